"""State-space mixers (issue 28, first step): Mamba's and Mamba2's layers in the spec language and the IR, counted
exactly as transformers builds them, alone and in a hybrid stack; what is not modelled yet is refused in one line."""

from __future__ import annotations

import pytest

from archcalc.backends.count import count_size
from archcalc.errors import SpecError
from archcalc.spec import load_spec_text
from tests.helpers import meta_count

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

MAMBA2 = """
name: tiny_mamba2
hyperparameters:
  V: {{doc: vocabulary}}
  L: {{doc: blocks}}
  d: {{doc: width}}
  inner: {{doc: inner width}}
  N: {{doc: state size}}
  heads: {{doc: mixer heads}}
  G: {{doc: groups}}
  K: {{doc: conv taps}}
  tie: {{doc: tied head, type: bool}}
model:
  embedding: {{vocab: V, width: d, position: {{kind: none}}}}
  block:
    repeat: L
    norm: {{kind: rmsnorm, eps: 1e-5}}
    mixer: {{kind: mamba2, inner: inner, state: N, conv: K, heads: heads, groups: G, chunk: 256, bias: {bias},
             conv_bias: {conv_bias}}}
  final_norm: {{kind: rmsnorm, eps: 1e-5}}
  head: {{tied: tie}}
sizes:
  x: {{V: {V}, L: {L}, d: {d}, inner: {inner}, N: {N}, heads: {heads}, G: {G}, K: {K}, tie: {tie}}}
"""

MAMBA = """
name: tiny_mamba
hyperparameters:
  V: {{doc: vocabulary}}
  L: {{doc: blocks}}
  d: {{doc: width}}
  N: {{doc: state size}}
  R: {{doc: dt rank}}
  K: {{doc: conv taps}}
model:
  embedding: {{vocab: V, width: d, position: {{kind: none}}}}
  block:
    repeat: L
    norm: {{kind: rmsnorm, eps: 1e-5}}
    mixer: {{kind: mamba, inner: 2 * d, state: N, conv: K, dt_rank: R, bias: {bias}, conv_bias: {conv_bias}}}
  final_norm: {{kind: rmsnorm, eps: 1e-5}}
  head: {{tied: true}}
sizes:
  x: {{V: {V}, L: {L}, d: {d}, N: {N}, R: {R}, K: {K}}}
"""


def _total(text: str) -> int:
    spec = load_spec_text(text, "tiny.yaml")
    return count_size(spec, "x").total


@pytest.mark.parametrize("V, L, d, expand, N, head_dim, G, K, bias, conv_bias, tie", [
    (50280, 2, 64, 2, 128, 64, 1, 4, False, True, False),  # Mamba2Config's layout at a small width
    (97, 3, 48, 2, 16, 12, 2, 4, True, False, True),  # groups, both biases flipped, a tied head
    (131, 1, 40, 3, 8, 10, 4, 3, False, True, False),  # expand 3, four groups, a 3-tap conv
])
def test_mamba2_counts_equal_transformers(V, L, d, expand, N, head_dim, G, K, bias, conv_bias, tie):
    inner = expand * d
    heads = inner // head_dim
    ours = _total(MAMBA2.format(V=V, L=L, d=d, inner=inner, N=N, heads=heads, G=G, K=K, tie=str(tie).lower(),
                                bias=str(bias).lower(), conv_bias=str(conv_bias).lower()))
    config = transformers.Mamba2Config(vocab_size=V, hidden_size=d, num_hidden_layers=L, expand=expand, state_size=N,
                                       head_dim=head_dim, num_heads=heads, n_groups=G, conv_kernel=K, use_bias=bias,
                                       use_conv_bias=conv_bias, tie_word_embeddings=tie)
    assert ours == meta_count(config, "Mamba2ForCausalLM")


@pytest.mark.parametrize("V, L, d, N, R, K, bias, conv_bias", [
    (50280, 2, 64, 16, 4, 4, False, True),  # MambaConfig's layout at a small width
    (97, 3, 40, 8, 3, 2, True, False),
])
def test_mamba_counts_equal_transformers(V, L, d, N, R, K, bias, conv_bias):
    ours = _total(MAMBA.format(V=V, L=L, d=d, N=N, R=R, K=K, bias=str(bias).lower(), conv_bias=str(conv_bias).lower()))
    config = transformers.MambaConfig(vocab_size=V, hidden_size=d, num_hidden_layers=L, expand=2, state_size=N,
                                      time_step_rank=R, conv_kernel=K, use_bias=bias, use_conv_bias=conv_bias)
    assert ours == meta_count(config, "MambaForCausalLM")


HYBRID = """
name: tiny_hybrid
hyperparameters:
  V: {doc: vocabulary}
  La: {doc: attention layers (one in four)}
  d: {doc: width}
model:
  embedding: {vocab: V, width: d, position: {kind: rotary, base: 10000}}
  blocks:
    - name: mamba_blocks
      repeat: 3 * La
      norm: {kind: rmsnorm, eps: 1e-5}
      mixer: {kind: mamba2, inner: 2 * d, state: 16, conv: 4, heads: 4, groups: 2}
      mlp: {kind: gated, hidden: 96, activation: silu, bias: false}
    - name: blocks
      repeat: La
      norm: {kind: rmsnorm, eps: 1e-5}
      attention: {heads: 4, kv_heads: 2, head_width: d / 4, qkv_bias: false, out_bias: false, layout: separate}
      mlp: {kind: gated, hidden: 96, activation: silu, bias: false}
  layer_order: [mamba_blocks, mamba_blocks, mamba_blocks, blocks]
  final_norm: {kind: rmsnorm, eps: 1e-5}
  head: {tied: false}
sizes:
  x: {V: 128, La: 1, d: 64}
"""


