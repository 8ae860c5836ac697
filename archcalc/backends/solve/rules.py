"""What the solver knows about a hyperparameter it does not solve (a :class:`Rule`: filled from the family's
proportions, or completed to keep the shape whole) and about a value that must come out whole (a :class:`Check`).

>>> from fractions import Fraction
>>> rule = Rule("d_ff", "fill", "size 7b", ratio=Fraction(43, 16), anchor="d", step=256)
>>> rule.guess({"d": 4096}), rule.text()
(11008, 'd_ff ≈ 2.688·d, on multiples of 256, as in size 7b')
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import sympy


@dataclass(frozen=True)
class Check:
    """A value that must be a whole number of at least ``minimum`` (``text`` says which and why)."""

    text: str
    expr: sympy.Expr  # in the free hyperparameters
    minimum: int = 1


@dataclass
class Rule:
    """How a free hyperparameter that is not solved gets its value: ``constant``, or ``ratio`` × ``anchor``
    snapped to ``step`` (fill), or the nearest such value that keeps the shape whole (complete)."""

    name: str
    kind: str  # "fill" (changes the count) or "complete" (does not)
    source: str
    constant: int | None = None
    ratio: Fraction | None = None
    anchor: str | None = None
    step: int = 1

    def aim(self, values: dict) -> Fraction:
        """The value the family's proportion asks for, before rounding."""
        if self.constant is not None or self.anchor is None or self.ratio is None:
            return Fraction(self.constant or 1)
        return self.ratio * values[self.anchor]

    def guess(self, values: dict) -> int:
        """The aim on the grid, halves rounded up (at least one step); integer arithmetic, called often."""
        if self.constant is not None or self.anchor is None or self.ratio is None:
            return self.constant or 1
        n, m = self.ratio.numerator * values[self.anchor], self.ratio.denominator * self.step
        return max(self.step, (2 * n + m) // (2 * m) * self.step)

    def text(self) -> str:
        if self.constant is not None:
            rule = f"{self.name} = {self.constant:,}"
        elif self.ratio is not None and self.ratio.denominator != 1 and self.ratio.numerator == 1:
            rule = f"{self.name} ≈ {self.anchor}/{self.ratio.denominator:,}"
        else:
            rule = f"{self.name} ≈ {_ratio_text(self.ratio)}·{self.anchor}"
        how = " (the nearest value that keeps the shape whole)" if self.kind == "complete" else ""
        grid = f", on multiples of {self.step}" if self.step > 1 and self.kind == "fill" and self.constant is None else ""
        return f"{rule}{how}{grid}, as in {self.source}"


def _ratio_text(r: Fraction | None) -> str:
    if r is None:
        return "?"
    return f"{r.numerator}" if r.denominator == 1 else f"{float(r):.4g}"
