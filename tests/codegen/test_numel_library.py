"""Symbols = numel for random hyperparameters of every bundled spec: a size of the family with a random
depth, vocabulary and switches (biases, tying) — the hyperparameters any size may change without
breaking the family's divisibility rules — built on the meta device and compared name by name, as
specified and with fused projections (--fuse-projections), whose total must not change."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from archcalc.backends.count import count
from archcalc.codegen.emit import ungenerated
from archcalc.codegen.verify import verify
from archcalc.ir import lower
from archcalc.spec import load_spec
from archcalc.spec.bind import bind, parse_overrides
from archcalc.spec.library import bundled_names
from archcalc.spec.transform import fuse_projections
from tests.helpers import examples

# every bundled spec whose module codegen generates (ungenerated says what it refuses: multi-token prediction, ...)
SPECS = {name: spec for name in bundled_names()
         if not ungenerated(lower(bind(spec := load_spec(name), next(iter(spec.sizes)))))}


@st.composite
def library_config(draw):
    name = draw(st.sampled_from(sorted(SPECS)))
    spec = SPECS[name]
    size = draw(st.sampled_from(list(spec.sizes)))
    values = bind(spec, size).values
    overrides = {}
    if spec.model.layer_order:  # a hybrid: whole cycles of its layer order (Qwen3.5's three mixers to one attention;
        # LFM2-MoE's dense layers too, which its counts follow from L)
        overrides["L"] = len(spec.model.layer_order) * draw(st.integers(1, 2))
    elif "L_dense" in values:  # DeepSeek: dense blocks first, then at least one MoE block
        dense = draw(st.integers(1, 2))
        overrides.update(L_dense=dense, L=dense + draw(st.integers(1, 2)))
    else:
        overrides["L"] = draw(st.integers(1, 3))
    if "V" in values:
        overrides["V"] = draw(st.integers(1, 300_000))
    for hp_name, hp in spec.hyperparameters.items():
        if hp.type == "bool" and draw(st.booleans()):
            overrides[hp_name] = not values[hp_name]
    return name, size, overrides, draw(st.booleans())


@examples(60)
@given(config=library_config())
def test_random_configs_of_every_bundled_spec_equal_numel_on_meta(config):
    name, size, overrides, fused = config
    spec = fuse_projections(SPECS[name]) if fused else SPECS[name]
    binding = bind(spec, size, parse_overrides(spec, [f"{k}={str(v).lower()}" for k, v in overrides.items()]))
    report = verify(lower(binding), device="meta")
    assert report.ok, (name, size, overrides, report.missing[:3], report.extra[:3], report.shape_mismatches[:3])
    assert report.module_total == count(binding).total
    if fused:  # the same parameters, named after the fused layout
        assert count(binding).total == count(bind(SPECS[name], size, parse_overrides(SPECS[name], [
            f"{k}={str(v).lower()}" for k, v in overrides.items()]))).total


@pytest.mark.parametrize("name, size", [(name, size) for name, spec in SPECS.items() for size in spec.sizes])
def test_every_size_of_every_bundled_spec_verifies_fused(name, size):
    """Every bundled size with fused projections: names and shapes equal the fused IR; totals the unfused ones."""
    spec = SPECS[name]
    report = verify(lower(bind(fuse_projections(spec), size)), device="meta")
    assert report.ok, (name, size, report.missing[:3], report.extra[:3])
    assert report.module_total == count(bind(spec, size)).total
