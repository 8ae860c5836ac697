"""The parsed form of a spec expression: its node tree, its error, and the sympy symbol of a hyperparameter
(:mod:`archcalc.spec.expr` parses, :mod:`archcalc.spec.expr_eval` evaluates).

>>> Node("name", 0, value="d"), symbol("d").is_positive
(Node(op='name', offset=0, args=(), value='d'), True)
"""

from __future__ import annotations

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
