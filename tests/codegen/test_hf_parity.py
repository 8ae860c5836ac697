"""Parity with transformers: for each supported model type, a tiny random transformers model (fp32, CPU,
eager attention) and the module archcalc generates from the same config (through the HF importer) give
the same logits once ``load_hf_state_dict`` has copied the weights: relative error (max abs difference /
max abs value) below 1e-4. Every parameter is perturbed first, so norms and biases that transformers
initialises to ones and zeros are tested too (and DeepSeek-V3's e_score_correction_bias buffer)."""

from __future__ import annotations

import json

import pytest
import torch

transformers = pytest.importorskip("transformers")

from archcalc.hf import spec_from_hf_config  # noqa: E402
from archcalc.ir import lower  # noqa: E402
from archcalc.spec.bind import bind  # noqa: E402
from archcalc.spec.transform import fuse_projections  # noqa: E402
from codegen.emit import emit  # noqa: E402
from codegen.load import load_source  # noqa: E402

TOLERANCE = 1e-4
TINY = dict(vocab_size=97, hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, max_position_embeddings=64)
MOE = dict(num_local_experts=4, num_experts_per_tok=2)
GPT = dict(vocab_size=97, n_embd=32, n_layer=2, n_head=4)
T5 = dict(vocab_size=97, d_model=32, d_kv=6, d_ff=48, num_layers=2, num_decoder_layers=3, num_heads=4,
          relative_attention_num_buckets=8, relative_attention_max_distance=20)  # small buckets: the log-spaced ones are used

DEEPSEEK = dict(vocab_size=97, hidden_size=32, intermediate_size=48, moe_intermediate_size=12, num_hidden_layers=3,
                num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=64, q_lora_rank=8, kv_lora_rank=12,
                qk_rope_head_dim=4, qk_nope_head_dim=6, v_head_dim=5, n_routed_experts=8, num_experts_per_tok=3, n_group=4,
                topk_group=2, n_shared_experts=2, first_k_dense_replace=1, routed_scaling_factor=1.7)  # 1 dense, 2 MoE layers

# model_type: (config class, its arguments, tokens per sequence)
CASES = {
    "llama": ("LlamaConfig", TINY, 11),
    "mistral": ("MistralConfig", {**TINY, "sliding_window": 5}, 13),  # longer than the window
    "qwen2": ("Qwen2Config", TINY, 11),
    "qwen3": ("Qwen3Config", {**TINY, "head_dim": 16}, 11),  # H x d_head = 64 != d = 32
    "mixtral": ("MixtralConfig", {**TINY, **MOE}, 11),
    "gpt2": ("GPT2Config", {**GPT, "n_positions": 64}, 11),
    "olmo2": ("Olmo2Config", TINY, 11),
    "phi3": ("Phi3Config", {**TINY, "pad_token_id": 0, "partial_rotary_factor": 0.5}, 11),
    "gpt_neox": ("GPTNeoXConfig", {**TINY, "num_key_value_heads": None, "rotary_pct": 0.25}, 11),
    "gptj": ("GPTJConfig", {**GPT, "n_positions": 64, "rotary_dim": 4}, 11),
    "falcon": ("FalconConfig", {"vocab_size": 97, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4}, 11),
    "falcon-new": ("FalconConfig", {"vocab_size": 97, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4,
                                    "new_decoder_architecture": True, "num_kv_heads": 2}, 11),
    "gemma2": ("Gemma2Config", {**TINY, "head_dim": 8, "sliding_window": 5, "query_pre_attn_scalar": 16,
                                "attn_logit_softcapping": 2.0, "final_logit_softcapping": 3.0}, 13),
    "gpt_oss": ("GptOssConfig", {**TINY, **MOE, "head_dim": 8, "sliding_window": 5,
                                 "rope_parameters": {"rope_type": "default", "rope_theta": 150000.0}}, 13),
    "t5": ("T5Config", T5, 11),  # T5 v1.0: ReLU, tied head with the d**-0.5 output scaling; H x d_kv = 24 != d = 32
    "t5-gated": ("T5Config", {**T5, "feed_forward_proj": "gated-gelu", "tie_word_embeddings": False}, 11),  # v1.1: GeGLU, no scaling
    "deepseek_v3": ("DeepseekV3Config", DEEPSEEK, 11),
    "deepseek_v3-plain-q": ("DeepseekV3Config", {**DEEPSEEK, "q_lora_rank": None, "attention_bias": True, "first_k_dense_replace": 2,
                                                  "norm_topk_prob": False, "n_group": 2, "topk_group": 1}, 11),
    "bert": ("BertConfig", {"vocab_size": 97, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4,
                            "intermediate_size": 48, "max_position_embeddings": 64}, 11),
}


def _configs(case: str):
    name, kwargs, seq = CASES[case]
    config = getattr(transformers, name)(**{k: v for k, v in kwargs.items() if v is not None})
    return config, seq


def _hf_model(config):
    torch.manual_seed(0)
    if config.model_type == "bert":
        model = transformers.BertModel(config, add_pooling_layer=True)
    elif config.model_type == "t5":
        model = transformers.T5ForConditionalGeneration(config)
    else:
        model = transformers.AutoModelForCausalLM.from_config(config, attn_implementation="eager")
    with torch.no_grad():
        for p in model.parameters():  # off the ones/zeros of the initialisation, so every tensor matters
            p.add_(torch.randn_like(p) * 0.1)
        for name, b in model.named_buffers():  # DeepSeek-V3's routing bias (zero-initialised) must be loaded too
            if name.endswith("e_score_correction_bias"):
                b.add_(torch.randn_like(b) * 0.1)
    return model.eval()


