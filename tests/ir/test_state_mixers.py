"""Gated DeltaNet and short-convolution mixers (issue 28): counted exactly as transformers builds Qwen3.5's linear
attention and LFM2's gated short convolution, alone and beside attention; their state, FLOPs and kind-specific fields
come from one class each (archcalc.ir.attrs.StateMixer)."""

from __future__ import annotations

import pytest
import sympy

from archcalc.backends.count import count_size
from archcalc.backends.memory import state_elements
from archcalc.errors import SpecError
from archcalc.ir import lower
from archcalc.ir.attrs import GatedDeltaNet, ShortConv, StateMixer
from archcalc.spec import load_spec_text
from archcalc.spec.bind import bind

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

DELTANET = """
name: tiny_deltanet
hyperparameters:
  V: {{doc: vocabulary}}
  L: {{doc: linear-attention layers}}
  La: {{doc: attention layers}}
  d: {{doc: width}}
  d_ff: {{doc: MLP width}}
model:
  embedding: {{vocab: V, width: d, position: {{kind: rotary}}}}
  blocks:
    - name: delta_blocks
      repeat: L
      norm: {{kind: rmsnorm, eps: 1e-6}}
      mixer: {{kind: gated_deltanet, heads: {Hv}, key_heads: {Hk}, key_width: {Dk}, value_width: {Dv}, conv: {K}}}
      mlp: {{kind: gated, hidden: d_ff, activation: silu, bias: false}}
    - name: blocks
      repeat: La
      norm: {{kind: rmsnorm, eps: 1e-6}}
      attention: {{heads: 4, kv_heads: 2, head_width: 16, qkv_bias: false, out_bias: false, layout: separate,
                  output_gate: true, qk_norm: {{kind: rmsnorm, eps: 1e-6, unit_offset: true}}}}
      mlp: {{kind: gated, hidden: d_ff, activation: silu, bias: false}}
  layer_order: {order}
  final_norm: {{kind: rmsnorm, eps: 1e-6}}
  head: {{tied: false}}
sizes:
  x: {{V: {V}, L: {L}, La: {La}, d: {d}, d_ff: {d_ff}}}
"""

SHORT_CONV = """
name: tiny_short_conv
hyperparameters:
  V: {{doc: vocabulary}}
  L: {{doc: conv layers}}
  d: {{doc: width}}
model:
  embedding: {{vocab: V, width: d, position: {{kind: none}}}}
  block:
    repeat: L
    norm: {{kind: rmsnorm, eps: 1e-5}}
    mixer: {{kind: short_conv, conv: {K}, bias: {bias}, conv_bias: {bias}}}
    mlp: {{kind: gated, hidden: {d_ff}, activation: silu, bias: false}}
  final_norm: {{kind: rmsnorm, eps: 1e-5}}
  head: {{tied: {tie}}}
sizes:
  x: {{V: {V}, L: {L}, d: {d}}}
"""


def _meta_total(model_class, config) -> int:
    with torch.device("meta"):
        return sum(p.numel() for p in model_class(config).parameters())


@pytest.mark.parametrize("Hv, Hk, Dk, Dv, K, layer_types", [
    (4, 2, 16, 24, 4, ["linear_attention"] * 2),  # grouped: each key head serves two value heads
    (3, 3, 8, 8, 3, ["linear_attention"] * 3),  # as many key heads as value heads, a 3-tap conv
    (4, 4, 16, 16, 4, ["linear_attention", "linear_attention", "linear_attention", "full_attention"] * 2),  # 3:1
])
def test_deltanet_counts_equal_transformers(Hv, Hk, Dk, Dv, K, layer_types):
    V, d, d_ff = 101, 64, 96
    linear = layer_types.count("linear_attention")
    order = ["delta_blocks" if t == "linear_attention" else "blocks" for t in layer_types]
    text = DELTANET.format(Hv=Hv, Hk=Hk, Dk=Dk, Dv=Dv, K=K, V=V, L=linear, La=max(len(layer_types) - linear, 1), d=d,
                           d_ff=d_ff, order=order)
    if linear == len(layer_types):  # no attention layer: the linear-attention stack alone
        text = text[:text.index("    - name: blocks")] + text[text.index("  layer_order"):].replace(f"layer_order: {order}", "layer_order: null")
    ours = count_size(load_spec_text(text, "tiny.yaml"), "x").total
    config = transformers.Qwen3_5TextConfig(
        vocab_size=V, hidden_size=d, num_hidden_layers=len(layer_types), intermediate_size=d_ff, layer_types=layer_types,
        linear_num_value_heads=Hv, linear_num_key_heads=Hk, linear_key_head_dim=Dk, linear_value_head_dim=Dv,
        linear_conv_kernel_dim=K, num_attention_heads=4, num_key_value_heads=2, head_dim=16, tie_word_embeddings=False)
    assert ours == _meta_total(transformers.Qwen3_5ForCausalLM, config)