def test_a_three_to_one_hybrid_counts_as_transformers_bamba():
    """Mamba2 layers and attention layers interleaved by layer_order, each with its MLP: Bamba's stack."""
    config = transformers.BambaConfig(vocab_size=128, hidden_size=64, num_hidden_layers=4, attn_layer_indices=[3],
                                      num_attention_heads=4, num_key_value_heads=2, intermediate_size=96, mamba_n_heads=4,
                                      mamba_d_head=32, mamba_n_groups=2, mamba_d_state=16, mamba_d_conv=4, mamba_expand=2,
                                      tie_word_embeddings=False)
    assert _total(HYBRID) == meta_count(config, "BambaForCausalLM") == 193_060


def test_the_mixer_has_its_own_role_and_tensors():
    spec = load_spec_text(HYBRID, "tiny.yaml")
    result = count_size(spec, "x")
    assert result.by_role["mixer"] > 0 and result.by_role["attention"] > 0
    paths = {leaf.path for leaf in result.leaves}
    assert {"mamba_blocks.mixer.conv.weight", "mamba_blocks.mixer.A_log", "mamba_blocks.mixer.norm.weight"} <= paths


def test_models_without_mixers_keep_their_roles():
    from archcalc.backends.count import count
    from archcalc.spec import load_spec
    from archcalc.spec.bind import bind

    assert "mixer" not in count(bind(load_spec("gpt2"), "small")).by_role


@pytest.mark.parametrize("mixer, words", [
    ("{kind: mamba, inner: 128, state: 16, conv: 4}", "a mamba mixer needs 'dt_rank'"),
    ("{kind: mamba2, inner: 128, state: 16, conv: 4}", "a mamba2 mixer needs 'heads'"),
    ("{kind: mamba, inner: 128, state: 16, conv: 4, dt_rank: 4, heads: 2}", "'heads' only applies to 'kind: mamba2'"),
    ("{kind: mamba2, inner: 128, state: 16, conv: 4, heads: 3}", "inner = 128 is not a multiple of heads = 3"),
    ("{kind: mamba2, inner: 128, state: 16, conv: 4, heads: 4, groups: 8}", "heads = 4 is not a multiple of groups = 8"),
    ("{kind: mamba2, inner: 128, state: 0, conv: 4, heads: 4}", "state"),
    ("{kind: rwkv, inner: 128, state: 16, conv: 4}", "rwkv"),
])
def test_bad_mixers_are_refused_at_their_place(mixer, words):
    text = HYBRID.replace("{kind: mamba2, inner: 2 * d, state: 16, conv: 4, heads: 4, groups: 2}", mixer)
    with pytest.raises(SpecError, match=words) as e:
        count_size(load_spec_text(text, "tiny.yaml"), "x")
    assert "tiny.yaml:" in str(e.value) or e.value.line is not None


def test_attention_and_a_mixer_side_by_side_share_one_norm():
    """Falcon-H1's layer: attention and a mixer on one normed input, pre-norm only."""
    text = HYBRID.replace("      mixer: {kind: mamba2", "      attention: {heads: 4, head_width: 16}\n      mixer: {kind: mamba2")
    by_path = count_size(load_spec_text(text, "tiny.yaml"), "x").by_path
    side = [path for path in by_path if path.startswith("mamba_blocks.")]
    assert {"mamba_blocks.norm.weight", "mamba_blocks.attn.qkv.weight", "mamba_blocks.mixer.in_proj.weight"} <= set(side)
    assert not any("mixer_norm" in path or "attn_norm" in path for path in side)
    post = text.replace("      attention: {heads: 4, head_width: 16}", "      residual: post-norm\n      attention: {heads: 4, head_width: 16}")
    with pytest.raises(SpecError, match="side by side is pre-norm"):
        load_spec_text(post, "tiny.yaml")


@pytest.mark.parametrize("command", [
    ["flops", "--seq-len", "64"], ["memory", "--seq-len", "64", "--batch", "1"],
    ["infer", "--hardware", "h100-sxm", "--batch", "1", "--prompt", "8", "--new-tokens", "8"], ["generate", "-o", "-"],
])
def test_mamba_layers_are_modelled(command, tmp_path, capsys):
    """Mamba's (Mamba1's) layers: FLOPs, memory, inference and code generation (tests/backends/test_mamba_costs.py,
    tests/codegen/test_mamba.py check the figures)."""
    from archcalc.cli import main

    path = tmp_path / "mamba.yaml"
    path.write_text(MAMBA.format(V=97, L=2, d=32, N=8, R=2, K=4, bias="false", conv_bias="true"))
    assert main([command[0], str(path), *command[1:]]) == 0
    assert capsys.readouterr().err.strip() == ""


def test_mamba_layers_beside_attention_layers_are_generated(tmp_path, capsys):
    """A hybrid of Mamba (Mamba1) and attention stacks (Jamba's) is counted and generated."""
    from archcalc.cli import main

    path = tmp_path / "hybrid.yaml"
    path.write_text(HYBRID.replace("{kind: mamba2, inner: 2 * d, state: 16, conv: 4, heads: 4, groups: 2}",
                                   "{kind: mamba, inner: 2 * d, state: 16, conv: 4, dt_rank: 4}"))
    assert main(["flops", str(path), "--seq-len", "64"]) == 0
    capsys.readouterr()
    assert main(["generate", str(path), "-o", "-"]) == 0
    captured = capsys.readouterr()
    assert captured.err.strip() == "" and "class MambaBlocksMamba(nn.Module):" in captured.out
