"""The spec language's expression grammar: a small, safe, exact arithmetic.

Spec values such as ``d / H`` or ``round_up(8 * d / 3, 256)`` are parsed here by a hand-written
recursive-descent parser, never by ``eval``, ``sympify`` of raw text or ``parse_expr`` (all of
which evaluate Python). The grammar, loosest binding first::

    expr    := and ('or' and)*
    and     := not ('and' not)*
    not     := 'not' not | compare
    compare := sum (('==' | '!=' | '<' | '<=' | '>' | '>=') sum)?
    sum     := product (('+' | '-') product)*
    product := unary (('*' | '/' | '//' | '%') unary)*
    unary   := ('-' | '+') unary | power
    power   := atom ('**' unary)?
    atom    := NUMBER | 'true' | 'false' | NAME | NAME '(' expr (',' expr)* ')' | '(' expr ')'

Numbers are exact (``2.5`` is 5/2, ``1e12`` is 10**12). Limits keep hostile input cheap: at most
:data:`MAX_TEXT` characters, :data:`MAX_DIGITS` digits in a literal, nesting depth
:data:`MAX_DEPTH`, and an exponent must be a constant integer of magnitude at most
:data:`MAX_EXPONENT` (so ``d ** d ** d`` is rejected before anything is computed).

>>> e = parse("round_up(8 * d / 3, 256)", {"d": "int"})
>>> e.to_sympy()
256*ceiling(d/96)
>>> parse("__import__('os')", {})
Traceback (most recent call last):
...
archcalc.spec.expr_tree.ExprError: unexpected character "'" at offset 11; expected a number, a name, an operator or a parenthesis
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from functools import lru_cache

import sympy

from archcalc.spec.expr_eval import evaluate, to_sympy
from archcalc.spec.expr_parser import (
    FUNCTIONS,
    KEYWORDS,
    MAX_DEGREE,
    MAX_DEPTH,
    MAX_DIGITS,
    MAX_EXPONENT,
    MAX_TEXT,
    Parser,
    constant_value,
)
from archcalc.spec.expr_tree import ExprError, Kind, Node, symbol

__all__ = ["FUNCTIONS", "KEYWORDS", "MAX_DEGREE", "MAX_DEPTH", "MAX_DIGITS", "MAX_EXPONENT", "MAX_TEXT", "Expr", "ExprError",
           "Kind", "Node", "degree", "parse", "symbol"]


@dataclass(frozen=True)
class Expr:
    """A parsed, type-checked spec expression. Compare and hash by its text."""

    text: str
    tree: Node = field(compare=False, repr=False)
    kind: Kind = "int"
    names: frozenset[str] = field(default=frozenset(), compare=False)

    def __str__(self) -> str:
        return self.text

    @property
    def constant(self) -> bool:
        return not self.names

    def degree(self, weights: dict[str, int] | None = None) -> int:
        """A bound on the polynomial degree, each name counting ``weights[name]`` (default 1)."""
        return degree(self.tree, weights or {})

    def to_sympy(self, symbols: dict[str, sympy.Symbol] | None = None) -> sympy.Expr:
        """The exact sympy value of an integer expression, names becoming positive integer symbols."""
        return to_sympy(self.tree, symbols) if symbols else _sympy_of(self.tree)

    def evaluate(self, env: dict[str, int | bool]) -> Fraction | bool:
        """The exact value with every name bound in ``env`` (a Fraction, or a bool)."""
        return evaluate(self.tree, env)


@lru_cache(maxsize=4096)
def _sympy_of(tree: Node) -> sympy.Expr:
    """Every size binds the same expressions: build each one's sympy form once (min/max simplify slowly)."""
    return to_sympy(tree, {})


def parse(text: str | int | bool, kinds: dict[str, Kind], want: Kind = "int") -> Expr:
    """Parse ``text`` (a YAML int, bool or string) with ``kinds`` giving each known name's type."""
    if isinstance(text, bool):
        if want != "bool":
            raise ExprError(f"expected an integer expression, got the boolean {str(text).lower()}")
        return Expr(str(text).lower(), Node("bool", 0, value=text), "bool")
    if isinstance(text, int):
        text = str(text)
    if not isinstance(text, str):
        raise ExprError(f"expected an {'integer' if want == 'int' else 'boolean'} expression, got {type(text).__name__}")
    if len(text) > MAX_TEXT:
        raise ExprError(f"expression is {len(text)} characters long; at most {MAX_TEXT} are allowed")
    parser = Parser(text, kinds)
    tree = parser.parse()
    kind = parser.kind_of(tree)
    if kind != want:
        expected = "an integer expression" if want == "int" else "a boolean (true, false or a bool hyperparameter)"
        raise ExprError(f"expected {expected}, got {text.strip()!r} which is {'a boolean' if kind == 'bool' else 'a number'}")
    if kind == "int" and degree(tree, {}) > MAX_DEGREE:
        raise ExprError(f"{text.strip()!r} has polynomial degree {degree(tree, {})}; at most {MAX_DEGREE} is allowed", 0)
    return Expr(text.strip(), tree, kind, frozenset(parser.names))


def degree(node: Node, weights: dict[str, int]) -> int:
    """A bound on the polynomial degree of ``node`` (division and rounding do not raise it)."""
    op = node.op
    if op in ("num", "bool"):
        return 0
    if op == "name":
        return weights.get(node.value, 1)  # type: ignore[arg-type]
    if op in ("and", "or", "not", "==", "!=", "<", "<=", ">", ">="):
        return 0
    parts = [degree(a, weights) for a in node.args]
    if op == "*":
        return parts[0] + parts[1]
    if op in ("/", "//", "%"):
        return parts[0]
    if op == "**":
        exponent = constant_value(node.args[1]) or Fraction(0)
        return parts[0] * max(0, int(exponent))
    return max(parts, default=0)
