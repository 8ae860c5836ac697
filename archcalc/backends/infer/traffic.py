"""Bytes that generation moves through memory: weights, the KV cache, and (an estimate) activations.

Conventions (stated in every result):
- Weights are read once per forward pass (the prefill, and each decode step). Every parameter is at
  ``dtype``; ``weights_dtype`` (int8, int4, fp8) quantizes the matrices of linear layers — not embeddings,
  norms, biases or the LM head — and adds their scales: int8 and int4 one ``dtype`` scale per group of 128
  weights (GPTQ/AWQ style), fp8 one float32 scale per output row.
- An embedding lookup reads only the rows of its tokens (a tied head reads the whole matrix anyway).
- A mixture of experts reads the experts its tokens are routed to: at most min(E, tokens × top_k) of E.
- The KV cache (at ``kv_dtype``) is read at each step for the tokens each layer sees (a sliding-window layer
  at most its window) and written once per new token; after generating it holds ``archcalc memory``'s
  ``kv_cache_bytes`` at P + N tokens.
- Activations, an estimate: every matmul reads its input and writes its output once (fused kernels move less).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction

import sympy

from archcalc.backends.parallel_plan import places_by_window
from archcalc.errors import UsageError
from archcalc.ir import Lowered, leaves, per_ir
from archcalc.ir.attrs import Attention, Head, LatentAttention, Linear
from archcalc.ir.ops import index_key_width

# bytes a weight, bytes of scale a weight (None: per row), the scale's dtype ("dtype": the activations' dtype)
QUANTIZED = {"int8": (Fraction(1), Fraction(1, 128)), "int4": (Fraction(1, 2), Fraction(1, 128)), "fp8": (Fraction(1), None)}
EMBEDDINGS = ("token_embedding", "position_embedding")


@dataclass(frozen=True)
class WeightBytes:
    """Bytes of the weights, by what a forward pass reads of them."""

    total: Fraction
    embeddings: Fraction  # the embedding tables (read row by row by lookups, unless the head is tied)
    embedding_row: Fraction  # bytes one token's lookups read
    experts: Fraction  # routed experts, all of them
    expert_share: Fraction  # top_k / experts: the share of routed experts one token uses
    scales: Fraction  # quantization scales (included in total)
    tied_head: bool
    by_role: dict[str, Fraction] = field(default_factory=dict)  # bytes of each role's weights (routed experts: all)
    experts_by_role: dict[str, Fraction] = field(default_factory=dict)  # of which routed experts

    def read_by_role(self, tokens: int) -> dict[str, Fraction]:
        """What :meth:`read` reads, by role (embedding lookups under their role, a tied head's matrix under lm_head)."""
        fraction = min(Fraction(1), tokens * self.expert_share)
        out = {role: b - self.experts_by_role.get(role, 0) + self.experts_by_role.get(role, 0) * fraction
               for role, b in self.by_role.items()}
        lookups = min(self.embeddings, tokens * self.embedding_row)
        if "token_embedding" in out or "position_embedding" in out:
            out["token_embedding"] = out.pop("token_embedding", 0) + out.pop("position_embedding", 0) - self.embeddings
            out["token_embedding"] += self.embeddings if self.tied_head else lookups
        return out

    def read(self, tokens: int) -> Fraction:
        """Bytes a forward pass over ``tokens`` tokens reads: every weight once, embeddings by rows, experts that
        the tokens can reach."""
        experts = self.experts * min(Fraction(1), tokens * self.expert_share) if self.experts else Fraction(0)
        lookups = self.embeddings if self.tied_head else min(self.embeddings, tokens * self.embedding_row)
        return self.total - self.experts - self.embeddings + experts + lookups


LOOKUPS = ("embed.", "mtp.embed.")  # tables read by rows: the model's, and an MTP module's stored copy


def weight_bytes(lowered: Lowered, dtype_bytes: Fraction, weights_dtype: str | None) -> WeightBytes:
    """The weights' bytes at ``dtype_bytes`` an element (``weights_dtype``: quantized matrices); once a binding and
    dtype for the binding's own IR (infer asks at each tensor-parallel degree it tries)."""
    return per_ir(lowered, f"_weight_bytes_{dtype_bytes}_{weights_dtype}",
                  lambda: _weight_bytes(lowered, dtype_bytes, weights_dtype))


def _weight_bytes(lowered: Lowered, dtype_bytes: Fraction, weights_dtype: str | None) -> WeightBytes:
    numeric = lowered.binding.numeric()
    value = lambda e: int(sympy.sympify(e).xreplace(numeric))  # noqa: E731
    if weights_dtype is not None and weights_dtype not in QUANTIZED:
        raise UsageError(f"--weights-dtype {weights_dtype!r}: expected one of {', '.join(QUANTIZED)}")
    total = embeddings = row = experts = scales = Fraction(0)
    share, tied = Fraction(1), False
    by_role: dict[str, Fraction] = {}
    experts_by_role: dict[str, Fraction] = {}
    for leaf in leaves(lowered.root):
        if leaf.tensor.tied_to:
            tied = tied or not leaf.path.startswith("mtp.")  # an MTP module's shared embedding and head: not the head
            continue
        shape = [value(s) for s in leaf.tensor.shape]
        copies = value(leaf.repeat * leaf.tensor.owned)  # a shared block's weights are held (and read) once
        numel = copies * sympy.prod(shape) if shape else copies
        role = leaf.tensor.role
        # the token tables and the heads (an MTP module's copies of them too) stay unquantized
        matrix = len(shape) == 2 and role not in (*EMBEDDINGS, "lm_head") and not leaf.path.startswith(LOOKUPS + ("mtp.head.",))
        size = numel * dtype_bytes
        if weights_dtype is not None and matrix:
            per, group = QUANTIZED[weights_dtype]
            scale = numel * group * dtype_bytes if group is not None else Fraction(copies * shape[0] * 4)
            size, scales = numel * per + scale, scales + scale
        total += size
        by_role[role] = by_role.get(role, Fraction(0)) + size
        if leaf.path.startswith(LOOKUPS) and len(shape) == 2:
            embeddings += size
            row += size / shape[0]
            continue
        active = leaf.tensor.active.xreplace(numeric)
        if active != 1:
            experts += size
            experts_by_role[role] = experts_by_role.get(role, Fraction(0)) + size
            share = Fraction(int(active.p), int(active.q))
    return WeightBytes(total, embeddings, row, experts, share, scales, tied, by_role, experts_by_role)


def matmul_io(lowered: Lowered) -> tuple[int, int]:
    """Activation elements one token's matmuls read and write, Σ (in + out): the body's and the LM head's."""
    numeric = lowered.binding.numeric()
    body = head = sympy.Integer(0)

    def visit(node, repeat) -> None:
        nonlocal body, head
        repeat = repeat * node.repeat
        if isinstance(node.attrs, (Linear, Head)):
            weight = next(t for t in node.tensors if t.name == "weight")
            io = repeat * weight.active * (weight.shape[0] + weight.shape[1])
            if isinstance(node.attrs, Head):
                head += io
            else:
                body += io
        for child in node.children:
            visit(child, repeat)

    visit(lowered.root, sympy.Integer(1))
    return int(sympy.ceiling(body.xreplace(numeric))), int(head.xreplace(numeric))


def kv_terms(lowered: Lowered) -> list[tuple[int, int | None]]:
    """The KV cache as (elements one token adds over all layers of a kind, window or None): a cache of T tokens per
    sequence holds Σ elements × min(T, window) (what ``archcalc memory`` counts; the tests check they agree)."""
    numeric = lowered.binding.numeric()
    value = lambda e: int(sympy.sympify(e).xreplace(numeric))  # noqa: E731
    terms: dict[int | None, int] = {}

    def visit(node, repeat: int) -> None:
        repeat *= value(node.repeat)
        a = node.attrs
        if isinstance(a, Attention) and (a.causal or a.cross) and not a.kv_shared:
            if isinstance(a, LatentAttention):  # the compressed latent and the shared rotary key
                per_token = value(a.kv_rank + a.rope_width + index_key_width(node))  # + the indexer's key (DSA)
            else:
                per_token = value(a.kv_heads) * (value(a.head_width) + value(a.value_width))
            period = len(a.pattern)
            for window, places in places_by_window(a.layer_windows).items():  # each window once, not once a place
                w = value(window) if window is not None else None
                terms[w] = terms.get(w, 0) + sum(len(range(j, repeat, period)) for j in places) * per_token
            return
        for child in node.children:
            visit(child, repeat)

    visit(lowered.root, 1)
    return list(terms.items())
