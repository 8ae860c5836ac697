"""The FLOPs backend: exact matmul FLOPs of a forward pass and a training step, and the literature's
approximations beside them, each with its ratio to the exact figure.

- ``forward_matmul``: every matmul of one forward pass, the LM head and both attention products over
  the full S×S square: what torch's FlopCounterMode reports for the generated module on meta.
- ``forward_matmul_causal``: attention products over the causal triangle (the band for sliding-window
  layers): the work a causal kernel such as flash attention really does.
- ``train_step_matmul``: forward + backward, backward = 2 × forward for matmuls (one product for the
  input gradient, one for the weight gradient); with ``recompute`` one more forward.
- Mamba2 (SSD) mixer layers: their projections, their depthwise conv and their chunked mixing are in the matmul
  totals (FlopCounterMode counts the conv as a convolution and the chunked products as matmuls; backward = 2 ×
  forward for both), the same full or causal; ``mixer_by_kind`` splits out the conv and the chunked mixing (see
  :mod:`archcalc.ir.ops` for the convention). The literature's approximations other than 6N assume attention
  layers: for a model with mixers only 6N is given.
- Mamba mixer layers: their four projections, their depthwise conv and their state read-out (state @ C, one product
  a token: 2·B·S·I·N) are in the matmul totals, the same full or causal; the sequential scan's state update (3·B·S·I·N
  element operations) is in none of them (``mixer_forward.state_update_ops``).
- Gated DeltaNet layers: their projections, their conv and the chunked delta rule's products (``delta_rule``), the
  same full or causal; short-convolution layers (LFM2): their projections and their conv (their gates are
  element-wise). Each kind's formula is its attrs class's (:class:`archcalc.ir.attrs.StateMixer`).

>>> from archcalc.spec import load_spec
>>> from archcalc.spec.bind import bind
>>> r = flops(bind(load_spec("gpt2"), "small"), seq_len=1024, batch=1)
>>> r.forward_matmul, r.train_step_matmul
(291648307200, 874944921600)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from functools import cached_property

import sympy

from archcalc.backends.count import CountResult, check_formula, count, render
from archcalc.backends.nonmatmul import non_matmul_forward
from archcalc.backends.shape import model_shape
from archcalc.ir import Lowered, lower, per_ir
from archcalc.ir.attrs import MIXERS
from archcalc.ir.nodes import ROLES
from archcalc.ir.ops import BATCH, SEQ, Op, forward_ops
from archcalc.spec.bind import Binding


@dataclass(frozen=True)
class FlopsResult:
    binding: Binding
    seq_len: int
    batch: int
    recompute: bool
    forward_matmul: int
    forward_matmul_causal: int
    by_role: dict[str, int]
    # per sequence, symbolic in S and the hyperparameters, before expanding (the formulas below expand them when read:
    # a docs build asks for many FLOPs whose formulas it never shows)
    forward_sum: sympy.Expr
    forward_causal_sum: sympy.Expr
    non_matmul_forward: int  # an estimate: softmax, norms, activations, residual adds
    approximations: dict[str, dict] = field(default_factory=dict)
    mixer_by_kind: dict[str, int] = field(default_factory=dict)  # mixer layers: "conv", "ssd", "scan" forward FLOPs (in the totals)

    @cached_property
    def forward_formula(self) -> sympy.Expr:
        """The forward pass's matmul FLOPs per sequence, symbolic in S and the hyperparameters."""
        return sympy.expand(self.forward_sum)

    @cached_property
    def forward_causal_formula(self) -> sympy.Expr:
        return sympy.expand(self.forward_causal_sum)

    @property
    def backward_matmul(self) -> int:
        return 2 * self.forward_matmul

    @property
    def train_step_matmul(self) -> int:
        return self.forward_matmul + self.backward_matmul + (self.forward_matmul if self.recompute else 0)

    @property
    def train_step_matmul_causal(self) -> int:
        return self.forward_matmul_causal * (4 if self.recompute else 3)

    @property
    def tokens(self) -> int:
        return self.seq_len * self.batch

    def to_json(self) -> dict:
        per_token = lambda n: exact(Fraction(n, self.tokens))  # noqa: E731
        text, latex = render(self.forward_formula, (SEQ,))
        causal_text, _ = render(self.forward_causal_formula, (SEQ,))
        return {
            "size": self.binding.size,
            "seq_len": self.seq_len,
            "batch": self.batch,
            "recompute": self.recompute,
            "forward_matmul": self.forward_matmul,
            "forward_matmul_causal": self.forward_matmul_causal,
            "backward_matmul": self.backward_matmul,
            "train_step_matmul": self.train_step_matmul,
            "train_step_matmul_causal": self.train_step_matmul_causal,
            "per_sequence": {"forward_matmul": self.forward_matmul // self.batch,
                             "train_step_matmul": self.train_step_matmul // self.batch},
            "per_token": {"forward_matmul": per_token(self.forward_matmul),
                          "forward_matmul_causal": per_token(self.forward_matmul_causal),
                          "train_step_matmul": per_token(self.train_step_matmul),
                          "train_step_matmul_causal": per_token(self.train_step_matmul_causal)},
            "by_role": self.by_role,
            "forward_formula": text,
            "forward_formula_latex": latex,
            "forward_causal_formula": causal_text,
            "non_matmul_forward_estimate": self.non_matmul_forward,
            "approximations": self.approximations,
            **({"mixer_forward": self._mixer_json()} if self.mixer_by_kind else {}),
        }

    def _mixer_json(self) -> dict:
        """The state-mixer layers' own forward terms: their conv, their mixing (MIXING_JSON) and, for Mamba's
        sequential scan, the state update's element operations (in no matmul total)."""
        out: dict = {"conv": self.mixer_by_kind.get("conv", 0)}
        terms = ["depthwise conv"]
        for kind, (key, what) in MIXING_JSON.items():
            if kind in self.mixer_by_kind:
                out[key] = self.mixer_by_kind[kind]
                terms.append(what)
        if "scan" in self.mixer_by_kind:
            out["state_update_ops"] = 3 * self.mixer_by_kind["scan"] // 2
        out["note"] = ("the state-mixer layers' " + ", ".join(terms) + ", in forward_matmul and forward_matmul_causal "
                       "alike; by_role.mixer holds them and the projections"
                       + ("; state_update_ops: Mamba's state update, 3·B·S·I·N element operations, in no matmul total"
                          if "scan" in self.mixer_by_kind else ""))
        return out


#: a state mixer's mixing op (ir.ops) -> its key in the JSON's mixer_forward, and what it is
MIXING_JSON = {"ssd": ("chunked_mixing", "Mamba2's chunked mixing (SSD)"),
               "scan": ("state_read_out", "Mamba's state read-out (state @ C, 2·B·S·I·N)"),
               "delta": ("delta_rule", "Gated DeltaNet's chunked delta rule")}


def exact(value: Fraction) -> int | str:
    """A JSON value that loses nothing: an integer when whole, else the fraction as text (``"1023/2"``)."""
    return value.numerator if value.denominator == 1 else f"{value.numerator}/{value.denominator}"


def flops(binding: Binding, seq_len: int, batch: int = 1, recompute: bool = False,
          lowered: Lowered | None = None, counted: CountResult | None = None) -> FlopsResult:
    """Exact matmul FLOPs of ``batch`` sequences of ``seq_len`` tokens at ``binding``'s size (once a binding and run
    for the binding's own IR and count: a docs page asks for the same figures in several sections)."""
    lowered = lowered or lower(binding)
    if counted is not None and counted is not binding.__dict__.get("_count"):  # not count()'s own (a variant's)
        return _flops(binding, seq_len, batch, recompute, lowered, counted)
    return per_ir(lowered, f"_flops_{seq_len}_{batch}_{recompute}",
                  lambda: _flops(binding, seq_len, batch, recompute, lowered, count(binding)))


def _flops(binding: Binding, seq_len: int, batch: int, recompute: bool, lowered: Lowered, counted: CountResult) -> FlopsResult:
    lowered.require_attention_only("the FLOPs", modelled=MIXERS)
    ops = forward_ops(lowered)
    numeric = {**binding.numeric(), SEQ: sympy.Integer(seq_len), BATCH: sympy.Integer(batch)}
    per_seq = {SEQ: SEQ, BATCH: sympy.Integer(1)}

    def total(pick) -> int:
        return int(sum((pick(op).xreplace(numeric) for op in ops), sympy.Integer(0)))

    by_role = {role: 0 for role in ROLES}
    for op in ops:
        by_role[op.role] += int(op.total_full.xreplace(numeric))
    by_role = {k: v for k, v in by_role.items() if v}
    mixer_by_kind = {kind: sum(int(op.total_full.xreplace(numeric)) for op in ops if op.kind == kind)
                     for kind in ("conv", *MIXING_JSON) if any(op.kind == kind for op in ops)}
    forward = total(lambda op: op.total_full)
    result = FlopsResult(
        binding=binding, seq_len=seq_len, batch=batch, recompute=recompute,
        forward_matmul=forward,
        forward_matmul_causal=total(lambda op: op.total_causal),
        by_role=by_role,
        forward_sum=_formula(ops, binding, per_seq, lambda op: op.total_full),
        forward_causal_sum=_formula(ops, binding, per_seq, lambda op: op.total_causal),
        non_matmul_forward=int(non_matmul_forward(lowered, seq_len, batch)),
        mixer_by_kind=mixer_by_kind,
    )
    approx = approximations(lowered, counted, seq_len, batch, result.train_step_matmul, ops, numeric)
    object.__setattr__(result, "approximations", approx)
    return result


def _formula(ops: list[Op], binding: Binding, per_seq: dict, pick) -> sympy.Expr:
    expr = sum((pick(op) for op in ops), sympy.Integer(0)).xreplace(per_seq)
    return check_formula(binding, expr.xreplace(binding.substitutions), "FLOPs")


def approximations(lowered: Lowered, counted: CountResult, seq_len: int, batch: int, exact_train: int,
                   ops: list[Op], numeric: dict) -> dict[str, dict]:
    """The common formulas for training compute, with their ratio to the exact ``train_step_matmul`` (a model with
    state-space mixers: 6N alone; the others count attention layers)."""
    N = counted.total
    if any(isinstance(node.attrs, MIXERS) for _, node in lowered.root.walk()):
        value = 6 * N * seq_len * batch
        return {"6N": {"train_step": value, "ratio": float(Fraction(value, exact_train)) if exact_train else None,
                       "what": "6·N·tokens, N = all parameters (GPT-3 Table D.1's training compute)"}}
    shape = model_shape(lowered)
    non_embedding = N - counted.by_role.get("token_embedding", 0) - counted.by_role.get("position_embedding", 0)
    weights_only = N - sum(n for path, n in counted.by_path.items() if path.endswith(".bias"))
    S, B, L, d, V = seq_len, batch, shape.layers, shape.width, shape.vocab
    d_attn, heads, head_width, d_ff = shape.attention_width, shape.heads, shape.head_width, shape.mlp_hidden
    tokens = S * B
    chinchilla_forward = B * (
        2 * S * V * d
        + L * (2 * 3 * S * d * d_attn + 2 * S * S * d_attn + 3 * heads * S * S + 2 * S * S * d_attn
               + 2 * S * d_attn * d + 2 * S * (2 * d * d_ff))
        + 2 * S * d * V
    )
    values = {
        "6N": (6 * N * tokens, "6·N·tokens, N = all parameters (GPT-3 Table D.1's training compute)"),
        "kaplan": (3 * (2 * non_embedding + 2 * L * S * d_attn) * tokens,
                   "3·C_fwd, C_fwd = 2·N + 2·L·S·d_attn per token, N without embeddings (Kaplan et al. 2020, Table 1)"),
        "chinchilla": (3 * chinchilla_forward,
                       "3 × forward of Hoffmann et al. 2022, Appendix F (embeddings, QKV, logits, softmax, values, out, dense, final logits)"),
        "palm": ((6 * weights_only + 12 * L * heads * head_width * S) * tokens,
                 "(6·N + 12·L·H·Q·T)·tokens (Chowdhery et al. 2022, Appendix B), N = weights without bias vectors"),
    }
    return {name: {"train_step": value, "ratio": float(Fraction(value, exact_train)) if exact_train else None, "what": what}
            for name, (value, what) in values.items()}
