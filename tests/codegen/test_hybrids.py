"""The generated hybrids of state mixers and attention (issue 28), each against the transformers model it is:
Bamba's Mamba2 layers (three to one attention layer, rotary positions on half of each head); Jamba's Mamba layers
(their dt, B and C RMS-normed with weights) and attention layers without positions, each with SwiGLU or experts; Qwen3.5's Gated DeltaNet
layers (three to one gated attention layer with QK-norms, a quarter of each head rotary, norms that scale by
1 + weight); Qwen3-Next's (the same with its projections fused key head by key head, and mixtures of experts with a
gated shared expert); LFM2's gated short convolutions beside attention layers with QK-norms; Granite 4.0-H's
Mamba2 and attention layers with experts beside a shared MLP and Granite's multipliers; Zamba2's Mamba2 layers, some
running one of two shared transformer blocks first, with adapters of their own. Each module loads the
transformers model's weights and gives its logits (below and above the chunk size) and its greedy tokens; the prompt
then single tokens continue one forward; its parameters are ``archcalc count``'s and transformers'; its weights export
back unchanged; its cache holds what ``archcalc memory`` counts; FlopCounterMode on a forward counts ``archcalc
flops``' forward."""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass

import pytest

from archcalc.backends.count import count_size
from archcalc.backends.flops import flops
from archcalc.backends.memory import memory
from archcalc.codegen.emit import emit
from archcalc.ir import lower
from archcalc.spec import load_spec_text
from archcalc.spec.bind import bind
from tests.helpers import cache_bytes, generate_keeping_cache, loaded

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

V, D, Q = 97, 32, 4  # vocabulary, width, chunk of the chunked scans
TOLERANCE = 1e-4

BAMBA = """
name: tiny_bamba
hyperparameters:
  V: {doc: vocabulary}
  La: {doc: attention layers (one in four)}
  d: {doc: width}
  N: {doc: state size}
  Q: {doc: chunk size}
model:
  embedding: {vocab: V, width: d, position: {kind: rotary, base: 10000, rotary_fraction: 1/2}}
  blocks:
    - name: mamba_blocks
      repeat: 3 * La
      norm: {kind: rmsnorm, eps: 1e-5}
      mixer: {kind: mamba2, inner: 2 * d, state: N, conv: 4, heads: 4, groups: 2, chunk: Q}
      mlp: {kind: gated, hidden: 48, activation: silu, bias: false}
    - name: blocks
      repeat: La
      norm: {kind: rmsnorm, eps: 1e-5}
      attention: {heads: 4, kv_heads: 2, head_width: d / 4, qkv_bias: false, out_bias: false, layout: separate}
      mlp: {kind: gated, hidden: 48, activation: silu, bias: false}
  layer_order: [mamba_blocks, mamba_blocks, mamba_blocks, blocks]
  final_norm: {kind: rmsnorm, eps: 1e-5}
  head: {tied: false}
hf: {model_type: bamba, weights: bamba}
sizes:
  x: {V: 97, La: 1, d: 32, N: 8, Q: 4}
"""

QWEN3_5 = """
name: tiny_qwen3_5
hyperparameters:
  V: {doc: vocabulary}
  La: {doc: attention layers (one in four)}
  d: {doc: width}
  Q: {doc: chunk size}
model:
  embedding: {vocab: V, width: d, position: {kind: rotary, base: 10000, rotary_fraction: 1/4}}
  blocks:
    - name: delta_blocks
      repeat: 3 * La
      norm: {kind: rmsnorm, eps: 1e-6, unit_offset: true}
      mixer: {kind: gated_deltanet, heads: 4, key_heads: 2, key_width: 8, value_width: 12, conv: 4, chunk: Q}
      mlp: {kind: gated, hidden: 48, activation: silu, bias: false}
    - name: blocks
      repeat: La
      norm: {kind: rmsnorm, eps: 1e-6, unit_offset: true}
      attention: {heads: 4, kv_heads: 2, head_width: 16, qkv_bias: false, out_bias: false, layout: separate,
                  output_gate: true, qk_norm: {kind: rmsnorm, eps: 1e-6, unit_offset: true}}
      mlp: {kind: gated, hidden: 48, activation: silu, bias: false}
  layer_order: [delta_blocks, delta_blocks, delta_blocks, blocks]
  final_norm: {kind: rmsnorm, eps: 1e-6, unit_offset: true}
  head: {tied: false}
hf: {model_type: qwen3_5_text, weights: qwen3_5}
sizes:
  x: {V: 97, La: 1, d: 32, Q: 4}
"""

