"""The sentences of the tutorial ("Write your first spec"), in each language; the commands, files and outputs
between them, and the figures in ``{braces}``, come from :mod:`archcalc.site.tutorial`."""

from __future__ import annotations

from archcalc.site.i18n import Messages

WORDS: Messages = {
    "title": {"en": "# Write your first spec", "ja": "# はじめての spec", "zh": "# 编写你的第一个 spec"},
    "intro": {
        "en": "This page builds a new model, a small Llama-style decoder, from an empty file: its exact parameter count and "
              "formula, its FLOPs and memory, a PyTorch module that trains, and the width that would give it a billion "
              "parameters. Every command below was run when this page was built, in a fresh folder, and its output is "
              "shown as archcalc printed it. Copy a command with the button at the right of its box.",
        "ja": "このページでは、空のファイルから新しいモデル（Llama 風の小さなデコーダ）を作ります。正確なパラメータ数とその式、"
              "FLOPs とメモリ、学習できる PyTorch モジュール、そしてパラメータ数を十億にする幅までを順に求めます。"
              "以下のコマンドはすべてこのページの生成時に新しいフォルダで実際に実行したもので、出力は archcalc が"
              "表示したそのままです。コマンドは枠の右にあるボタンでコピーできます。",
        "zh": "本页从一个空文件出发，构建一个新模型——一个 Llama 风格的小型解码器：求出它的精确参数量与公式、FLOPs 与内存、"
              "一个可以训练的 PyTorch 模块，以及让参数量达到十亿所需的宽度。下面的每条命令都是在生成本页时于一个全新的"
              "文件夹中实际运行的，输出与 archcalc 打印的完全相同。点击代码框右侧的按钮即可复制命令。",
    },
    "h1": {"en": "## 1. An empty file", "ja": "## 1. 空のファイル", "zh": "## 1. 空文件"},
    "empty": {
        "en": "Create `tiny.yaml` with nothing in it, and ask for its count:",
        "ja": "中身が空の `tiny.yaml` を作り、パラメータ数を求めてみます。",
        "zh": "新建一个空的 `tiny.yaml`，然后让 archcalc 计数：",
    },
    "errors": {
        "en": "Errors name the file, line and column, and what was expected. The exit status is {status}.",
        "ja": "エラーにはファイル名・行・列と、そこで何が期待されていたかが示されます。終了ステータスは {status} です。",
        "zh": "错误信息会指出文件、行和列，以及此处期望的内容。退出状态为 {status}。",
    },
    "h2": {"en": "## 2. Symbols and components", "ja": "## 2. 記号と構成要素", "zh": "## 2. 符号与组件"},
    "symbols": {
        "en": "A spec names its **hyperparameters** (the symbols of the formulas; a default may refer to others) and "
              "describes the **model** with them: the embedding, one block repeated `L` times, the final norm and the head.",
        "ja": "spec では**ハイパーパラメータ**（式に現れる記号。デフォルト値はほかの記号を参照できます）に名前を付け、"
              "それを使って**モデル**を記述します。埋め込み、`L` 回繰り返されるブロック、最後の正規化、そして出力ヘッドです。",
        "zh": "spec 先列出**超参数**（公式中的符号；默认值可以引用其他符号），再用它们描述**模型**：嵌入层、重复 `L` 次的块、"
              "最终的归一化以及输出头。",
    },
    "no_sizes": {
        "en": "Without sizes, every hyperparameter must have a value from somewhere:",
        "ja": "サイズがない場合は、すべてのハイパーパラメータに何らかの方法で値を与えなければなりません。",
        "zh": "没有定义尺寸时，每个超参数都必须从某处获得取值：",
    },
    "set_missing": {
        "en": "`--set` gives the missing ones (the others take their defaults: `H = d / 64 = 4`, `d_ff = 704`):",
        "ja": "足りない値は `--set` で与えます（ほかはデフォルト値になります：`H = d / 64 = 4`、`d_ff = 704`）。",
        "zh": "用 `--set` 补上缺少的值（其余取默认值：`H = d / 64 = 4`，`d_ff = 704`）：",
    },
    "formula": {
        "en": "The formula is exact: `round_up(8 * d / 3, 64)` stays a ceiling, so `192*d*ceiling(d/24)` is the gated MLP's "
              "three `d × d_ff` matrices. The tied head adds no parameters.",
        "ja": "式は厳密です。`round_up(8 * d / 3, 64)` は切り上げのまま残るので、`192*d*ceiling(d/24)` がゲート付き MLP の"
              "三つの `d × d_ff` 行列にあたります。重みを共有した出力ヘッドはパラメータを増やしません。",
        "zh": "公式是精确的：`round_up(8 * d / 3, 64)` 保留为向上取整，因此 `192*d*ceiling(d/24)` 正是门控 MLP 的三个 "
              "`d × d_ff` 矩阵。共享权重的输出头不增加参数。",
    },
    "h3": {"en": "## 3. Sizes", "ja": "## 3. サイズ", "zh": "## 3. 尺寸"},
    "add_sizes": {
        "en": "Add named sizes at the end of the file:",
        "ja": "ファイルの末尾に、名前付きのサイズを追加します。",
        "zh": "在文件末尾添加具名的尺寸：",
    },
    "appended": {"en": "tiny.yaml (appended)", "ja": "tiny.yaml（末尾に追加）", "zh": "tiny.yaml（追加到末尾）"},
    "whole": {
        "en": "Values must come out whole. A width that is not a multiple of {multiple} is refused, and says why:",
        "ja": "値は整数にならなければなりません。{multiple} の倍数でない幅は拒否され、その理由が示されます。",
        "zh": "取值必须是整数。不是 {multiple} 的倍数的宽度会被拒绝，并说明原因：",
    },
    "h4": {"en": "## 4. FLOPs and memory", "ja": "## 4. FLOPs とメモリ", "zh": "## 4. FLOPs 与内存"},
    "flops": {
        "en": "Exact matmul FLOPs of a forward pass and a training step, with the usual approximations beside them:",
        "ja": "順伝播一回と学習一ステップの行列積 FLOPs を厳密に求め、よく使われる近似式の値と並べて示します。",
        "zh": "一次前向传播和一个训练步的精确矩阵乘法 FLOPs，旁边列出常用的近似值：",
    },
    "memory": {
        "en": "Weights, the KV cache, the training state and the activations for a batch:",
        "ja": "重み、KV キャッシュ、学習時の状態、そしてバッチ一つ分のアクティベーションです。",
        "zh": "权重、KV 缓存、训练状态以及一个批次的激活值：",
    },
    "h5": {"en": "## 5. A PyTorch module", "ja": "## 5. PyTorch モジュール", "zh": "## 5. PyTorch 模块"},
    "generate": {
        "en": "`generate` writes one readable file: a config, one class per component, and `build()`. It needs no torch to write.",
        "ja": "`generate` は読みやすいファイルを一つ書き出します。設定、構成要素ごとのクラス、そして `build()` です。"
              "書き出しに torch は要りません。",
        "zh": "`generate` 写出一个易读的文件：一个配置、每个组件一个类，以及 `build()`。写出文件不需要 torch。",
    },
    "verify": {
        "en": "`verify` builds it (on the meta device: no memory) and compares every parameter name and shape with the count:",
        "ja": "`verify` はそれを（meta デバイス上に、メモリを使わずに）構築し、すべてのパラメータの名前と形状を計数結果と照合します。",
        "zh": "`verify` 构建该模块（在 meta 设备上，不占内存），并把每个参数的名称和形状与计数结果逐一比对：",
    },
    "run": {
        "en": "`run` trains it for a few steps on random tokens and reports the speed (figures from the machine that built this page):",
        "ja": "`run` はランダムなトークンで数ステップ学習させ、速度を報告します（数値はこのページを生成したマシンでのものです）。",
        "zh": "`run` 用随机词元训练几步并报告速度（数字来自生成本页的机器）：",
    },
    "own_loop": {
        "en": "Or train it in your own loop; here it learns one fixed batch by heart, so the loss falls:",
        "ja": "自分で書いたループで学習させることもできます。ここでは固定したバッチ一つを丸暗記させるので、損失が下がっていきます。",
        "zh": "也可以在自己的训练循环中训练它；这里让它死记一个固定的批次，所以损失会下降：",
    },
    "h6": {"en": "## 6. Solve for a size", "ja": "## 6. サイズを逆算する", "zh": "## 6. 反求尺寸"},
    "solve": {
        "en": "Which width gives a billion parameters with {blocks} blocks? The solver inverts the formula exactly and lists "
              "whole-number widths the spec allows (multiples of {multiple}), nearest first:",
        "ja": "ブロック数が {blocks} のとき、パラメータ数が十億になる幅はいくつでしょうか。ソルバーは式を厳密に逆に解き、spec が"
              "許す整数の幅（{multiple} の倍数）を近い順に挙げます。",
        "zh": "在 {blocks} 个块的情况下，多大的宽度能得到十亿参数？求解器精确地反解公式，并按接近程度列出 spec 允许的整数宽度"
              "（{multiple} 的倍数）：",
    },
    "h7": {"en": "## 7. A hybrid: Mamba2 layers and attention", "ja": "## 7. ハイブリッド：Mamba2 層とアテンション",
           "zh": "## 7. 混合模型：Mamba2 层与注意力"},
    "hybrid": {
        "en": "A block can mix tokens with a state-space layer instead of attention: `mixer:` with `kind: mamba2` "
              "(Mamba2's SSD layer, as transformers' Mamba2Mixer builds it). Two stacks, interleaved by `layer_order`, make a "
              "model of three Mamba2 layers to one attention layer, each with its MLP, as Bamba, Nemotron-H and Granite 4.0-H "
              "are built:",
        "ja": "ブロックはアテンションの代わりに状態空間層でトークンを混ぜることもできます。`mixer:` に `kind: mamba2` を指定します"
              "（transformers の Mamba2Mixer と同じ構成の、Mamba2 の SSD 層）。`layer_order` で二つのスタックを交互に並べると、"
              "Mamba2 層三つにつきアテンション層一つ、それぞれに MLP が付いたモデルになります。Bamba、Nemotron-H、"
              "Granite 4.0-H と同じ構成です。",
        "zh": "块也可以不用注意力，而用状态空间层来混合词元：在 `mixer:` 中写 `kind: mamba2`（即 Mamba2 的 SSD 层，"
              "与 transformers 的 Mamba2Mixer 构造方式相同）。用 `layer_order` 交错排列两个堆叠，就得到每三个 Mamba2 层"
              "配一个注意力层、每层各带一个 MLP 的模型，Bamba、Nemotron-H 和 Granite 4.0-H 都是这样构建的：",
    },
    "state": {
        "en": "A Mamba2 layer keeps a recurrent state of fixed size instead of a KV cache: at {context} tokens of context, the "
              "KV cache comes from the four attention layers only, and the state does not grow with the context:",
        "ja": "Mamba2 層は KV キャッシュの代わりに固定サイズの再帰状態を保持します。コンテキストが {context} トークンのとき、"
              "KV キャッシュは四つのアテンション層だけから生じ、状態はコンテキストが伸びても大きくなりません。",
        "zh": "Mamba2 层保存的是固定大小的循环状态，而不是 KV 缓存：在 {context} 词元的上下文下，KV 缓存只来自四个注意力层，"
              "而状态不会随上下文增长：",
    },
    "module": {
        "en": "The generated module has a Mamba2 class beside the attention class, with a chunked scan for a sequence and "
              "one step at a time for generation:",
        "ja": "生成されるモジュールには、アテンションのクラスと並んで Mamba2 のクラスがあります。系列全体にはチャンク単位の"
              "スキャンを、生成時には一ステップずつの計算を使います。",
        "zh": "生成的模块在注意力类旁边还有一个 Mamba2 类：处理整段序列时使用分块扫描，生成时则逐步计算：",
    },
    "hybrid_flops": {
        "en": "Its FLOPs: the Mamba2 layers' projections and their chunked scan are matmuls like attention's, and the "
              "scan's own products are reported apart, so a run's MFU counts them (the 6N rule does not):",
        "ja": "FLOPs について：Mamba2 層の射影とチャンク単位のスキャンはアテンションと同じく行列積で、スキャン固有の積は"
              "別に報告されます。そのため学習時の MFU にはこれらが含まれます（6N の経験則には含まれません）。",
        "zh": "它的 FLOPs：Mamba2 层的投影和分块扫描与注意力一样都是矩阵乘法，扫描本身的乘积单独列出，"
              "因此运行时的 MFU 会把它们算进去（6N 经验公式则不会）：",
    },
    "cache": {
        "en": "Generation keeps one cache entry per layer: a fixed-size state for each Mamba2 layer and a KV cache for the "
              "attention layer. Generate the tiny size and continue a prompt greedily:",
        "ja": "生成時には層ごとに一つのキャッシュを保持します。Mamba2 層には固定サイズの状態、アテンション層には KV キャッシュです。"
              "tiny サイズのモジュールを書き出し、プロンプトの続きを貪欲法で生成してみます。",
        "zh": "生成时每层保留一个缓存项：每个 Mamba2 层是固定大小的状态，注意力层是 KV 缓存。写出 tiny 尺寸的模块，"
              "并用贪心解码续写一段提示：",
    },
    "kept_state": {
        "en": "The state it keeps is the recurrent state `memory` counts (in float32 here, as the module was built):",
        "ja": "保持される状態は、`memory` が数える再帰状態そのものです（ここではモジュールを構築したときと同じ float32 です）。",
        "zh": "它保存的状态正是 `memory` 所计算的循环状态（这里与构建模块时一样，使用 float32）：",
    },
    "next_head": {"en": "## Next", "ja": "## 次に読むもの", "zh": "## 下一步"},
    "next_spec": {
        "en": "- [The spec language](spec-language.md): every key, and the expression grammar.",
        "ja": "- [spec 言語](spec-language.md)（英語）：すべてのキーと式の文法。",
        "zh": "- [spec 语言](spec-language.md)（英文）：所有键以及表达式语法。",
    },
    "next_models": {
        "en": "- [The models](models/index.md): the bundled specs, each with its architecture and a calculator.",
        "ja": "- [モデル一覧](models/index.md)（英語）：同梱の spec。それぞれにアーキテクチャ図と計算機があります。",
        "zh": "- [模型](models/index.md)（英文）：内置的 spec，每个都附有架构图和计算器。",
    },
    "next_conventions": {
        "en": "- [Counting conventions](conventions.md): what each number counts.",
        "ja": "- [数え方の規約](conventions.md)（英語）：それぞれの数値が何を数えているか。",
        "zh": "- [计数约定](conventions.md)（英文）：每个数字统计的是什么。",
    },
    "next_walkthrough": {
        "en": "- [GPT-2 small: where every parameter goes](gpt2-parameters.md): a known model, counted tensor by tensor.",
        "ja": "- [GPT-2 small：パラメータはどこにあるのか](gpt2-parameters.md)：よく知られたモデルをテンソルごとに数えます。",
        "zh": "- [GPT-2 small：每个参数都在哪里](gpt2-parameters.md)：逐个张量地清点一个知名模型。",
    },
}
