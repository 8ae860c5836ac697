"""The generated Mamba2 mixer (issue 28): a tiny Mamba2 model generated from a spec loads transformers'
Mamba2ForCausalLM weights and gives its logits (below and above the chunk size) and its greedy tokens; its
parameters are ``archcalc count``'s; its cache holds exactly each layer's state; FlopCounterMode counts the FLOPs
convention's matrix products and nothing else; the file passes ruff. (Mamba's layers: tests/codegen/test_mamba.py;
hybrids with attention layers: tests/codegen/test_hybrid.py.)"""

from __future__ import annotations

import math

import pytest

from archcalc.backends.count import count_size
from archcalc.codegen.emit import emit
from archcalc.ir import lower
from archcalc.spec import load_spec_text
from archcalc.spec.bind import bind
from tests.helpers import assert_ruff_clean, generate_keeping_cache, loaded

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

SPEC = """
name: tiny_mamba2
hyperparameters:
  V: {{doc: vocabulary}}
  L: {{doc: blocks}}
  d: {{doc: width}}
  N: {{doc: state size}}
  H: {{doc: mixer heads}}
  G: {{doc: groups}}
  K: {{doc: conv taps}}
  Q: {{doc: chunk size}}
model:
  embedding: {{vocab: V, width: d, position: {{kind: none}}}}
  block:
    repeat: L
    norm: {{kind: rmsnorm, eps: 1e-5}}
    mixer: {{kind: mamba2, inner: 2 * d, state: N, conv: K, heads: H, groups: G, chunk: Q, bias: {bias},
             conv_bias: {conv_bias}}}
  final_norm: {{kind: rmsnorm, eps: 1e-5}}
  head: {{tied: {tie}}}
hf: {{model_type: mamba2, weights: mamba2}}
sizes:
  x: {{V: {V}, L: {L}, d: {d}, N: {N}, H: {H}, G: {G}, K: {K}, Q: {Q}}}
"""
TINY = dict(V=97, L=2, d=32, N=8, H=4, G=2, K=4, Q=4, bias=False, conv_bias=True, tie=False)
# groups, both biases flipped, a tied head, a 3-tap conv
OTHER = dict(V=61, L=3, d=24, N=4, H=6, G=3, K=3, Q=4, bias=True, conv_bias=False, tie=True)
CASES = {"tiny": TINY, "other": OTHER}
TOLERANCE = 1e-4


def _text(case: dict) -> str:
    return SPEC.format(**{k: str(v).lower() if isinstance(v, bool) else v for k, v in case.items()})


def _source(case: dict) -> str:
    return emit(lower(bind(load_spec_text(_text(case), "tiny.yaml"), "x")), "test")


def _hf(case: dict):
    """transformers' Mamba2ForCausalLM of the same config, every parameter perturbed, in eval mode (its torch path on
    the CPU); no end-of-sequence token, so that generate() runs to the end."""
    config = transformers.Mamba2Config(
        vocab_size=case["V"], hidden_size=case["d"], num_hidden_layers=case["L"], expand=2, state_size=case["N"],
        num_heads=case["H"], head_dim=2 * case["d"] // case["H"], n_groups=case["G"], conv_kernel=case["K"],
        chunk_size=case["Q"], use_bias=case["bias"], use_conv_bias=case["conv_bias"], tie_word_embeddings=case["tie"],
        layer_norm_epsilon=1e-5, eos_token_id=None, pad_token_id=None, bos_token_id=None)
    torch.manual_seed(0)
    model = transformers.Mamba2ForCausalLM(config).float().eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.1 * torch.randn_like(p))
    model.generation_config.eos_token_id = None
    return model


def _pair(case: dict):
    hf = _hf(case)
    module = loaded(_source(case))
    model = module.build().eval()
    module.load_hf_state_dict(model, hf.state_dict())
    return hf, module, model


def _rel(a, b) -> float:
    return float((a - b).abs().max() / b.abs().max())


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("T", [3, 11])  # below and above the chunk of 4 tokens
def test_logits_match_transformers(name, T):
    case = CASES[name]
    hf, _, model = _pair(case)
    ids = torch.randint(0, case["V"], (2, T), generator=torch.Generator().manual_seed(T))
    with torch.no_grad():
        ours, theirs = model(ids), hf(ids).logits
    assert ours.shape == theirs.shape and _rel(ours, theirs) < TOLERANCE


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("T", [2, 6])  # a prompt shorter than the conv's K - 1 inputs; one longer than a chunk
def test_greedy_generation_matches_transformers(name, T):
    case = CASES[name]
    hf, _, model = _pair(case)
    ids = torch.randint(0, case["V"], (2, T), generator=torch.Generator().manual_seed(T))
    ours = model.generate(ids, max_new_tokens=8, temperature=0)
    theirs = hf.generate(ids, max_new_tokens=8, do_sample=False)
    assert torch.equal(ours, theirs)


