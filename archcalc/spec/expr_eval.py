"""The parsed form of a spec expression and what it means: its node tree, its error, the sympy symbol of a
hyperparameter, and its two evaluations, to exact sympy (symbolic) or to exact Fractions (numeric). The grammar that
reads text into the tree is :mod:`archcalc.spec.expr`, which imports this module (the parser folds constants with it).

The two evaluators mirror each other operator by operator, so a formula and its numbers agree.

>>> Node("name", 0, value="d"), symbol("d").is_positive
(Node(op='name', offset=0, args=(), value='d'), True)
>>> from archcalc.spec.expr import parse
>>> evaluate(parse("round_up(8 * d / 3, 256)", {"d": "int"}).tree, {"d": 4096})
Fraction(11008, 1)
"""

from __future__ import annotations

import math
import operator
from dataclasses import dataclass
from fractions import Fraction
from typing import Literal

import sympy

Kind = Literal["int", "bool"]


class ExprError(ValueError):
    """A malformed expression; ``offset`` is the 0-based column inside the expression text."""

    def __init__(self, message: str, offset: int = 0):
        super().__init__(message)
        self.offset = offset


@dataclass(frozen=True)
class Node:
    """One node of a parsed expression: ``op`` is 'num', 'bool', 'name', 'call', or an operator."""

    op: str
    offset: int
    args: tuple[Node, ...] = ()
    value: Fraction | bool | str | None = None


def symbol(name: str) -> sympy.Symbol:
    """The sympy symbol of a hyperparameter: a positive integer, so ``H*(d/H)`` simplifies to ``d``."""
    return sympy.Symbol(name, integer=True, positive=True)


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


_OPERATORS = {"+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv}


def arith(node: Node, x: list, lib=_Exact):
    """One operator on already-evaluated arguments: exact Fractions (``_Exact``) or sympy (``_Symbolic``)."""
    op = node.op
    if op in ("/", "//", "%") and x[1] == 0:
        raise ExprError(f"division by zero at offset {node.offset}", node.offset)
    if op in _OPERATORS:
        return _OPERATORS[op](x[0], x[1])
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
    return _call(node, x, lib)


def _call(node: Node, x: list, lib):
    """A named function (:data:`archcalc.spec.expr.FUNCTIONS`) on already-evaluated arguments."""
    fn = node.value
    if fn in ("ceil", "floor"):
        return getattr(lib, fn)(x[0])
    if fn in ("min", "max"):
        return getattr(lib, fn)(x[0], x[1])
    if x[1] == 0:
        raise ExprError(f"{fn}() with a multiple of zero at offset {node.offset}", node.offset)
    if fn == "round_up":
        return x[1] * lib.ceil(x[0] / x[1])
    return x[1] * lib.floor(x[0] / x[1])  # round_down
