"""Several targets at once, the way people plan a model: a compute budget becomes a parameter target, and
every candidate gets its training tokens, training FLOPs and memory (inference or training with AdamW),
checked against a device's memory. Every figure is an exact integer.

- ``--target-flops C --tokens D``: N = C // (6·D). ``--tokens-per-param R`` (Chinchilla's 20 by default):
  D = R·N, so N = floor(sqrt(C / (6·R))), computed exactly (``isqrt`` of an exact floor, R a Fraction).
- Per candidate: tokens (D, or R·N rounded to the nearest whole token), ``train_flops_6nd`` = 6·N·D (the
  planning rule C was turned into N with) and ``train_flops_matmul``, the exact matmul FLOPs of D tokens
  in sequences of ``seq_len`` (``archcalc flops``' ``train_step_matmul`` per sequence × D / seq_len).
- Memory: inference = weights at ``dtype`` + the KV cache of ``batch`` × ``seq_len`` tokens; training =
  16 bytes a parameter (mixed-precision AdamW) + activations (flash attention, no recomputation), from
  :mod:`archcalc.backends.memory`, on one device.

>>> params_from_flops(576 * 10**21, tokens_per_param=Fraction(20))
69282032302
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

from archcalc.backends.flops import flops
from archcalc.backends.memory import DTYPES, kv_cache_elements, memory
from archcalc.errors import UsageError
from archcalc.ir import lower
from archcalc.spec import Spec
from archcalc.spec.bind import bind

CHINCHILLA = Fraction(20)


@dataclass(frozen=True)
class Plan:
    seq_len: int
    batch: int = 1
    dtype: str = "bfloat16"
    tokens: int | None = None  # D given
    tokens_per_param: Fraction | None = None  # or R
    memory_budget: int | None = None
    memory_for: str = "inference"  # or "training"
    flops: bool = False  # show tokens and training FLOPs

    @property
    def memory(self) -> bool:
        return self.memory_budget is not None or self.flops


def params_from_flops(compute: int, tokens: int | None = None, tokens_per_param: Fraction | None = None) -> int:
    """The parameter target of a compute budget C = 6·N·D."""
    if compute < 1:
        raise UsageError("--target-flops: expected a positive number of FLOPs")
    if tokens is not None:
        if tokens < 1:
            raise UsageError(f"--tokens {tokens}: expected a positive number of training tokens")
        n = compute // (6 * tokens)
        what = f"C / (6·D) with D = {tokens:,}"
    else:
        r = tokens_per_param if tokens_per_param is not None else CHINCHILLA
        n = math.isqrt(compute * r.denominator // (6 * r.numerator))
        what = f"sqrt(C / (6·{_decimal(r)}))"
    if n < 1:
        raise UsageError(f"--target-flops {compute:,}: {what} is below one parameter; expected a larger budget")
    return n


def annotate(spec: Spec, values: dict, total: int, plan: Plan) -> dict:
    """Tokens, training FLOPs and memory of one candidate (exact integers)."""
    from archcalc.backends.solve.problem import overrides

    binding = bind(spec, None, overrides(spec, values))
    out: dict = {}
    if plan.flops:
        tokens = plan.tokens if plan.tokens is not None else math.floor((plan.tokens_per_param or CHINCHILLA) * total
                                                                          + Fraction(1, 2))
        per_sequence = flops(binding, plan.seq_len, 1).train_step_matmul
        out["tokens"] = tokens
        out["train_flops_6nd"] = 6 * total * tokens
        out["train_flops_matmul"] = math.ceil(Fraction(per_sequence * tokens, plan.seq_len))
    if plan.memory:
        m = memory(binding, plan.seq_len, plan.batch, plan.dtype)
        width = Fraction(DTYPES[plan.dtype])  # int4's 0.5 is exactly 1/2
        weights = math.ceil(total * width)
        kv = math.ceil(kv_cache_elements(lower(binding).root, binding, plan.seq_len, plan.batch) * width)
        acts = m.acts.total_bytes()
        need = {"inference": weights + kv, "training": 16 * total + acts}
        out["memory"] = {"weights_bytes": weights, "kv_cache_bytes": kv, "inference_bytes": need["inference"],
                         "training_states_bytes": 16 * total, "activations_bytes": acts,
                         "training_bytes": need["training"]}
        if plan.memory_budget is not None:
            out["memory"]["fits"] = need[plan.memory_for] <= plan.memory_budget
    return out


def fitting_params(plan: Plan, extras: dict) -> int:
    """About how many parameters the budget holds, with the candidate's own KV cache or activations."""
    m = extras["memory"]
    assert plan.memory_budget is not None
    if plan.memory_for == "training":
        return max(0, (plan.memory_budget - m["activations_bytes"]) // 16)
    width = Fraction(DTYPES[plan.dtype])
    return max(0, math.floor((plan.memory_budget - m["kv_cache_bytes"]) / width))


def _decimal(r: Fraction) -> str:
    return str(r.numerator) if r.denominator == 1 else f"{float(r):g}"
