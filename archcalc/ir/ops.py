"""Matmul operations of one forward pass, derived from the IR tree, with symbolic FLOPs.

Convention: 2 FLOPs per multiply-accumulate. ``tokens`` is B·S (sequences × tokens per sequence).
A Linear layer applied to every token costs 2·tokens·in·out (a routed expert: times top_k / experts,
the share of tokens it sees). Attention costs two batched products per layer, scores Q·Kᵀ and the
weighted sum of values: 2·B·H·pairs·d_head and 2·B·H·pairs·d_value, where ``pairs`` is S² for the
full square (what torch's FlopCounterMode counts), S(S+1)/2 for the causal triangle, the band
for sliding-window layers and the triangle of each block for chunked layers. Embedding lookups cost
nothing; the LM head is a matmul (tied or not).

DeepSeek Sparse Attention (latent attention with an indexer): the indexer's projections are Linear ops, and its scoring
is an op of its own ("indexer", role attention): 2·B·H_i·(d_i + 1) a query-key pair (each head's q·k, then the heads'
weighted sum), over S² in full and S(S+1)/2 causal (it scores every earlier token). The attention itself reads each
query's top-k keys only: causal pairs Σ min(i, k) over i = 1..S (k·S − k(k−1)/2 once S ≥ k); in full the S×S square, as
transformers computes it (dense, the unselected keys masked). A layer that reuses the previous layer's selection has no
indexer op.

A Mamba2 (SSD) mixer layer, besides its in_proj and out_proj Linear ops, has two ops of its own, in the matmul totals
as torch's FlopCounterMode counts them on the generated chunked code: its depthwise conv ("conv", 2·B·S·C·K, C = I +
2·G·N channels of K taps) and its chunked mixing ("ssd", over nc = ceiling(S / Q) chunks of Q tokens, Q = the spec's
chunk or 256): 2·B·H·nc·(Q²·N + Q²·P + 2·Q·N·P) + 2·B·H·(nc + 1)²·N·P, P = I / H: per chunk the scores C·Bᵀ and their
weighted sum of x, each chunk's state and its read-out, and the (nc + 1)² chunk-decay product over the states. The
chunked mixing does the same work full or causal (``full`` = ``causal``).

A Mamba (the first) mixer layer (I inner channels, N state, K conv taps, R dt rank) is counted as the generated code
runs it, transformers' slow path (MambaMixer's sequential scan): its Linear ops in_proj (2·I × d), x_proj (R + 2·N ×
I), dt_proj (I × R) and out_proj; its depthwise conv ("conv", 2·B·S·I·K: the input padded left by K − 1, output length
S); and the state's read-out ("scan", 2·B·S·I·N: one product (B, I, N) @ (B, N, 1) per token). The discretisation (dA =
exp(A·dt), dBx = dt·B·x) and the state update (state = dA·state + dBx: 3·B·S·I·N element operations, decay multiply,
input multiply, add) are element-wise, in no matmul total; the D skip and the gate likewise. The scan does the same
work full or causal; a decode token costs the same products for one token (conv 2·I·K over the cached window,
read-out 2·I·N).

>>> from archcalc.spec import load_spec
>>> from archcalc.spec.bind import bind
>>> from archcalc.ir import lower
>>> ops = forward_ops(lower(bind(load_spec("gpt2"), "small")))
>>> [(op.path, op.kind) for op in ops][:3]
[('blocks.attn.qkv', 'matmul'), ('blocks.attn.out', 'matmul'), ('blocks.attn', 'attention')]
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import sympy

from archcalc.ir.attrs import MTP, Attention, Conv, Head, Indexer, LatentAttention, Linear, Pooler, StateMixer
from archcalc.ir.layers import layers_of_kind
from archcalc.ir.lower import Lowered
from archcalc.ir.nodes import ONE, Component


class RunSymbol(sympy.Symbol):
    """A symbol of the run (sequences, tokens), printed by its name but never equal to a spec's hyperparameter of the
    same name: sympy symbols are equal by name and assumptions, so a spec's own ``S`` or ``B`` would otherwise be
    taken for the run's and change the numbers. It sorts as a plain symbol does, so formulas print as before."""

    @classmethod
    def class_key(cls):
        return sympy.Symbol.class_key()


BATCH = RunSymbol("B", integer=True, positive=True)
SEQ = RunSymbol("S", integer=True, positive=True)


@dataclass(frozen=True)
class Op:
    """One matmul (or one attention layer's two products), ``repeat`` times in the model."""

    path: str
    kind: str  # "matmul" | "attention" | "conv" | a state mixer's mixing: "ssd" (Mamba2), "scan" (Mamba), "delta"
    role: str
    repeat: sympy.Expr
    full: sympy.Expr  # FLOPs of one copy over the full sequence (attention: the full S×S square)
    causal: sympy.Expr  # the same with only the causal triangle / band of attention pairs
    heads: sympy.Expr = ONE
    pair_width: sympy.Expr = ONE  # d_head + d_value: FLOPs per pair are 2·heads·pair_width

    @property
    def total_full(self) -> sympy.Expr:
        return self.repeat * self.full

    @property
    def total_causal(self) -> sympy.Expr:
        return self.repeat * self.causal


