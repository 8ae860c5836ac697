"""Lowering of per-layer settings that change no parameter: chunked attention, Llama 4's query/key norm on the
rotary layers and its query temperature on the others, the order of interleaved stacks (``layer_order``), and how
many of a stack's layers a cycling pattern gives each kind (``layers_of_kind``, by arithmetic).

Kept apart from :mod:`archcalc.ir.lower`, which calls these while it builds the attention nodes and the model node.
"""

from __future__ import annotations

from typing import Any

import sympy

from archcalc.errors import SpecError
from archcalc.spec import components as sc
from archcalc.spec.loader import where


def attention_extras(lowerer: Any, a: sc.Attention, pattern: tuple, rotary: tuple, loc: tuple) -> dict:
    """The chunk, rotary QK-norm and temperature settings of an attention node (its ``pattern`` and ``rotary`` cycles)."""
    out: dict = {}
    if "chunked" in pattern:
        assert a.chunk is not None
        out["chunk"] = lowerer.width(a.chunk, loc + ("chunk",), "chunk")
    if a.rotary_qk_norm is not None and True in rotary and lowerer.spec.model.embedding.position.kind == "rotary":
        out["rotary_qk_norm"] = float(a.rotary_qk_norm)
    if a.temperature is not None and False in rotary:
        out["temperature"] = (float(a.temperature.floor), float(a.temperature.scale))
    return out


def layers_of_kind(pattern: tuple[str, ...], repeat: sympy.Expr, kind: str) -> sympy.Expr:
    """How many of ``repeat`` layers get ``kind`` when ``pattern`` cycles over them."""
    p = len(pattern)
    return sum((sympy.floor((repeat - 1 - j) / p) + 1 for j, k in enumerate(pattern) if k == kind), sympy.Integer(0))


def layer_order(lowerer: Any, m: sc.Model, stacks: list, loc: tuple) -> tuple[str, ...] | None:
    """The cycle of stack names that interleaves the stacks' layers, checked against their repeats (None: in turn)."""
    if m.layer_order is None:
        return None
    order, spot = tuple(m.layer_order), where(lowerer.spec, loc + ("layer_order",))
    repeats = {c.name: lowerer.value(c.repeat) for c in stacks}
    if not order or set(order) - set(repeats):
        raise SpecError.at(spot, f"layer_order {list(order)} must name the stacks {sorted(repeats)}")
    total = sympy.Integer(sum(repeats.values()))
    got = {name: int(layers_of_kind(order, total, name)) for name in repeats}  # arithmetic: L may be 10^18
    if got != repeats:
        raise SpecError.at(spot, f"layer_order {list(order)} over {total} layers gives the stacks {got} layers, but their "
                                 f"repeats are {repeats}")
    return order
