"""Shared helpers of the solver tests: counts of shapes as ``archcalc count --set`` gives them, and the
constraints a shape must keep, checked independently of the solver."""

from __future__ import annotations

from functools import lru_cache

from archcalc.backends.count import count
from archcalc.errors import ArchcalcError
from archcalc.ir import lower
from archcalc.ir.attrs import Attention, Embeddings, LatentAttention
from archcalc.spec import load_spec
from archcalc.spec.bind import bind, parse_overrides


@lru_cache(maxsize=64)
def spec_of(name: str):
    """Specs are immutable: load each once."""
    return load_spec(name)


def count_of(spec_name: str, values: dict) -> int:
    """``archcalc count SPEC --set K=V ...`` of one shape."""
    spec = spec_of(spec_name)
    items = [f"{k}={str(v).lower()}" for k, v in values.items()]
    return count(bind(spec, None, parse_overrides(spec, items))).total


_STRUCTURES: dict[str, tuple] = {}


def _structure(spec_name: str, binding):
    """The count formula and the constraints of a spec, from its first valid binding (integers do not change
    the structure: only switches do, and these tests fix none)."""
    if spec_name in _STRUCTURES:
        return _STRUCTURES[spec_name]
    result = count(binding)
    root = lower(binding).root
    rotary = any(isinstance(c.attrs, Embeddings) and c.attrs.position == "rotary" for _, c in root.walk())
    heads = [(c.attrs.heads, c.attrs.kv_heads, c.attrs.head_width) for _, c in root.walk()
             if isinstance(c.attrs, Attention) and not isinstance(c.attrs, LatentAttention) and not c.attrs.cross]
    _STRUCTURES[spec_name] = (result.formula, rotary, heads)
    return _STRUCTURES[spec_name]


@lru_cache(maxsize=400_000)
def valid_count(spec_name: str, items: tuple[tuple[str, int], ...]) -> int | None:
    """The exact count of a shape, or None if it breaks a constraint: a default that is not whole (refused by
    bind), kv_heads not dividing heads (refused by count) or an odd rotary head width (refused by the code
    generator). Fast enough for brute force: bind, then count's own formula evaluated at the shape."""
    spec = spec_of(spec_name)
    try:
        binding = bind(spec, None, parse_overrides(spec, [f"{k}={v}" for k, v in items]))
    except ArchcalcError:
        return None
    numeric = binding.numeric()
    try:
        formula, rotary, heads = _structure(spec_name, binding)
    except ArchcalcError:
        return None
    for h, kv, width in heads:
        if int(h.xreplace(numeric)) % int(kv.xreplace(numeric)):
            return None
        if rotary and int(width.xreplace(numeric)) % 2:
            return None
    value = formula.xreplace(binding.substitutions).xreplace(numeric)
    assert value.is_Integer, value
    return int(value)
