"""DeepSeek Sparse Attention (DeepSeek-V3.2, GLM-5): the indexer's parameters by tensor, its FLOPs (it scores every
earlier token; the attention reads each query's top-k keys only), its cache, and GLM-5's layers that reuse the previous
layer's selection, against closed forms written out here."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from archcalc.backends.count import count
from archcalc.backends.flops import flops
from archcalc.backends.infer import infer
from archcalc.backends.infer.flops import generation_flops
from archcalc.backends.memory import memory
from archcalc.cli.infer_show import render, to_json
from archcalc.errors import SpecError
from archcalc.hf import spec_from_hf_file
from archcalc.hf.export import export_config
from archcalc.ir import lower
from archcalc.ir.ops import BATCH, SEQ, forward_ops
from archcalc.spec import load_spec
from archcalc.spec.bind import bind

HUB = Path(__file__).parent.parent / "data" / "hf"
S, K = 131072, 2048  # 128k context; DeepSeek-V3.2's index_topk
L, H, D_HEAD, D_ROPE, D_V = 61, 128, 128, 64, 128  # DeepSeek-V3 and V3.2 share these
H_I, D_I, Q_RANK, D = 64, 128, 1536, 7168  # the indexer: heads, width; the query latent, the model width


def _v32():
    return bind(load_spec("deepseek_v32"), "671b")


def test_the_indexer_adds_its_four_tensors_per_layer_as_transformers_names_them():
    c = count(_v32())
    by_path = {leaf.path: int(leaf.count.xreplace(c.binding.numeric())) for leaf in c.leaves}
    per_layer = {"q_up.weight": H_I * D_I * Q_RANK, "k.weight": D_I * D, "k_norm.weight": D_I, "k_norm.bias": D_I,
                 "weights.weight": H_I * D}
    for tensor, numel in per_layer.items():
        assert by_path[f"dense_blocks.attn.indexer.{tensor}"] == 3 * numel
        assert by_path[f"blocks.attn.indexer.{tensor}"] == 58 * numel
    v3 = count(bind(load_spec("deepseek_v3"), "671b")).total
    assert c.total - v3 == L * sum(per_layer.values()) == 851_524_864
    assert c.total == 671_877_929_216  # transformers' DeepseekV32ForCausalLM on meta (the issue's figure)


def test_v32_against_v3_attention_flops_at_128k_is_the_closed_form():
    """The attention reads Σ min(i, k) = k·S − k(k − 1)/2 pairs instead of S(S + 1)/2; the indexer scores the causal
    triangle at 2·H_i·(d_i + 1) a pair and runs its three projections on every token."""
    sparse, dense = flops(_v32(), seq_len=S, batch=1), flops(bind(load_spec("deepseek_v3"), "671b"), seq_len=S, batch=1)
    per_pair = 2 * H * (D_HEAD + D_ROPE + D_V)
    indexer_pair = 2 * H_I * (D_I + 1)
    projections = 2 * S * (Q_RANK * H_I * D_I + D * D_I + D * H_I)
    top_k_pairs, triangle = K * S - K * (K - 1) // 2, S * (S + 1) // 2
    assert sparse.forward_matmul_causal - dense.forward_matmul_causal == L * (
        per_pair * (top_k_pairs - triangle) + indexer_pair * triangle + projections)
    # in full (as transformers computes it: the unselected keys masked) the attention is dense; the indexer's S² adds
    assert sparse.forward_matmul - dense.forward_matmul == L * (indexer_pair * S * S + projections)
    assert 2 * sparse.forward_matmul_causal < dense.forward_matmul_causal  # the long-context saving: over 2× in all


def test_a_decode_step_reads_top_k_keys_and_the_indexer_scores_every_key():
    g = generation_flops(_v32(), batch=1, prompt=S, new_tokens=2)
    no_context = generation_flops(_v32(), batch=1, prompt=1, new_tokens=2)
    latent_pair = 2 * H * (2 * 512 + D_ROPE)  # generating: attention in the latent space
    assert g.step_at(S) - no_context.step_at(1) == L * (latent_pair * (K - 2) + 2 * H_I * (D_I + 1) * (S + 1 - 2))
    assert g.decode_by_role["indexer_scores"] == L * 2 * H_I * (D_I + 1) * (S + 1)
    assert g.decode_by_role["attention_products"] == L * latent_pair * K
    assert g.sparse_saving[1] == L * latent_pair * (S + 1 - K)
    assert g.prefill_by_role["attention_products"] == L * latent_pair * (K * S - K * (K - 1) // 2)


def test_the_cache_holds_the_indexer_key_beside_the_latent():
    m = memory(_v32(), seq_len=S, batch=1, dtype="bfloat16")
    assert m.kv_cache_bytes == L * (512 + D_ROPE + D_I) * 2 * S == 11_257_511_936
    r = infer(_v32(), "h200", batch=1, prompt=S - 2, new_tokens=2, tp=8, weights_dtype="fp8")
    assert r.kv_cache_bytes == m.kv_cache_bytes


def test_infer_at_128k_shows_the_indexer_cost_and_the_sparse_saving():
    r = infer(_v32(), "h200", batch=1, prompt=S, new_tokens=2, tp=8, weights_dtype="fp8")
    latent_pair, index_pair = 2 * H * (2 * 512 + D_ROPE), 2 * H_I * (D_I + 1)
    triangle, top_k_pairs = S * (S + 1) // 2, K * S - K * (K - 1) // 2
    assert r.flops.prefill_by_role["indexer_scores"] == L * index_pair * triangle == 8_652_123_008_925_696
    assert r.flops.sparse_saving[0] == L * latent_pair * (triangle - top_k_pairs) == 141_420_728_313_446_400
    text = render(load_spec("deepseek_v32"), r)
    assert "indexer scores (every key)       8,652,123,008,925,696" in text
    assert "saved against dense attention   141,420,728,313,446,400" in text
    assert to_json(r)["sparse_attention_saving"] == {"prefill": r.flops.sparse_saving[0], "decode": r.flops.sparse_saving[1]}


def test_glm_5_2_shared_layers_own_no_indexer_and_keep_no_indexer_key():
    spec = spec_from_hf_file(HUB / "glm-5.2.json")
    size = next(iter(spec.sizes))
    low = lower(bind(spec, size))
    stacks = {c.name: c for c in low.root.children if c.kind == "block"}
    assert [n for n in stacks] == ["dense_blocks", "blocks", "shared_blocks"]
    assert stacks["shared_blocks"].find("attn.indexer") is None and stacks["shared_blocks"].find("attn").attrs.index_shared
    assert count(bind(spec, size)).total == 743_377_000_704  # transformers' GlmMoeDsaForCausalLM on meta
    m = memory(bind(spec, size), seq_len=1000, batch=1, dtype="bfloat16")
    assert m.kv_cache_bytes == (78 * (512 + 64) + 21 * 128) * 2 * 1000  # 21 layers run their own indexer
    config = export_config(spec, size)
    assert config["indexer_types"] == json.loads((HUB / "glm-5.2.json").read_text())["indexer_types"]
    per_pair = 2 * 32 * 129  # GLM-5's indexer: 32 heads of width 128, its scores of the full 4,096² square
    numeric = {**low.binding.numeric(), BATCH: 1, SEQ: 4096}
    scored = sum(op.total_full for op in forward_ops(low) if op.kind == "indexer")
    assert scored.xreplace(numeric) == 21 * per_pair * 4096**2


@pytest.mark.parametrize("change, message", [
    ({"q_lora_rank": None}, "q_lora_rank: null is not modelled: the indexer reads the query latent"),
    ({"indexer_types": ["shared"] + ["full"] * 77}, "the first layer shares the previous layer's selection"),
    ({"index_topk_pattern": "FX"}, "expected 78 letters F"),
    ({"mlp_layer_types": ["dense"] * 2 + ["sparse"] * 76}, "expected the 3 dense layers that first_k_dense_replace gives"),
    ({"layer_types": ["full_attention"] * 78}, "expected indexed_attention"),
    ({"index_head_dim": 32}, "index_head_dim: 32 is narrower than qk_rope_head_dim = 64"),
])
def test_configs_transformers_cannot_run_as_counted_are_refused(tmp_path, change, message):
    data = json.loads((HUB / "glm-5.1.json").read_text()) | change
    path = tmp_path / "config.json"
    path.write_text(json.dumps(data))
    with pytest.raises(SpecError, match=message):
        spec_from_hf_file(path)
