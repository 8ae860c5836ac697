"""Tiny transformers models and the modules archcalc generates from the same configs: the cases the parity,
generation and export tests share (one place, so that a new model type is one row here)."""

from __future__ import annotations

import functools
import json

import pytest
import torch

transformers = pytest.importorskip("transformers")

from archcalc.codegen.emit import emit  # noqa: E402
from archcalc.hf import spec_from_hf_config  # noqa: E402
from archcalc.ir import lower  # noqa: E402
from archcalc.spec.bind import bind  # noqa: E402
from archcalc.spec.transform import fuse_projections  # noqa: E402
from tests.helpers import loaded  # noqa: E402

TOLERANCE = 1e-4
TINY = dict(vocab_size=97, hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, max_position_embeddings=64)
MOE = dict(num_local_experts=4, num_experts_per_tok=2)
GPT = dict(vocab_size=97, n_embd=32, n_layer=2, n_head=4)
T5 = dict(vocab_size=97, d_model=32, d_kv=6, d_ff=48, num_layers=2, num_decoder_layers=3, num_heads=4,
          relative_attention_num_buckets=8, relative_attention_max_distance=20)  # small buckets: the log-spaced ones are used

DEEPSEEK = dict(vocab_size=97, hidden_size=32, intermediate_size=48, moe_intermediate_size=12, num_hidden_layers=3,
                num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=64, q_lora_rank=8, kv_lora_rank=12,
                qk_rope_head_dim=4, qk_nope_head_dim=6, v_head_dim=5, n_routed_experts=16, num_experts_per_tok=3, n_group=4,
                topk_group=2, n_shared_experts=2, first_k_dense_replace=1, routed_scaling_factor=1.7)  # 1 dense, 2 MoE layers

LINEAR = dict(TINY, num_hidden_layers=4, head_dim=16, layer_types=["linear_attention", "full_attention", "linear_attention",
                                                                   "linear_attention"], linear_num_value_heads=4,
              linear_num_key_heads=2, linear_key_head_dim=8, linear_value_head_dim=6)  # Qwen3.5's and Qwen3-Next's hybrids

LINEAR_MOE = {k: v for k, v in LINEAR.items() if k != "intermediate_size"}  # Qwen3_5MoeTextConfig has no dense width

GEMMA4_LAYERS = [f"{kind}_attention" for kind in ("sliding", "sliding", "full", "sliding", "sliding", "sliding", "full")]

