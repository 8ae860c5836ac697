"""fuse_projections changes names, never numbers: every bundled size keeps its total, active count, roles and
FLOPs; only self-attention q/k/v and gated gate/up are fused (cross, latent and relative-bias attention stay)."""

from __future__ import annotations

import pytest
import sympy

from archcalc.backends.count import count
from archcalc.backends.flops import flops
from archcalc.spec import load_spec
from archcalc.spec.bind import bind
from archcalc.spec.library import bundled_names
from archcalc.spec.transform import fuse_projections


@pytest.mark.parametrize("name", bundled_names())
def test_fused_spec_has_the_same_numbers_and_fused_names(name):
    spec = load_spec(name)
    fused = fuse_projections(spec)
    for size in spec.sizes:
        plain, joined = bind(spec, size), bind(fused, size)
        a, b = count(plain), count(joined)
        assert (a.total, a.active, a.by_role) == (b.total, b.active, b.by_role)
        assert sympy.expand(a.formula - b.formula) == 0
        fa, fb = flops(plain, 128, 2), flops(joined, 128, 2)
        assert (fa.forward_matmul, fa.forward_matmul_causal, fa.train_step_matmul) == \
               (fb.forward_matmul, fb.forward_matmul_causal, fb.train_step_matmul)
        for path in b.by_path:
            parts = path.split(".")
            assert "gate" not in parts, path  # every gated MLP (and expert) is fused
            if any(a == "attn" and b in ("q", "k", "v") for a, b in zip(parts, parts[1:])):
                # self-attention is fused except beside T5's relative position bias, with an output gate (Qwen3.5's)
                # and where values are the keys or keys and values are an earlier layer's (Gemma 4's)
                assert name == "t5" or any(s.attention and (s.attention.output_gate or s.attention.k_eq_v or s.attention.kv_shared)
                                           for s in spec.model.stacks()), path


def test_what_stays_separate():
    t5 = fuse_projections(load_spec("t5"))
    paths = set(count(bind(t5, "small")).by_path)
    assert "encoder.blocks.attn.q.weight" in paths  # relative-bias attention is not fused
    assert "decoder.blocks.cross_attn.q.weight" in paths  # nor is cross-attention
    deepseek = fuse_projections(load_spec("deepseek_v3"))
    paths = set(count(bind(deepseek, next(iter(deepseek.sizes)))).by_path)
    assert "blocks.attn.kv_down.weight" in paths  # latent attention has no q/k/v to stack
    gated = fuse_projections(load_spec("qwen3_5"))
    assert "blocks.attn.q.weight" in set(count(bind(gated, "4b")).by_path)  # the output gate rides on q's projection
    assert "blocks.mlp.experts.gate_up.weight" in paths and "blocks.mlp.experts.gate.weight" not in paths
    orig = fuse_projections(load_spec("transformer_2017"))
    paths = set(count(bind(orig, "base")).by_path)
    assert "encoder.blocks.attn.qkv.weight" in paths and "decoder.blocks.cross_attn.k.weight" in paths


def test_the_original_spec_is_untouched():
    spec = load_spec("llama")
    fuse_projections(spec)
    assert (spec.model.block.attention.layout, spec.model.block.mlp.layout) == ("separate", "separate")
