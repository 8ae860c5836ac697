"""The sentences of the home page, in each language; the commands and their outputs between them come from
:mod:`archcalc.site.home`. ``why_COMMAND``: what a command is for, above its example."""

from __future__ import annotations

from archcalc.site.i18n import Messages

WORDS: Messages = {
    "title": {"en": "# archcalc", "ja": "# archcalc", "zh": "# archcalc"},
    "intro": {
        "en": "archcalc compiles a declarative transformer spec into exact symbolic formulas for its parameters, FLOPs and "
              "memory, and into a readable PyTorch module — and checks that the two agree. Every number is an exact integer.",
        "ja": "archcalc は、宣言的に書いた Transformer の spec をコンパイルし、パラメータ数・FLOPs・メモリの厳密な記号式と、"
              "読みやすい PyTorch モジュールを生成します。そして両者が一致することを検証します。数値はすべて厳密な整数です。",
        "zh": "archcalc 把声明式的 Transformer spec 编译成参数量、FLOPs 和内存的精确符号公式，以及一个易读的 PyTorch 模块，"
              "并验证两者一致。所有数字都是精确的整数。",
    },
    "go_tutorial": {
        "en": "- **[Write your first spec](tutorial.md)**: a new model from an empty file to counts, a module that trains, and a solve.",
        "ja": "- **[はじめての spec](tutorial.md)**：空のファイルから新しいモデルを作り、パラメータを数え、学習できるモジュールを"
              "生成し、サイズを逆算します。",
        "zh": "- **[编写你的第一个 spec](tutorial.md)**：从空文件开始构建新模型，完成计数、生成可训练的模块并反求尺寸。",
    },
    "go_walkthrough": {
        "en": "- **[GPT-2 small: where every parameter goes](gpt2-parameters.md)**: a known model, counted tensor by tensor.",
        "ja": "- **[GPT-2 small：パラメータはどこにあるのか](gpt2-parameters.md)**：よく知られたモデルをテンソルごとに数えます。",
        "zh": "- **[GPT-2 small：每个参数都在哪里](gpt2-parameters.md)**：逐个张量地清点一个知名模型。",
    },
    "go_calculator": {
        "en": "- **[Calculator](models/llama.md#calculator)**: parameters, FLOPs, memory and inference speed of any size, exact, "
              "in the page — every [model page](models/index.md) opens with one.",
        "ja": "- **[計算機](models/llama.md#calculator)**：任意のサイズのパラメータ数、FLOPs、メモリ、推論速度をページ上で厳密に"
              "計算します。どの[モデルのページ](models/index.md)も冒頭に計算機があります。",
        "zh": "- **[计算器](models/llama.md#calculator)**：在页面中精确计算任意尺寸的参数量、FLOPs、内存和推理速度——每个"
              "[模型页面](models/index.md)开头都有一个。",
    },
    "go_models": {
        "en": "- **[Models](models/index.md)**: one page per bundled spec — its architecture, an exact calculator, the formula, "
              "every size against its published figure, FLOPs, memory and the generated PyTorch source.",
        "ja": "- **[モデル](models/index.md)**：同梱の spec ごとに一ページ。アーキテクチャ、厳密な計算機、式、公表値と比べた"
              "各サイズ、FLOPs、メモリ、生成された PyTorch のソースを載せています。",
        "zh": "- **[模型](models/index.md)**：每个内置 spec 一页——架构、精确计算器、公式、各尺寸与公开数字的对比、FLOPs、"
              "内存以及生成的 PyTorch 源码。",
    },
    "go_gpt3": {
        "en": "- **[GPT-3's Table 2.1](gpt3.md)**: the eight rows counted as printed, the two that disagree with themselves, "
              "and a 100T-parameter GPT-3.",
        "ja": "- **[GPT-3 の Table 2.1](gpt3.md)**：印刷されたとおりに数えた八つの行、そのうち自己矛盾している二行、"
              "そして 100T パラメータの GPT-3。",
        "zh": "- **[GPT-3 的 Table 2.1](gpt3.md)**：按原文逐行计数的八行、其中自相矛盾的两行，以及一个 100T 参数的 GPT-3。",
    },
    "go_reference": {
        "en": "- **Reference**: [counting conventions](conventions.md), [spec language](spec-language.md), "
              "[command line](cli.md), [Python API](api.md).",
        "ja": "- **リファレンス**（英語）：[数え方の規約](conventions.md)、[spec 言語](spec-language.md)、"
              "[コマンドライン](cli.md)、[Python API](api.md)。",
        "zh": "- **参考**（英文）：[计数约定](conventions.md)、[spec 语言](spec-language.md)、"
              "[命令行](cli.md)、[Python API](api.md)。",
    },
    "install": {
        "en": "Install from a checkout with `pip install .` (sympy, pydantic and PyYAML; `verify` and `run` also need "
              "torch). Figures cited from papers are labelled *reported*; everything else is computed.",
        "ja": "リポジトリを取得して `pip install .` でインストールします（依存は sympy、pydantic、PyYAML。`verify` と `run` には"
              " torch も必要です）。論文から引用した数値には *reported*（公表値）と記し、それ以外はすべて計算値です。",
        "zh": "在代码仓库中用 `pip install .` 安装（依赖 sympy、pydantic 和 PyYAML；`verify` 和 `run` 还需要 torch）。"
              "引自论文的数字标为 *reported*（公开值），其余全部是计算得出的。",
    },
    "every_command": {
        "en": "## Every command, with what it prints",
        "ja": "## すべてのコマンドとその出力",
        "zh": "## 每条命令及其输出",
    },
    "examples_run": {
        "en": "Each example was run when this page was built, in an empty folder; the output is as archcalc printed it.",
        "ja": "どの例もこのページの生成時に空のフォルダで実行したもので、出力は archcalc が表示したそのままです。",
        "zh": "每个示例都是在生成本页时于一个空文件夹中运行的；输出与 archcalc 打印的完全相同。",
    },
    "see_cli": {
        "en": "{help}: see the [command line reference](cli.md#archcalc-{command}).",
        "ja": "{help}：[コマンドラインリファレンス](cli.md#archcalc-{command})を参照してください。",
        "zh": "{help}：参见[命令行参考](cli.md#archcalc-{command})。",
    },
    "docs": {
        "en": "This site: every page generated from the specs, with `mkdocs.yml`, so the folder builds "
              "as it is (offline, and from disk).",
        "ja": "このサイトそのものです。すべてのページを spec から `mkdocs.yml` とともに生成するので、フォルダはそのまま"
              "ビルドできます（オフラインでも、ディスクから開いても動きます）。",
        "zh": "即本站：所有页面都由 spec 生成，并附带 `mkdocs.yml`，因此该文件夹可以直接构建（离线可用，也可从磁盘直接打开）。",
    },
    "why_count": {
        "en": "Every size of a spec: the exact total against the published figure, the formula, the split by role.",
        "ja": "spec のすべてのサイズについて、公表値と比べた厳密な総数、式、役割ごとの内訳を示します。",
        "zh": "spec 的每个尺寸：与公开数字对比的精确总数、公式以及按角色的拆分。",
    },
    "why_flops": {
        "en": "Exact matmul FLOPs of a forward pass and a training step, with 6N, Kaplan, Chinchilla and PaLM beside them.",
        "ja": "順伝播一回と学習一ステップの厳密な行列積 FLOPs。6N、Kaplan、Chinchilla、PaLM の近似値も並べて示します。",
        "zh": "一次前向传播和一个训练步的精确矩阵乘法 FLOPs，并列出 6N、Kaplan、Chinchilla 和 PaLM 的近似值。",
    },
    "why_memory": {
        "en": "Weights, KV cache, training state and activations for a batch (and per GPU with --dp, --zero, --tp).",
        "ja": "バッチ一つ分の重み、KV キャッシュ、学習時の状態、アクティベーション（--dp、--zero、--tp を付ければ GPU ごと）。",
        "zh": "一个批次的权重、KV 缓存、训练状态和激活值（加上 --dp、--zero、--tp 则按每个 GPU 计算）。",
    },
    "why_infer": {
        "en": "Generation: exact prefill and decode FLOPs, bytes moved, and the roofline latency and throughput on an accelerator.",
        "ja": "生成：プリフィルとデコードの厳密な FLOPs、転送バイト数、そしてアクセラレータ上でのルーフラインによる"
              "レイテンシとスループット。",
        "zh": "生成：预填充与解码的精确 FLOPs、搬运的字节数，以及加速器上按 roofline 估算的延迟和吞吐量。",
    },
    "why_solve": {
        "en": "The hyperparameters that hit a target: the exact solution and whole-number candidates.",
        "ja": "目標値に届くハイパーパラメータ：厳密解と、整数値の候補。",
        "zh": "达到目标值的超参数：精确解以及整数候选。",
    },
    "why_plan": {
        "en": "A training plan: the parallel layouts that fit N GPUs, ranked, with days, GPU-hours and cost (times estimated "
              "from exact FLOPs and bytes).",
        "ja": "学習計画：N 枚の GPU に収まる並列化の構成を順位付けし、日数、GPU 時間、費用とともに示します（時間は厳密な "
              "FLOPs とバイト数からの見積もりです）。",
        "zh": "训练计划：能放进 N 块 GPU 的并行布局，按优劣排序，并给出天数、GPU 小时和成本（时间由精确的 FLOPs 和字节数估算）。",
    },
    "why_serve": {
        "en": "A serving plan: paged KV blocks, the sequences that fit at each context, the longest context for a load.",
        "ja": "推論サービングの計画：ページ化された KV ブロック、各コンテキスト長で収まる系列数、負荷に対して可能な最長のコンテキスト。",
        "zh": "推理服务计划：分页的 KV 块、每种上下文长度下能容纳的序列数，以及给定负载下的最长上下文。",
    },
    "why_generate": {
        "en": "One readable PyTorch file for a size (writing it needs no torch).",
        "ja": "サイズ一つ分の、読みやすい PyTorch ファイル一つ（書き出しに torch は要りません）。",
        "zh": "为一个尺寸生成一个易读的 PyTorch 文件（写出文件不需要 torch）。",
    },
    "why_verify": {
        "en": "Build the generated module on the meta device and compare every name and shape with the count.",
        "ja": "生成したモジュールを meta デバイス上に構築し、すべての名前と形状を計数結果と照合します。",
        "zh": "在 meta 设备上构建生成的模块，并把每个名称和形状与计数结果比对。",
    },
    "why_run": {
        "en": "Train the generated module on random tokens: loss, tokens/s, memory, achieved FLOP/s (measured on the "
              "machine that built this page, with one CPU thread; here GPT-2 small cut to 2 layers of width 128).",
        "ja": "生成したモジュールをランダムなトークンで学習させ、損失、tokens/s、メモリ、実効 FLOP/s を示します（このページを"
              "生成したマシンで CPU スレッド一つを使って計測。ここでは GPT-2 small を幅 128 の 2 層に縮めています）。",
        "zh": "用随机词元训练生成的模块：损失、tokens/s、内存和实际达到的 FLOP/s（在生成本页的机器上用一个 CPU 线程测得；"
              "这里把 GPT-2 small 缩减为 2 层、宽度 128）。",
    },
    "why_import-hf": {
        "en": "A transformers config.json as a spec, counted as transformers builds it (also --hf on every command).",
        "ja": "transformers の config.json を spec に変換し、transformers が構築するとおりに数えます（どのコマンドでも --hf が使えます）。",
        "zh": "把 transformers 的 config.json 转为 spec，并按 transformers 的构建方式计数（每条命令也都支持 --hf）。",
    },
    "why_export-hf": {
        "en": "The other way: a size of a spec as a transformers config.json.",
        "ja": "逆方向：spec のサイズ一つを transformers の config.json として書き出します。",
        "zh": "反方向：把 spec 的一个尺寸导出为 transformers 的 config.json。",
    },
    "why_specs": {
        "en": "The bundled specs, usable by name.",
        "ja": "同梱の spec の一覧。名前で指定して使えます。",
        "zh": "内置的 spec 列表，可按名称使用。",
    },
}