def chunked_pairs(seq: sympy.Expr, chunk: sympy.Expr) -> sympy.Expr:
    """Query-key pairs a chunked causal layer scores: the causal triangle of each block of ``chunk`` tokens (the last
    block holds the S mod chunk tokens left)."""
    blocks, left = sympy.floor(seq / chunk), seq - chunk * sympy.floor(seq / chunk)
    return blocks * chunk * (chunk + 1) / 2 + left * (left + 1) / 2


def causal_pairs(seq: sympy.Expr, window: sympy.Expr | None = None) -> sympy.Expr:
    """Query-key pairs a causal layer scores: S(S+1)/2, or with a window of w keys Σ min(i, w)."""
    full = seq * (seq + 1) / 2
    if window is None:
        return full
    return sympy.Piecewise((full, seq <= window), (window * seq - window * (window - 1) / 2, True))


def forward_ops(lowered: Lowered, batch: sympy.Expr = BATCH, seq: sympy.Expr = SEQ) -> list[Op]:
    """Every matmul of one forward pass over ``batch`` sequences of ``seq`` tokens."""
    ops: list[Op] = []
    tokens = batch * seq

    def visit(node: Component, prefix: str, repeat: sympy.Expr, role: str, tokens: sympy.Expr) -> None:
        path = f"{prefix}.{node.name}" if prefix and node.name else prefix or node.name
        repeat = repeat * node.repeat
        start = len(ops)
        if isinstance(node.attrs, Pooler):  # BERT's pooler reads the first token of each sequence only
            tokens = batch
        if isinstance(node.attrs, (Linear, Head)):
            weight = next(t for t in node.tensors if t.name == "weight")
            out, inp = weight.shape
            flops = 2 * tokens * inp * out * weight.active
            ops.append(Op(path, "matmul", weight.role, repeat, flops, flops))
        if isinstance(node.attrs, Conv):  # a depthwise causal conv1d: K multiply-accumulates per output element
            flops = 2 * tokens * node.attrs.channels * node.attrs.taps
            ops.append(Op(path, "conv", "mixer", repeat, flops, flops))
        for child in node.children:
            visit(child, path, repeat, role, tokens)
        if isinstance(node.attrs, Indexer):  # after its projections: its scores of every earlier token
            ops.append(_indexer(node.attrs, path, repeat, batch, seq))
        if isinstance(node.attrs, Attention):  # after its projections: q/k/v, out, then the two products
            ops.extend(_attention(node, path, repeat, batch, seq))
        if isinstance(node.attrs, StateMixer) and node.attrs.mixing:  # after its projections and its conv: its mixing
            flops = node.attrs.mixing_flops(batch, seq)
            ops.append(Op(path, node.attrs.mixing, "mixer", repeat, flops, flops))
        if isinstance(node.attrs, MTP):  # the module's attention products too: all its work is the role mtp
            ops[start:] = [replace(op, role="mtp") for op in ops[start:]]

    visit(lowered.root, "", ONE, "other", tokens)
    return ops


def _attention(node: Component, path: str, repeat: sympy.Expr, batch, seq) -> list[Op]:
    a = node.attrs
    assert isinstance(a, Attention)
    qk_width = a.head_width + (a.rope_width if isinstance(a, LatentAttention) else 0)  # latent: the rotary part too
    width = qk_width + a.value_width
    per_pair = 2 * batch * a.heads * width
    full = per_pair * seq**2
    if not a.causal:
        return [Op(path, "attention", "attention", repeat, full, full, a.heads, width)]
    ops = []
    for kind in ("global", "local", "chunked"):
        if kind not in a.pattern:
            continue
        count = repeat if len(set(a.pattern)) == 1 else layers_of_kind(a.pattern, repeat, kind)
        pairs = chunked_pairs(seq, a.chunk) if kind == "chunked" else causal_pairs(seq, a.window if kind == "local" else None)
        if isinstance(a, LatentAttention) and a.sparse:  # each query reads its top-k earlier keys only
            pairs = causal_pairs(seq, a.index_top_k)
        ops.append(Op(path, "attention", "attention", count, full, per_pair * pairs, a.heads, width))
    return ops


def _indexer(a: Indexer, path: str, repeat: sympy.Expr, batch, seq) -> Op:
    """DeepSeek Sparse Attention's indexer scores: each query head with each key (q·kᵀ, head_width wide), then the
    heads' weighted sum (weights @ scores, one multiply-accumulate a head and key): 2·B·heads·(head_width + 1) a
    query-key pair, over the full S×S square (as transformers computes it, masked) or the causal triangle."""
    per_pair = 2 * batch * a.heads * (a.head_width + 1)
    return Op(path, "indexer", "attention", repeat, per_pair * seq**2, per_pair * causal_pairs(seq), a.heads, a.head_width + 1)


def index_key_width(node: Component) -> sympy.Expr:
    """The indexer's key a latent attention layer caches per token beside its latent (DeepSeek Sparse Attention;
    0 without an indexer of its own)."""
    indexer = next((c for c in node.children if isinstance(c.attrs, Indexer)), None)
    return indexer.attrs.head_width if indexer is not None else sympy.Integer(0)
