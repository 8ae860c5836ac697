"""The "Write your first spec" page: a new model from an empty file to counts, formulas, a PyTorch module
that trains, and a solve. Every command on it is run when the page is built, in a fresh folder, and its
output is shown as the program printed it (see :mod:`archcalc.site.examples`)."""

from __future__ import annotations

from archcalc.site.examples import Head, Program, Run, Step, Write, markdown, run_script
from archcalc.site.i18n import say
from archcalc.site.words_tutorial import WORDS

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
for step in range(1, 11):
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


# The page, in order: a message key (a sentence of archcalc.site.words_tutorial, in the page's language), or the index
# of a step of STEPS (its command and output, the same in every language), or APPENDED (the sizes added to the file)
APPENDED = "appended"
LAYOUT: tuple[str | int, ...] = (
    "title", "intro", "h1", "empty", 1, "errors", "h2", "symbols", 2, "no_sizes", 3, "set_missing", 4, "formula",
    "h3", "add_sizes", APPENDED, 6, "whole", 7, "h4", "flops", 8, "memory", 9,
    "h5", "generate", 10, 11, "verify", 14, "run", 15, "own_loop", 13, 16, "h6", "solve", 12,
    "h7", "hybrid", 17, 18, "state", 19, "module", 20, 21, "hybrid_flops", 22, "cache", 23, 24, 25, "kept_state", 26,
    "next_head", "next_spec", "next_models", "next_conventions", "next_walkthrough")
# The figures the sentences name, written once for every language
FIGURES = {"status": "2", "blocks": "24", "multiple": "64", "context": "32k"}


def tutorial_page(program: Program, lang: str = "en") -> str:
    """The tutorial in ``lang`` (``en``, ``ja`` or ``zh``): its commands run once, whatever the language."""
    outputs = run_script(STEPS, program)
    out: list[str] = []
    for item in LAYOUT:
        if isinstance(item, int):
            out += markdown(STEPS, outputs, item)
        elif item == APPENDED:
            out += [f'```yaml title="{say(WORDS, APPENDED, lang)}"\n{SIZES.rstrip()}\n```', ""]
        else:  # a list item follows the one before it; anything else is a paragraph of its own
            out += [say(WORDS, item, lang, **FIGURES)] + ([] if item.startswith("next_") and item != "next_head" else [""])
    return "\n".join(out) + ("\n" if out[-1] else "")
