"""Evaluation of parsed spec expressions: to exact sympy (symbolic) or to exact Fractions (numeric).

The two evaluators mirror each other operator by operator, so a formula and its numbers agree.

>>> from archcalc.spec.expr import parse
>>> evaluate(parse("round_up(8 * d / 3, 256)", {"d": "int"}).tree, {"d": 4096})
Fraction(11008, 1)
"""

from __future__ import annotations

import math
from fractions import Fraction

import sympy

from archcalc.spec.expr_tree import ExprError, Node, symbol


class _Exact:
    """The operations that differ between the numeric evaluator (Fractions) and the symbolic one (sympy)."""

    floor = staticmethod(lambda v: Fraction(math.floor(v)))
    ceil = staticmethod(lambda v: Fraction(math.ceil(v)))
    mod = staticmethod(lambda a, b: a % b)
    power = staticmethod(lambda a, b: a ** int(b))
    min = staticmethod(min)
    max = staticmethod(max)


class _Symbolic:
    floor = staticmethod(sympy.floor)
    ceil = staticmethod(sympy.ceiling)
    mod = staticmethod(sympy.Mod)
    power = staticmethod(lambda a, b: a**b)
    min = staticmethod(sympy.Min)
    max = staticmethod(sympy.Max)


def to_sympy(node: Node, symbols: dict[str, sympy.Symbol]) -> sympy.Expr:
    op = node.op
    if op == "num":
        v: Fraction = node.value  # type: ignore[assignment]
        return sympy.Rational(v.numerator, v.denominator)
    if op == "name":
        name: str = node.value  # type: ignore[assignment]
        return symbols.get(name) or symbol(name)
    if op in ("bool", "not", "and", "or", "==", "!=", "<", "<=", ">", ">="):
        raise ExprError(f"{op!r} at offset {node.offset} gives a boolean, not a number", node.offset)
    return arith(node, [to_sympy(n, symbols) for n in node.args], _Symbolic)


def evaluate(node: Node, env: dict[str, int | bool]) -> Fraction | bool:
    op, a = node.op, node.args
    if op in ("num", "bool"):
        return node.value  # type: ignore[return-value]
    if op == "name":
        value = env[node.value]  # type: ignore[index]
        return value if isinstance(value, bool) else Fraction(value)
    if op == "not":
        return not evaluate(a[0], env)
    if op == "and":
        return bool(evaluate(a[0], env)) and bool(evaluate(a[1], env))
    if op == "or":
        return bool(evaluate(a[0], env)) or bool(evaluate(a[1], env))
    x = [evaluate(n, env) for n in a]
    if op in ("==", "!=", "<", "<=", ">", ">="):
        left, right = x
        return {"==": left == right, "!=": left != right, "<": left < right,
                "<=": left <= right, ">": left > right, ">=": left >= right}[op]
    return arith(node, x, _Exact)


def arith(node: Node, x: list, lib=_Exact):
    """One operator on already-evaluated arguments: exact Fractions (``_Exact``) or sympy (``_Symbolic``)."""
    op = node.op
    if op in ("/", "//", "%") and x[1] == 0:
        raise ExprError(f"division by zero at offset {node.offset}", node.offset)
    if op == "+":
        return x[0] + x[1]
    if op == "-":
        return x[0] - x[1]
    if op == "*":
        return x[0] * x[1]
    if op == "/":
        return x[0] / x[1]
    if op == "//":
        return lib.floor(x[0] / x[1])
    if op == "%":
        return lib.mod(x[0], x[1])
    if op == "**":
        if x[0] == 0 and x[1] < 0:
            raise ExprError(f"division by zero at offset {node.offset}", node.offset)
        return lib.power(x[0], x[1])
    if op == "neg":
        return -x[0]
    if op == "pos":
        return x[0]
    fn = node.value
    if fn == "ceil":
        return lib.ceil(x[0])
    if fn == "floor":
        return lib.floor(x[0])
    if fn == "min":
        return lib.min(x[0], x[1])
    if fn == "max":
        return lib.max(x[0], x[1])
    if x[1] == 0:
        raise ExprError(f"{fn}() with a multiple of zero at offset {node.offset}", node.offset)
    if fn == "round_up":
        return x[1] * lib.ceil(x[0] / x[1])
    return x[1] * lib.floor(x[0] / x[1])  # round_down
