"""Activation memory: the tensors autograd keeps from the forward pass for the backward pass of the
generated module, counted one by one (what ``archcalc.codegen.measure.saved_activation_bytes`` measures).

Per block, with n = batch × tokens:
- every norm keeps its input (n × width, the fp32 residual stream) and its statistics (LayerNorm 2n,
  RMSNorm n, fp32);
- the first projection(s) keep their input, the norm's output: once in fp32 training; under mixed
  precision once per projection, since each casts its own bf16 copy (q, k, v separately: 3);
- flash attention keeps q, k, v, its output (which is also the output projection's input) and the
  log-sum-exp (B × heads × tokens, fp32): no S×S matrix. Under GQA the kernel shares each key/value
  head among its queries (``enable_gqa``), so k and v are kept at KV heads; where the generated module
  must repeat them (a window mask, a written-out softmax, heads wider than 256) they are kept repeated:
  the attention node's ``kv_sharing``, decided at lowering (:mod:`archcalc.ir.kernel`);
- a dense MLP keeps the activation's input and output (n × hidden each; ReLU only its output), a gated
  MLP the gate and up outputs, the activation's output and the product (4 × n × hidden; ReLU 3).
- a Mamba2 (SSD) mixer, an estimate of what its backward keeps (not checked against measured tensors yet), with
  nc = ceiling(S / Q) chunks of Q tokens: the in_proj input (n × d) and output (z, x B C, dt: n × (I + C + H)), the
  conv output and its SiLU (2 × n × C), the step sizes (n × H, fp32), each chunk's scores and decay mask
  (B × H × nc × Q × Q, the scores in the compute dtype, the mask fp32), the chunk states before and after the
  chunk decay (2 × B × H × (nc + 1) × N × P), the mixer output, its gated product and the out_proj input (3 × n × I)
  and the gated norm's statistics (n × G, fp32). Not split by tensor parallelism.
- a Mamba mixer (I inner channels, N state, R dt rank), an estimate of what the generated sequential scan's backward
  keeps (not checked against measured tensors yet): the in_proj input (n × d) and output (x, z: n × 2·I), the conv
  output and its SiLU (2 × n × I), x_proj's output (n × (R + 2·N)), dt_proj's output and its softplus (2 × n × I, fp32),
  the discretised decay and input dA, dB·x (2 × n × I × N, fp32), every token's state (n × I × N, fp32: what each
  read-out and update keeps), the scan output, its D skip, the gate and the out_proj input (4 × n × I). Not split by
  tensor parallelism.
- a Gated DeltaNet mixer (H value heads, Dk, Dv, C conv channels, chunks of Q), an estimate likewise: the projections'
  input and outputs, the conv output and its SiLU, q, k, v per value head and the gates in fp32, the chunk products
  and decay mask (3 × B × H × nc × Q × Q, fp32), the corrected values and decayed keys, the chunk states and the
  output, its gated norm and the out_proj input (3 × n × H·Dv); a short convolution (LFM2) its projections' input and
  output (n × d, 3 × n × d), B·x and the conv output, and the out_proj input.
Outside the blocks: the final norm, the head's input, and the fp32 log-softmax of the logits (n × V); with an additive
position bias (ALiBi, T5's relative bias), the bias attention keeps as its mask (1 × heads × S × S, one tensor
shared by every layer, made in the compute dtype).
Checked against measured saved tensors for GPT-2 (LayerNorm, learned positions). Left out, and so an
underestimate for Llama-style models on the CPU: torch's composite ``rms_norm`` there keeps the normalised
tensor too (one more n × width per norm), and the rotary tables are kept (2 × tokens × rotary width);
a 4-layer Llama-style model (d = 512, GQA 8/2, V = 32,000), 256 tokens, fp32 on the CPU: estimate 6.5% below measured.
With full recomputation only each block's input (n × width) is kept, plus one block's activations
while it is recomputed. Under tensor parallelism (Megatron-style, no sequence parallelism) the
tensors inside attention and MLP are split over the ranks, the residual stream is not.
A model with state-space mixers is counted stack by stack (``stacks``; a hybrid's Mamba2 and attention layers each
with their own tensors): ``per_layer`` is then its heaviest stack's layer (what recomputation keeps for one block
and what a pipeline stage is charged per layer: an upper bound there).

>>> from archcalc.spec import load_spec
>>> from archcalc.spec.bind import bind
>>> from archcalc.ir import lower
>>> a = activations(lower(bind(load_spec("gpt2"), "small")), seq_len=1024, batch=1, mixed=False)
>>> a.per_layer_bytes()
50397184
"""