MOE = ("{kind: moe, hidden: 16, activation: silu, bias: false, experts: 4, top_k: 2, expert_kind: gated, router_bias: false, "
       "shared_experts: 1, shared_hidden: 24, shared_gate: true, normalize: true}")
# Qwen3-Next's: the fused projections, mixtures of experts
QWEN3_NEXT = QWEN3_5.replace("conv: 4, chunk: Q}", "conv: 4, chunk: Q, layout: fused}").replace(
    "{kind: gated, hidden: 48, activation: silu, bias: false}", MOE).replace(
    "hf: {model_type: qwen3_5_text, weights: qwen3_5}", "hf: {model_type: qwen3_next, weights: qwen3_next}")

LFM2 = """
name: tiny_lfm2
hyperparameters:
  V: {doc: vocabulary}
  d: {doc: width}
model:
  embedding: {vocab: V, width: d, position: {kind: rotary, base: 1000000}}
  blocks:
    - name: conv_blocks
      repeat: 3
      norm: {kind: rmsnorm, eps: 1e-5}
      mixer: {kind: short_conv, conv: 3}
      mlp: {kind: gated, hidden: 64, activation: silu, bias: false}
    - name: blocks
      repeat: 2
      norm: {kind: rmsnorm, eps: 1e-5}
      attention: {heads: 4, kv_heads: 2, head_width: 8, qkv_bias: false, out_bias: false, layout: separate,
                  qk_norm: {kind: rmsnorm, eps: 1e-5}}
      mlp: {kind: gated, hidden: 64, activation: silu, bias: false}
  layer_order: [conv_blocks, conv_blocks, blocks, conv_blocks, blocks]
  final_norm: {kind: rmsnorm, eps: 1e-5}
  head: {tied: true}
hf: {model_type: lfm2, weights: lfm2}
sizes:
  x: {V: 97, d: 32}
"""

# Nemotron-H's four kinds of layer, each one norm and one operator: Mamba2 (its prompt's step sizes clamped at 0.001),
# experts (squared ReLU, DeepSeek-V3's routing in two groups, a shared expert), attention without positions, an MLP
# alone (squared ReLU), then Mamba2 again: the pattern ME*-M
NEMOTRON_H = """
name: tiny_nemotron_h
hyperparameters:
  V: {doc: vocabulary}
  d: {doc: width}
  Q: {doc: chunk size}
model:
  embedding: {vocab: V, width: d, position: {kind: none}}
  blocks:
    - name: mamba_blocks
      repeat: 2
      norm: {kind: rmsnorm, eps: 1e-5}
      mixer: {kind: mamba2, inner: 2 * d, state: 8, conv: 4, heads: 4, groups: 2, chunk: Q, dt_min: 0.001}
    - name: blocks
      repeat: 1
      norm: {kind: rmsnorm, eps: 1e-5}
      attention: {heads: 4, kv_heads: 2, head_width: 8, qkv_bias: false, out_bias: false, layout: separate}
    - name: mlp_blocks
      repeat: 1
      norm: {kind: rmsnorm, eps: 1e-5}
      mlp: {kind: dense, hidden: 48, activation: relu2, bias: false}
    - name: moe_blocks
      repeat: 1
      norm: {kind: rmsnorm, eps: 1e-5}
      mlp: {kind: moe, hidden: 24, activation: relu2, bias: false, experts: 4, top_k: 2, expert_kind: dense,
            router_bias: false, shared_experts: 1, shared_hidden: 40, scoring: sigmoid, groups: 2, group_top_k: 1,
            normalize: true, routed_scale: 1.7}
  layer_order: [mamba_blocks, moe_blocks, blocks, mlp_blocks, mamba_blocks]
  final_norm: {kind: rmsnorm, eps: 1e-5}
  head: {tied: false}
hf: {model_type: nemotron_h, weights: nemotron_h}
sizes:
  x: {V: 97, d: 32, Q: 4}
"""

