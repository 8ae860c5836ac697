"""Build generated modules for tests."""

from __future__ import annotations

from archcalc.ir import lower
from archcalc.spec import load_spec
from archcalc.spec.bind import bind, parse_overrides
from archcalc.spec.transform import fuse_projections
from codegen.emit import emit
from codegen.load import load_source


def lowered(spec_name: str, size: str | None = None, fused: bool = False, **values):
    """The IR of a bundled spec's size with hyperparameters overridden; ``fused``: with fused projections."""
    spec = fuse_projections(load_spec(spec_name)) if fused else load_spec(spec_name)
    overrides = parse_overrides(spec, [f"{k}={str(v).lower()}" for k, v in values.items()])
    return lower(bind(spec, size, overrides))


def module(spec_name: str, size: str | None = None, fused: bool = False, **values):
    return load_source(emit(lowered(spec_name, size, fused, **values), "test"))


TINY = dict(V=97, T=32, L=2, d=32, H=4)