def test_a_step_continues_the_scan():
    """The prompt through the chunked scan, then one token at a time, gives the logits of one forward."""
    _, _, model = _pair(TINY)
    ids = torch.randint(0, TINY["V"], (2, 9), generator=torch.Generator().manual_seed(5))
    with torch.no_grad():
        full = model(ids)
        cache = model.new_cache(2, 9)
        steps = [model(ids[:, :5], cache=cache)] + [model(ids[:, t : t + 1], cache=cache) for t in range(5, 9)]
    assert _rel(torch.cat(steps, dim=1), full[:, 4:]) < TOLERANCE
    with pytest.raises(ValueError, match="one token at a time"):
        model(ids[:, :2], cache=cache)


@pytest.mark.parametrize("name", list(CASES))
def test_parameters_equal_archcalc_count(name):
    case = CASES[name]
    module = loaded(_source(case))
    model = module.build(device="meta")
    total = count_size(load_spec_text(_text(case), "tiny.yaml"), "x").total
    assert sum(p.numel() for p in model.parameters()) == total == module.PARAMETERS


@pytest.mark.parametrize("name", list(CASES))
def test_round_trip_to_transformers(name):
    case = CASES[name]
    hf, module, model = _pair(case)
    theirs = hf.state_dict()
    back = module.to_hf_state_dict(model)
    assert set(back) == set(theirs)
    assert all(torch.equal(back[k], theirs[k]) for k in theirs)


@pytest.mark.parametrize("name", list(CASES))
def test_cache_holds_each_layers_state(name):
    """After generate(), the cache's bytes are b·(C·(K-1) + H·N·P)·element_size per mixer layer, whatever the
    length: the conv's last K - 1 inputs and the state."""
    case = CASES[name]
    module = loaded(_source(case))
    model = module.build()
    b, T, new = 3, 5, 6
    cache = generate_keeping_cache(model, torch.zeros(b, T, dtype=torch.long), new)
    inner = 2 * case["d"]
    C, P = inner + 2 * case["G"] * case["N"], inner // case["H"]
    per_layer = b * (C * (case["K"] - 1) + case["H"] * case["N"] * P) * 4  # float32
    assert [c.seen for c in cache] == [T + new - 1] * case["L"]
    assert sum(t.numel() * t.element_size() for c in cache for t in (c.conv_state, c.ssm_state)) == case["L"] * per_layer


def _flops(case: dict, b: int, T: int) -> int:
    """The FLOPs convention of a forward over (b, T): per mixer layer its projections, its conv and the chunked
    mixing; then the head."""
    d, N, H, G, K, Q, V = (case[k] for k in "dNHGKQV")
    inner = 2 * d
    C, P, nc = inner + 2 * G * N, inner // H, math.ceil(T / Q)
    projections = 2 * b * T * d * (inner + C + H) + 2 * b * T * inner * d
    conv = 2 * b * T * C * K
    mixing = 2 * b * H * nc * (Q * Q * N + Q * Q * P + Q * N * P + Q * N * P) + 2 * b * H * (nc + 1) ** 2 * N * P
    return case["L"] * (projections + conv + mixing) + 2 * b * T * d * V


@pytest.mark.parametrize("b, T", [(2, 3), (2, 11), (1, 8)])
def test_flop_counter_counts_the_convention(b, T):
    from torch.utils.flop_counter import FlopCounterMode

    module = loaded(_source(TINY))
    model = module.build().eval()
    with FlopCounterMode(display=False) as counter, torch.no_grad():
        model(torch.zeros(b, T, dtype=torch.long))
    assert counter.get_total_flops() == _flops(TINY, b, T)
    # b=2, T=11, chunks of 4: 2 layers x (231,424 + 16,896 + 100,352) + 136,576 = 1,013,120
    assert _flops(TINY, 2, 11) == 1_013_120


@pytest.mark.parametrize("name", list(CASES))
def test_generated_file_passes_ruff(process, tmp_path, name):
    text = _source(CASES[name])
    assert_ruff_clean(text, tmp_path)
    path = tmp_path / "model.py"
    formatted = process.run(["-m", "ruff", "format", "--isolated", "--line-length", "100", "--check", "--diff", str(path)])
    assert formatted.returncode == 0, formatted.stdout[-3000:] + formatted.stderr
    assert "class Mamba2(nn.Module):" in text and "einsum" not in text