JAMBA_MOE = "{kind: moe, hidden: 24, activation: silu, bias: false, experts: 4, top_k: 2, expert_kind: gated, router_bias: false, normalize: false}"
JAMBA_MIXER = "{kind: mamba, inner: 2 * d, state: N, conv: 4, dt_rank: 4, dt_bc_norm: 1e-5, dt_bc_norm_weights: true}"
# Jamba's four kinds of layer: Mamba or attention (no positions), each with SwiGLU or experts (the top 2 of 4, their
# softmax shares not renormalised); dt, B and C of the Mamba layers RMS-normed with weights
JAMBA = f"""
name: tiny_jamba
hyperparameters:
  V: {{doc: vocabulary}}
  d: {{doc: width}}
  N: {{doc: state size}}
model:
  embedding: {{vocab: V, width: d, position: {{kind: none}}}}
  blocks:
    - name: mamba_blocks
      repeat: 2
      norm: {{kind: rmsnorm, eps: 1e-5}}
      mixer: {JAMBA_MIXER}
      mlp: {{kind: gated, hidden: 24, activation: silu, bias: false}}
    - name: mambamoe_blocks
      repeat: 2
      norm: {{kind: rmsnorm, eps: 1e-5}}
      mixer: {JAMBA_MIXER}
      mlp: {JAMBA_MOE}
    - name: blocks
      repeat: 1
      norm: {{kind: rmsnorm, eps: 1e-5}}
      attention: {{heads: 4, kv_heads: 2, head_width: 8, qkv_bias: false, out_bias: false, layout: separate}}
      mlp: {{kind: gated, hidden: 24, activation: silu, bias: false}}
    - name: moe_blocks
      repeat: 1
      norm: {{kind: rmsnorm, eps: 1e-5}}
      attention: {{heads: 4, kv_heads: 2, head_width: 8, qkv_bias: false, out_bias: false, layout: separate}}
      mlp: {JAMBA_MOE}
  layer_order: [mambamoe_blocks, blocks, mambamoe_blocks, mamba_blocks, moe_blocks, mamba_blocks]
  final_norm: {{kind: rmsnorm, eps: 1e-5}}
  head: {{tied: false}}
  init: {{mixer: plain}}
hf: {{model_type: jamba, weights: jamba}}
sizes:
  x: {{V: 97, d: 32, N: 8}}
"""

GRANITE_MOE = ("{kind: moe, hidden: 16, activation: silu, bias: false, experts: 4, top_k: 2, expert_kind: gated, "
               "router_bias: false, shared_experts: 1, shared_hidden: 24}")
GRANITE = f"""
name: tiny_granitemoehybrid
hyperparameters:
  V: {{doc: vocabulary}}
  d: {{doc: width}}
  N: {{doc: state size}}
model:
  embedding: {{vocab: V, width: d, position: {{kind: none}}, multiplier: 3.0}}
  blocks:
    - name: mamba_blocks
      repeat: 2
      residual_multiplier: 0.5
      norm: {{kind: rmsnorm, eps: 1e-5}}
      mixer: {{kind: mamba2, inner: 2 * d, state: N, conv: 4, heads: 4, groups: 2, chunk: 4}}
      mlp: {GRANITE_MOE}
    - name: blocks
      repeat: 1
      residual_multiplier: 0.5
      norm: {{kind: rmsnorm, eps: 1e-5}}
      attention: {{heads: 4, kv_heads: 2, head_width: 8, qkv_bias: false, out_bias: false, layout: separate, scale: 0.3}}
      mlp: {GRANITE_MOE}
  layer_order: [mamba_blocks, blocks, mamba_blocks]
  final_norm: {{kind: rmsnorm, eps: 1e-5}}
  head: {{tied: false, multiplier: 1 / 3}}
  init: {{mixer: plain}}
hf: {{model_type: granitemoehybrid, weights: granitemoehybrid}}
sizes:
  x: {{V: 97, d: 32, N: 8}}
"""

