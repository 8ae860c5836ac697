"""The sentences of the GPT-2 walkthrough ("where every parameter goes"), in each language; the numbers and
formulas in ``{braces}`` come from :mod:`archcalc.site.walkthrough`."""

from __future__ import annotations

from archcalc.site.i18n import Messages

WORDS: Messages = {
    "title": {
        "en": "# GPT-2 small: where every parameter goes",
        "ja": "# GPT-2 small：パラメータはどこにあるのか",
        "zh": "# GPT-2 small：每个参数都在哪里",
    },
    "intro": {
        "en": "GPT-2 small has **{total}** parameters. This page follows a token from the input to the prediction and "
              "counts every tensor on the way, with the hyperparameters of `spec/gpt2.yaml`. Each figure is computed from "
              "the same IR as `archcalc count gpt2 --size small`, whose count equals that of transformers' GPT2LMHeadModel "
              "(the GPT-2 paper's table lists the smallest model as {paper}, a figure later corrected).",
        "ja": "GPT-2 small のパラメータ数は **{total}** です。このページでは、トークンが入力されてから次のトークンが予測されるまでの"
              "経路をたどり、途中にあるテンソルを `spec/gpt2.yaml` のハイパーパラメータで一つ残らず数えます。どの数値も "
              "`archcalc count gpt2 --size small` と同じ IR から計算したもので、その値は transformers の GPT2LMHeadModel "
              "と一致します（GPT-2 の論文の表では最小モデルが {paper} と記載されていますが、この値は後に訂正されました）。",
        "zh": "GPT-2 small 共有 **{total}** 个参数。本页沿着一个词元从输入到预测的路径，用 `spec/gpt2.yaml` 中的超参数"
              "逐一清点途经的每个张量。所有数字都与 `archcalc count gpt2 --size small` 由同一个 IR 计算得出，"
              "其结果与 transformers 的 GPT2LMHeadModel 完全一致（GPT-2 论文的表格把最小的模型写作 {paper}，这个数字后来被更正）。",
    },
    "hyper_head": {"en": "## The hyperparameters", "ja": "## ハイパーパラメータ", "zh": "## 超参数"},
    "hyper": {
        "en": "A handful of numbers fix the whole model; the spec gives `d_head` and `d_ff` as defaults that follow from the others:",
        "ja": "モデル全体はわずかな数で決まります。spec では `d_head` と `d_ff` を、ほかの値から導かれるデフォルト値として与えています。",
        "zh": "整个模型只由少数几个数决定；spec 把 `d_head` 和 `d_ff` 设为由其他值推出的默认值：",
    },
    "col_symbol": {"en": "symbol", "ja": "記号", "zh": "符号"},
    "col_meaning": {"en": "meaning", "ja": "意味", "zh": "含义"},
    "col_value": {"en": "value", "ja": "値", "zh": "取值"},
    "sym_V": {"en": "vocabulary size", "ja": "語彙サイズ", "zh": "词表大小"},
    "sym_T": {"en": "context length (positions)", "ja": "コンテキスト長（位置の数）", "zh": "上下文长度（位置数）"},
    "sym_L": {"en": "blocks", "ja": "ブロック数", "zh": "块数"},
    "sym_d": {"en": "model width d_model", "ja": "モデルの幅 d_model", "zh": "模型宽度 d_model"},
    "sym_H": {"en": "attention heads", "ja": "アテンションヘッド数", "zh": "注意力头数"},
    "sym_d_head": {"en": "width of one head (d / H)", "ja": "ヘッド一つの幅（d / H）", "zh": "单个头的宽度（d / H）"},
    "sym_d_ff": {"en": "MLP hidden width (4·d)", "ja": "MLP の中間層の幅（4·d）", "zh": "MLP 隐藏层宽度（4·d）"},
    "emb_head": {"en": "## 1. Embeddings", "ja": "## 1. 埋め込み", "zh": "## 1. 嵌入"},
    "emb": {
        "en": "A token enters as a row number of a table with V rows of d numbers: the token embedding, "
              "{V} × {d} = **{tok}** parameters. Its position adds a row of a second table, one row per position of the "
              "context: {T} × {d} = **{pos}**. Together they hold {emb}, {emb_share} of the model.",
        "ja": "トークンは、d 個の数からなる行を V 行並べた表の行番号として入力されます。これがトークン埋め込みで、"
              "{V} × {d} = **{tok}** 個のパラメータです。さらに位置の情報として、コンテキストの位置ごとに一行を持つ"
              "もう一つの表から一行が加えられます。こちらは {T} × {d} = **{pos}** 個です。両者を合わせると {emb} 個で、"
              "モデル全体の {emb_share} を占めます。",
        "zh": "词元以行号的形式进入模型：它索引一张 V 行、每行 d 个数的表，即词元嵌入，共 {V} × {d} = **{tok}** 个参数。"
              "位置信息来自第二张表，上下文中的每个位置对应一行：{T} × {d} = **{pos}** 个参数。两者合计 {emb} 个，"
              "占整个模型的 {emb_share}。",
    },
    "block_head": {"en": "## 2. One block", "ja": "## 2. ブロック一つ分", "zh": "## 2. 一个块"},
    "block": {
        "en": "The block is repeated L = {L} times. One copy holds these tensors (the names are the generated module's; "
              "its `state_dict()` adds the layer index after `blocks`):",
        "ja": "ブロックは L = {L} 回繰り返されます。一つのブロックが持つテンソルは次のとおりです（名前は生成される"
              "モジュールのもので、その `state_dict()` では `blocks` の後ろに層の番号が付きます）。",
        "zh": "块重复 L = {L} 次。每个块包含下列张量（名称取自生成的模块；其 `state_dict()` 会在 `blocks` 之后加上层号）：",
    },
    "col_tensor": {"en": "tensor", "ja": "テンソル", "zh": "张量"},
    "col_shape": {"en": "shape", "ja": "形状", "zh": "形状"},
    "col_formula": {"en": "formula", "ja": "式", "zh": "公式"},
    "col_parameters": {"en": "parameters", "ja": "パラメータ数", "zh": "参数量"},
    "col_share": {"en": "share", "ja": "割合", "zh": "占比"},
    "one_block": {"en": "one block", "ja": "ブロック一つ", "zh": "一个块"},
    "block_parts": {
        "en": "Attention: one fused projection maps d numbers to the queries, keys and values of all H heads at once, "
              "and the output projection maps the heads back to d, each with a bias: {attn_formula} = **{attn_block}**. "
              "The MLP widens to d_ff and comes back, with GELU between: {mlp_formula} = **{mlp_block}**. The two "
              "LayerNorms have a scale and a shift of d numbers each: {norm_formula} = **{norm_block}**.",
        "ja": "アテンションでは、一つにまとめられた射影が d 個の数を H 個すべてのヘッドのクエリ・キー・バリューへ一度に写し、"
              "出力射影が各ヘッドの結果を d 次元に戻します。どちらにもバイアスがあり、合計 {attn_formula} = **{attn_block}** 個です。"
              "MLP は幅を d_ff まで広げ、GELU を挟んで元に戻します：{mlp_formula} = **{mlp_block}** 個。"
              "二つの LayerNorm はそれぞれ d 個のスケールとシフトを持ちます：{norm_formula} = **{norm_block}** 個。",
        "zh": "注意力部分：一个融合的投影把 d 个数一次性映射为全部 H 个头的查询、键和值，输出投影再把各头的结果映射回 d 维，"
              "两者都带偏置：{attn_formula} = **{attn_block}** 个。MLP 先把宽度扩展到 d_ff，经过 GELU 后再映射回来："
              "{mlp_formula} = **{mlp_block}** 个。两个 LayerNorm 各有 d 个缩放参数和 d 个平移参数：{norm_formula} = **{norm_block}** 个。",
    },
    "blocks_head": {"en": "## 3. All the blocks", "ja": "## 3. すべてのブロック", "zh": "## 3. 所有的块"},
    "blocks": {
        "en": "L copies of the block: {L} × {block} = **{blocks}**, {blocks_share} of the model. The MLPs hold twice as "
              "much as attention: most of a transformer's parameters are not in attention.",
        "ja": "ブロックを L 個重ねると {L} × {block} = **{blocks}** 個で、モデル全体の {blocks_share} になります。"
              "MLP はアテンションの倍のパラメータを持ちます。Transformer のパラメータの大半はアテンションの外にあるのです。",
        "zh": "L 个块合计 {L} × {block} = **{blocks}** 个，占模型的 {blocks_share}。MLP 的参数是注意力的两倍："
              "Transformer 的参数大部分并不在注意力里。",
    },
    "end_head": {"en": "## 4. The final norm and the head", "ja": "## 4. 最後の正規化と出力ヘッド", "zh": "## 4. 最终归一化与输出头"},
    "end": {
        "en": "After the last block come a final LayerNorm ({final} parameters) and the head, which turns d numbers back "
              "into V scores, one per token of the vocabulary. GPT-2 ties the head to the token embedding: it reuses the "
              "same {V} × {d} matrix and adds nothing. An untied head would add {untied} "
              "(`archcalc count gpt2 --size small --set tie_embeddings=false`: {untied_total} in all).",
        "ja": "最後のブロックの後には、最終の LayerNorm（{final} 個）と出力ヘッドが続きます。出力ヘッドは d 個の数を、語彙の"
              "トークンごとに一つずつ、V 個のスコアに戻します。GPT-2 では出力ヘッドがトークン埋め込みと重みを共有しており、"
              "同じ {V} × {d} の行列を使い回すため、パラメータは増えません。共有しない場合は {untied} 個増えます"
              "（`archcalc count gpt2 --size small --set tie_embeddings=false` では合計 {untied_total} 個）。",
        "zh": "最后一个块之后是最终的 LayerNorm（{final} 个参数）和输出头。输出头把 d 个数变回 V 个分数，词表中每个词元一个。"
              "GPT-2 的输出头与词元嵌入共享权重：复用同一个 {V} × {d} 矩阵，因此不增加参数。若不共享，则会多出 {untied} 个"
              "（`archcalc count gpt2 --size small --set tie_embeddings=false`：共 {untied_total} 个）。",
    },
    "total_head": {"en": "## The total", "ja": "## 合計", "zh": "## 总计"},
    "total": {
        "en": "Every part, in the symbols and in numbers:",
        "ja": "各部分を記号と数値で並べると次のようになります。",
        "zh": "各部分的符号公式与数值如下：",
    },
    "col_part": {"en": "part", "ja": "部分", "zh": "部分"},
    "part_token": {"en": "token embedding", "ja": "トークン埋め込み", "zh": "词元嵌入"},
    "part_position": {"en": "position embedding", "ja": "位置埋め込み", "zh": "位置嵌入"},
    "part_blocks": {"en": "blocks", "ja": "ブロック", "zh": "块"},
    "part_final": {"en": "final norm", "ja": "最終 LayerNorm", "zh": "最终 LayerNorm"},
    "part_head": {"en": "head (tied)", "ja": "出力ヘッド（共有）", "zh": "输出头（共享）"},
    "part_total": {"en": "total", "ja": "合計", "zh": "总计"},
    "formula": {
        "en": "The same count as one formula, as `archcalc count` prints it; any size of GPT-2 follows from its L, d and H:",
        "ja": "同じ数え方を一つの式にすると、`archcalc count` が出力するとおり次のようになります。GPT-2 のどのサイズも、"
              "その L、d、H から求まります。",
        "zh": "把同样的计数写成一个公式，即 `archcalc count` 输出的形式；GPT-2 的任何尺寸都可由其 L、d、H 求得：",
    },
    "next": {
        "en": "The [GPT-2 model page](models/gpt2.md) has every size, the FLOPs, the memory and a calculator; "
              "[Write your first spec](tutorial.md) builds a model of your own.",
        "ja": "[GPT-2 のモデルページ](models/gpt2.md)には全サイズ、FLOPs、メモリ、計算機があります。"
              "[はじめての spec](tutorial.md)では自分のモデルを一から作ります。",
        "zh": "[GPT-2 模型页面](models/gpt2.md)列出了所有尺寸、FLOPs、内存和计算器；"
              "[编写你的第一个 spec](tutorial.md) 从零构建你自己的模型。",
    },
}