# model_type: (config class, its arguments, tokens per sequence)
CASES = {
    "llama": ("LlamaConfig", TINY, 11),
    "mistral": ("MistralConfig", {**TINY, "sliding_window": 5}, 13),  # longer than the window
    "qwen2": ("Qwen2Config", TINY, 11),
    "qwen3": ("Qwen3Config", {**TINY, "head_dim": 16}, 11),  # H x d_head = 64 != d = 32
    "ernie4_5": ("Ernie4_5Config", {**TINY, "head_dim": 8, "use_bias": True}, 11),  # interleaved rotary pairs
    "mixtral": ("MixtralConfig", {**TINY, **MOE}, 11),
    "olmoe": ("OlmoeConfig", {**TINY, **MOE}, 11),  # softmax over all experts, the chosen shares not renormalised
    "qwen2_moe": ("Qwen2MoeConfig", {**TINY, "num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 24,
                                      "shared_expert_intermediate_size": 40}, 11),  # a gated shared expert, qkv biases
    "qwen3_moe": ("Qwen3MoeConfig", {**TINY, **MOE, "head_dim": 16, "moe_intermediate_size": 24, "norm_topk_prob": True}, 11),
    "qwen2_moe-dense-layers": ("Qwen2MoeConfig", {**TINY, "num_hidden_layers": 3, "num_experts": 4, "num_experts_per_tok": 2,
                                                   "moe_intermediate_size": 24, "shared_expert_intermediate_size": 40,
                                                   "decoder_sparse_step": 2}, 11),  # dense, MoE, dense
    "qwen3_moe-dense-layers": ("Qwen3MoeConfig", {**TINY, **MOE, "num_hidden_layers": 3, "head_dim": 16, "moe_intermediate_size": 24,
                                                   "mlp_only_layers": [1]}, 11),  # MoE, dense, MoE
    "gpt2": ("GPT2Config", {**GPT, "n_positions": 64}, 11),
    "olmo2": ("Olmo2Config", TINY, 11),
    "phi3": ("Phi3Config", {**TINY, "pad_token_id": 0, "partial_rotary_factor": 0.5}, 11),
    "gpt_neox": ("GPTNeoXConfig", {**TINY, "num_key_value_heads": None, "rotary_pct": 0.25}, 11),
    "gpt_neox-odd-rotary": ("GPTNeoXConfig", {**TINY, "hidden_size": 48, "num_key_value_heads": None, "rotary_pct": 0.25}, 11),  # 12 x 0.25 = 3
    "gptj": ("GPTJConfig", {**GPT, "n_positions": 64, "rotary_dim": 4}, 11),
    "falcon": ("FalconConfig", {"vocab_size": 97, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4}, 11),
    "falcon-new": ("FalconConfig", {"vocab_size": 97, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4,
                                    "new_decoder_architecture": True, "num_kv_heads": 2}, 11),
    "starcoder2": ("Starcoder2Config", {**TINY, "sliding_window": 5}, 13),  # biases everywhere; longer than the window
    "phi": ("PhiConfig", {**TINY, "hidden_size": 80, "num_key_value_heads": None, "partial_rotary_factor": 0.4}, 11),  # Phi-2's 40% of a head
    "phi-qk": ("PhiConfig", {**TINY, "qk_layernorm": True, "layer_norm_eps": 1e-4}, 11),  # a LayerNorm over each head's q and k
    "gpt_bigcode": ("GPTBigCodeConfig", {**GPT, "n_positions": 64}, 11),  # multi-query: one key/value head in c_attn
    "gpt_bigcode-mha": ("GPTBigCodeConfig", {**GPT, "n_positions": 64, "multi_query": False}, 11),  # c_attn head by head
    "opt": ("OPTConfig", {"vocab_size": 97, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4, "ffn_dim": 48,
                          "max_position_embeddings": 64}, 11),  # positions read rows p + 2 of the table
    "opt-350m": ("OPTConfig", {"vocab_size": 97, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4, "ffn_dim": 48,
                               "max_position_embeddings": 64, "word_embed_proj_dim": 24, "do_layer_norm_before": False},
                 11),  # as OPT-350m: a 24-wide token table projected in and out, post-norm blocks, no final LayerNorm
    "stablelm": ("StableLmConfig", {**TINY, "use_qkv_bias": True}, 11),  # a quarter of each head rotated
    "stablelm-12b": ("StableLmConfig", {**TINY, "qk_layernorm": True, "use_parallel_residual": True, "layer_norm_eps": 1e-4},
                     11),  # as StableLM 2 12B: a LayerNorm per head over its q and k, one norm in a parallel block
    "gemma": ("GemmaConfig", {**TINY, "head_dim": 16}, 11),  # H x d_head = 64 != d = 32, as Gemma 7B's
    "gemma2": ("Gemma2Config", {**TINY, "head_dim": 8, "sliding_window": 5, "query_pre_attn_scalar": 16,
                                "attn_logit_softcapping": 2.0, "final_logit_softcapping": 3.0}, 13),
    "smollm3": ("SmolLM3Config", {**TINY, "no_rope_layer_interval": 2, "pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2}, 11),  # the second layer without rotary positions
    "granite": ("GraniteConfig", {**TINY, "embedding_multiplier": 3.0, "residual_multiplier": 0.5, "attention_multiplier": 0.3,
                                  "logits_scaling": 3.0}, 11),  # multipliers that change the logits
    "granitemoe": ("GraniteMoeConfig", {**TINY, **MOE, "embedding_multiplier": 3.0, "residual_multiplier": 0.5,
                                        "attention_multiplier": 0.3, "logits_scaling": 3.0}, 11),
    "cohere": ("CohereConfig", {**TINY, "logit_scale": 0.3, "pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2}, 11),
    "cohere-qk-norm": ("CohereConfig", {**TINY, "use_qk_norm": True, "layer_norm_eps": 1e-4, "tie_word_embeddings": False,
                                        "pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2}, 11),  # Command R+'s per-head QK-norms
    # five sliding layers (heads of 8) to one global (heads of 16), per-layer inputs of 4, soft-capped logits
    "gemma4_text": ("Gemma4TextConfig", {**TINY, "num_hidden_layers": 6, "head_dim": 8, "global_head_dim": 16, "sliding_window": 5,
                                         "hidden_size_per_layer_input": 4, "vocab_size_per_layer_input": 97,
                                         "final_logit_softcapping": 30.0}, 11),
    # as 31B: no per-layer inputs; on the global layer the values are the keys, with one key/value head of its own
    "gemma4_text-31b": ("Gemma4TextConfig", {**TINY, "num_hidden_layers": 6, "head_dim": 8, "global_head_dim": 16,
                                             "sliding_window": 5, "hidden_size_per_layer_input": 0, "attention_k_eq_v": True,
                                             "num_global_key_value_heads": 1, "final_logit_softcapping": 30.0}, 11),
    # as E2B: per-layer inputs, and the last 3 layers reuse the keys and values of the last earlier layer of their kind
    # (sliding: layer 3, global: layer 2), with twice the MLP's width and no cache of their own
    "gemma4_text-kv-shared": ("Gemma4TextConfig", {**TINY, "num_hidden_layers": 7, "head_dim": 8, "global_head_dim": 16,
                                                   "sliding_window": 5, "hidden_size_per_layer_input": 4,
                                                   "vocab_size_per_layer_input": 97, "num_kv_shared_layers": 3,
                                                   "use_double_wide_mlp": True, "layer_types": GEMMA4_LAYERS,
                                                   "final_logit_softcapping": 30.0}, 11),
    # as 26B-A4B: a mixture of experts beside every dense MLP (its own router, norms and scales), k_eq_v global layers
    "gemma4_text-moe": ("Gemma4TextConfig", {**TINY, "num_hidden_layers": 6, "head_dim": 8, "global_head_dim": 16,
                                             "sliding_window": 5, "hidden_size_per_layer_input": 0, "attention_k_eq_v": True,
                                             "num_global_key_value_heads": 1, "enable_moe_block": True, "num_experts": 4,
                                             "top_k_experts": 2, "moe_intermediate_size": 12,
                                             "final_logit_softcapping": 30.0}, 11),
    "gemma3_text": ("Gemma3TextConfig", {**TINY, "num_hidden_layers": 3, "head_dim": 8, "sliding_window": 5, "sliding_window_pattern": 3,
                                          "query_pre_attn_scalar": 12, "rope_scaling": {"rope_type": "linear", "factor": 4.0},
                                          "rope_theta": 40.0, "rope_local_base_freq": 15.0}, 13),  # local, local, global; own bases
    "llama4_text": ("Llama4TextConfig", {**TINY, "num_hidden_layers": 3, "head_dim": 8, "intermediate_size_mlp": 40, "num_local_experts": 4,
                                         "num_experts_per_tok": 1, "interleave_moe_layer_step": 2, "no_rope_layers": [1, 1, 0],
                                         "attention_chunk_size": 4, "floor_scale": 3}, 13),  # dense, MoE, dense; chunks of 4; NoPE last
    "llama4_text-scout": ("Llama4TextConfig", {**TINY, "num_hidden_layers": 3, "head_dim": 8, "num_local_experts": 4, "num_experts_per_tok": 1,
                                               "no_rope_layers": [1, 0, 1], "attention_chunk_size": 5, "floor_scale": 4}, 13),  # every layer MoE
    "gpt_oss": ("GptOssConfig", {**TINY, **MOE, "head_dim": 8, "sliding_window": 5,
                                 "rope_parameters": {"rope_type": "default", "rope_theta": 150000.0}}, 13),
    "t5": ("T5Config", T5, 11),  # T5 v1.0: ReLU, tied head with the d**-0.5 output scaling; H x d_kv = 24 != d = 32
    "t5-gated": ("T5Config", {**T5, "feed_forward_proj": "gated-gelu", "tie_word_embeddings": False}, 11),  # v1.1: GeGLU, no scaling
    "deepseek_v2": ("DeepseekV2Config", {**DEEPSEEK, "topk_method": "group_limited_greedy", "norm_topk_prob": False}, 11),
    "deepseek_v2-lite": ("DeepseekV2Config", {**DEEPSEEK, "q_lora_rank": None, "topk_method": "greedy", "n_group": 1,
                                              "topk_group": 1, "routed_scaling_factor": 1.0}, 11),  # no query compression
    "deepseek_v3": ("DeepseekV3Config", DEEPSEEK, 11),
    "deepseek_v3-plain-q": ("DeepseekV3Config", {**DEEPSEEK, "q_lora_rank": None, "attention_bias": True, "first_k_dense_replace": 2,
                                                  "norm_topk_prob": False, "n_group": 2, "topk_group": 1}, 11),
    "bloom": ("BloomConfig", {"vocab_size": 97, "hidden_size": 48, "n_layer": 2, "n_head": 6}, 11),  # 6 heads: ALiBi's extra slopes
    "mpt": ("MptConfig", {"vocab_size": 97, "d_model": 40, "n_layers": 2, "n_heads": 5, "max_seq_len": 64}, 11),  # 5 heads
    "mpt-scaled": ("MptConfig", {"vocab_size": 97, "d_model": 32, "n_layers": 2, "n_heads": 4, "max_seq_len": 64,
                                 "attn_config": {"softmax_scale": 0.2}}, 11),  # a score scale of its own
    "mamba": ("MambaConfig", {"vocab_size": 97, "hidden_size": 32, "num_hidden_layers": 2, "state_size": 8, "time_step_rank": 4,
                              "conv_kernel": 4}, 11),  # Mamba layers alone: no attention, no MLP; a tied head
    "falcon_mamba": ("FalconMambaConfig", {"vocab_size": 97, "hidden_size": 32, "num_hidden_layers": 2, "state_size": 8,
                                            "time_step_rank": 4, "conv_kernel": 4, "mixer_rms_eps": 1e-3}, 11),  # dt, B, C normed
    "mamba2": ("Mamba2Config", {"vocab_size": 97, "hidden_size": 32, "num_hidden_layers": 2, "state_size": 8, "num_heads": 4,
                                "head_dim": 16, "n_groups": 2, "conv_kernel": 4, "chunk_size": 4}, 11),  # 11 tokens: 3 chunks
    # nine Mamba2 layers, then attention: the bundled Bamba-9B's layer order up to its first attention layer
    "bamba": ("BambaConfig", {**TINY, "num_hidden_layers": 10, "attn_layer_indices": [9], "mamba_n_heads": 4, "mamba_d_head": 16,
                              "mamba_n_groups": 2, "mamba_d_state": 8, "mamba_chunk_size": 4}, 11),
    # Falcon-H1: attention and a Mamba2 mixer side by side in every layer (inner width 48, not expand · d; the gated
    # norm that normalises first), a head width of its own, every multiplier away from one
    "falcon_h1": ("FalconH1Config", {**TINY, "head_dim": 8, "mamba_d_ssm": 48, "mamba_n_heads": 4, "mamba_d_head": 12,
                                     "mamba_n_groups": 2, "mamba_d_state": 8, "mamba_chunk_size": 4, "mamba_rms_norm": True,
                                     "embedding_multiplier": 1.5, "lm_head_multiplier": 0.5, "attention_in_multiplier": 0.7,
                                     "attention_out_multiplier": 1.3, "key_multiplier": 0.6, "ssm_in_multiplier": 0.9,
                                     "ssm_out_multiplier": 1.4, "ssm_multipliers": [0.5, 1.2, 0.8, 1.1, 0.9],
                                     "mlp_multipliers": [0.8, 1.25]}, 11),
    # its class defaults' mixer: no gated norm, the scan's output times silu(z) alone
    "falcon_h1-plain": ("FalconH1Config", {**TINY, "mamba_d_ssm": None, "mamba_expand": 2, "mamba_n_heads": 4,
                                           "mamba_d_state": 8, "mamba_chunk_size": 4}, 11),
    # the bundled Jamba's layer order over six layers: Mamba layers with SwiGLU (0, 2) and with experts (1, 3, 5),
    # attention at 4; their dt, B and C normed with weights (tests/codegen/test_hybrids.py: all four kinds of layer)
    "jamba": ("JambaConfig", {**TINY, "num_hidden_layers": 6, "num_experts": 4, "num_experts_per_tok": 2, "mamba_d_state": 8,
                              "mamba_dt_rank": 4, "rms_norm_eps": 1e-5}, 11),
    "qwen3_5_text": ("Qwen3_5TextConfig", {**LINEAR}, 11),  # three Gated DeltaNet layers to one gated attention layer
    "qwen3_5_moe_text": ("Qwen3_5MoeTextConfig", {**LINEAR_MOE, "num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 24,
                                                  "shared_expert_intermediate_size": 40}, 11),  # and mixtures of experts
    "qwen3_next": ("Qwen3NextConfig", {**LINEAR, "num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 24,
                                       "shared_expert_intermediate_size": 40}, 11),  # their projections fused
    # Granite 4.0-H: the bundled order's first six layers (five Mamba2, then attention without positions), experts
    # beside a shared MLP, Granite's multipliers
    "granitemoehybrid": ("GraniteMoeHybridConfig", {**TINY, "num_hidden_layers": 6, "layer_types": ["mamba"] * 5 + ["attention"],
                                                    "num_local_experts": 4, "num_experts_per_tok": 2, "intermediate_size": 16,
                                                    "shared_intermediate_size": 24, "mamba_n_heads": 4, "mamba_d_head": 16,
                                                    "mamba_n_groups": 2, "mamba_d_state": 8, "mamba_chunk_size": 4,
                                                    "position_embedding_type": "nope", "embedding_multiplier": 3.0,
                                                    "residual_multiplier": 0.5, "attention_multiplier": 0.3,
                                                    "logits_scaling": 3.0}, 11),
    # its dense form (the shared MLP alone), rotary positions, the newer layer type names
    "granitemoehybrid-dense": ("GraniteMoeHybridConfig", {**TINY, "num_hidden_layers": 3, "num_local_experts": 0,
                                                          "layer_types": ["linear_attention", "full_attention", "linear_attention"],
                                                          "shared_intermediate_size": 24, "mamba_n_heads": 4, "mamba_d_head": 16,
                                                          "mamba_d_state": 8, "mamba_chunk_size": 4,
                                                          "position_embedding_type": "rope"}, 11),
    # short convolutions and attention by the older full_attn_idxs (the bundled LFM2's first six layers), the MLP's
    # width adjusted (48 -> 2/3 -> rounded up to 16: 32)
    "lfm2": ("Lfm2Config", {**TINY, "num_hidden_layers": 6, "full_attn_idxs": [2, 5], "block_multiple_of": 16,
                            "tie_word_embeddings": False}, 11),
    # LFM2-MoE: the first 7 of LFM2-8B-A1B's 24 layers (two dense convolutions lead; attention at 2 and 6), experts chosen
    # by sigmoid score (+ a bias), renormalised and scaled
    "lfm2_moe": ("Lfm2MoeConfig", {**TINY, "num_hidden_layers": 7, "num_dense_layers": 2, "num_experts": 4,
                                   "num_experts_per_tok": 2, "moe_intermediate_size": 12, "routed_scaling_factor": 1.5,
                                   "layer_types": ["full_attention" if i in (2, 6) else "conv" for i in range(7)]}, 11),
    # ... a dense attention layer first (the stack LFM2-8B-A1B has none of), the chosen scores not renormalised
    "lfm2_moe-dense-attention": ("Lfm2MoeConfig", {**TINY, "num_hidden_layers": 5, "num_dense_layers": 2, "num_experts": 4,
                                                   "num_experts_per_tok": 2, "moe_intermediate_size": 12, "norm_topk_prob": False,
                                                   "layer_types": ["full_attention", "conv", "conv", "full_attention", "conv"]},
                                 11),
    # AFMoE (Trinity): two dense layers, then experts (sigmoid + a learned bias, a shared expert); gated attention, three
    # sliding rotary layers to one full without positions, four norms a layer, muP
    "afmoe": ("AfmoeConfig", {**TINY, "num_hidden_layers": 6, "head_dim": 8, "num_dense_layers": 2, "num_experts": 4,
                              "num_experts_per_tok": 2, "num_shared_experts": 1, "moe_intermediate_size": 12,
                              "sliding_window": 5, "mup_enabled": True, "route_scale": 2.5}, 11),
    # LongCat-Flash: two latent attentions and MLPs a layer, the shortcut mixture's router choosing among 4 real and 3
    # zero-compute experts
    "longcat_flash": ("LongcatFlashConfig", {"vocab_size": 97, "hidden_size": 32, "num_layers": 2, "num_attention_heads": 4,
                                             "max_position_embeddings": 64, "q_lora_rank": 8, "kv_lora_rank": 12,
                                             "qk_rope_head_dim": 4, "head_dim": 4, "qk_nope_head_dim": 6, "v_head_dim": 5,
                                             "ffn_hidden_size": 48, "expert_ffn_hidden_size": 12, "n_routed_experts": 4,
                                             "zero_expert_num": 3, "moe_topk": 2}, 11),
    # Mamba2, experts and attention: the bundled Nemotron-3-Nano's pattern up to its first attention layer (MLP layers:
    # tests/codegen/test_hybrids.py); experts in two groups (a token's from the better one), scaled
    # Zamba2: ten Mamba2 layers, the seventh hybrid (the bundled layer order's first ten), every adapter, rotary
    # positions on the shared attention
    "zamba2": ("Zamba2Config", {"vocab_size": 97, "hidden_size": 32, "intermediate_size": 48, "num_hidden_layers": 10,
                                "layers_block_type": ["mamba"] * 6 + ["hybrid"] + ["mamba"] * 3,
                                "num_attention_heads": 4, "num_key_value_heads": 4, "n_mamba_heads": 4, "mamba_ngroups": 2,
                                "mamba_d_state": 8, "chunk_size": 4, "num_mem_blocks": 2, "adapter_rank": 4,
                                "use_shared_attention_adapter": True, "use_mem_rope": True, "max_position_embeddings": 64}, 11),
    "nemotron_h": ("NemotronHConfig", {"vocab_size": 97, "hidden_size": 32, "hybrid_override_pattern": "MEMEM*",
                                       "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 8,
                                       "intermediate_size": 48, "mamba_num_heads": 4, "mamba_head_dim": 16, "n_groups": 2,
                                       "ssm_state_size": 8, "chunk_size": 4, "n_routed_experts": 4, "num_experts_per_tok": 2,
                                       "moe_intermediate_size": 24, "moe_shared_expert_intermediate_size": 40, "n_group": 2,
                                       "topk_group": 1, "routed_scaling_factor": 1.7, "max_position_embeddings": 64}, 11),
    # GLM-4.5's MoE: one dense layer, then experts by sigmoid scores with a shared expert; QK-norms, biased q/k/v, half
    # of each head rotary
    "glm4_moe": ("Glm4MoeConfig", {**TINY, "num_hidden_layers": 3, "head_dim": 16, "first_k_dense_replace": 1, "n_routed_experts": 4,
                                   "num_experts_per_tok": 2, "moe_intermediate_size": 16, "n_shared_experts": 1,
                                   "routed_scaling_factor": 2.5, "use_qk_norm": True, "attention_bias": True}, 11),
    # MiniMax-M2: QK-norms over all heads, a quarter of each head rotary (rotary_dim), experts by sigmoid scores
    "minimax_m2": ("MiniMaxM2Config", {**TINY, "head_dim": 8, "rotary_dim": 4, "num_local_experts": 4, "num_experts_per_tok": 2,
                                       "intermediate_size": 16}, 11),
    # Seed-OSS: biases on q, k and v but not on the output projection (two keys); H x d_head = 64 != d = 32
    "seed_oss": ("SeedOssConfig", {**TINY, "head_dim": 16}, 11),
    # GLM-4.7-Flash: DeepSeek's latent attention and experts, the dense layers by mlp_layer_types
    "glm4_moe_lite": ("Glm4MoeLiteConfig", {**{k: v for k, v in DEEPSEEK.items() if k != "first_k_dense_replace"},
                                            "mlp_layer_types": ["dense", "sparse", "sparse"]}, 11),
    # OLMo 3: OLMo 2's blocks, three sliding layers to one full (the bundled pattern); the full layers' rotary set scaled
    "olmo3": ("Olmo3Config", {**TINY, "num_hidden_layers": 4, "sliding_window": 5,
                              "rope_scaling": {"rope_type": "linear", "factor": 4.0}}, 13),
    # Arcee AFM: a MLP without a gate (up, squared ReLU, down); H x d_head = 64 != d = 32
    "arcee": ("ArceeConfig", {**TINY, "head_dim": 16, "bos_token_id": 1, "eos_token_id": 2}, 11),
    # EXAONE 4: three sliding layers with rotary positions, then a global one without (the bundled pattern); norms after
    # the sublayers, QK-norm per head
    "exaone4": ("Exaone4Config", {**TINY, "num_hidden_layers": 4, "head_dim": 16, "sliding_window": 5}, 13),
    # DeepSeek-V3.2: DeepSeek-V3 with an indexer choosing each query's 3 best earlier keys (16 heads: a score of exactly 0,
    # every head's relu 0, is rare, so no tie among scores decides which keys, in transformers either)
    "deepseek_v32": ("DeepseekV32Config", {**DEEPSEEK, "index_n_heads": 16, "index_head_dim": 8, "index_topk": 3}, 11),
    # GLM-5: the same, its indexer rotating the attention's interleaved pairs (every layer its own indexer)
    "glm_moe_dsa": ("GlmMoeDsaConfig", {**DEEPSEEK, "n_group": 1, "topk_group": 1, "index_n_heads": 16, "index_head_dim": 8,
                                        "index_topk": 3}, 11),
    # Command R7B: Command R's parallel block; three sliding layers with rotary positions, then a global one without
    "cohere2": ("Cohere2Config", {**TINY, "num_hidden_layers": 4, "sliding_window": 5, "logit_scale": 0.3, "pad_token_id": 0,
                                  "bos_token_id": 1, "eos_token_id": 2}, 13),
    # Apertus: a MLP without a gate whose xIELU has two learnable scalars (alpha_p, alpha_n: loaded, exported); QK-norm
    "apertus": ("ApertusConfig", {**TINY, "pad_token_id": 0}, 11),
    # ERNIE 4.5 MoE: a dense layer, then experts chosen by softmax share plus a learned bias (moe_statics), a shared
    # expert; interleaved rotary pairs
    "ernie4_5_moe": ("Ernie4_5_MoeConfig", {**TINY, "num_hidden_layers": 3, "moe_num_experts": 4, "moe_k": 2,
                                            "moe_intermediate_size": 12, "moe_num_shared_experts": 1}, 11),
    # ... its layers by start, end and interval: MoE, dense, MoE, dense (a layer order), no shared experts
    "ernie4_5_moe-interval": ("Ernie4_5_MoeConfig", {**TINY, "num_hidden_layers": 4, "moe_num_experts": 4, "moe_k": 2,
                                                     "moe_intermediate_size": 12, "moe_num_shared_experts": 0,
                                                     "moe_layer_start_index": 0, "moe_layer_end_index": 2,
                                                     "moe_layer_interval": 2}, 11),
    # Ministral 3: yarn rotary and every layer's query temperature, 1 + beta * log(1 + floor(p / 4)): p counted from 0
    "ministral3": ("Ministral3Config", {**TINY, "head_dim": 8, "rope_parameters": {
        "rope_type": "yarn", "rope_theta": 1000000.0, "factor": 4.0, "original_max_position_embeddings": 4, "beta_fast": 32.0,
        "beta_slow": 1.0, "mscale": 1.0, "mscale_all_dim": 1.0, "llama_4_scaling_beta": 0.5}}, 13),
    # Mistral 4: DeepSeek's latent attention and shared expert, a softmax over all experts (the best 2 of 4 groups), yarn
    # on the rotary part (partial_rotary_factor 4 / 10 of head_dim), every layer's query temperature
    "mistral4": ("Mistral4Config", {**DEEPSEEK, "norm_topk_prob": True, "rope_parameters": {
        "rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0, "original_max_position_embeddings": 4, "beta_fast": 32.0,
        "beta_slow": 1.0, "mscale": 1.0, "mscale_all_dim": 1.0, "llama_4_scaling_beta": 0.5}}, 13),
    # ... its interleave off (half pairs), no query compression, no groups, all layers MoE
    "mistral4-plain-q": ("Mistral4Config", {**DEEPSEEK, "q_lora_rank": None, "rope_interleave": False, "first_k_dense_replace": 0,
                                            "n_group": 1, "topk_group": 1, "rope_parameters": {
        "rope_type": "yarn", "rope_theta": 10000.0, "factor": 2.0, "original_max_position_embeddings": 4,
        "llama_4_scaling_beta": 0.3}}, 11),
    "bert": ("BertConfig", {"vocab_size": 97, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4,
                            "intermediate_size": 48, "max_position_embeddings": 64}, 11),
}


# the cases whose spec has multi-token prediction modules (model.mtp; generated with --with-mtp: test_mtp.py)
MTP_CASES = ("deepseek_v3", "deepseek_v32", "glm_moe_dsa", "glm4_moe", "glm4_moe_lite")


# model_type: what codegen's UnsupportedError says for it (its tiny model imports, counts and exports; the parity tests
# check the refusal and mark the case xfail)
UNGENERATED: dict[str, str] = {}


# model_type: what codegen's UnsupportedError says for some of its configs (not the tiny case's): those xfail, with it
PARTLY_GENERATED = {"zamba2": "codegen generates Zamba2's shared blocks tied only"}


def refused(model_type: str, generate) -> None:
    """Where codegen refuses ``model_type``, or this config of it: check that ``generate()`` says why, then xfail the
    test."""
    from archcalc.codegen.errors import UnsupportedError

    if model_type in UNGENERATED:
        with pytest.raises(UnsupportedError, match=UNGENERATED[model_type]):
            generate()
        pytest.xfail(f"codegen refuses {model_type}: {UNGENERATED[model_type]}")
    if model_type in PARTLY_GENERATED:
        try:
            generate()
        except UnsupportedError as e:
            if PARTLY_GENERATED[model_type] not in str(e):
                raise
            pytest.xfail(f"codegen refuses this {model_type} config: {e}")


def configs(case: str):
    name, kwargs, seq = CASES[case]
    config = getattr(transformers, name)(**{k: v for k, v in kwargs.items() if v is not None})
    return config, seq


def build_hf(config, **causal_kwargs):
    """The transformers model a config names: BertModel with its pooler, T5ForConditionalGeneration, else the
    causal LM (built with ``causal_kwargs``)."""
    if config.model_type == "bert":
        return transformers.BertModel(config, add_pooling_layer=True)
    if config.model_type == "t5":
        return transformers.T5ForConditionalGeneration(config)
    if type(config) not in transformers.AutoModelForCausalLM._model_mapping:  # Mistral 4's: not in the auto mapping
        from archcalc.hf.build import family_of

        return getattr(transformers, family_of(config.model_type).hf_class)._from_config(config, **causal_kwargs)
    return transformers.AutoModelForCausalLM.from_config(config, **causal_kwargs)


def hf_model(config):
    torch.manual_seed(0)
    model = build_hf(config, attn_implementation="eager")
    with torch.no_grad():
        for p in model.parameters():  # off the ones/zeros of the initialisation, so every tensor matters
            p.add_(torch.randn_like(p) * 0.1)
        for name, b in model.named_buffers():  # DeepSeek-V3's routing bias (zero-initialised) must be loaded too
            if name.endswith("e_score_correction_bias"):
                b.add_(torch.randn_like(b) * 0.1)
    return model.eval()


def generated(config, fused: bool = False):
    """The module archcalc generates from ``config`` (emitted and imported once per process and config)."""
    refused(config.model_type, lambda: _generated(config.to_json_string(use_diff=False), fused))
    return _generated(config.to_json_string(use_diff=False), fused)


@functools.cache
def _generated(config_json: str, fused: bool):
    spec = spec_from_hf_config(json.loads(config_json), "tiny.json")
    spec = fuse_projections(spec) if fused else spec
    return loaded(emit(lower(bind(spec, next(iter(spec.sizes)))), "test"))


def rel(ours: torch.Tensor, theirs: torch.Tensor) -> float:
    return ((ours - theirs).abs().max() / theirs.abs().max()).item()