# Falcon-H1: attention and a Mamba2 mixer side by side in every layer, its multipliers (the attention's and the mixer's
# input and output, the keys', in_proj's five parts', the MLP's gate and output, the embeddings' and the logits')
FALCON_H1 = """
name: tiny_falcon_h1
hyperparameters:
  V: {doc: vocabulary}
  d: {doc: width}
  Q: {doc: chunk size}
model:
  embedding: {vocab: V, width: d, position: {kind: rotary, base: 10000}, multiplier: 1.5}
  block:
    repeat: 2
    norm: {kind: rmsnorm, eps: 1e-5}
    attention: {heads: 4, kv_heads: 2, head_width: 8, qkv_bias: false, out_bias: false, layout: separate,
                in_multiplier: 0.7, out_multiplier: 1.3, key_multiplier: 0.6}
    mixer: {kind: mamba2, inner: 48, state: 8, conv: 4, heads: 4, groups: 2, chunk: Q, bias: false, out_bias: false,
            norm_before_gate: true, in_proj_multipliers: [0.5, 1.2, 0.8, 1.1, 0.9], in_multiplier: 0.9,
            out_multiplier: 1.4}
    mlp: {kind: gated, hidden: 48, activation: silu, bias: false, gate_multiplier: 0.8, down_multiplier: 1.25}
  final_norm: {kind: rmsnorm, eps: 1e-5}
  head: {tied: false, multiplier: 0.5}
  init: {mixer: plain}
hf: {model_type: falcon_h1, weights: falcon_h1}
sizes:
  x: {V: 97, d: 32, Q: 4}
"""

ZAMBA2 = """
name: tiny_zamba2
hyperparameters:
  V: {doc: vocabulary}
  d: {doc: width}
  Q: {doc: chunk size}
model:
  embedding: {vocab: V, width: d, position: {kind: none}}
  blocks:
    - name: mamba_blocks
      repeat: 2
      norm: {kind: rmsnorm, eps: 1e-5}
      mixer: {kind: mamba2, inner: 2 * d, state: 8, conv: 4, heads: 4, groups: 2, chunk: Q, bias: false, conv_bias: true,
              dt_min: 1e-9, norm_eps: 1e-5}
    - name: hybrid_blocks
      repeat: 4
      norm: {kind: rmsnorm, eps: 1e-5}
      mixer: {kind: mamba2, inner: 2 * d, state: 8, conv: 4, heads: 4, groups: 2, chunk: Q, bias: false, conv_bias: true,
              dt_min: 1e-9, norm_eps: 1e-5}
      shared:
        copies: 2
        attention: {heads: 4, head_width: 2 * d / 4, qkv_bias: false, out_bias: false, layout: separate,
                    scale_width: d / 4}
        mlp: {kind: gated, hidden: 48, activation: gelu, bias: false, layout: fused}
        adapter_rank: 4
        attention_adapters: true
  layer_order: [mamba_blocks, hybrid_blocks, hybrid_blocks]
  final_norm: {kind: rmsnorm, eps: 1e-5}
  head: {tied: true}
  init: {mixer: plain}
hf: {model_type: zamba2, weights: zamba2}
sizes:
  x: {V: 97, d: 32, Q: 4}
"""

LINEAR = dict(vocab_size=V, hidden_size=D, num_hidden_layers=4, layer_types=["linear_attention"] * 3 + ["full_attention"],
              num_attention_heads=4, num_key_value_heads=2, head_dim=16, linear_num_value_heads=4, linear_num_key_heads=2,
              linear_key_head_dim=8, linear_value_head_dim=12, linear_conv_kernel_dim=4, tie_word_embeddings=False,
              rms_norm_eps=1e-6)
NO_TOKENS = dict(eos_token_id=None, pad_token_id=None, bos_token_id=None)


def _bamba():
    return transformers.BambaForCausalLM(transformers.BambaConfig(
        vocab_size=V, hidden_size=D, num_hidden_layers=4, attn_layer_indices=[3], num_attention_heads=4,
        num_key_value_heads=2, intermediate_size=48, mamba_n_heads=4, mamba_d_head=2 * D // 4, mamba_n_groups=2,
        mamba_d_state=8, mamba_d_conv=4, mamba_expand=2, mamba_chunk_size=Q, tie_word_embeddings=False,
        rms_norm_eps=1e-5, **NO_TOKENS))


def _jamba():
    return transformers.JambaForCausalLM(transformers.JambaConfig(
        vocab_size=V, hidden_size=D, num_hidden_layers=6, attn_layer_period=3, attn_layer_offset=1, expert_layer_period=2,
        expert_layer_offset=0, num_attention_heads=4, num_key_value_heads=2, intermediate_size=24, num_experts=4,
        num_experts_per_tok=2, mamba_d_state=8, mamba_d_conv=4, mamba_expand=2, mamba_dt_rank=4, tie_word_embeddings=False,
        rms_norm_eps=1e-5, **NO_TOKENS))


