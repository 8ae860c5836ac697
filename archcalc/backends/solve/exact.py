"""Exact evaluation of the solver's sympy formulas on Python integers, cheap enough to call thousands of times.

A polynomial with rational coefficients (every bundled parameter count) becomes a list of integer terms
over one common denominator; anything else (ceilings from ``round_up``, ``Min``/``Max``, ``Mod``) becomes a
tree of closures over Fractions. Both give exactly what ``expr.xreplace(values)`` gives, without sympy's
cost per call.

>>> import sympy
>>> L, d = sympy.symbols("L d", positive=True, integer=True)
>>> f = compile_exact(L * (12 * d**2 + 13 * d) + 50257 * d + sympy.Rational(1, 2) * d)
>>> f({"L": 12, "d": 768}), f({"L": 1, "d": 1})
(123652224, Fraction(100565, 2))
"""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction

import sympy

Number = int | Fraction
Evaluator = Callable[[dict], Number]

_CACHE: dict[sympy.Expr, Evaluator] = {}


def compile_exact(expr: sympy.Expr) -> Evaluator:
    """A function of ``{name: int}`` giving the exact value of ``expr`` (an int when whole)."""
    expr = sympy.sympify(expr)
    if expr not in _CACHE:
        _CACHE[expr] = _polynomial(expr) or _rational(expr) or _tree(expr)
    return _CACHE[expr]


def _rational(expr: sympy.Expr) -> Evaluator | None:
    """A quotient of polynomials (d·KV·d/H with H free): both evaluated as polynomials, divided exactly."""
    if expr.has(sympy.ceiling, sympy.floor, sympy.Min, sympy.Max, sympy.Mod):
        return None
    num, den = sympy.fraction(sympy.together(expr))
    top, bottom = _polynomial(sympy.expand(num)), _polynomial(sympy.expand(den))
    if top is None or bottom is None or den.is_number:
        return None

    def evaluate(values: dict) -> Number:
        a, b = top(values), bottom(values)
        if isinstance(a, int) and isinstance(b, int):
            q, r = divmod(a, b)
            return q if r == 0 else Fraction(a, b)
        return _norm(Fraction(a) / Fraction(b))

    return evaluate


def _polynomial(expr: sympy.Expr) -> Evaluator | None:
    names = sorted(str(s) for s in expr.free_symbols)
    if not names:
        value = _number(expr)
        return None if value is None else (lambda values: value)
    try:
        poly = sympy.Poly(expr, *sorted(expr.free_symbols, key=str))
    except sympy.PolynomialError:
        return None
    if not poly.domain.is_QQ and not poly.domain.is_ZZ:
        return None
    coeffs = [(Fraction(int(c.p), int(c.q)), powers) for powers, c in poly.terms()]
    common = math.lcm(*(c.denominator for c, _ in coeffs))
    terms = [(int(c * common), powers) for c, powers in coeffs]

    def evaluate(values: dict) -> Number:
        xs = [values[n] for n in names]
        total = 0
        for coeff, powers in terms:
            for x, e in zip(xs, powers):
                if e:
                    coeff *= x**e
            total += coeff
        return _whole(total, common)

    return evaluate


def _whole(numerator: int, denominator: int) -> Number:
    if denominator == 1:
        return numerator
    q, r = divmod(numerator, denominator)
    return q if r == 0 else Fraction(numerator, denominator)


def _number(expr: sympy.Expr) -> Number | None:
    if expr.is_Integer:
        return int(expr)
    if expr.is_Rational:
        return Fraction(int(expr.p), int(expr.q))
    return None


def _tree(expr: sympy.Expr) -> Evaluator:
    """Closures over the expression tree; sympy's own substitution for anything unusual."""
    value = _number(expr)
    if value is not None:
        return lambda values: value
    if expr.is_Symbol:
        name = str(expr)
        return lambda values: values[name]
    args = [_tree(a) for a in expr.args]
    if expr.is_Add:
        return lambda values: _norm(sum(f(values) for f in args))
    if expr.is_Mul:
        return lambda values: _norm(math.prod(f(values) for f in args))
    if expr.is_Pow and expr.exp.is_Integer:
        base, exp = args[0], int(expr.exp)
        return lambda values: _norm(Fraction(base(values)) ** exp)
    simple = {sympy.ceiling: math.ceil, sympy.floor: math.floor}
    if expr.func in simple:
        fn, (inner,) = simple[expr.func], args
        return lambda values: fn(inner(values))
    if expr.func in (sympy.Min, sympy.Max):
        pick = min if expr.func is sympy.Min else max
        return lambda values: pick(f(values) for f in args)
    if expr.func is sympy.Mod:
        a, b = args
        return lambda values: _norm(Fraction(a(values)) % Fraction(b(values)))
    symbols = {str(s): s for s in expr.free_symbols}

    def slow(values: dict) -> Number:
        out = expr.xreplace({symbols[n]: sympy.Integer(v) for n, v in values.items() if n in symbols})
        number = _number(out)
        if number is None:
            raise ValueError(f"{expr} did not evaluate to a rational number")
        return number

    return slow


def _norm(x: Number) -> Number:
    if isinstance(x, Fraction) and x.denominator == 1:
        return x.numerator
    return x
