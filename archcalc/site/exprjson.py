"""Formulas as JSON trees for the in-browser calculator, which evaluates them exactly (BigInt rationals).

Two sources share one vocabulary: the spec's own expressions (defaults, size values: the parsed tree,
so the browser follows the same rules as ``archcalc`` itself) and sympy formulas from the IR (counts,
FLOPs). A node is a list: ``["num", "7", "2"]`` (7/2), ``["name", "d"]``, ``["bool", true]``,
``[op, arg, ...]`` for ``+ - * / // % ** neg pos not and or == != < <= > >=``, ``["fn", name, arg...]``
for ``floor ceil min max round_up round_down``, and ``["pw", [value, condition], ...]`` (sympy's Piecewise).

>>> from archcalc.spec.expr import parse, symbol
>>> from_expr(parse("round_up(8 * d / 3, 256)", {"d": "int"}))
['fn', 'round_up', ['/', ['*', ['num', '8', '1'], ['name', 'd']], ['num', '3', '1']], ['num', '256', '1']]
>>> from_sympy(symbol("L") * symbol("d") ** 2 / 2)
['*', ['num', '1', '2'], ['name', 'L'], ['**', ['name', 'd'], ['num', '2', '1']]]
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import sympy

from archcalc.spec.expr import Expr, Node

Tree = list[Any]


def num(value: Fraction | int) -> Tree:
    value = Fraction(value)
    return ["num", str(value.numerator), str(value.denominator)]


def from_expr(expr: Expr) -> Tree:
    """A spec expression's parse tree, operator for operator."""
    return _node(expr.tree)


def _node(node: Node) -> Tree:
    if node.op == "num":
        return num(node.value)  # type: ignore[arg-type]
    if node.op == "bool":
        return ["bool", bool(node.value)]
    if node.op == "name":
        return ["name", str(node.value)]
    args = [_node(a) for a in node.args]
    if node.op == "call":
        return ["fn", str(node.value), *args]
    return [node.op, *args]


_FUNCTIONS = {sympy.floor: "floor", sympy.ceiling: "ceil", sympy.Min: "min", sympy.Max: "max", sympy.Abs: "abs"}
_RELATIONS = {sympy.Eq: "==", sympy.Ne: "!=", sympy.Lt: "<", sympy.Le: "<=", sympy.Gt: ">", sympy.Ge: ">="}


def from_sympy(expr: sympy.Basic) -> Tree:
    """A sympy formula over hyperparameter symbols; ValueError for anything the browser does not evaluate."""
    if expr is sympy.true or expr is sympy.false:
        return ["bool", bool(expr)]
    if expr.is_Rational:
        return num(Fraction(int(expr.p), int(expr.q)))  # type: ignore[attr-defined]
    if expr.is_Symbol:
        return ["name", str(expr)]
    if expr.is_Add:
        return ["+", *(from_sympy(a) for a in expr.args)]
    if expr.is_Mul:
        return ["*", *(from_sympy(a) for a in expr.args)]
    if expr.is_Pow:
        base, exponent = expr.args
        if not exponent.is_Integer:
            raise ValueError(f"a power with exponent {exponent}")
        return ["**", from_sympy(base), from_sympy(exponent)]
    if isinstance(expr, sympy.Mod):
        return ["%", from_sympy(expr.args[0]), from_sympy(expr.args[1])]
    return _from_sympy_logic(expr)


def _from_sympy_logic(expr: sympy.Basic) -> Tree:
    """The rest of :func:`from_sympy`: a Piecewise, logic, a relation or a named function."""
    if isinstance(expr, sympy.Piecewise):
        return ["pw", *([from_sympy(value), from_sympy(cond)] for value, cond in expr.args)]
    if isinstance(expr, sympy.And | sympy.Or):
        op = "and" if isinstance(expr, sympy.And) else "or"
        out = from_sympy(expr.args[0])
        for arg in expr.args[1:]:
            out = [op, out, from_sympy(arg)]
        return out
    if isinstance(expr, sympy.Not):
        return ["not", from_sympy(expr.args[0])]
    for kind, op in _RELATIONS.items():
        if isinstance(expr, kind):
            return [op, from_sympy(expr.lhs), from_sympy(expr.rhs)]
    for kind, name in _FUNCTIONS.items():
        if expr.func is kind:
            return ["fn", name, *(from_sympy(a) for a in expr.args)]
    raise ValueError(f"{type(expr).__name__} ({expr})")