def _nemotron_h():
    return transformers.NemotronHForCausalLM(transformers.NemotronHConfig(
        vocab_size=V, hidden_size=D, hybrid_override_pattern="ME*-M", num_attention_heads=4, num_key_value_heads=2,
        head_dim=8, intermediate_size=48, mamba_num_heads=4, mamba_head_dim=2 * D // 4, n_groups=2, ssm_state_size=8,
        conv_kernel=4, chunk_size=Q, n_routed_experts=4, num_experts_per_tok=2, moe_intermediate_size=24,
        moe_shared_expert_intermediate_size=40, n_group=2, topk_group=1, routed_scaling_factor=1.7,
        layer_norm_epsilon=1e-5, **NO_TOKENS))


def _qwen3_5():
    return transformers.Qwen3_5ForCausalLM(transformers.Qwen3_5TextConfig(**LINEAR, intermediate_size=48, **NO_TOKENS))


def _qwen3_next():
    return transformers.Qwen3NextForCausalLM(transformers.Qwen3NextConfig(
        **LINEAR, partial_rotary_factor=0.25, rope_theta=10000.0, num_experts=4, num_experts_per_tok=2,
        moe_intermediate_size=16, norm_topk_prob=True, shared_expert_intermediate_size=24, intermediate_size=48,
        **NO_TOKENS))


def _lfm2():
    return transformers.Lfm2ForCausalLM(transformers.Lfm2Config(
        vocab_size=V, hidden_size=D, num_hidden_layers=5, layer_types=["conv", "conv", "full_attention", "conv",
                                                                       "full_attention"],
        num_attention_heads=4, num_key_value_heads=2, intermediate_size=64, block_auto_adjust_ff_dim=False,
        conv_L_cache=3, norm_eps=1e-5, tie_word_embeddings=True, **NO_TOKENS))


def _granite():
    return transformers.GraniteMoeHybridForCausalLM(transformers.GraniteMoeHybridConfig(
        vocab_size=V, hidden_size=D, num_hidden_layers=3, layer_types=["mamba", "attention", "mamba"],
        num_attention_heads=4, num_key_value_heads=2, intermediate_size=16, shared_intermediate_size=24,
        num_local_experts=4, num_experts_per_tok=2, mamba_n_heads=4, mamba_d_head=2 * D // 4, mamba_n_groups=2,
        mamba_d_state=8, mamba_d_conv=4, mamba_chunk_size=Q, embedding_multiplier=3.0, residual_multiplier=0.5,
        attention_multiplier=0.3, logits_scaling=3.0, position_embedding_type="nope", tie_word_embeddings=False,
        rms_norm_eps=1e-5, **NO_TOKENS))


def _falcon_h1():
    return transformers.FalconH1ForCausalLM(transformers.FalconH1Config(
        vocab_size=V, hidden_size=D, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=8,
        intermediate_size=48, mamba_d_ssm=48, mamba_n_heads=4, mamba_d_head=12, mamba_n_groups=2, mamba_d_state=8,
        mamba_d_conv=4, mamba_chunk_size=Q, mamba_rms_norm=True, mamba_norm_before_gate=True, embedding_multiplier=1.5,
        lm_head_multiplier=0.5, attention_in_multiplier=0.7, attention_out_multiplier=1.3, key_multiplier=0.6,
        ssm_in_multiplier=0.9, ssm_out_multiplier=1.4, ssm_multipliers=[0.5, 1.2, 0.8, 1.1, 0.9],
        mlp_multipliers=[0.8, 1.25], tie_word_embeddings=False, rms_norm_eps=1e-5, **NO_TOKENS))


def _zamba2():
    """Two shared blocks for four hybrid layers (each block run by two, its adapter lists under both), every adapter,
    no rotary positions; a least step size of 1e-9 (as good as none: a prompt's steps are what single tokens' are)."""
    return transformers.Zamba2ForCausalLM(transformers.Zamba2Config(
        vocab_size=V, hidden_size=D, intermediate_size=48, num_hidden_layers=6,
        layers_block_type=["mamba", "hybrid", "hybrid"] * 2, num_attention_heads=4, num_key_value_heads=4,
        n_mamba_heads=4, mamba_ngroups=2, mamba_d_state=8, chunk_size=Q, num_mem_blocks=2, adapter_rank=4,
        use_shared_attention_adapter=True, use_mem_rope=False, time_step_min=1e-9, rms_norm_eps=1e-5, **NO_TOKENS))


