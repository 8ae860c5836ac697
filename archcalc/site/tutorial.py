"""The "Write your first spec" page: a new model from an empty file to counts, formulas, a PyTorch module
that trains, and a solve. Every command on it is run when the page is built, in a fresh folder, and its
output is shown as the program printed it (see :mod:`archcalc.site.examples`)."""

from __future__ import annotations

from archcalc.site.examples import Head, Program, Run, Step, Write, markdown, run_script

HYPERPARAMETERS = """\
name: tiny
title: A tiny decoder
hyperparameters:
  V: {doc: vocabulary size, default: 32000}
  L: {doc: blocks}
  d: {doc: model width, multiple_of: 64}
  H: {doc: attention heads, default: d / 64}
  d_head: {doc: width of one head, default: d / H}
  d_ff: {doc: SwiGLU hidden width, default: "round_up(8 * d / 3, 64)"}
model:
  embedding: {vocab: V, width: d, position: {kind: rotary}}
  block:
    repeat: L
    residual: pre-norm
    norm: rmsnorm
    attention: {heads: H, head_width: d_head, qkv_bias: false, out_bias: false}
    mlp: {kind: gated, hidden: d_ff, activation: silu, bias: false}
  final_norm: rmsnorm
  head: {tied: true}
"""

SIZES = """\
sizes:
  small: {L: 4, d: 256}
  base: {L: 12, d: 768}
"""

TRAIN = """\
import torch

from tiny_small import Config, build

torch.manual_seed(0)
model = build()  # float32 on the CPU
optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
batch = torch.randint(0, Config().vocab, (4, 33))  # 4 sequences of 32 tokens, and the next token of each
for step in range(1, 21):
    logits, loss = model(batch[:, :-1], targets=batch[:, 1:])
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if step % 5 == 0:
        print(f"step {step}: loss {loss.item():.3f}")
"""

HYBRID = """\
name: hybrid
title: Three Mamba2 layers to one attention layer
hyperparameters:
  V: {doc: vocabulary size, default: 32000}
  La: {doc: attention layers (one in four)}
  d: {doc: model width, multiple_of: 64}
  H: {doc: attention heads, default: d / 64}
  d_ff: {doc: SwiGLU hidden width, default: "round_up(8 * d / 3, 64)"}
model:
  embedding: {vocab: V, width: d, position: {kind: rotary}}
  blocks:
    - name: mamba_blocks
      repeat: 3 * La
      norm: rmsnorm
      mixer: {kind: mamba2, inner: 2 * d, state: 128, conv: 4, heads: 2 * d / 64, groups: 1, chunk: 256}
      mlp: {kind: gated, hidden: d_ff, activation: silu, bias: false}
    - name: blocks
      repeat: La
      norm: rmsnorm
      attention: {heads: H, head_width: 64, qkv_bias: false, out_bias: false}
      mlp: {kind: gated, hidden: d_ff, activation: silu, bias: false}
  layer_order: [mamba_blocks, mamba_blocks, mamba_blocks, blocks]
  final_norm: rmsnorm
  head: {tied: true}
sizes:
  tiny: {La: 1, d: 128}
  1b: {La: 4, d: 2048}
"""

GENERATE_HYBRID = """\
import torch

from hybrid_tiny import Config, build

torch.manual_seed(0)
model = build().eval()  # float32 on the CPU, random weights
prompt = torch.randint(0, Config().vocab, (1, 16))  # one sequence of 16 tokens
tokens = model.generate(prompt, max_new_tokens=8, temperature=0)  # greedy, through a cache
print("tokens:", tuple(tokens.shape))
cache = model.new_cache(1, 24)  # what generate() keeps: one entry per layer, in the order they run
print("layers:", " ".join(type(entry).__name__ for entry in cache))
state = [t for entry in cache if type(entry).__name__ == "MixerCache" for t in vars(entry).values()
         if isinstance(t, torch.Tensor)]
print("recurrent state:", sum(t.numel() * t.element_size() for t in state), "bytes")
"""

STEPS: tuple[Step, ...] = (
    Write("tiny.yaml", "", show=False),
    Run(("count", "tiny.yaml")),
    Write("tiny.yaml", HYPERPARAMETERS),
    Run(("count", "tiny.yaml")),
    Run(("count", "tiny.yaml", "--set", "L=4", "--set", "d=256")),
    Write("tiny.yaml", HYPERPARAMETERS + SIZES, show=False),
    Run(("count", "tiny.yaml")),
    Run(("count", "tiny.yaml", "--set", "d=300")),
    Run(("flops", "tiny.yaml", "--size", "small", "--seq-len", "256")),
    Run(("memory", "tiny.yaml", "--size", "base", "--seq-len", "1024", "--batch", "8")),
    Run(("generate", "tiny.yaml", "--size", "small", "-o", "tiny_small.py")),
    Head("tiny_small.py", 36),
    Run(("solve", "tiny.yaml", "--target-params", "1B", "--fix", "L=24")),
    Write("train_tiny.py", TRAIN),
    Run(("verify", "tiny.yaml", "--size", "small"), torch=True),
    Run(("run", "tiny.yaml", "--size", "small", "--steps", "3", "--batch", "4", "--seq-len", "32"), torch=True),
    Run(("train_tiny.py",), torch=True, python=True),
    Write("hybrid.yaml", HYBRID),
    Run(("count", "hybrid.yaml", "--size", "1b")),
    Run(("memory", "hybrid.yaml", "--size", "1b", "--seq-len", "32768", "--batch", "1")),
    Run(("verify", "hybrid.yaml", "--size", "1b"), torch=True),
    Run(("run", "hybrid.yaml", "--size", "tiny", "--steps", "3", "--batch", "2", "--seq-len", "64"), torch=True),
    Run(("flops", "hybrid.yaml", "--size", "1b", "--seq-len", "4096")),
    Run(("generate", "hybrid.yaml", "--size", "tiny", "-o", "hybrid_tiny.py")),
    Write("generate_hybrid.py", GENERATE_HYBRID),
    Run(("generate_hybrid.py",), torch=True, python=True),
    Run(("memory", "hybrid.yaml", "--size", "tiny", "--seq-len", "24", "--batch", "1", "--dtype", "float32")),
)


