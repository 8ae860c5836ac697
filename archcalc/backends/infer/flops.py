"""Exact matmul FLOPs of generation, as the generated module's ``generate()`` runs it.

One prefill over the prompt's P positions, with the LM head at the last position only, then N − 1 cached
decode steps: the token at position p runs alone and attends to the p + 1 tokens up to it (at most
``window`` in a sliding-window layer, whose cache keeps only those; a chunked layer's cache is a ring of one block,
all of whose slots a step scores, the earlier block's masked). Grouped-query and multi-query attention
cost what multi-head attention costs (every query head still scores every key); a mixture of experts runs
top_k experts per token; multi-head latent attention, generating, attends in the latent space (kv_up
absorbed: 2·H·d_head·kv_rank per token into it and 2·H·kv_rank·d_value out of it, pairs of width
2·kv_rank + rope_width), in the prefill too. DeepSeek Sparse Attention: each query attends to the top-k keys its
indexer chose, Σ min(p + 1, k) pairs as a window of k would give, and the indexer scores every earlier key,
2·H_i·(d_i + 1) a pair (by role ``indexer_scores``, apart from ``attention_products``; its projections are in role
attention). 2 FLOPs per multiply-accumulate.

A Mamba2 (SSD) mixer layer: the prefill runs the chunked forward of :mod:`archcalc.ir.ops` over the prompt (its
projections, its conv 2·B·P·C·K and its chunked mixing over ceiling(P / Q) chunks); a decode step, per token and layer,
its projections, its conv over the cached window 2·C·K and the state's read-out 2·H·N·P (C·state, a matmul), all in the
matmul totals and the same at every position; the state update (decay, outer product, add: 3·H·N·P element
operations per token and layer) is reported apart (``decode_state_update``), never in the matmul totals.
A Mamba mixer layer likewise, its prefill the sequential scan (conv 2·B·P·I·K and read-out 2·B·P·I·N in the matmul
totals), a decode step its conv 2·I·K and read-out 2·I·N per token and layer, its state update 3·I·N apart.
A Gated DeltaNet layer: its prefill the chunked delta rule (``mixer_delta_rule``), a decode step its conv 2·C·K and its
products with the state 6·H·Dk·Dv per token and layer (read by the key and by the query, the correction written); a
short convolution (LFM2) its conv alone. Each kind's formulas are its attrs class's (:class:`~archcalc.ir.attrs.StateMixer`).

Attention pairs are counted over the causal triangle (the work a causal kernel does; a chunked layer's prefill: the
triangle of each block): then
``generate_matmul`` = ``forward_matmul_causal(P + N − 1) − 2·V·d·B·(P − 1)`` for a dense decoder. ``_dense``
figures count the prefill's full P × P square, which is what torch's FlopCounterMode reports for SDPA.

>>> from archcalc.spec import load_spec
>>> from archcalc.spec.bind import bind
>>> g = generation_flops(bind(load_spec("gpt2"), "small"), batch=1, prompt=8, new_tokens=4)
>>> g.prefill, g.decode_steps, g.generate
(1437476352, [247395840, 247432704, 247469568], 2179774464)
>>> g.decode == sum(g.decode_steps), g.step_at(10) == g.decode_steps[-1]
(True, True)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import cached_property

import sympy

from archcalc.errors import UsageError
from archcalc.ir import Component, Lowered, lower, per_ir
from archcalc.ir.attrs import MIXERS, Attention, Head, Indexer, LatentAttention, Linear, Pooler, StateMixer
from archcalc.ir.nodes import ONE
from archcalc.ir.ops import RunSymbol, chunked_pairs, layers_of_kind
from archcalc.spec.bind import Binding

B, P, N = sympy.symbols("B P N", integer=True, positive=True)


# the run's B, P, N while counting: never equal to a spec's hyperparameter of the same name (a Mamba2 spec's state
# ``N``); the formula shown uses the plain B, P, N
_B, _P, _N = (RunSymbol(name, integer=True, positive=True) for name in "BPN")


@dataclass(frozen=True)
class AttentionTerm:
    """Layers that score query-key pairs alike: ``layers`` of them, ``per_pair`` FLOPs a pair (one sequence)."""

    path: str
    layers: sympy.Expr
    per_pair: sympy.Expr
    window: sympy.Expr | None
    # a chunked layer (window: its block): the prefill scores each block's triangle; a decode step scores the slots of
    # its cache, a ring of one block, as a window does (the generated module masks the earlier block's keys)
    chunked: bool = False
    indexer: bool = False  # DeepSeek Sparse Attention's indexer scoring every earlier token (reported apart)
    sparse: bool = False  # DeepSeek Sparse Attention: ``window`` is the top-k keys its indexer chose, not a band


@dataclass(frozen=True)
class MixerTerm:
    """``layers`` state-mixer layers alike (their projections are in :class:`Costs`' ``by_role``)."""

    path: str
    layers: sympy.Expr
    attrs: StateMixer

    def conv(self, a: StateMixer | None = None) -> sympy.Expr:
        """Conv FLOPs of one token in one layer: 2·C·K."""
        a = a or self.attrs
        return 2 * a.channels * a.conv

    def read_out(self, a: StateMixer | None = None) -> sympy.Expr:
        """A decode step's matmuls on the state, one token in one layer (Mamba2: 2·H·N·P = 2·I·N)."""
        return (a or self.attrs).step_flops()


#: a state mixer's mixing over a prompt (ir.ops' op kind) -> its role in the prefill's by-role FLOPs
PREFILL_ROLES = {"ssd": "mixer_chunked_mixing", "scan": "mixer_state_read_out", "delta": "mixer_delta_rule"}


@dataclass(frozen=True)
class Costs:
    """Per-token matmul FLOPs of one sequence (``by_role``; the head apart), the attention terms and the state
    mixer terms."""

    by_role: dict[str, sympy.Expr]
    head: sympy.Expr
    attention: list[AttentionTerm]
    mixers: tuple[MixerTerm, ...] = ()

    @property
    def per_token(self) -> sympy.Expr:
        return sum(self.by_role.values(), sympy.Integer(0))

    def at(self, numeric: dict) -> Costs:
        """These costs at one size (``numeric``: each hyperparameter's value): numbers in place of the expressions in
        the hyperparameters (the state mixers' terms stay as they are: their figures are evaluated one by one)."""
        at = lambda e: sympy.sympify(e).xreplace(numeric)  # noqa: E731
        return Costs({role: at(f) for role, f in self.by_role.items()}, at(self.head),
                     [replace(t, layers=at(t.layers), per_pair=at(t.per_pair), window=None if t.window is None else at(t.window))
                      for t in self.attention], self.mixers)


def costs(lowered: Lowered) -> Costs:
    """Walk the IR: what one token costs in every matmul, and what one query-key pair costs in each attention."""
    by_role: dict[str, sympy.Expr] = {}
    head = sympy.Integer(0)
    terms: list[AttentionTerm] = []
    mixers: list[MixerTerm] = []

    def add(role: str, flops: sympy.Expr) -> None:
        by_role[role] = by_role.get(role, sympy.Integer(0)) + flops

    def visit(node: Component, prefix: str, repeat: sympy.Expr, latent: Component | None) -> None:
        nonlocal head
        path = f"{prefix}.{node.name}" if prefix and node.name else prefix or node.name
        repeat = repeat * node.repeat
        if isinstance(node.attrs, Pooler):
            return
        if isinstance(node.attrs, LatentAttention):
            latent = node
        if isinstance(node.attrs, (Linear, Head)):
            weight = next(t for t in node.tensors if t.name == "weight")
            out, inp = weight.shape
            flops = 2 * inp * out * weight.active * repeat
            if isinstance(node.attrs, Head):
                head += flops
            elif not (latent is not None and node.name == "kv_up"):  # absorbed when generating
                add(weight.role, flops)
        for child in node.children:
            visit(child, path, repeat, latent)
        if isinstance(node.attrs, Indexer):  # its scores: 2·heads·(head_width + 1) a query-key pair, every earlier key
            terms.append(AttentionTerm(path, repeat, 2 * node.attrs.heads * (node.attrs.head_width + 1), None, indexer=True))
        if isinstance(node.attrs, Attention):
            terms.extend(_attention(node, path, repeat, add))
        if isinstance(node.attrs, StateMixer):
            mixers.append(MixerTerm(path, repeat, node.attrs))

    visit(lowered.root, "", ONE, None)
    return Costs(by_role, head, terms, tuple(mixers))


def _attention(node: Component, path: str, repeat: sympy.Expr, add) -> list[AttentionTerm]:
    a = node.attrs
    assert isinstance(a, Attention)
    if not a.causal:
        raise UsageError("infer works on decoders (causal self-attention); this model has bidirectional or cross-attention")
    heads = a.heads
    if isinstance(a, LatentAttention):
        rank = a.kv_rank
        add("attention", repeat * 2 * heads * rank * (a.head_width + a.value_width))  # into and out of the latent space
        per_pair = 2 * heads * (2 * rank + a.rope_width)
    else:
        per_pair = 2 * heads * (a.head_width + a.value_width)
    pattern = a.pattern
    out = []
    for kind in ("global", "local", "chunked"):
        if kind in pattern:
            layers = repeat if len(set(pattern)) == 1 else layers_of_kind(pattern, repeat, kind)
            window = a.window if kind == "local" else a.chunk if kind == "chunked" else None
            sparse = isinstance(a, LatentAttention) and a.sparse
            if sparse:  # the top-k keys its indexer chose: Σ min(p + 1, k)
                window = a.index_top_k
            out.append(AttentionTerm(path, layers, per_pair, window, kind == "chunked", sparse=sparse))
    return out


def triangle(length: sympy.Expr, window: sympy.Expr | None) -> sympy.Expr:
    """Causal pairs of ``length`` queries at positions 0.. over their own keys: Σ min(i + 1, window)."""
    return keys_between(sympy.Integer(1), length, window)


def keys_between(first: sympy.Expr, last: sympy.Expr, window: sympy.Expr | None) -> sympy.Expr:
    """Σ min(k, window) for k = first .. last (0 when last < first): keys seen by queries that see first .. last."""
    plain = (first + last) * (last - first + 1) / 2
    if window is None:
        return plain
    return sympy.Piecewise((plain, last <= window), (window * (last - first + 1), first >= window),
                           ((first + window) * (window - first + 1) / 2 + window * (last - window), True))


_SHOWN = (B, P, N)  # the plain symbols of the formula shown
STEP_LIST_LIMIT = 1024  # decode steps listed one by one (decode_steps, JSON's decode_step_matmul) up to this many


@dataclass(frozen=True)
class GenerationFlops:
    binding: Binding
    batch: int
    prompt: int
    new_tokens: int
    prefill: int
    prefill_dense: int
    decode: int  # the N - 1 decode steps together, in closed form
    prefill_by_role: dict[str, int]
    decode_by_role: dict[str, int]
    # builds generate_matmul in the run's symbols and the hyperparameters (``formula`` expands it) when first read:
    # most callers want the numbers only, and the formula of a large model is most of what this module would cost
    build_symbolic: Callable[[], sympy.Expr] = field(compare=False, repr=False)
    prefill_at_size: sympy.Expr  # the prefill's FLOPs in the run's B and P, at this size
    # a decode step of one sequence at position p: step_fixed + Σ k · min(p + 1, window) over step_terms (k, window)
    step_fixed: int = 0
    step_terms: tuple[tuple[int, int | None], ...] = ()
    # DeepSeek Sparse Attention: the attention products that reading every earlier key (dense latent attention) would
    # add, (prefill, decode); None without sparse attention
    sparse_saving: tuple[int, int] | None = None
    # state-mixer layers' state updates over the decode steps: element operations per token and layer (not FLOPs of
    # a matmul: in none of the totals above)
    decode_state_update: int = 0

    @cached_property
    def formula(self) -> sympy.Expr:
        """generate_matmul in B, P, N and the hyperparameters, expanded."""
        return sympy.expand(self.build_symbolic().xreplace(self.binding.substitutions).xreplace(dict(zip((_B, _P, _N), _SHOWN))))

    @property
    def prefill_formula(self) -> sympy.Expr:
        """The prefill's matmul FLOPs in B and P alone, at this binding's hyperparameters (``formula`` at N = 1), as
        built (not expanded: expanding a windowed layer's piecewise sum costs more than evaluating it)."""
        return self.prefill_at_size.xreplace(dict(zip((_B, _P), _SHOWN)))

    @property
    def steps(self) -> int:
        """Decode steps: one for each new token after the first."""
        return self.new_tokens - 1

    def step_at(self, position: int, batch: int | None = None) -> int:
        """FLOPs of the decode step of the token at ``position`` (it sees position + 1 keys, a window at most) for
        ``batch`` sequences (default: this run's)."""
        seen = position + 1
        per_sequence = self.step_fixed + sum(k * (seen if w is None else min(seen, w)) for k, w in self.step_terms)
        return (self.batch if batch is None else batch) * per_sequence

    @property
    def decode_steps(self) -> list[int]:
        """Each decode step's FLOPs, positions P .. P + N - 2: for runs of up to STEP_LIST_LIMIT steps (else
        ValueError; :meth:`step_at` gives any one of them)."""
        if self.steps > STEP_LIST_LIMIT:
            raise ValueError(f"{self.steps:,} decode steps are more than are listed ({STEP_LIST_LIMIT:,}); use step_at()")
        return [self.step_at(p) for p in range(self.prompt, self.prompt + self.steps)]

    @property
    def generate(self) -> int:
        return self.prefill + self.decode


def generation_flops(binding: Binding, batch: int, prompt: int, new_tokens: int, lowered: Lowered | None = None) -> GenerationFlops:
    """The FLOPs of one run; once a binding and run for the binding's own IR (a docs build asks for the same run at
    several tensor-parallel degrees: the FLOPs do not depend on them)."""
    lowered = lowered or lower(binding)
    return per_ir(lowered, f"_generation_{batch}_{prompt}_{new_tokens}",
                  lambda: _generation_flops(binding, batch, prompt, new_tokens, lowered))


def _mixer_roles(mixers: list, value: Callable, at: dict, prefill_by_role: dict, decode_by_role: dict) -> int:
    """The state-mixer layers' own terms (their projections are in role "mixer"), added to the run's by-role FLOPs;
    returns their state updates' element operations over the decode steps (0 without state mixers)."""
    if not mixers:
        return 0
    batch, prompt, steps = at[_B], at[_P], at[_N] - 1
    prefill_by_role["mixer_conv"] = batch * prompt * sum(value(m.layers) * int(m.conv(a)) for m, a in mixers)
    for kind, role in PREFILL_ROLES.items():
        if any(a.mixing == kind for _, a in mixers):
            prefill_by_role[role] = sum(value(m.layers) * int(a.mixing_flops(_B, _P).xreplace(at))
                                        for m, a in mixers if a.mixing == kind)
    decode_by_role["mixer_conv"] = batch * steps * sum(value(m.layers) * int(m.conv(a)) for m, a in mixers)
    decode_by_role["mixer_state_read_out"] = batch * steps * sum(value(m.layers) * int(m.read_out(a)) for m, a in mixers)
    return batch * steps * sum(value(m.layers) * int(a.update_ops()) for m, a in mixers)


def _generation_flops(binding: Binding, batch: int, prompt: int, new_tokens: int, lowered: Lowered) -> GenerationFlops:
    B, P, N = _B, _P, _N  # noqa: N806 (see _RunSymbol)
    lowered.require_attention_only("the generation FLOPs", modelled=MIXERS)
    numeric = binding.numeric()
    by_symbol = per_ir(lowered, "_infer_costs", lambda: costs(lowered))  # the same for every run of this IR
    # in numbers: the figures below are expressions in the run's B, P and N alone
    c = per_ir(lowered, "_infer_costs_at_size", lambda: by_symbol.at(numeric))
    value = lambda e: int(sympy.sympify(e).xreplace(numeric))  # noqa: E731
    # the mixers' widths at this size first (a hyperparameter may share a name with B, P or N): (term, numeric attrs)
    mixers = [(m, m.attrs.numeric(value)) for m in c.mixers]

    def mixing(a: StateMixer, batch, length) -> sympy.Expr:
        """A layer's mixing over a prompt: Mamba2's chunked scan, Mamba's read-outs of the sequential scan, ..."""
        return a.mixing_flops(batch, length)

    def mixer_prefill(length, symbolic: bool = False) -> sympy.Expr:
        """The state-mixer layers' conv and mixing over a prompt of ``length`` tokens, B sequences."""
        return sum(((m.layers if symbolic else value(m.layers))
                    * (B * length * m.conv(None if symbolic else a) + mixing(m.attrs if symbolic else a, B, length))
                    for m, a in mixers), sympy.Integer(0))

    def mixer_step(symbolic: bool = False) -> sympy.Expr:
        """The state-mixer layers' conv and products with the state of one decode token of one sequence."""
        return sum(((m.layers if symbolic else value(m.layers))
                    * (m.conv(None if symbolic else a) + m.read_out(None if symbolic else a)) for m, a in mixers),
                   sympy.Integer(0))

    def attention(pairs, indexer: bool | None = None, of: Costs = c) -> sympy.Expr:
        """The attention terms' FLOPs over ``pairs``: all of them, or the indexers' only (True) or the others (False)."""
        return sum((t.layers * t.per_pair * pairs(t) for t in of.attention if indexer in (None, t.indexer)), sympy.Integer(0))

    def prompt_pairs(length) -> Callable:
        return lambda t: chunked_pairs(length, t.window) if t.chunked else triangle(length, t.window)

    body = B * P * c.per_token + B * c.head
    prefill = body + B * attention(prompt_pairs(P)) + mixer_prefill(P)
    dense = body + B * attention(lambda t: P**2) + mixer_prefill(P)
    decode_total = (N - 1) * B * (c.per_token + c.head + mixer_step()) \
        + B * attention(lambda t: keys_between(P + 1, P + N - 1, t.window))
    at = {B: batch, P: prompt, N: new_tokens}
    fixed = value(c.per_token + c.head) + int(mixer_step())  # one sequence's step: fixed + Σ k · min(p + 1, w)
    terms = tuple((value(t.layers * t.per_pair), value(t.window) if t.window is not None else None) for t in c.attention)
    prefill_by_role = {role: value(batch * prompt * f) for role, f in c.by_role.items()}
    prefill_by_role["attention_products"] = value(batch * attention(prompt_pairs(sympy.Integer(prompt)), False))
    indexed = any(t.indexer for t in c.attention)
    if indexed:  # DeepSeek Sparse Attention: the indexers' scores of every earlier token, apart
        prefill_by_role["indexer_scores"] = value(batch * attention(prompt_pairs(sympy.Integer(prompt)), True))
    prefill_by_role["lm_head"] = value(batch * c.head)
    decode_by_role = {role: value(batch * (new_tokens - 1) * f) for role, f in c.by_role.items()}
    decode_by_role["attention_products"] = value(decode_total.xreplace(at) - batch * (new_tokens - 1) * (c.per_token + c.head)
                                                 - batch * (new_tokens - 1) * mixer_step())
    if indexed:
        decode_by_role["indexer_scores"] = value((B * attention(lambda t: keys_between(P + 1, P + N - 1, t.window), True)).xreplace(at))
        decode_by_role["attention_products"] -= decode_by_role["indexer_scores"]
    decode_by_role["lm_head"] = value(batch * (new_tokens - 1) * c.head)
    state_update = _mixer_roles(mixers, value, at, prefill_by_role, decode_by_role)

    def symbolic() -> sympy.Expr:
        s = by_symbol
        return B * P * s.per_token + B * s.head + B * attention(prompt_pairs(P), of=s) + mixer_prefill(P, True) \
            + (N - 1) * B * (s.per_token + s.head + mixer_step(True)) \
            + B * attention(lambda t: keys_between(P + 1, P + N - 1, t.window), of=s)

    saving = None
    if any(t.sparse for t in c.attention):  # the same layers reading every earlier key
        sparse = [t for t in c.attention if t.sparse]
        saving = tuple(value((B * sum((t.layers * t.per_pair * (pairs(t, None) - pairs(t, t.window)) for t in sparse),
                                      sympy.Integer(0))).xreplace(at))
                       for pairs in (lambda t, w: triangle(P, w), lambda t, w: keys_between(P + 1, P + N - 1, w)))
    return GenerationFlops(binding, batch, prompt, new_tokens, value(prefill.xreplace(at)), value(dense.xreplace(at)),
                           value(decode_total.xreplace(at)), prefill_by_role, decode_by_role, symbolic, prefill, fixed, terms,
                           saving, state_update)
