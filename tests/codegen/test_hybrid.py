"""The generated Mamba2/attention hybrid (issue 28): Mamba2 layers and attention layers, each with a gated MLP,
interleaved by layer_order as transformers' BambaForCausalLM builds them (attention at layer 3 of 4, rotary
positions on half of each head). The module loads Bamba's weights and gives its logits (below and above the chunk
size) and its greedy tokens; its parameters are ``archcalc count``'s; its cache holds the attention layer's keys and
values and the mixer layers' states, as ``archcalc memory`` counts them; FlopCounterMode on a forward counts
``archcalc flops``' forward; the file passes ruff."""

from __future__ import annotations

import pytest

from archcalc.backends.count import count_size
from archcalc.backends.flops import flops
from archcalc.backends.memory import memory
from archcalc.codegen.emit import emit
from archcalc.errors import SpecError
from archcalc.ir import lower
from archcalc.spec import load_spec_text
from archcalc.spec.bind import bind
from tests.helpers import assert_ruff_clean, generate_keeping_cache, loaded

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

SPEC = """
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
V, D, N, Q = 97, 32, 8, 4
TOLERANCE = 1e-4


def _lowered():
    return lower(bind(load_spec_text(SPEC, "tiny_bamba.yaml"), "x"))


def _source() -> str:
    return emit(_lowered(), "test")


def _hf():
    """transformers' BambaForCausalLM of the same config (partial_rotary_factor 0.5, as BambaConfig sets it), every
    parameter perturbed, in eval mode (its torch path on the CPU); no end-of-sequence token."""
    config = transformers.BambaConfig(
        vocab_size=V, hidden_size=D, num_hidden_layers=4, attn_layer_indices=[3], num_attention_heads=4,
        num_key_value_heads=2, intermediate_size=48, mamba_n_heads=4, mamba_d_head=2 * D // 4, mamba_n_groups=2,
        mamba_d_state=N, mamba_d_conv=4, mamba_expand=2, mamba_chunk_size=Q, tie_word_embeddings=False,
        rms_norm_eps=1e-5, eos_token_id=None, pad_token_id=None, bos_token_id=None)
    config._attn_implementation = "eager"
    torch.manual_seed(0)
    model = transformers.BambaForCausalLM(config).float().eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.1 * torch.randn_like(p))
    model.generation_config.eos_token_id = None
    return model


def _pair():
    hf = _hf()
    module = loaded(_source())
    model = module.build().eval()
    module.load_hf_state_dict(model, hf.state_dict())
    return hf, module, model


def _rel(a, b) -> float:
    return float((a - b).abs().max() / b.abs().max())


def test_the_layers_interleave_as_bambas():
    module = loaded(_source())
    model = module.build(device="meta")
    kinds = ["mixer" if hasattr(block, "mixer") else "attn" for block in model.layer_list]
    assert kinds == ["mixer", "mixer", "mixer", "attn"]
    assert module.Config().rotary_width == D // 4 // 2  # half of each head's 8 features


@pytest.mark.parametrize("T", [3, 11])  # below and above the chunk of 4 tokens
def test_logits_match_transformers(T):
    hf, _, model = _pair()
    ids = torch.randint(0, V, (2, T), generator=torch.Generator().manual_seed(T))
    with torch.no_grad():
        ours, theirs = model(ids), hf(ids).logits
    assert ours.shape == theirs.shape and _rel(ours, theirs) < TOLERANCE


@pytest.mark.parametrize("T", [2, 6])  # a prompt shorter than the conv's K - 1 inputs; one longer than a chunk
def test_greedy_generation_matches_transformers(T):
    hf, _, model = _pair()
    ids = torch.randint(0, V, (2, T), generator=torch.Generator().manual_seed(T))
    ours = model.generate(ids, max_new_tokens=8, temperature=0)
    theirs = hf.generate(ids, max_new_tokens=8, do_sample=False)
    assert torch.equal(ours, theirs)


def test_steps_continue_the_prompt():
    """The prompt at once, then one token at a time, gives the logits of one forward over the whole sequence."""
    _, _, model = _pair()
    ids = torch.randint(0, V, (2, 9), generator=torch.Generator().manual_seed(5))
    with torch.no_grad():
        full = model(ids)
        cache = model.new_cache(2, 9)
        steps = [model(ids[:, :5], cache=cache)] + [model(ids[:, t : t + 1], cache=cache) for t in range(5, 9)]
    assert _rel(torch.cat(steps, dim=1), full[:, 4:]) < TOLERANCE


def test_parameters_equal_archcalc_count():
    module = loaded(_source())
    model = module.build(device="meta")
    total = count_size(load_spec_text(SPEC, "tiny_bamba.yaml"), "x").total
    assert sum(p.numel() for p in model.parameters()) == total == module.PARAMETERS


def test_round_trip_to_transformers():
    hf, module, model = _pair()
    theirs = hf.state_dict()
    back = module.to_hf_state_dict(model)
    assert set(back) == set(theirs)
    assert all(torch.equal(back[k], theirs[k]) for k in theirs)


def test_cache_bytes_equal_archcalc_memory():
    """After generate(), the cache holds the attention layer's keys and values of every token and each mixer layer's
    state: ``archcalc memory``'s inference cache (KV cache + recurrent state) at that batch and length, in float32."""
    module = loaded(_source())
    model = module.build()
    b, T, new = 3, 5, 6
    cache = generate_keeping_cache(model, torch.zeros(b, T, dtype=torch.long), new)
    assert [type(c).__name__ for c in cache] == ["MixerCache"] * 3 + ["KVCache"]
    kv = sum(t.numel() * t.element_size() for c in cache if hasattr(c, "k") for t in (c.k, c.v))
    state = sum(t.numel() * t.element_size() for c in cache if hasattr(c, "ssm_state") for t in (c.conv_state, c.ssm_state))
    m = memory(bind(load_spec_text(SPEC, "tiny_bamba.yaml"), "x"), seq_len=T + new, batch=b, dtype="float32")
    assert (kv, state) == (m.kv_cache_bytes, m.state_bytes)
    inner, groups, heads = 2 * D, 2, 4
    channels = inner + 2 * groups * N
    assert state == 3 * b * (channels * 3 + heads * N * inner // heads) * 4  # conv's last K - 1 inputs and the state
    assert kv == b * 2 * (T + new) * 8 * 2 * 4  # keys and values, 2 kv heads of 8 features
    assert kv + state == m.to_json()["inference_cache_bytes"]


@pytest.mark.parametrize("b, T", [(2, 3), (2, 11), (1, 8)])
def test_flop_counter_counts_archcalc_flops(b, T):
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.utils.flop_counter import FlopCounterMode

    low = _lowered()
    model = loaded(_source()).build().eval()
    with FlopCounterMode(display=False) as counter, torch.no_grad(), sdpa_kernel(SDPBackend.MATH):
        model(torch.zeros(b, T, dtype=torch.long))
    assert counter.get_total_flops() == flops(low.binding, T, b, lowered=low).forward_matmul


def test_generated_file_passes_ruff(process, tmp_path):
    text = _source()
    assert_ruff_clean(text, tmp_path)
    path = tmp_path / "model.py"
    formatted = process.run(["-m", "ruff", "format", "--isolated", "--line-length", "100", "--check", "--diff", str(path)])
    assert formatted.returncode == 0, formatted.stdout[-3000:] + formatted.stderr
    assert not [line for line in text.splitlines() if len(line) > 100 and not line.strip().startswith('"')]
    assert "def new_cache(self, batch: int, length: int) -> list[KVCache | MixerCache]:" in text


def test_mamba1_beside_attention_is_refused_in_one_line():
    text = SPEC.replace("mixer: {kind: mamba2, inner: 2 * d, state: N, conv: 4, heads: 4, groups: 2, chunk: Q}",
                        "mixer: {kind: mamba, inner: 2 * d, state: N, conv: 4, dt_rank: 4}")
    text = text.replace("hf: {model_type: bamba, weights: bamba}\n", "")
    with pytest.raises(SpecError, match="code generation: not modelled yet for state-space layers"):
        emit(lower(bind(load_spec_text(text, "tiny.yaml"), "x")), "test")