def tutorial_page(program: Program) -> str:
    outputs = run_script(STEPS, program)

    def step(i: int) -> list[str]:
        return markdown(STEPS, outputs, i)

    return "\n".join([
        "# Write your first spec", "",
        "This page builds a new model, a small Llama-style decoder, from an empty file: its exact parameter count and "
        "formula, its FLOPs and memory, a PyTorch module that trains, and the width that would give it a billion "
        "parameters. Every command below was run when this page was built, in a fresh folder, and its output is "
        "shown as archcalc printed it. Copy a command with the button at the right of its box.", "",
        "## 1. An empty file", "",
        "Create `tiny.yaml` with nothing in it, and ask for its count:", "",
        *step(1),
        "Errors name the file, line and column, and what was expected. The exit status is 2.", "",
        "## 2. Symbols and components", "",
        "A spec names its **hyperparameters** (the symbols of the formulas; a default may refer to others) and "
        "describes the **model** with them: the embedding, one block repeated `L` times, the final norm and the head.",
        "", *step(2),
        "Without sizes, every hyperparameter must have a value from somewhere:", "",
        *step(3),
        "`--set` gives the missing ones (the others take their defaults: `H = d / 64 = 4`, `d_ff = 704`):", "",
        *step(4),
        "The formula is exact: `round_up(8 * d / 3, 64)` stays a ceiling, so `192*d*ceiling(d/24)` is the gated MLP's "
        "three `d × d_ff` matrices. The tied head adds no parameters.", "",
        "## 3. Sizes", "",
        "Add named sizes at the end of the file:", "",
        f'```yaml title="tiny.yaml (appended)"\n{SIZES.rstrip()}\n```', "",
        *step(6),
        "Values must come out whole. A width that is not a multiple of 64 is refused, and says why:", "",
        *step(7),
        "## 4. FLOPs and memory", "",
        "Exact matmul FLOPs of a forward pass and a training step, with the usual approximations beside them:", "",
        *step(8),
        "Weights, the KV cache, the training state and the activations for a batch:", "",
        *step(9),
        "## 5. A PyTorch module", "",
        "`generate` writes one readable file: a config, one class per component, and `build()`. It needs no torch to write.", "",
        *step(10), *step(11),
        "`verify` builds it (on the meta device: no memory) and compares every parameter name and shape with the count:", "",
        *step(14),
        "`run` trains it for a few steps on random tokens and reports the speed (figures from the machine that built this page):", "",
        *step(15),
        "Or train it in your own loop; here it learns one fixed batch by heart, so the loss falls:", "",
        *step(13), *step(16),
        "## 6. Solve for a size", "",
        "Which width gives a billion parameters with 24 blocks? The solver inverts the formula exactly and lists "
        "whole-number widths the spec allows (multiples of 64), nearest first:", "",
        *step(12),
        "## 7. A hybrid: Mamba2 layers and attention", "",
        "A block can mix tokens with a state-space layer instead of attention: `mixer:` with `kind: mamba2` "
        "(Mamba2's SSD layer, as transformers' Mamba2Mixer builds it). Two stacks, interleaved by `layer_order`, make a "
        "model of three Mamba2 layers to one attention layer, each with its MLP, as Bamba, Nemotron-H and Granite 4.0-H "
        "are built:", "",
        *step(17), *step(18),
        "A Mamba2 layer keeps a recurrent state of fixed size instead of a KV cache: at 32k tokens of context, the "
        "KV cache comes from the four attention layers only, and the state does not grow with the context:", "",
        *step(19),
        "The generated module has a Mamba2 class beside the attention class, with a chunked scan for a sequence and "
        "one step at a time for generation:", "",
        *step(20), *step(21),
        "Its FLOPs: the Mamba2 layers' projections and their chunked scan are matmuls like attention's, and the "
        "scan's own products are reported apart, so a run's MFU counts them (the 6N rule does not):", "",
        *step(22),
        "Generation keeps one cache entry per layer: a fixed-size state for each Mamba2 layer and a KV cache for the "
        "attention layer. Generate the tiny size and continue a prompt greedily:", "",
        *step(23), *step(24), *step(25),
        "The state it keeps is the recurrent state `memory` counts (in float32 here, as the module was built):", "",
        *step(26),
        "## Next", "",
        "- [The spec language](spec-language.md): every key, and the expression grammar.",
        "- [The models](models/index.md): the bundled specs, each with its architecture and a calculator.",
        "- [Counting conventions](conventions.md): what each number counts.", "",
    ])
