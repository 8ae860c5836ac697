"""Lowering the settings that change no parameter but the arithmetic: a score scale or a multiplier given as a number
or as an expression over the hyperparameters (``1 / d_head``, evaluated at the size), the score scale given as the
width whose square root divides the scores (Gemma's query_pre_attn_scalar), and the sliding layers' own rotary tables.

>>> from archcalc.spec import load_spec
>>> from archcalc.spec.bind import bind
>>> from archcalc.ir import lower
>>> lower(bind(load_spec("granite"), "3.3-8b")).root.find("blocks.attn").attrs.scale
0.0078125
"""

from __future__ import annotations

from typing import Any

from archcalc.errors import SpecError
from archcalc.spec.expr import Expr
from archcalc.spec.loader import where


def factor(lowerer: Any, value: float | Expr | None, loc: tuple, what: str) -> float | None:
    """A scale or multiplier at the lowered size (``lowerer``: an :class:`archcalc.ir.lower.Lowerer`)."""
    if value is None or isinstance(value, float):
        return value
    number = lowerer.symbolic(value, loc, what).xreplace(lowerer.numeric)
    if not (number.is_Rational and number > 0):
        raise SpecError.at(where(lowerer.spec, loc), f"{what} = {value.text} is {number} for size {lowerer.binding.size!r}; "
                                                     "expected a number above 0")
    return float(number)


def score_scale(lowerer: Any, a: Any, loc: tuple) -> float | None:
    """The attention's score scale: ``scale``, or 1/sqrt(``scale_width``); None: 1/sqrt(head width)."""
    if a.scale_width is None:
        return factor(lowerer, a.scale, loc + ("scale",), "attention scale")
    return lowerer.value(lowerer.width(a.scale_width, loc + ("scale_width",), "scale_width")) ** -0.5


def embedding_settings(lowerer: Any, e: Any, pos: Any, loc: tuple) -> dict[str, Any]:
    """The embeddings' multiplier and, for rotary positions, the sliding layers' own base and scaling."""
    local = pos.local if pos.kind == "rotary" else None
    return {"multiplier": factor(lowerer, e.multiplier, loc + ("multiplier",), "embedding multiplier"),
            "rotary_local_base": local.base if local else None, "rotary_local_scaling": local.scaling if local else None}
