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

The parsed tree and its evaluation (to sympy, to exact numbers) are :mod:`archcalc.spec.expr_eval`.

>>> e = parse("round_up(8 * d / 3, 256)", {"d": "int"})
>>> e.to_sympy()
256*ceiling(d/96)
>>> parse("__import__('os')", {})
Traceback (most recent call last):
...
archcalc.spec.expr_eval.ExprError: unexpected character "'" at offset 11; expected a number, a name, an operator or a parenthesis
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from fractions import Fraction
from functools import lru_cache

import sympy

from archcalc.spec.expr_eval import ExprError, Kind, Node, evaluate, symbol, to_sympy

__all__ = ["FUNCTIONS", "KEYWORDS", "MAX_DEGREE", "MAX_DEPTH", "MAX_DIGITS", "MAX_EXPONENT", "MAX_TEXT", "Expr", "ExprError",
           "Kind", "Node", "degree", "parse", "symbol"]

MAX_TEXT = 400
MAX_DIGITS = 30
MAX_DEPTH = 40
MAX_EXPONENT = 64
MAX_DEGREE = 8  # polynomial degree of one expression: keeps symbolic expansion of formulas cheap
KEYWORDS = frozenset({"and", "or", "not", "true", "false"})
FUNCTIONS = {"ceil": 1, "floor": 1, "min": 2, "max": 2, "round_up": 2, "round_down": 2}

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


# -- the lexer and the parser ---------------------------------------------------------------
_TOKEN = re.compile(  # ASCII only: str.isdigit() and int() also accept other scripts' digits
    r"(?P<space>\s+)"
    r"|(?P<num>[0-9][0-9_]*(?:\.[0-9_]+)?(?:[eE][+-]?[0-9_]+)?)"
    r"|(?P<name>[A-Za-z_][A-Za-z0-9_]*)"
    r"|(?P<op>\*\*|//|==|!=|<=|>=|[-+*/%(),<>])",
    re.ASCII,
)
_NUMBER = re.compile(r"[0-9]+(?:_[0-9]+)*(?:\.[0-9]+(?:_[0-9]+)*)?(?:[eE][+-]?[0-9]+)?", re.ASCII)