def _generated(config, fused: bool = False):
    spec = spec_from_hf_config(json.loads(config.to_json_string(use_diff=False)), "tiny.json")
    spec = fuse_projections(spec) if fused else spec
    source = emit(lower(bind(spec, next(iter(spec.sizes)))), "test")
    return load_source(source)


def _rel(ours: torch.Tensor, theirs: torch.Tensor) -> float:
    return ((ours - theirs).abs().max() / theirs.abs().max()).item()


@pytest.mark.parametrize("fused", [False, True], ids=["as-specified", "fused"])
@pytest.mark.parametrize("case", list(CASES))
def test_logits_match_transformers(case, fused):
    """``fused``: with --fuse-projections (one qkv, one gate_up), loaded from transformers' separate tensors."""
    config, seq = _configs(case)
    hf = _hf_model(config)
    module = _generated(config, fused)
    model = module.build().eval()
    module.load_hf_state_dict(model, hf.state_dict())
    ids = torch.randint(0, config.vocab_size, (2, seq), generator=torch.Generator().manual_seed(1))
    if config.model_type == "t5":  # encoder and decoder inputs of different lengths
        dec = torch.randint(0, config.vocab_size, (2, seq - 3), generator=torch.Generator().manual_seed(2))
        with torch.no_grad():
            ours, out = model(ids, dec), hf(input_ids=ids, decoder_input_ids=dec)
        assert ours.shape == out.logits.shape and _rel(ours, out.logits) < TOLERANCE
        return
    with torch.no_grad():
        ours = model(ids)
        out = hf(ids)
    if config.model_type == "bert":
        assert _rel(ours, out.last_hidden_state) < TOLERANCE
        assert _rel(model.pooler(ours), out.pooler_output) < TOLERANCE
    else:
        assert ours.shape == out.logits.shape
        assert _rel(ours, out.logits) < TOLERANCE


def test_a_wrong_shape_or_a_leftover_tensor_is_an_error():
    config, _ = _configs("llama")
    hf, module = _hf_model(config), _generated(config)
    model = module.build()
    state = dict(hf.state_dict())
    state["model.layers.0.self_attn.q_proj.weight"] = state["model.layers.0.self_attn.q_proj.weight"][:, :-1]
    with pytest.raises(ValueError, match="blocks.0.attn.q.weight"):
        module.load_hf_state_dict(model, state)
    state = dict(hf.state_dict(), extra=torch.zeros(1))
    with pytest.raises(ValueError, match="extra"):
        module.load_hf_state_dict(model, state)


def test_fused_projections_are_one_parameter_loaded_from_three():
    config, _ = _configs("llama")
    hf, module = _hf_model(config), _generated(config, fused=True)
    model = module.build()
    names = {name for name, _ in model.named_parameters()}
    assert "blocks.0.attn.qkv.weight" in names and "blocks.0.mlp.gate_up.weight" in names
    assert not {"blocks.0.attn.q.weight", "blocks.0.mlp.gate.weight"} & names
    module.load_hf_state_dict(model, hf.state_dict())
    state = hf.state_dict()
    q, k, v = (state[f"model.layers.1.self_attn.{p}_proj.weight"] for p in "qkv")
    assert torch.equal(model.blocks[1].attn.qkv.weight, torch.cat([q, k, v]))


DENSE = [case for case in CASES if case not in ("mixtral", "gpt_oss", "deepseek_v3", "deepseek_v3-plain-q")]


@pytest.mark.parametrize("case", DENSE)
def test_fused_dense_families_compile_to_one_graph(case):
    """torch.compile sees one graph, no breaks, for every family without experts (MoE layers dispatch tokens with
    data-dependent shapes and break the graph there; see docs/training.md)."""
    config, seq = _configs(case)
    model = _generated(config, fused=True).build()
    ids = torch.randint(0, config.vocab_size, (2, seq))
    args = (ids, ids[:, :5]) if config.model_type == "t5" else (ids,)
    explanation = torch._dynamo.explain(model)(*args)
    assert explanation.graph_break_count == 0 and explanation.graph_count == 1


@pytest.mark.parametrize("case", list(CASES))
def test_reset_parameters_initialises_a_model_materialised_from_meta(case):
    """build(device="meta"), to_empty, reset_parameters: every parameter and buffer is written, and those that
    build() sets to a constant (norm weights, biases, sinks, DeepSeek's score bias) get that constant."""
    config, _ = _configs(case)
    module = _generated(config, fused=True)
    torch.manual_seed(0)
    built = module.build()
    model = module.build(device="meta").to_empty(device="cpu")
    with torch.no_grad():
        for t in [*model.parameters(), *model.buffers()]:
            t.fill_(float("nan"))
        model.reset_parameters()
    reference = dict(built.state_dict())
    for name, tensor in model.state_dict().items():
        assert torch.isfinite(tensor).all(), name
        expected = reference[name]
        if expected.numel() > 1 and bool((expected == expected.flatten()[0]).all()):
            assert torch.equal(tensor, expected), name  # a constant: ones or zeros
        elif expected.numel() > 100:
            assert 0.5 < tensor.std().item() / expected.std().item() < 2, name  # the same random init
