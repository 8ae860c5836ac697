"""An estimate of the forward pass's non-matmul arithmetic: softmax, norms, activations, residual adds.

These are not multiply-accumulates and no two tools count them alike, so archcalc reports them apart
from the exact matmul figures, as an estimate, with the per-element costs stated here:

- softmax over attention scores: 3 FLOPs per score (max/subtract, exp, sum and divide folded), as in
  Chinchilla's Appendix F, over the pairs a causal kernel computes;
- LayerNorm: 7 per element (mean, subtract, square, mean, rsqrt-multiply, scale, shift); RMSNorm: 4;
- activations: GELU 8 per element, SiLU 4, ReLU 1, plus 1 for the gate product of a gated MLP;
- residual adds: 1 per element of the model width, two per block;
- an additive position bias on the scores (ALiBi, T5's relative bias): 1 per score it is added to (the bias itself
  is computed once per forward and shared by the layers: not counted);
- multipliers (no parameters): 1 per element they multiply: the token embeddings (an embedding multiplier), each
  branch before its residual add (a residual multiplier; parallel blocks multiply the branches' sum once) and the
  logits (a logit multiplier).
- a Mamba2 (SSD) mixer, a rough estimate: per token 4·C for the SiLU after the conv (C conv channels), 8·I for the
  gate (SiLU 4, product 1), the D skip (2) and the sum of the two chunked outputs (1), and 5·H for the step sizes
  (softplus 4, times A 1); per score of each chunk's Q × Q block 3 (the segment sum's subtraction, its exp, the
  product with the scores), B·H·ceiling(S / Q)·Q² scores; its gated RMSNorm is counted as a norm. The cumulative sums,
  decays and padding are left out.
- a Mamba mixer, a rough estimate: per token 4·I for the SiLU after the conv, 5·I for the step sizes (softplus 4, its
  bias 1), 8·I for the gate and the D skip, and per state element (I·N a token) 4 for the discretisation (A·dt, its
  exp, dt·B, times x) and 3 for the state update (decay multiply, input multiply, add).
- a Gated DeltaNet mixer, a rough estimate: per token 4·C for the SiLU after the conv, 9·H·Dv for the gated norm's
  gate (SiLU 4, product 1) and the q/k scaling, 10·H for the gates (sigmoid, softplus, exp), per score of each chunk's
  Q × Q block 3 (decay, mask, product), and the state's decay once per chunk (H·Dk·Dv per Q tokens, 3 operations).
- a short convolution: 2·d per token (the products B·x and C·y).

>>> from archcalc.spec import load_spec
>>> from archcalc.spec.bind import bind
>>> from archcalc.ir import lower
>>> non_matmul_forward(lower(bind(load_spec("gpt2"), "small")), 1024, 1) > 0
True
"""

from __future__ import annotations

import sympy

from archcalc.ir import Lowered
from archcalc.ir.attrs import (
    MLP,
    Attention,
    Block,
    Embeddings,
    GatedDeltaNet,
    Head,
    LayerNorm,
    Mamba,
    Mamba2,
    MoE,
    Norm,
    RMSNorm,
    ShortConv,
    StateMixer,
)
from archcalc.ir.nodes import ONE, Component
from archcalc.ir.ops import causal_pairs

NORM = {LayerNorm: 7, RMSNorm: 4}
ACTIVATION = {"gelu": 8, "gelu_tanh": 8, "silu": 4, "relu": 1, "relu2": 2, "swiglu_clamped": 6, "xielu": 8}


def non_matmul_forward(lowered: Lowered, seq_len: int, batch: int) -> int:
    numeric = lowered.binding.numeric()
    value = lambda e: int(sympy.floor(sympy.sympify(e).xreplace(numeric)))  # noqa: E731
    tokens = seq_len * batch
    width = lowered.root.attrs.width
    total = 0

    def visit(node: Component, repeat: int) -> None:
        nonlocal total
        repeat *= value(node.repeat) if node.repeat != ONE else 1
        a = node.attrs
        if isinstance(a, Norm):
            total += repeat * tokens * NORM[type(a)] * value(a.width)
        elif isinstance(a, Attention):
            pairs = value(causal_pairs(sympy.Integer(seq_len))) if a.causal else seq_len * seq_len
            total += repeat * batch * (3 + a.position_bias) * value(a.heads) * pairs
        elif isinstance(a, (MLP, MoE)):
            gated = isinstance(a, MoE) or a.gated
            per = ACTIVATION.get(a.activation, 8) + (1 if gated else 0)
            share = value(a.top_k) if isinstance(a, MoE) else 1
            total += repeat * tokens * per * value(a.hidden) * share
        elif isinstance(a, StateMixer):
            total += repeat * _mixer(a, tokens, batch, seq_len, value)
        elif isinstance(a, Block):
            total += repeat * tokens * 2 * value(width)
            if a.residual_multiplier is not None:
                total += repeat * tokens * (1 if a.residual == "parallel" else 2) * value(width)
        elif isinstance(a, Embeddings) and a.multiplier is not None:
            total += tokens * value(width)
        elif isinstance(a, Head) and a.multiplier is not None:
            total += tokens * value(lowered.root.attrs.vocab)
        for child in node.children:
            visit(child, repeat)

    visit(lowered.root, 1)
    return total


def _mixer(a: StateMixer, tokens: int, batch: int, seq_len: int, value) -> int:
    """One state-mixer layer's estimate (see the module's docstring)."""
    if isinstance(a, Mamba2):
        q, channels = value(a.chunk_size), value(a.channels)
        scores = batch * value(a.heads) * (-(-seq_len // q)) * q * q
        return tokens * (4 * channels + 8 * value(a.inner) + 5 * value(a.heads)) + 3 * scores
    if isinstance(a, Mamba):
        return tokens * value(a.inner) * (17 + 7 * value(a.state))
    if isinstance(a, GatedDeltaNet):
        q, heads, state = value(a.chunk_size), value(a.heads), value(a.recurrent)
        scores = batch * heads * (-(-seq_len // q)) * q * q
        return tokens * (4 * value(a.channels) + 9 * heads * value(a.value_width) + 10 * heads + 3 * state // q) + 3 * scores
    assert isinstance(a, ShortConv)
    return tokens * 2 * value(a.width)
