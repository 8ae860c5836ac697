"""The spec's expressions at the bound size, as the lowering reads them: a width that must be a positive integer, a
flag, a scale or multiplier given as a number or as an expression over the hyperparameters (``1 / d_head``), each
error pointing at the spec expression that produced it. :class:`~archcalc.ir.lower.Lowerer` builds the tree on top.

>>> from archcalc.spec import load_spec
>>> from archcalc.spec.bind import bind
>>> values = SizeValues(bind(load_spec("gpt2"), "small"))
>>> values.value(values.width(values.spec.model.embedding.width, ("model", "embedding", "width"), "embedding width"))
768
"""

from __future__ import annotations

from fractions import Fraction

import sympy

from archcalc.errors import SpecError
from archcalc.spec.bind import Binding, _fmt
from archcalc.spec.expr import Expr, ExprError
from archcalc.spec.loader import where
from archcalc.spec.schema import MAX_VALUE


class SizeValues:
    """The values of one bound size; ``loc`` tuples are places in the spec file (for the errors)."""

    def __init__(self, binding: Binding):
        self.spec, self.binding = binding.spec, binding
        self.numeric = binding.numeric()

    def width(self, expr: Expr, loc: tuple, what: str) -> sympy.Expr:
        """A symbolic width that must be a positive integer (and not absurdly large) at this size."""
        formula = self.symbolic(expr, loc, what)
        value = formula.xreplace(self.numeric)
        if value.is_Integer and 1 <= value <= MAX_VALUE:
            return formula
        if not value.is_Rational:  # zoo or nan: a division by zero at this size
            shown = "undefined (a division by zero)"
        elif not value.is_Integer:
            shown = f"{_fmt(Fraction(int(value.p), int(value.q)))}, which is not an integer"
        else:
            shown = _fmt(Fraction(int(value))) + (f", more than {MAX_VALUE:.0e}" if value > MAX_VALUE else "")
        raise SpecError.at(
            where(self.spec, loc),
            f"{what} = {expr.text} is {shown} for size {self.binding.size!r}; expected a positive integer",
        )

    def symbolic(self, expr: Expr, loc: tuple, what: str) -> sympy.Expr:
        """``expr`` as a sympy expression; a division by a constant zero is an error at ``loc``."""
        try:
            return expr.to_sympy()
        except ExprError as e:
            raise SpecError.at(where(self.spec, loc), f"{what} = {expr.text}: {e}") from None

    def value(self, expr: sympy.Expr) -> int:
        return int(expr.xreplace(self.numeric))

    def flag(self, expr: Expr | None, loc: tuple, default: bool = False) -> bool:
        try:
            return default if expr is None else bool(expr.evaluate(self.binding.values))
        except ExprError as e:
            raise SpecError.at(where(self.spec, loc), f"{loc[-1]} = {expr.text}: {e}") from None

    def factor(self, value: float | Expr | None, loc: tuple, what: str) -> float | None:
        """A scale or multiplier that changes no parameter but the arithmetic, at this size (None: not given).

        >>> from archcalc.spec import load_spec
        >>> from archcalc.spec.bind import bind
        >>> from archcalc.ir import lower
        >>> lower(bind(load_spec("granite"), "3.3-8b")).root.find("blocks.attn").attrs.scale
        0.0078125
        """
        if value is None or isinstance(value, float):
            return value
        number = self.symbolic(value, loc, what).xreplace(self.numeric)
        if not (number.is_Rational and number > 0):
            raise SpecError.at(where(self.spec, loc), f"{what} = {value.text} is {number} for size {self.binding.size!r}; "
                                                      "expected a number above 0")
        return float(number)
