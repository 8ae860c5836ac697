"""Layers that differ within one stack of a config, read by the hook interleaved_moe_layers: dense and MoE layers
interleaved (two stacks and a layer_order), NoPE and chunked layers, the rotary layers' query/key norm and the NoPE
layers' temperature. Counts against transformers on the meta device; FLOPs and the KV cache of chunked layers by hand;
the refusals, one line each."""

from __future__ import annotations

import json

import pytest

from archcalc.backends.count import count_size
from archcalc.hf import spec_from_hf_config
from archcalc.ir import lower
from archcalc.ir.ops import chunked_pairs
from archcalc.spec.bind import bind
from tests.helpers import meta_count

transformers = pytest.importorskip("transformers")

SMALL = dict(vocab_size=101, hidden_size=48, intermediate_size=24, intermediate_size_mlp=40, num_hidden_layers=7,
             num_attention_heads=6, num_key_value_heads=2, head_dim=8, num_local_experts=5, num_experts_per_tok=1)
VARIANTS = {  # name: Llama4TextConfig arguments beyond SMALL
    "every-layer-moe": {},
    "maverick-like": {"interleave_moe_layer_step": 2, "use_qk_norm": False},
    "every-third": {"interleave_moe_layer_step": 3, "no_rope_layer_interval": 2},
    "moe-layers-listed": {"moe_layers": [0, 4, 5], "no_rope_layers": [1, 0, 0, 1, 1, 1, 0]},
    "all-dense": {"moe_layers": [], "layer_types": ["full_attention"] * 7},
}


def _spec(name: str):
    config = transformers.Llama4TextConfig(**SMALL, **VARIANTS[name])
    return config, spec_from_hf_config(json.loads(config.to_json_string(use_diff=False)), f"{name}.json")


@pytest.mark.parametrize("name", VARIANTS)
def test_counts_equal_transformers(name):
    config, spec = _spec(name)
    assert count_size(spec, next(iter(spec.sizes))).total == meta_count(config, "Llama4ForCausalLM")


def test_interleaved_stacks_follow_the_moe_layers():
    _, spec = _spec("moe-layers-listed")  # MoE at 0, 4, 5 of 7: the shortest cycle that gives them is 5 layers long
    assert spec.model.layer_order == ["blocks", "dense_blocks", "dense_blocks", "dense_blocks", "blocks"]
    _, spec = _spec("maverick-like")
    assert spec.model.layer_order == ["dense_blocks", "blocks"]
    dense, moe = spec.model.blocks
    assert dense.attention.rotary_pattern is None and moe.attention.rotary_pattern == [True, False]
    assert moe.attention.rotary_qk_norm is None and moe.attention.temperature is not None


def test_chunked_pairs_are_each_blocks_triangle():
    for seq in range(1, 30):
        for chunk in range(1, 9):
            brute = sum(1 for i in range(seq) for j in range(i + 1) if i // chunk == j // chunk)
            assert chunked_pairs(seq, chunk) == brute


def test_chunked_layers_in_flops_and_the_kv_cache(cli):
    """Scout at 20,000 tokens: 36 layers attend within blocks of 8,192 tokens and cache one block; 12 see them all."""
    seq, heads, width, kv = 20_000, 40, 128, 8
    flops = cli("flops", "llama4", "--size", "scout", "--seq-len", str(seq), "--json").json()["results"][0]
    chunked = 2 * (8192 * 8193 // 2) + (seq - 2 * 8192) * (seq - 2 * 8192 + 1) // 2
    per_pair = 2 * heads * 2 * width
    saved = 36 * per_pair * (seq * seq - chunked) + 12 * per_pair * (seq * seq - seq * (seq + 1) // 2)
    assert flops["forward_matmul"] - flops["forward_matmul_causal"] == saved
    memory = cli("memory", "llama4", "--size", "scout", "--seq-len", str(seq), "--batch", "1", "--json").json()["results"][0]
    assert memory["kv_cache_bytes"] == 2 * kv * 2 * width * (36 * 8192 + 12 * seq)


@pytest.mark.parametrize("change,where", [
    ({"attention_chunk_size": None}, "attention_chunk_size: null, but some layers are chunked_attention"),
    ({"moe_layers": [0, 9]}, "moe_layers[1]: expected a layer index from 0 to 6, got 9"),
    ({"layer_types": ["sliding_attention"] * 7}, "layer_types[0]: 'sliding_attention' is not modelled"),
    ({"attn_temperature_tuning": 4}, "attn_temperature_tuning: expected true or false, got 4"),
])
def test_refusals_name_the_key(cli, tmp_path, change, where):
    config = json.loads(transformers.Llama4TextConfig(**SMALL).to_json_string(use_diff=False)) | change
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config, indent=2))
    run = cli("count", "--hf", str(path))
    assert run.status == 2 and where in run.err and run.err.count("\n") == 1, run.err


def test_the_model_of_each_variant_lowers():
    for name in VARIANTS:
        _, spec = _spec(name)
        assert lower(bind(spec, next(iter(spec.sizes)))).root is not None