from __future__ import annotations

from dataclasses import dataclass, field

import sympy

from archcalc.ir import Component, Lowered
from archcalc.ir.attrs import (
    MIXERS,
    MLP,
    Attention,
    Block,
    GatedDeltaNet,
    LayerNorm,
    Linear,
    Mamba,
    Mamba2,
    Model,
    MoE,
    Norm,
    ShortConv,
)
from archcalc.ir.mtp import mtp_activations

FP32 = 4


@dataclass
class Activations:
    """Saved tensors as (label, bytes, split by tensor parallelism?) per layer, and outside the layers."""

    layers: int
    per_layer: list[tuple[str, int, bool]] = field(default_factory=list)
    outside: list[tuple[str, int, bool]] = field(default_factory=list)
    block_input_bytes: int = 0
    mixed: bool = True
    stacks: list[tuple[str, int, list[tuple[str, int, bool]]]] = field(default_factory=list)  # mixers: (name, layers, items)

    @property
    def convention(self) -> str:
        precision = "bf16 autocast (fp32 residual stream)" if self.mixed else "fp32"
        return f"tensors saved for backward by the generated module, flash attention, {precision}"

    def per_layer_bytes(self, tp: int = 1) -> int:
        return sum(b // tp if split else b for _, b, split in self.per_layer)

    def outside_bytes(self, tp: int = 1) -> int:
        return sum(b // tp if split else b for _, b, split in self.outside)

    def total_bytes(self, tp: int = 1) -> int:
        if self.stacks:
            return sum(n * sum(b // tp if split else b for _, b, split in items) for _, n, items in self.stacks) \
                + self.outside_bytes(tp)
        return self.layers * self.per_layer_bytes(tp) + self.outside_bytes(tp)

    def recompute_bytes(self, tp: int = 1) -> int:
        return self.layers * self.block_input_bytes + self.per_layer_bytes(tp) + self.outside_bytes(tp)

    def breakdown(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for name, _, items in self.stacks:
            for label, b, _ in items:
                out[f"per layer of {name}: {label}"] = out.get(f"per layer of {name}: {label}", 0) + b
        for label, b, _ in [] if self.stacks else self.per_layer:
            out[f"per layer: {label}"] = out.get(f"per layer: {label}", 0) + b
        for label, b, _ in self.outside:
            out[label] = out.get(label, 0) + b
        return out


def activations(lowered: Lowered, seq_len: int, batch: int, mixed: bool = True) -> Activations:
    lowered.require_attention_only("the activation memory (training)", modelled=MIXERS)
    numeric = lowered.binding.numeric()
    value = lambda e: int(sympy.sympify(e).xreplace(numeric))  # noqa: E731
    n = seq_len * batch
    compute = 2 if mixed else FP32
    stacks = [c for _, c in lowered.root.walk() if isinstance(c.attrs, Block)]
    model = lowered.root.attrs
    assert isinstance(model, Model)
    width = value(model.width)
    acts = Activations(layers=sum(value(s.repeat) for s in stacks), mixed=mixed, block_input_bytes=n * width * FP32)
    block = stacks[0]  # layers of further stacks are counted like the first (same width; a documented simplification)
    if any(isinstance(node.attrs, MIXERS) for _, node in lowered.root.walk()):  # a mixer: each stack its own tensors
        acts.stacks = [(s.name, value(s.repeat), _block(s, n, batch, seq_len, compute, mixed, value)) for s in stacks]
        acts.per_layer = max((items for _, _, items in acts.stacks), key=lambda items: sum(b for _, b, _ in items))
        block = next((s for s in stacks if any(isinstance(c.attrs, Attention) for c in s.children)), block)
    else:
        acts.per_layer = _block(block, n, batch, seq_len, compute, mixed, value)
    attn = next((c for c in block.children if isinstance(c.attrs, Attention)), None)
    if attn is not None and attn.attrs.position_bias:
        acts.outside.append(("position bias (1 x heads x S x S, shared by the layers)", value(attn.attrs.heads) * seq_len**2 * compute, False))
    final = lowered.root.find("final_norm")
    if final is not None:
        acts.outside += _norm(final, n, value)
    head = lowered.root.find("head")
    if head is not None:
        acts.outside.append(("head input", n * width * compute, False))
        acts.outside.append(("log-softmax of the logits (fp32)", n * value(model.vocab) * FP32, False))
    more, items = mtp_activations(lowered.root, n, compute, value)  # counted MTP modules (--with-mtp)
    acts.layers += more
    acts.outside += items
    return acts


def _block(block: Component, n: int, batch: int, seq_len: int, compute: int, mixed: bool, value) -> list[tuple[str, int, bool]]:
    out: list[tuple[str, int, bool]] = []
    for child in block.children:
        if isinstance(child.attrs, Norm):
            out += _norm(child, n, value)
        elif isinstance(child.attrs, Attention):
            out += _attention(child, n, batch, seq_len, compute, mixed, value)
        elif isinstance(child.attrs, Mamba2):
            out += _mamba2(child, n, batch, seq_len, compute, value)
        elif isinstance(child.attrs, Mamba):
            out += _mamba(child, n, compute, value)
        elif isinstance(child.attrs, GatedDeltaNet):
            out += _deltanet(child, n, batch, seq_len, compute, value)
        elif isinstance(child.attrs, ShortConv):
            out += _short_conv(child, n, compute, value)
        elif isinstance(child.attrs, (MLP, MoE)):
            out += _mlp(child, n, compute, mixed, value)
    return out


def _mamba2(mixer: Component, n: int, batch: int, seq: int, compute: int, value) -> list[tuple[str, int, bool]]:
    """An estimate of what a Mamba2 layer's backward keeps (see the module's docstring)."""
    a = mixer.attrs
    assert isinstance(a, Mamba2)
    d = value(next(c for c in mixer.children if c.name == "in_proj").attrs.in_features)
    inner, heads, state, groups, q = (value(w) for w in (a.inner, a.heads, a.state, a.groups, a.chunk_size))
    channels, width, chunks = inner + 2 * groups * state, inner // heads, -(-seq // q)
    return [("mixer projection input", n * d * compute, False),
            ("in_proj output (z, x B C, dt)", n * (inner + channels + heads) * compute, False),
            ("conv output and its SiLU", 2 * n * channels * compute, False),
            ("step sizes (fp32)", n * heads * FP32, False),
            ("chunk scores and decay mask (B x H x nc x Q x Q)", batch * heads * chunks * q * q * (compute + FP32), False),
            ("chunk states (B x H x (nc + 1) x N x P, before and after the chunk decay)",
             2 * batch * heads * (chunks + 1) * state * width * compute, False),
            ("mixer output, gated, out_proj input", 3 * n * inner * compute, False),
            ("gated norm statistics (fp32)", n * groups * FP32, False)]


def _mamba(mixer: Component, n: int, compute: int, value) -> list[tuple[str, int, bool]]:
    """An estimate of what a Mamba layer's backward keeps (see the module's docstring)."""
    a = mixer.attrs
    assert isinstance(a, Mamba)
    d = value(next(c for c in mixer.children if c.name == "in_proj").attrs.in_features)
    inner, state, rank = value(a.inner), value(a.state), value(a.dt_rank)
    return [("mixer projection input", n * d * compute, False),
            ("in_proj output (x, z)", n * 2 * inner * compute, False),
            ("conv output and its SiLU", 2 * n * inner * compute, False),
            ("x_proj output (dt, B, C)", n * (rank + 2 * state) * compute, False),
            ("step sizes before and after softplus (fp32)", 2 * n * inner * FP32, False),
            ("discretised decay and input (2 x n x I x N, fp32)", 2 * n * inner * state * FP32, False),
            ("each token's state (n x I x N, fp32)", n * inner * state * FP32, False),
            ("scan output, D skip, gate, out_proj input", 4 * n * inner * compute, False)]


def _deltanet(mixer: Component, n: int, batch: int, seq: int, compute: int, value) -> list[tuple[str, int, bool]]:
    """An estimate of what a Gated DeltaNet layer's backward keeps (see the module's docstring)."""
    a = mixer.attrs
    assert isinstance(a, GatedDeltaNet)
    d = value(next(c for c in mixer.children if c.name.startswith("in_proj")).attrs.in_features)
    heads, dk, dv, channels, q = (value(w) for w in (a.heads, a.key_width, a.value_width, a.channels, a.chunk_size))
    chunks = -(-seq // q)
    padded = batch * heads * chunks * q  # positions of the chunked form, per value head
    return [("mixer projection input", n * d * compute, False),
            ("in_proj outputs (q k v, z, b, a)", n * (channels + heads * dv + 2 * heads) * compute, False),
            ("conv output and its SiLU", 2 * n * channels * compute, False),
            ("q, k, v per value head, normalised, and the gates (fp32)", (padded * (2 * dk + dv) + 2 * n * heads) * FP32, False),
            ("chunk products and decay mask (B x H x nc x Q x Q, fp32)", 3 * padded * q * FP32, False),
            ("corrected values and decayed keys (fp32)", padded * (dv + dk) * FP32, False),
            ("chunk states (B x H x nc x Dk x Dv, fp32)", batch * heads * chunks * dk * dv * FP32, False),
            ("mixer output, gated norm, out_proj input", 3 * n * heads * dv * compute, False)]


def _short_conv(mixer: Component, n: int, compute: int, value) -> list[tuple[str, int, bool]]:
    """An estimate of what a short-convolution layer's backward keeps (see the module's docstring)."""
    a = mixer.attrs
    assert isinstance(a, ShortConv)
    d = value(a.width)
    return [("mixer projection input", n * d * compute, False), ("in_proj output (B, C, x)", 3 * n * d * compute, False),
            ("B·x and the conv output", 2 * n * d * compute, False), ("out_proj input", n * d * compute, False)]


def _norm(norm: Component, n: int, value) -> list[tuple[str, int, bool]]:
    assert isinstance(norm.attrs, Norm)
    stats = 2 if isinstance(norm.attrs, LayerNorm) else 1
    return [(f"{norm.kind} input", n * value(norm.attrs.width) * FP32, False), (f"{norm.kind} statistics", n * stats * FP32, False)]


def _attention(attn: Component, n: int, batch: int, seq: int, compute: int, mixed: bool, value) -> list[tuple[str, int, bool]]:
    a = attn.attrs
    assert isinstance(a, Attention)
    heads, kv, dh, dv = (value(w) for w in (a.heads, a.kv_heads, a.head_width, a.value_width))
    projections = [c for c in attn.children if isinstance(c.attrs, Linear) and c.name != "out"]
    d_in = value(projections[0].attrs.in_features)
    copies = len(projections) if mixed else 1
    out = [("projection input", copies * n * d_in * compute, False)]
    if a.kv_sharing == "none":
        out.append(("q, k, v", n * heads * (2 * dh + dv) * compute, True))
    elif a.kv_sharing == "sdpa":
        out.append(("q, k, v (k, v at key/value heads)", n * (heads * dh + kv * (dh + dv)) * compute, True))
    else:  # k and v repeated to every head before the kernel
        out.append(("q, k, v (k, v repeated to all heads)", n * heads * (2 * dh + dv) * compute, True))
    out.append(("attention output", n * heads * dv * compute, True))
    out.append(("log-sum-exp", batch * heads * seq * FP32, True))
    return out


def _mlp(mlp: Component, n: int, compute: int, mixed: bool, value) -> list[tuple[str, int, bool]]:
    a = mlp.attrs
    assert isinstance(a, (MLP, MoE))
    hidden = value(a.hidden)
    relu = a.activation == "relu"
    inputs = [c for c in mlp.children if isinstance(c.attrs, Linear) and c.name != "down"]
    d_in = value(inputs[0].attrs.in_features) if inputs else 0
    copies = len(inputs) if mixed else 1
    if isinstance(a, MoE):
        hidden *= value(a.top_k)  # each token goes through top_k experts
    gated = isinstance(a, MoE) or a.gated  # a mixture's experts are counted as gated
    tensors = (3 if relu else 4) if gated else (1 if relu else 2)
    return [("MLP input", copies * n * d_in * compute, False), ("MLP hidden", tensors * n * hidden * compute, True)]