class Parser:
    """One expression's tokens, read by the grammar's rules (one method each, loosest binding first); ``names``: the
    hyperparameters it mentions, ``kinds`` their types.

    >>> tree = Parser("2 * d ** 2", {"d": "int"}).parse()
    >>> tree.op, [arg.op for arg in tree.args]
    ('*', ['num', '**'])
    """

    def __init__(self, text: str, kinds: dict[str, Kind]):
        self.text, self.kinds, self.names = text, kinds, set()
        self.tokens = list(self._tokenize(text))
        self.i = 0
        self.depth = 0

    @staticmethod
    def _tokenize(text: str):
        pos = 0
        while pos < len(text):
            m = _TOKEN.match(text, pos)
            if m is None:
                if text[pos].isdigit() or text[pos].isnumeric():
                    raise ExprError(f"digit {text[pos]!r} at offset {pos} is not one of 0-9; expected ASCII digits", pos)
                raise ExprError(
                    f"unexpected character {text[pos]!r} at offset {pos}; "
                    "expected a number, a name, an operator or a parenthesis",
                    pos,
                )
            if m.lastgroup != "space":
                yield m.lastgroup, m.group(), pos
            pos = m.end()
        yield "end", "", len(text)

    def peek(self) -> tuple[str, str, int]:
        return self.tokens[self.i]

    def take(self) -> tuple[str, str, int]:
        tok = self.tokens[self.i]
        self.i += 1
        return tok

    def expect(self, value: str) -> None:
        kind, text, pos = self.take()
        if text != value or kind not in ("op",):
            raise ExprError(f"expected {value!r} at offset {pos}, found {text or 'the end'!r}", pos)

    def parse(self) -> Node:
        kind, _, pos = self.peek()
        if kind == "end":
            raise ExprError("empty expression; expected a number, a name or a formula", 0)
        node = self.expr()
        kind, text, pos = self.peek()
        if kind != "end":
            raise ExprError(f"unexpected {text!r} at offset {pos}; expected an operator or the end", pos)
        return node

    def nest(self):
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise ExprError(f"expression nests deeper than {MAX_DEPTH} levels", self.peek()[2])

    def expr(self) -> Node:
        self.nest()
        node = self.binary(self.and_, ("or",))
        self.depth -= 1
        return node

    def and_(self) -> Node:
        return self.binary(self.not_, ("and",))

    def not_(self) -> Node:
        kind, text, pos = self.peek()
        if kind == "name" and text == "not":
            self.take()
            self.nest()
            node = Node("not", pos, (self.not_(),))
            self.depth -= 1
            return node
        return self.compare()

    def compare(self) -> Node:
        left = self.sum()
        kind, text, pos = self.peek()
        if kind == "op" and text in ("==", "!=", "<", "<=", ">", ">="):
            self.take()
            return Node(text, pos, (left, self.sum()))
        return left

    def sum(self) -> Node:
        return self.binary(self.product, ("+", "-"))

    def product(self) -> Node:
        return self.binary(self.unary, ("*", "/", "//", "%"))

    def binary(self, operand, ops: tuple[str, ...]) -> Node:
        node = operand()
        while True:
            kind, text, pos = self.peek()
            if text not in ops or kind not in ("op", "name"):
                return node
            self.take()
            node = Node(text, pos, (node, operand()))

    def unary(self) -> Node:
        kind, text, pos = self.peek()
        if kind == "op" and text in ("-", "+"):
            self.take()
            self.nest()
            node = Node("neg" if text == "-" else "pos", pos, (self.unary(),))
            self.depth -= 1
            return node
        return self.power()

    def power(self) -> Node:
        base = self.atom()
        kind, text, pos = self.peek()
        if kind == "op" and text == "**":
            self.take()
            self.nest()
            exponent = self.unary()
            self.depth -= 1
            value = constant_value(exponent)
            if value is None or value.denominator != 1 or abs(value) > MAX_EXPONENT:
                start = _start(exponent)
                raise ExprError(
                    f"exponent at offset {start} must be a constant integer between "
                    f"-{MAX_EXPONENT} and {MAX_EXPONENT} (e.g. d ** 2)",
                    start,
                )
            if _power_degree(base) * abs(value) > MAX_EXPONENT:
                raise ExprError(
                    f"nested powers at offset {pos} are too large; exponents multiply to more than {MAX_EXPONENT}", pos
                )
            base_value = constant_value(base)
            if base_value is not None and base_value != 0 and _digits(base_value) * abs(value) > 4 * MAX_DIGITS:
                raise ExprError(f"{self.text.strip()!r} is too large a number", pos)
            if base_value == 0 and value < 0:
                raise ExprError("division by zero: 0 raised to a negative power", pos)
            return Node("**", pos, (base, exponent))
        return base

    def atom(self) -> Node:
        kind, text, pos = self.take()
        if kind == "num":
            return Node("num", pos, value=_number(text, pos))
        if kind == "name":
            if text in ("true", "false"):
                return Node("bool", pos, value=text == "true")
            if text in KEYWORDS:
                raise ExprError(f"unexpected {text!r} at offset {pos}", pos)
            if self.peek()[1] == "(":
                return self.call(text, pos)
            if text not in self.kinds:
                raise ExprError(_unknown_name(text, pos, self.kinds), pos)
            self.names.add(text)
            return Node("name", pos, value=text)
        if kind == "op" and text == "(":
            node = self.expr()
            self.expect(")")
            return node
        found = "the end of the expression" if kind == "end" else repr(text)
        raise ExprError(f"unexpected {found} at offset {pos}; expected a number, a name or '('", pos)

    def call(self, name: str, pos: int) -> Node:
        if name not in FUNCTIONS:
            known = ", ".join(sorted(FUNCTIONS))
            raise ExprError(f"unknown function {name!r} at offset {pos}; known functions: {known}", pos)
        self.expect("(")
        args = [self.expr()]
        while self.peek()[1] == ",":
            self.take()
            args.append(self.expr())
        self.expect(")")
        if len(args) != FUNCTIONS[name]:
            raise ExprError(f"{name}() takes {FUNCTIONS[name]} argument(s), got {len(args)}", pos)
        return Node("call", pos, tuple(args), name)

    def kind_of(self, node: Node) -> Kind:
        """Type-check ``node``: arithmetic on numbers, logic on booleans."""
        op = node.op
        if op == "num":
            return "int"
        if op == "bool":
            return "bool"
        if op == "name":
            return self.kinds[node.value]  # type: ignore[index]
        kinds = [self.kind_of(a) for a in node.args]
        if op in ("and", "or", "not"):
            want: Kind = "bool"
        else:
            want = "int"
        for arg, kind in zip(node.args, kinds):
            if kind != want:
                what = "a boolean" if kind == "bool" else "a number"
                raise ExprError(f"{op!r} at offset {node.offset} needs {'booleans' if want == 'bool' else 'numbers'}, got {what}", arg.offset)
        return "bool" if op in ("and", "or", "not", "==", "!=", "<", "<=", ">", ">=") else "int"


