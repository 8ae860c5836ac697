"""The emitter's state while it walks the IR: the config fields and the classes of the file being written.

Template modules (``archcalc.codegen.attention``, ``archcalc.codegen.mlp``, ...) take an :class:`Emitter`, declare the config
fields they read and add the source of their classes; ``archcalc.codegen.emit`` puts the file together.
"""

from __future__ import annotations

import keyword

import sympy

from archcalc.codegen.errors import UnsupportedError
from archcalc.ir import Lowered


class Emitter:
    """Collects config fields and component classes while walking the IR."""

    def __init__(self, lowered: Lowered):
        self.lowered = lowered
        self.numeric = lowered.binding.numeric()
        self.fields: dict[str, tuple[int | float, str]] = {}  # name -> (value, comment)
        self.classes: list[str] = []
        self.helpers: list[str] = []  # leaves used by the classes (rotary tables, norms): placed first

    def value(self, expr: sympy.Expr) -> int:
        return int(sympy.Integer(expr.xreplace(self.numeric)))

    def field(self, name: str, expr: sympy.Expr | float, comment: str = "") -> str:
        """Declare a config field (once) and return the expression that reads it: ``cfg.width``."""
        if isinstance(expr, float):
            value: int | float = expr
            note = comment
        else:
            value = self.value(expr)
            symbolic = str(expr)
            note = comment or (symbolic if not symbolic.isdigit() else "")
        assert name.isidentifier() and not keyword.iskeyword(name), name
        if name in self.fields and self.fields[name][0] != value:
            raise UnsupportedError(f"codegen: two values for config field {name!r} ({self.fields[name][0]} and {value})")
        self.fields.setdefault(name, (value, note))
        return f"cfg.{name}"

    def add(self, source: str, helper: bool = False) -> None:
        """Add a class (once); a helper (rotary tables, a norm class) goes before every class."""
        target = self.helpers if helper else self.classes
        if source in target:
            return
        head = source.split("(", 1)[0] + "("
        if head.startswith("class ") and any(c.startswith(head) for c in self.helpers + self.classes):
            raise UnsupportedError(f"codegen: two different classes named {head[6:-1]} (stacks that differ; not generated yet)")
        target.append(source)