@dataclass(frozen=True)
class Hybrid:
    spec: str
    hf: Callable  # transformers' model of the same config
    caches: tuple[str, ...]  # the cache of each layer, in the order they run
    state: int  # the mixers' state bytes for one sequence in float32: their conv windows and states
    kv: int  # the attention layers' key and value bytes for one token of one sequence in float32


CASES = {
    # C = 2·d + 2·G·N conv channels, 3 of their inputs kept, and H heads of an N x (2·d / H) state: 3 layers
    "bamba": Hybrid(BAMBA, _bamba, ("MixerCache",) * 3 + ("KVCache",), 3 * ((2 * D + 2 * 2 * 8) * 3 + 2 * D * 8) * 4,
                    2 * 2 * 8 * 4),
    # I = 2·d inner channels, 3 of their inputs kept, and an N-wide state each: 4 Mamba layers; 2 attention layers
    "jamba": Hybrid(JAMBA, _jamba, ("MixerCache", "KVCache", "MixerCache", "MixerCache", "KVCache", "MixerCache"),
                    4 * (2 * D * 3 + 2 * D * 8) * 4, 2 * 2 * 2 * 8 * 4),
    # C = 2·Hk·Dk + H·Dv conv channels, 3 of their inputs kept, and a Dk x Dv state per value head: 3 layers
    "qwen3_5": Hybrid(QWEN3_5, _qwen3_5, ("MixerCache",) * 3 + ("KVCache",), 3 * ((2 * 2 * 8 + 4 * 12) * 3 + 4 * 8 * 12) * 4,
                      2 * 2 * 16 * 4),
    "qwen3_next": Hybrid(QWEN3_NEXT, _qwen3_next, ("MixerCache",) * 3 + ("KVCache",),
                         3 * ((2 * 2 * 8 + 4 * 12) * 3 + 4 * 8 * 12) * 4, 2 * 2 * 16 * 4),
    # d conv channels, 2 of their inputs kept, nothing else: 3 layers; 2 attention layers
    "lfm2": Hybrid(LFM2, _lfm2, ("MixerCache", "MixerCache", "KVCache", "MixerCache", "KVCache"), 3 * D * 2 * 4,
                   2 * 2 * 2 * 8 * 4),
    # two Mamba2 layers as Bamba's (C = 2·d + 2·G·N conv channels, an N x (2·d / H) state per head); the expert and MLP
    # layers keep nothing; one attention layer
    "nemotron_h": Hybrid(NEMOTRON_H, _nemotron_h, ("MixerCache", "NoneType", "KVCache", "NoneType", "MixerCache"),
                         2 * ((2 * D + 2 * 2 * 8) * 3 + 2 * D * 8) * 4, 2 * 2 * 8 * 4),
    # Bamba's Mamba2 layers (two) and one attention layer without positions, each with experts beside a shared MLP,
    # Granite's multipliers
    "granitemoehybrid": Hybrid(GRANITE, _granite, ("MixerCache", "KVCache", "MixerCache"),
                               2 * ((2 * D + 2 * 2 * 8) * 3 + 2 * D * 8) * 4, 2 * 2 * 8 * 4),
    # both layers keep both: a Mamba2 state (C = 48 + 2·G·N conv channels, 3 of their inputs kept, an N x (48 / H)
    # state per head) and the keys and values of 2 key/value heads of 8
    "falcon_h1": Hybrid(FALCON_H1, _falcon_h1, ("ParallelCache",) * 2, 2 * ((48 + 2 * 2 * 8) * 3 + 48 * 8) * 4,
                        2 * 2 * 2 * 8 * 4),
    # every layer a Mamba2 state (C = 2·d + 2·G·N conv channels, 3 of their inputs kept, an N x (2·d / H) state per
    # head), each hybrid layer also the keys and values of its use of the shared attention: 4 heads of 2·d / 4
    "zamba2": Hybrid(ZAMBA2, _zamba2, ("MixerCache", "ParallelCache", "ParallelCache") * 2,
                     6 * ((2 * D + 2 * 2 * 8) * 3 + 2 * D * 8) * 4, 4 * 2 * 4 * 16 * 4),
}


