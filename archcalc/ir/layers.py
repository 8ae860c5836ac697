"""How many of a stack's layers a cycling pattern gives each kind (``layers_of_kind``, by arithmetic): read by the
lowering (the order of interleaved stacks), the FLOPs of banded and chunked attention, and inference."""

from __future__ import annotations

import sympy
from sympy.core.symbol import Str

FLOOR_TERMS = 8  # a kind at up to this many places of a cycle is counted as a sum of floors; beyond, by PatternLayers


class PatternLayers(sympy.Function):
    """``layers_KIND(n)``: how many of ``n`` layers get one kind when a cycle of ``period`` layers repeats over them,
    the kind at the places whose bits are set in ``mask`` (bit j: place j). An integer once ``n`` is one, in time
    linear in the cycle; symbolic, one term in a formula whatever the cycle's length, where a sum of floors would
    take one term (and sympy some milliseconds) a place.

    >>> L = sympy.Symbol("L", integer=True, positive=True)
    >>> n = PatternLayers(L, sympy.Integer(3), sympy.Integer(0b101), Str("local"))
    >>> n, n.xreplace({L: sympy.Integer(7)})
    (layers_local(L), 5)
    """

    nargs = 4
    is_integer = True
    is_nonnegative = True

    @classmethod
    def eval(cls, n, period, mask, kind):
        if n.is_Integer and period.is_Integer and mask.is_Integer:
            cycles, rest = divmod(int(n), int(period))
            places = int(mask)
            return sympy.Integer(cycles * places.bit_count() + (places & ((1 << rest) - 1)).bit_count())
        return None

    def _sympystr(self, printer) -> str:
        return f"layers_{self.args[3]}({printer._print(self.args[0])})"

    def _latex(self, printer) -> str:
        return rf"\operatorname{{layers}}_{{\mathrm{{{self.args[3]}}}}}\left({printer._print(self.args[0])}\right)"


def layers_of_kind(pattern: tuple[str, ...], repeat: sympy.Expr, kind: str) -> sympy.Expr:
    """How many of ``repeat`` layers get ``kind`` when ``pattern`` cycles over them: a number when ``repeat`` is one,
    else Σ floor((repeat - 1 - j) / p) + 1 over the kind's places j (up to :data:`FLOOR_TERMS` of them), else
    :class:`PatternLayers`. Linear in the pattern's length (a 10,000-layer cycle costs milliseconds).

    >>> L = sympy.Symbol("L", integer=True, positive=True)
    >>> layers_of_kind(("local", "global"), L, "global"), layers_of_kind(("local", "global"), sympy.Integer(7), "local")
    (floor(L/2), 4)
    """
    p = len(pattern)
    places = [j for j, k in enumerate(pattern) if k == kind]
    repeat = sympy.sympify(repeat)
    if repeat.is_Integer:
        return sympy.Integer(sum(len(range(j, int(repeat), p)) for j in places))
    if len(places) <= FLOOR_TERMS:
        return sympy.Add(*(sympy.floor((repeat - 1 - j) / p) + 1 for j in places))
    return PatternLayers(repeat, sympy.Integer(p), sympy.Integer(sum(1 << j for j in places)), Str(kind))