@pytest.mark.parametrize("K, bias, tie", [(3, False, False), (4, True, True)])
def test_short_conv_counts_equal_transformers(K, bias, tie):
    V, L, d, d_ff = 97, 3, 48, 80
    ours = count_size(load_spec_text(SHORT_CONV.format(K=K, bias=str(bias).lower(), tie=str(tie).lower(), V=V, L=L, d=d,
                                                       d_ff=d_ff), "tiny.yaml"), "x").total
    config = transformers.Lfm2Config(vocab_size=V, hidden_size=d, num_hidden_layers=L, intermediate_size=d_ff,
                                     layer_types=["conv"] * L, conv_L_cache=K, conv_bias=bias, block_auto_adjust_ff_dim=False,
                                     tie_word_embeddings=tie)
    assert ours == _meta_total(transformers.Lfm2ForCausalLM, config)


def test_state_is_the_conv_window_and_the_delta_state():
    """Per layer and sequence: C·(K − 1) + H·Dk·Dv (C = 2·Hk·Dk + H·Dv); a short convolution keeps d·(K − 1)."""
    text = DELTANET.format(Hv=4, Hk=2, Dk=16, Dv=24, K=4, V=101, L=3, La=1, d=64, d_ff=96,
                           order=["delta_blocks"] * 3 + ["blocks"])
    lowered = lower(bind(load_spec_text(text, "tiny.yaml"), "x"))
    channels = 2 * 2 * 16 + 4 * 24
    assert state_elements(lowered) == [("delta_blocks.mixer", 3, channels * 3 + 4 * 16 * 24)]
    conv = lower(bind(load_spec_text(SHORT_CONV.format(K=3, bias="false", tie="true", V=97, L=2, d=48, d_ff=80),
                                     "tiny.yaml"), "x"))
    assert state_elements(conv) == [("blocks.mixer", 2, 48 * 2)]
    mixers = [n.attrs for _, n in conv.root.walk() if isinstance(n.attrs, StateMixer)]
    assert isinstance(mixers[0], ShortConv) and mixers[0].mixing_flops(sympy.Integer(1), sympy.Integer(9)) == 0


def test_deltanet_mixing_flops_follow_the_chunks():
    """The chunked form's products: 2·B·H·nc·(2·Q²·Dk + Q²·Dv + 3·Q·Dk·Dv), nc = ceiling(S / Q); Q = 64 by default."""
    a = GatedDeltaNet(*(sympy.Integer(v) for v in (4, 2, 16, 24, 4)))
    per_chunk = 2 * 4 * (2 * 64**2 * 16 + 64**2 * 24 + 3 * 64 * 16 * 24)
    assert a.mixing_flops(sympy.Integer(1), sympy.Integer(64)) == per_chunk
    assert a.mixing_flops(sympy.Integer(2), sympy.Integer(65)) == 2 * 2 * per_chunk
    assert a.step_flops() == 6 * 4 * 16 * 24


@pytest.mark.parametrize("mixer, message", [
    ("{kind: gated_deltanet, heads: 4, key_width: 16, conv: 4}", "a gated_deltanet mixer needs 'value_width'"),
    ("{kind: gated_deltanet, heads: 4, key_heads: 3, key_width: 16, value_width: 16, conv: 4}",
     "heads = 4 is not a multiple of key_heads = 3"),
    ("{kind: short_conv, conv: 3, heads: 2}", "'heads' only applies to 'kind: mamba2' or 'kind: gated_deltanet'"),
    ("{kind: gated_deltanet, heads: 4, key_width: 16, value_width: 16, conv: 4, inner: 64}",
     "'inner' only applies to 'kind: mamba' or 'kind: mamba2'"),
])
def test_bad_mixer_fields_are_refused_in_one_line(mixer, message):
    text = SHORT_CONV.format(K=3, bias="false", tie="true", V=97, L=2, d=48, d_ff=80).replace(
        "{kind: short_conv, conv: 3, bias: false, conv_bias: false}", mixer)
    with pytest.raises(SpecError, match=message) as e:
        count_size(load_spec_text(text, "tiny.yaml"), "x")
    assert "\n" not in str(e.value) and str(e.value).startswith("tiny.yaml:")
