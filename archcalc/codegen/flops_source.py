"""``train_step_flops(seq_len)`` of the generated file: the exact matmul FLOPs of one training step on one sequence
with causal attention, the ``train_step_matmul_causal`` of ``archcalc flops`` (3 × the causal forward: backward is
twice the forward), as integer arithmetic in seq_len: a polynomial, or one per range of lengths where sliding
windows cap the attention span. ``flops_per_token`` (templates/module.py) divides it by seq_len, for MFU."""

from __future__ import annotations

from math import lcm

import sympy

from archcalc.codegen.parts import docstring
from archcalc.ir import Lowered
from archcalc.ir.ops import BATCH, SEQ, forward_ops

DOC = ("Exact matmul FLOPs of one training step (forward and backward, no recomputation) on one sequence of "
       "seq_len tokens, with causal attention: `archcalc flops`'s train_step_matmul_causal.")


def flops_source(lowered: Lowered) -> str | None:
    """The function's source, or None where the count is not a polynomial (or piecewise one) in seq_len."""
    b = lowered.binding
    at = {**b.numeric(), BATCH: sympy.Integer(1)}  # each op at this size first: a sum in S alone to expand
    forward = sum((op.total_causal.xreplace(b.substitutions).xreplace(at) for op in forward_ops(lowered)), sympy.Integer(0))
    step = sympy.piecewise_fold(sympy.expand(3 * forward))
    pieces = step.args if isinstance(step, sympy.Piecewise) else ((step, sympy.true),)
    body = []
    try:
        for expr, condition in pieces:
            value = _integer(expr)
            body += [f"    return {value}"] if condition == sympy.true else [f"    if {_condition(condition)}:", f"        return {value}"]
    except (sympy.PolynomialError, ValueError):
        return None
    if not body[-1].startswith("    return"):
        return None
    return "\n".join(["def train_step_flops(seq_len: int) -> int:", f"    {docstring(DOC, 4)}", "    S = seq_len", *body])


def _integer(expr: sympy.Expr) -> str:
    """An integer polynomial in S over a whole denominator, as Python: ``(9 * S**2 + 3 * S) // 2``."""
    poly = sympy.Poly(expr, SEQ)
    coefficients = [sympy.Rational(c) for c in poly.all_coeffs()]
    denominator = lcm(*(int(c.q) for c in coefficients))
    terms = []
    for power, c in zip(range(len(coefficients) - 1, -1, -1), coefficients):
        n = int(c * denominator)
        if n:
            term = str(abs(n)) if power == 0 else f"{abs(n)} * S" + (f"**{power}" if power > 1 else "")
            terms.append(("- " if n < 0 else "+ ") + term)
    text = " ".join(terms).removeprefix("+ ") or "0"
    if text.startswith("- "):
        text = "-" + text[2:]
    return text if denominator == 1 else f"({text}) // {denominator}"


def _condition(condition: sympy.Basic) -> str:
    if isinstance(condition, sympy.And):
        return " and ".join(_condition(c) for c in condition.args)
    if isinstance(condition, sympy.core.relational.Relational) and condition.lhs == SEQ and condition.rhs.is_Integer:
        return f"S {condition.rel_op} {condition.rhs}"
    raise ValueError(f"a condition codegen does not write: {condition}")