def _lowered(name: str):
    return lower(bind(load_spec_text(CASES[name].spec, f"tiny_{name}.yaml"), "x"))


def _hf(name: str):
    """transformers' model, every parameter perturbed, in eval mode on its torch path; no end-of-sequence token."""
    torch.manual_seed(0)
    model = CASES[name].hf()
    model.config._attn_implementation = "eager"
    model = model.float().eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.1 * torch.randn_like(p))
    model.generation_config.eos_token_id = None
    return model


def _pair(name: str):
    hf = _hf(name)
    module = loaded(emit(_lowered(name), "test"))
    model = module.build().eval()
    module.load_hf_state_dict(model, hf.state_dict())
    return hf, module, model


def _hf_logits(hf, ids):
    """transformers' logits; its Gated DeltaNet layers with the spec's chunk (they take chunk_size from kwargs)."""
    m = sys.modules[type(hf).__module__]
    original = getattr(m, "torch_chunk_gated_delta_rule", None)
    if original is not None:
        m.torch_chunk_gated_delta_rule = lambda *a, **k: original(*a, **{**k, "chunk_size": Q})
    try:
        return hf(ids).logits
    finally:
        if original is not None:
            m.torch_chunk_gated_delta_rule = original


def _rel(a, b) -> float:
    return float((a - b).abs().max() / b.abs().max())


@pytest.mark.parametrize("name", CASES)
@pytest.mark.parametrize("T", [3, 11])  # below and above the chunk of 4 tokens
def test_logits_match_transformers(name, T):
    hf, _, model = _pair(name)
    ids = torch.randint(0, V, (2, T), generator=torch.Generator().manual_seed(T))
    with torch.no_grad():
        ours, theirs = model(ids), _hf_logits(hf, ids)
    assert ours.shape == theirs.shape and _rel(ours, theirs) < TOLERANCE


@pytest.mark.parametrize("name", CASES)
@pytest.mark.parametrize("T", [2, 6])  # a prompt shorter than the conv's K - 1 inputs; one longer than a chunk
def test_greedy_generation_matches_transformers(name, T):
    hf, _, model = _pair(name)
    ids = torch.randint(0, V, (2, T), generator=torch.Generator().manual_seed(T))
    ours = model.generate(ids, max_new_tokens=8, temperature=0)
    theirs = hf.generate(ids, max_new_tokens=8, do_sample=False)
    assert torch.equal(ours, theirs)


@pytest.mark.parametrize("name", CASES)
def test_steps_continue_the_prompt(name):
    """The prompt at once, then one token at a time, gives the logits of one forward over the whole sequence."""
    _, _, model = _pair(name)
    ids = torch.randint(0, V, (2, 9), generator=torch.Generator().manual_seed(5))
    with torch.no_grad():
        full = model(ids)
        cache = model.new_cache(2, 9)
        steps = [model(ids[:, :5], cache=cache)] + [model(ids[:, t : t + 1], cache=cache) for t in range(5, 9)]
    assert _rel(torch.cat(steps, dim=1), full[:, 4:]) < TOLERANCE


@pytest.mark.parametrize("name", CASES)
def test_parameters_equal_archcalc_count_and_transformers(name):
    module = loaded(emit(_lowered(name), "test"))
    model = module.build(device="meta")
    total = count_size(load_spec_text(CASES[name].spec, "tiny.yaml"), "x").total
    assert sum(p.numel() for p in model.parameters()) == total == module.PARAMETERS
    assert total == sum(p.numel() for p in _hf(name).parameters())


@pytest.mark.parametrize("name", CASES)
def test_round_trip_to_transformers(name):
    hf, module, model = _pair(name)
    theirs = hf.state_dict()
    back = module.to_hf_state_dict(model)
    assert set(back) == set(theirs)
    assert all(torch.equal(back[k], theirs[k]) for k in theirs)


