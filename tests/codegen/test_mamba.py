"""The generated Mamba (Mamba1) mixer (issue 28): a tiny Mamba model generated from a spec loads transformers'
MambaForCausalLM weights and gives its logits (its torch slow path: the sequential scan) and its greedy tokens; its
parameters are ``archcalc count``'s; its cache holds exactly each layer's state; FlopCounterMode counts the FLOPs
convention's products (projections, conv, one read-out a token) and nothing else; the file passes ruff."""

from __future__ import annotations

import pytest

from archcalc.backends.count import count_size
from archcalc.backends.flops import flops
from archcalc.codegen.emit import emit
from archcalc.ir import lower
from archcalc.spec import load_spec_text
from archcalc.spec.bind import bind
from tests.helpers import assert_ruff_clean, generate_keeping_cache, loaded

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

SPEC = """
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
  head: {{tied: {tie}}}
hf: {{model_type: mamba, weights: mamba}}
sizes:
  x: {{V: {V}, L: {L}, d: {d}, N: {N}, R: {R}, K: {K}}}
"""
TINY = dict(V=97, L=2, d=32, N=8, R=4, K=4, bias=False, conv_bias=True, tie=True)  # MambaConfig's defaults' shape
# both biases flipped, an untied head, a 3-tap conv, a dt rank of 3
OTHER = dict(V=61, L=3, d=24, N=4, R=3, K=3, bias=True, conv_bias=False, tie=False)
CASES = {"tiny": TINY, "other": OTHER}
TOLERANCE = 1e-4


def _text(case: dict) -> str:
    return SPEC.format(**{k: str(v).lower() if isinstance(v, bool) else v for k, v in case.items()})


def _source(case: dict) -> str:
    return emit(lower(bind(load_spec_text(_text(case), "tiny.yaml"), "x")), "test")


def _hf(case: dict):
    """transformers' MambaForCausalLM of the same config, every parameter perturbed, in eval mode (its torch path on
    the CPU); no end-of-sequence token, so that generate() runs to the end."""
    config = transformers.MambaConfig(
        vocab_size=case["V"], hidden_size=case["d"], num_hidden_layers=case["L"], expand=2, state_size=case["N"],
        time_step_rank=case["R"], conv_kernel=case["K"], use_bias=case["bias"], use_conv_bias=case["conv_bias"],
        tie_word_embeddings=case["tie"], layer_norm_epsilon=1e-5, use_mambapy=False,
        eos_token_id=None, pad_token_id=None, bos_token_id=None)
    torch.manual_seed(0)
    model = transformers.MambaForCausalLM(config).float().eval()
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
@pytest.mark.parametrize("T", [2, 9])  # shorter and longer than the conv's K taps
def test_logits_match_transformers(name, T):
    case = CASES[name]
    hf, _, model = _pair(case)
    ids = torch.randint(0, case["V"], (2, T), generator=torch.Generator().manual_seed(T))
    with torch.no_grad():
        ours, theirs = model(ids), hf(ids).logits
    assert ours.shape == theirs.shape and _rel(ours, theirs) < TOLERANCE


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("T", [2, 6])  # a prompt shorter than the conv's K - 1 inputs; one longer
def test_greedy_generation_matches_transformers(name, T):
    case = CASES[name]
    hf, _, model = _pair(case)
    ids = torch.randint(0, case["V"], (2, T), generator=torch.Generator().manual_seed(T))
    ours = model.generate(ids, max_new_tokens=8, temperature=0)
    theirs = hf.generate(ids, max_new_tokens=8, do_sample=False)
    assert torch.equal(ours, theirs)


def test_a_step_continues_the_scan():
    """The prompt through the scan, then one token at a time, gives the logits of one forward."""
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
    """After generate(), the cache's bytes are b·(I·(K-1) + I·N)·element_size per mixer layer, whatever the length:
    the conv's last K - 1 inputs and the state; archcalc memory says the same."""
    from archcalc.backends.memory import memory

    case = CASES[name]
    module = loaded(_source(case))
    model = module.build()
    b, T, new = 3, 5, 6
    cache = generate_keeping_cache(model, torch.zeros(b, T, dtype=torch.long), new)
    inner = 2 * case["d"]
    per_layer = b * inner * (case["K"] - 1 + case["N"]) * 4  # float32
    assert [c.seen for c in cache] == [T + new - 1] * case["L"]
    held = sum(t.numel() * t.element_size() for c in cache for t in (c.conv_state, c.ssm_state))
    assert held == case["L"] * per_layer
    binding = bind(load_spec_text(_text(case), "tiny.yaml"), "x")
    for seq in (T + new, 10 * (T + new)):
        assert memory(binding, seq_len=seq, batch=b, dtype="float32").state_bytes == held


def _flops(case: dict, b: int, T: int) -> int:
    """The FLOPs convention of a forward over (b, T): per mixer layer its four projections, its conv and one state
    read-out a token; then the head."""
    d, N, R, K, V = (case[k] for k in "dNRKV")
    inner = 2 * d
    projections = 2 * b * T * (d * 2 * inner + inner * (R + 2 * N) + R * inner + inner * d)
    conv = 2 * b * T * inner * K
    read_out = 2 * b * T * inner * N
    return case["L"] * (projections + conv + read_out) + 2 * b * T * d * V


@pytest.mark.parametrize("b, T", [(2, 3), (2, 11), (1, 8)])
def test_flop_counter_counts_the_convention(b, T):
    from torch.utils.flop_counter import FlopCounterMode

    module = loaded(_source(TINY))
    model = module.build().eval()
    with FlopCounterMode(display=False) as counter, torch.no_grad():
        model(torch.zeros(b, T, dtype=torch.long))
    measured = counter.get_total_flops()
    binding = bind(load_spec_text(_text(TINY), "tiny.yaml"), "x")
    assert measured == _flops(TINY, b, T) == flops(binding, seq_len=T, batch=b).forward_matmul
    # b=2, T=11: 2 layers x (projections 2·22·(32·128 + 64·20 + 4·64 + 64·32) = 337,920 + conv 11,264
    # + read-out 22,528) + head 136,576 = 880,000
    assert _flops(TINY, 2, 11) == 880_000


@pytest.mark.parametrize("name", list(CASES))
def test_generated_file_passes_ruff(process, tmp_path, name):
    text = _source(CASES[name])
    assert_ruff_clean(text, tmp_path)
    path = tmp_path / "model.py"
    formatted = process.run(["-m", "ruff", "format", "--isolated", "--line-length", "100", "--check", "--diff", str(path)])
    assert formatted.returncode == 0, formatted.stdout[-3000:] + formatted.stderr
    assert "class Mamba(nn.Module):" in text and "einsum" not in text


def test_a_fresh_model_starts_as_transformers_initialises_mamba():
    """build(): each layer's step sizes softplus(dt_proj.bias) log-uniform in [0.001, 0.1], A = -1..-N, D = 1 (the
    model's init zeroes every Linear's bias first, then the mixers set their own)."""
    torch.manual_seed(0)
    model = loaded(_source(CASES["tiny"])).build()
    for block in model.blocks:
        dt = torch.nn.functional.softplus(block.mixer.dt_proj.bias.detach())
        assert 0.001 <= dt.min() and dt.max() <= 0.1 and dt.std() > 0
        assert torch.equal(block.mixer.D.detach(), torch.ones_like(block.mixer.D))