def _unknown_name(name: str, pos: int, kinds: dict[str, Kind]) -> str:
    from archcalc.spec.suggest import did_you_mean

    declared = ", ".join(sorted(kinds)) or "none"
    return f"unknown name {name!r} at offset {pos}{did_you_mean(name, kinds)}; declared hyperparameters: {declared}"


def _number(text: str, pos: int) -> Fraction:
    """The exact value of a number literal, within the limits on its digits and exponent."""
    if not _NUMBER.fullmatch(text):
        raise ExprError(f"malformed number {text!r} at offset {pos}; '_' may only separate digits, as in 1_000", pos)
    digits = text.replace("_", "").split(".")[0].split("e")[0].split("E")[0]
    if len(digits) > MAX_DIGITS:
        raise ExprError(f"number at offset {pos} has more than {MAX_DIGITS} digits", pos)
    exponent = text.replace("_", "").lower().partition("e")[2]
    if exponent and abs(int(exponent)) > 2 * MAX_DIGITS:  # 1e999999999 would take minutes to build
        raise ExprError(f"number {text!r} at offset {pos} is out of range; expected an exponent of at most {2 * MAX_DIGITS}", pos)
    try:
        value = Fraction(text.replace("_", ""))
    except (ValueError, ZeroDivisionError):
        raise ExprError(f"malformed number {text!r} at offset {pos}", pos) from None
    if value and _digits(value) > MAX_DIGITS:
        raise ExprError(f"number {text!r} at offset {pos} is too large", pos)
    return value


def _digits(value: Fraction) -> int:
    """Decimal digits of the larger of numerator and denominator (estimated when too long for str())."""
    big = max(abs(value.numerator), value.denominator)
    return len(str(big)) if big.bit_length() < 4000 else int(big.bit_length() * 0.30103) + 1


def _power_degree(node: Node) -> int:
    """How much nested powers in ``node`` multiply exponents (``(x**4)**3`` is 12)."""
    if node.op == "**":
        exponent = constant_value(node.args[1]) or Fraction(1)
        return _power_degree(node.args[0]) * max(1, abs(int(exponent)))
    return max((_power_degree(a) for a in node.args), default=1)


def constant_value(node: Node) -> Fraction | None:
    """The value of a constant numeric subtree (no names), or None."""
    if node.op == "num":
        return node.value  # type: ignore[return-value]
    if not _is_numeric_constant(node):
        return None
    try:  # safe: every power inside was bounded when it was parsed
        value = evaluate(node, {})
    except (ExprError, ZeroDivisionError):
        return None
    return value if isinstance(value, Fraction) else None


def _is_numeric_constant(node: Node) -> bool:
    if node.op in ("name", "bool") or node.op in ("and", "or", "not", "==", "!=", "<", "<=", ">", ">="):
        return False
    return all(_is_numeric_constant(a) for a in node.args)


def _start(node: Node) -> int:
    """Where the text of ``node`` begins (an operator node's own offset is its operator's)."""
    return min([node.offset, *(_start(a) for a in node.args)])
