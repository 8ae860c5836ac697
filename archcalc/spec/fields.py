"""Field types and the strict base model shared by every part of the spec schema.

Expression-valued fields hold a parsed :class:`~archcalc.spec.expr.Expr`, checked at load time
against the declared hyperparameters, which the loader passes in the validation context as
``{"kinds": {name: "int" | "bool"}}``. Serialising a spec writes the expression text back, so a spec
round-trips through ``model_dump()``.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, PlainSerializer, PlainValidator, ValidationInfo, model_validator

from archcalc.spec.expr import Expr, ExprError, parse
from archcalc.spec.suggest import did_you_mean

IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,31}", re.ASCII)  # always fullmatch: "$" matches before "\n"


class FieldError(ValueError):
    """A validation error below the validated object: ``sub`` extends the location, ``offset`` the column."""

    def __init__(self, message: str, sub: tuple = (), offset: int = 0, key: bool = False):
        super().__init__(message)
        self.sub, self.offset, self.key = tuple(sub), offset, key


def _kinds(info: ValidationInfo) -> dict[str, str]:
    return (info.context or {}).get("kinds", {})


def parse_field(value: Any, info: ValidationInfo, want: str) -> Expr:
    if isinstance(value, Expr):
        return value
    if isinstance(value, float):
        if value.is_integer() and want == "int" and abs(value) < 1e30:
            value = int(value)
        else:
            raise FieldError(f"expected an {'integer' if want == 'int' else 'boolean'} expression, got the number {value!r}")
    if value is None:
        raise FieldError(f"expected an {'integer' if want == 'int' else 'boolean'} value, got nothing (null)")
    if not isinstance(value, (str, int, bool)):
        raise FieldError(f"expected an {'integer' if want == 'int' else 'boolean'} expression, got a {_describe(value)}")
    try:
        return parse(value, _kinds(info), want)  # type: ignore[arg-type]
    except ExprError as e:
        raise FieldError(str(e), offset=e.offset) from None


def _describe(value: Any) -> str:
    return "mapping" if isinstance(value, dict) else "list" if isinstance(value, list) else type(value).__name__


def _num(value: Any, info: ValidationInfo) -> Expr:
    return parse_field(value, info, "int")


def _bool(value: Any, info: ValidationInfo) -> Expr:
    return parse_field(value, info, "bool")


def _real(value: Any) -> float:
    """A finite real number (an epsilon, a rope base); YAML writes ``1e-5`` as a string."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise FieldError(f"expected a number such as 1e-5, got {_describe(value)}")
    try:
        number = float(value)
    except ValueError:
        raise FieldError(f"expected a number such as 1e-5, got {value!r}") from None
    if not math.isfinite(number):
        raise FieldError(f"expected a finite number, got {value!r}")
    return number


def _positive_real(value: Any) -> float:
    """A finite number above zero: an epsilon, a rotary base, a soft-cap, a score scale, a clamp limit."""
    number = _real(value)
    if number <= 0:
        raise FieldError(f"expected a number above 0, got {value!r}")
    return number


def _identifier(value: Any) -> str:
    if not isinstance(value, str) or not IDENTIFIER.fullmatch(value):
        raise FieldError(f"expected a name of letters, digits and '_' (at most 32, not starting with a digit), got {value!r}")
    return value


def split_hint(key: Any) -> str:
    """Why a key such as ``256)`` appeared: YAML's flow mappings split ``{default: round_up(8 * d / 3, 256)}`` at the
    comma, into ``default: round_up(8 * d / 3`` and a key ``256)``. Say so, and how to write it."""
    if isinstance(key, str) and key.count(")") > key.count("("):
        return (" (YAML's {...} syntax split an expression at its comma; quote the whole expression, "
                "e.g. {default: \"round_up(8 * d / 3, 256)\"})")
    return ""


def dump_expr(e: Expr) -> int | bool | str:
    """The YAML value that parses back to ``e``: a plain int or bool where it is one, else the text."""
    if e.kind == "bool" and e.text in ("true", "false"):
        return e.text == "true"
    if e.text.lstrip("-").isdigit():
        return int(e.text)
    return e.text


_to_text = PlainSerializer(dump_expr)

#: An integer-valued expression over the hyperparameters, e.g. ``4 * d``.
IntExpr = Annotated[Expr, PlainValidator(_num), _to_text]
#: A boolean expression, e.g. ``true`` or ``qkv_bias``.
BoolExpr = Annotated[Expr, PlainValidator(_bool), _to_text]
Real = Annotated[float, PlainValidator(_real)]
PositiveReal = Annotated[float, PlainValidator(_positive_real)]
Identifier = Annotated[str, PlainValidator(_identifier)]


class Strict(BaseModel):
    """Frozen; an unknown key is an error that names the nearest valid key."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=False)

    @classmethod
    def _preprocess(cls, data: Any, info: ValidationInfo) -> Any:
        """Hook for shorthands (a subclass may turn a string into a mapping)."""
        return data

    @model_validator(mode="before")
    @classmethod
    def _known_keys(cls, data: Any, info: ValidationInfo) -> Any:
        data = cls._preprocess(data, info)
        if isinstance(data, dict):
            allowed = [f.alias or name for name, f in cls.model_fields.items()]
            for key in data:
                if key not in allowed:
                    raise FieldError(
                        f"unknown key {key!r}{split_hint(key) or did_you_mean(key, allowed)}; expected one of: {', '.join(allowed)}",
                        sub=(key,), key=True,
                    )
        elif not isinstance(data, cls):
            raise FieldError(f"expected a mapping of {cls.__name__.removesuffix('Spec').lower()} keys, got {_describe(data)} {data!r:.40}")
        return data


def shorthand(data: Any, key: str = "kind") -> Any:
    """Let ``norm: rmsnorm`` stand for ``norm: {kind: rmsnorm}``."""
    return {key: data} if isinstance(data, str) else data


def constant(expr: Expr | None) -> Fraction | None:
    """The value of a constant expression (``1/4``), or None for an absent one or one that names hyperparameters."""
    if expr is None or not expr.constant or expr.kind != "int":
        return None
    try:
        value = expr.evaluate({})
    except ExprError:
        return None  # a division by zero: reported where the value is used, with its size
    return value if isinstance(value, Fraction) else None


def _factor(value: Any, info: Any) -> float | Expr:
    """A positive number (``0.22``), or an expression over the hyperparameters that gives one at each size
    (``1 / d_head``): a score scale or a multiplier, evaluated when a size is lowered."""
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            return parse_field(value, info, "int")
    return value if isinstance(value, Expr) else _positive_real(value)


#: A number, or a rational expression over the hyperparameters; no parameter depends on it.
Factor = Annotated[float | Expr, PlainValidator(_factor), PlainSerializer(lambda v: dump_expr(v) if isinstance(v, Expr) else v)]
