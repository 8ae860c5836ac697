"""How large a formula may grow once hyperparameters given as expressions are substituted into it.

A hyperparameter given as an expression (``d_head: d / H``) is replaced by that expression in every formula
that uses it, so a size's formula is written in the hyperparameters it gives as numbers. Substitutions compose:
``h2: "min(h1, h0) + min(h0, h1 + 1)"``, ``h3: ...`` doubles the expression at each step, and sympy compares the
arguments of min/max pairwise, so a dozen such defaults took minutes; ``(a + b + ... + p)**8`` expands to 735,471
monomials. So every expression is measured as it will be substituted -- nodes, min/max/floor/ceil/round/``//``/``%``
operations, polynomial degree and the monomials it expands to -- before sympy builds it, and refused above the limits
below; formulas are measured again before they are expanded. The symbolic work is bounded by construction
(``benchmarks/limits.py`` times expressions at the limits; docs/limits.md lists them).

>>> from archcalc.spec.expr import parse
>>> d_ff = parse("round_up(8 * d / 3, 256)", {"d": "int"})
>>> measure(d_ff.tree, {})
Cost(nodes=7, piecewise=1, degree=1, terms=1)
>>> measure(parse("(a + b + 1)**2", {"a": "int", "b": "int"}).tree, {}).terms  # a², ab, b², a, b
5
>>> h = {"h": Cost(nodes=300, piecewise=10, degree=1, terms=1)}
>>> problem(measure(parse("min(h, h + 1) + max(h, 2)", {"h": "int"}).tree, h))
'grows to 906 nodes once the expressions it uses are substituted; at most 800 are allowed'
>>> import sympy
>>> a, b = sympy.symbols("a b")
>>> expanded_terms((a + b + 1) ** 2 * a)  # a bound: in fact a³, a²b, ab², a², ab, a
11
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from math import comb
from typing import Any

import sympy

from archcalc.spec.expr import MAX_DEGREE, Expr, Node, degree

MAX_NODES = 800  # nodes of one expression with every substituted hyperparameter written out
MAX_PIECEWISE = 24  # min, max, floor, ceil, round_up, round_down, // and % in it: sympy's costly operations
MAX_TERMS = 64  # monomials it expands to
MAX_TOTAL_PIECEWISE = 48  # the operations summed over every hyperparameter and model field of one size
MAX_FORMULA_TERMS = 2000  # monomials of a whole formula (parameters, FLOPs) once expanded: about 0.6 ms each
PIECEWISE_OPS = frozenset({"//", "%", "call"})
_CAP = 10**12  # term estimates stop growing here (no huge integers from hostile exponents)


@dataclass(frozen=True)
class Cost:
    """The size of an expression with every substituted hyperparameter written out."""

    nodes: int
    piecewise: int
    degree: int
    terms: int


SYMBOL = Cost(1, 0, 1, 1)  # a hyperparameter that stays a symbol (given as a number)


def measure(node: Node, costs: dict[str, Cost]) -> Cost:
    """The cost of ``node`` when each name in ``costs`` is replaced by the expression it stands for."""
    nodes, piecewise, terms = _count(node, costs)
    return Cost(nodes, piecewise, degree(node, {n: c.degree for n, c in costs.items()}), terms)


def _count(node: Node, costs: dict[str, Cost]) -> tuple[int, int, int]:
    """Nodes, piecewise operations and expanded monomials of ``node`` written out."""
    op = node.op
    if op == "name":
        cost = costs.get(node.value, SYMBOL)  # type: ignore[arg-type]
        return cost.nodes, cost.piecewise, cost.terms
    parts = [_count(arg, costs) for arg in node.args]
    nodes = 1 + sum(p[0] for p in parts)
    piecewise = int(op in PIECEWISE_OPS) + sum(p[1] for p in parts)
    if op in ("num", "bool"):
        terms = 0
    elif op in ("+", "-"):
        terms = parts[0][2] + parts[1][2]
    elif op == "*":
        terms = _product(parts[0][2], parts[1][2])
    elif op in ("/", "neg", "pos"):
        terms = parts[0][2]  # (a + b) / c expands to a/c + b/c
    elif op == "**":
        exponent = node.args[1].value if node.args[1].op == "num" else None
        terms = _power(parts[0][2], int(exponent)) if exponent is not None and exponent > 0 else 1  # type: ignore[operator]
    else:  # rounding and min/max: one term each, whatever is inside
        terms = 1
    return nodes, piecewise, terms


def _product(a: int, b: int) -> int:
    """Monomials (other than a constant) of a product of sums with ``a`` and ``b`` of them (and a constant each)."""
    return min((a + 1) * (b + 1) - 1, _CAP)


def _power(a: int, k: int) -> int:
    """The same for a sum of ``a`` monomials and a constant raised to the power ``k``."""
    return min(comb(a + k, k) - 1, _CAP) if a < _CAP and k < 10**4 else _CAP


def problem(cost: Cost) -> str | None:
    """What is too large about ``cost``, or None."""
    after = "once the expressions it uses are substituted"
    if cost.degree > MAX_DEGREE:
        return f"has polynomial degree {cost.degree} {after}; at most {MAX_DEGREE} is allowed"
    if cost.nodes > MAX_NODES:
        return f"grows to {cost.nodes} nodes {after}; at most {MAX_NODES} are allowed"
    if cost.terms > MAX_TERMS:
        return f"expands to {_about(cost.terms)} terms {after}; at most {MAX_TERMS} are allowed"
    if cost.piecewise > MAX_PIECEWISE:
        return (f"grows to {cost.piecewise} min/max/floor/ceil/round/'//'/'%' operations {after}; "
                f"at most {MAX_PIECEWISE} are allowed (write a long chain of defaults as numbers in the sizes)")
    return None


def _about(n: int) -> str:
    return f"{n:,}" if n < _CAP else f"more than {_CAP:,}"


def substituted_costs(exprs: dict[str, Expr], substituted: set[str]) -> dict[str, Cost]:
    """The cost of each name in ``substituted`` (its expression in ``exprs``, written out; the names are acyclic)."""
    costs: dict[str, Cost] = {}

    def of(name: str) -> Cost:
        if name not in costs:
            costs[name] = SYMBOL  # provisional; a cycle was refused before
            for used in exprs[name].names & substituted:
                of(used)
            costs[name] = measure(exprs[name].tree, costs)
        return costs[name]

    for name in substituted:
        of(name)
    return costs


def first_excess(exprs: dict[str, Expr], substituted: set[str], model: Any) -> tuple[tuple, str] | None:
    """The first hyperparameter (``(name,)``) or model field (its path) that grows past the limits, and why.

    Each expression is bounded on its own, and the costly operations of all of them together (one size's
    formulas are built from all)."""
    costs = substituted_costs(exprs, substituted)
    places = [((name,), costs[name]) for name in exprs if name in costs]
    places += [(loc, measure(e.tree, costs)) for loc, e in model_expressions(model, ("model",))
               if e.kind == "int"]
    piecewise = 0
    for loc, cost in places:
        if why := problem(cost):
            return loc, why
        piecewise += cost.piecewise
        if piecewise > MAX_TOTAL_PIECEWISE:
            return loc, (f"brings the min/max/floor/ceil/round/'//'/'%' operations of the expressions built from "
                         f"substituted hyperparameters to {piecewise}; at most {MAX_TOTAL_PIECEWISE} are allowed in all")
    return None


def model_expressions(obj: Any, loc: tuple) -> Iterator[tuple[tuple, Expr]]:
    """Every expression in the ``model:`` section (a pydantic tree), with its path."""
    if isinstance(obj, Expr):
        yield loc, obj
    elif isinstance(obj, (list, tuple)):
        for i, item in enumerate(obj):
            yield from model_expressions(item, loc + (i,))
    elif hasattr(type(obj), "model_fields"):
        for name in type(obj).model_fields:
            yield from model_expressions(getattr(obj, name), loc + (name,))


def expanded_terms(expr: sympy.Basic) -> int:
    """An upper bound on the non-constant monomials of ``sympy.expand(expr)``, from its unexpanded tree."""
    if expr.is_Number:
        return 0
    if isinstance(expr, sympy.Add):
        return min(sum(expanded_terms(a) for a in expr.args), _CAP)
    if isinstance(expr, sympy.Mul):
        total = 0
        for a in expr.args:
            total = _product(total, expanded_terms(a))
        return total
    if isinstance(expr, sympy.Pow) and expr.exp.is_Integer and expr.exp > 0:
        return _power(expanded_terms(expr.base), int(expr.exp))
    return 1


def formula_too_large(formula: sympy.Basic, what: str) -> str | None:
    """Why expanding ``formula`` would be too costly, or None (see :data:`MAX_FORMULA_TERMS`)."""
    terms = expanded_terms(formula)
    if terms <= MAX_FORMULA_TERMS:
        return None
    return (f"the {what} formula would expand to {_about(terms)} terms; at most {MAX_FORMULA_TERMS:,} are allowed "
            "(hyperparameters given as long sums or powers of sums)")