@pytest.mark.parametrize("name", CASES)
def test_cache_bytes_equal_archcalc_memory(name):
    """After generate(), the cache holds the attention layers' keys and values of every token and each mixer layer's
    conv window and state: ``archcalc memory``'s KV cache and recurrent state at that batch and length, in float32."""
    model = loaded(emit(_lowered(name), "test")).build()
    b, T, new = 3, 5, 6
    cache = generate_keeping_cache(model, torch.zeros(b, T, dtype=torch.long), new)
    assert tuple(type(c).__name__ for c in cache) == CASES[name].caches
    m = memory(bind(load_spec_text(CASES[name].spec, "tiny.yaml"), "x"), seq_len=T + new, batch=b, dtype="float32")
    assert cache_bytes(cache) == (m.kv_cache_bytes, m.state_bytes) == (b * (T + new) * CASES[name].kv, b * CASES[name].state)
    assert sum(cache_bytes(cache)) == m.to_json()["inference_cache_bytes"]


@pytest.mark.parametrize("name", CASES)
@pytest.mark.parametrize("b, T", [(2, 3), (2, 11), (1, 8)])
def test_flop_counter_counts_archcalc_flops(name, b, T):
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.utils.flop_counter import FlopCounterMode

    low = _lowered(name)
    model = loaded(emit(low, "test")).build().eval()
    with FlopCounterMode(display=False) as counter, torch.no_grad(), sdpa_kernel(SDPBackend.MATH):
        model(torch.zeros(b, T, dtype=torch.long))
    assert counter.get_total_flops() == flops(low.binding, T, b, lowered=low).forward_matmul


MIXERS_ONLY = """
name: two_mixers
hyperparameters:
  V: {doc: vocabulary}
  d: {doc: width}
model:
  embedding: {vocab: V, width: d, position: {kind: none}}
  blocks:
    - name: delta_blocks
      repeat: 2
      norm: {kind: rmsnorm, eps: 1e-6}
      mixer: {kind: gated_deltanet, heads: 4, key_heads: 2, key_width: 8, value_width: 6, conv: 4, chunk: 4}
      mlp: {kind: gated, hidden: 48, activation: silu, bias: false}
    - name: conv_blocks
      repeat: 2
      norm: {kind: rmsnorm, eps: 1e-6}
      mixer: {kind: short_conv, conv: 3}
  layer_order: [delta_blocks, conv_blocks]
  final_norm: {kind: rmsnorm, eps: 1e-6}
  head: {tied: true}
sizes:
  x: {V: 97, d: 32}
"""


def test_two_kinds_of_mixer_interleaved_generate_what_the_forward_predicts():
    """Layers of two mixer kinds and no attention: the cache list follows the layers' order (each layer gets a state of
    its own kind), and greedy generation picks what one forward over the whole sequence predicts."""
    spec = load_spec_text(MIXERS_ONLY, "two_mixers.yaml")
    model = loaded(emit(lower(bind(spec, "x")), "test")).build().eval()
    ids = torch.randint(0, V, (2, 6), generator=torch.Generator().manual_seed(0))
    out = model.generate(ids, max_new_tokens=7, temperature=0)
    with torch.no_grad():
        predicted = model(out[:, :-1]).argmax(-1)[:, 5:]
    assert torch.equal(predicted, out[:, 6:])
    assert [type(c).__name__ for c in model.new_cache(1, 4)] == ["MixerCache"] * 4
    assert [c.ssm_state.shape[1:] for c in model.new_cache(1, 4)] == [(4, 8, 6), (0,), (4, 8, 6), (0,)]


@pytest.mark.gpu
@pytest.mark.parametrize("name", CASES)
def test_on_cuda_bf16_training_and_cached_generation(name, monkeypatch):
    """On a GPU: a bf16-autocast forward and backward give finite logits and gradients; in float32 (no TF32) the
    cached greedy tokens are what one forward over the whole sequence predicts (the scans' float32 state there)."""
    monkeypatch.setattr(torch.backends.cudnn, "allow_tf32", False)
    monkeypatch.setattr(torch.backends.cuda.matmul, "allow_tf32", False)
    module = loaded(emit(_lowered(name), "test"))
    torch.manual_seed(0)
    model = module.build(device="cuda")
    ids = torch.randint(0, V, (4, 37), device="cuda")
    with torch.autocast("cuda", dtype=torch.bfloat16):
        logits = model(ids)
    assert logits.dtype == torch.bfloat16 and torch.isfinite(logits.float()).all()
    logits.float().sum().backward()
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in model.parameters())
    model.eval()
    out = model.generate(ids[:, :9], max_new_tokens=12, temperature=0)
    with torch.no_grad():
        predicted = model(out[:, :-1]).argmax(-1)[:, 8:]
    assert torch.equal(predicted, out[:, 9:])
