"""The Gated DeltaNet template (archcalc/codegen/templates/deltanet.py), imported as the Python
module it is: with transformers' weights, ``GatedDeltaNet`` gives Qwen3.5's and Qwen3-Next's
outputs (float32, CPU), below and above the chunk size and for grouped value heads; its
prompt-then-tokens cache gives the full sequence's outputs and transformers' states;
FlopCounterMode counts exactly the products of the FLOPs formulas below, which are the
convention's (a triangular solve counts nothing)."""

from __future__ import annotations

import types

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from torch.utils.flop_counter import FlopCounterMode  # noqa: E402
from transformers import DynamicCache  # noqa: E402
from transformers.models.qwen3_5 import modeling_qwen3_5  # noqa: E402
from transformers.models.qwen3_5.configuration_qwen3_5 import Qwen3_5TextConfig  # noqa: E402
from transformers.models.qwen3_next import modeling_qwen3_next  # noqa: E402
from transformers.models.qwen3_next.configuration_qwen3_next import Qwen3NextConfig  # noqa: E402

from archcalc.codegen.template import unit  # noqa: E402
from archcalc.codegen.templates import deltanet, mixer  # noqa: E402

RTOL = 1e-4
D = 32  # width
# both sides: transformers' forward passes its keywords on to torch_chunk_gated_delta_rule
CHUNK = 8


def chunked_forward_flops(b, T, d, Hk, Hv, Dk, Dv, K, Q) -> int:
    """The matmul FLOPs of GatedDeltaNet.forward on a (b, T, d) input without a cache (the chunked
    path), or with an empty cache (a prompt)."""
    C = 2 * Hk * Dk + Hv * Dv  # the conv's channels: q, k, v
    Tp = T + (-T % Q)  # the length padded to whole chunks (Tp / Q chunks)
    return (
        2 * b * T * d * C  # in_proj_qkv
        + 2 * b * T * d * Hv * Dv  # in_proj_z
        + 2 * b * T * d * Hv  # in_proj_b
        + 2 * b * T * d * Hv  # in_proj_a
        + 2 * b * T * C * K  # the depthwise conv: K taps a channel and token (its bias uncounted)
        + 2 * b * Hv * Tp * Q * Dk  # within each chunk: k_beta @ kᵀ, (Q, Dk) @ (Dk, Q)
        + 2 * b * Hv * Tp * Q * Dk  # within each chunk: q @ kᵀ, (Q, Dk) @ (Dk, Q)
        # each chunk reads the state by its decayed keys: k_cumdecay @ S, (Q, Dk) @ (Dk, Dv)
        + 2 * b * Hv * Tp * Dk * Dv
        + 2 * b * Hv * Tp * Dk * Dv  # and by its queries: q @ S, (Q, Dk) @ (Dk, Dv)
        # the scores applied to the new values: attn @ v_new, (Q, Q) @ (Q, Dv)
        + 2 * b * Hv * Tp * Q * Dv
        + 2 * b * Hv * Tp * Dk * Dv  # the state's update: kᵀ @ v_new, (Dk, Q) @ (Q, Dv)
        + 2 * b * T * Hv * Dv * d  # out_proj
    )  # the UT transform (two triangular solves, (Q, Q) by (Q, Dv) and (Q, Dk)) counts nothing


def step_flops(b, d, Hk, Hv, Dk, Dv, K) -> int:
    """The matmul FLOPs of one cached GatedDeltaNet.forward step on a (b, 1, d) input."""
    C = 2 * Hk * Dk + Hv * Dv
    return (
        2 * b * d * (C + Hv * Dv + 2 * Hv)  # in_proj_qkv, in_proj_z, in_proj_b, in_proj_a
        + 2 * b * C * K  # the conv over the window of K inputs
        + 2 * b * Hv * Dk * Dv  # the state read by k: k @ S, (1, Dk) @ (Dk, Dv)
        + 2 * b * Hv * Dk * Dv  # the state's update: k @ δᵀ, (Dk, 1) @ (1, Dv)
        + 2 * b * Hv * Dk * Dv  # the state read by q: q @ S, (1, Dk) @ (Dk, Dv)
        + 2 * b * Hv * Dv * d  # out_proj
    )


def _cfg(Hk, Hv, Dk=8, Dv=6, K=4, Q=CHUNK) -> types.SimpleNamespace:
    return types.SimpleNamespace(
        width=D,
        mixer_key_heads=Hk,
        mixer_value_heads=Hv,
        mixer_key_width=Dk,
        mixer_value_width=Dv,
        mixer_conv=K,
        mixer_chunk=Q,
        norm_eps=1e-6,
    )


def _hf_kwargs(cfg: types.SimpleNamespace) -> dict:
    return dict(
        hidden_size=D,
        num_hidden_layers=1,
        layer_types=["linear_attention"],
        vocab_size=11,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=8,
        rms_norm_eps=cfg.norm_eps,
        linear_num_key_heads=cfg.mixer_key_heads,
        linear_num_value_heads=cfg.mixer_value_heads,
        linear_key_head_dim=cfg.mixer_key_width,
        linear_value_head_dim=cfg.mixer_value_width,
        linear_conv_kernel_dim=cfg.mixer_conv,
    )


def _ours(cfg: types.SimpleNamespace, monkeypatch, conv_bias: bool = False):
    """The template's GatedDeltaNet as the emitter renders it, separate projections (``fused`` false: Qwen3-Next's
    fused ones are checked end to end in tests/codegen/test_deltanet.py), run in the template module's namespace."""
    namespace = dict(vars(deltanet), CONV_BIAS=conv_bias, IN_BIAS=False, OUT_BIAS=False,
                     MixerCache=mixer.MixerCache)  # names.py's MixerCache, the linter's stand-in, takes no arguments
    exec(unit("deltanet", "GatedDeltaNet", {"fused": False}, {"DOC": '"""GatedDeltaNet."""'}), namespace)  # noqa: S102
    layer = namespace["GatedDeltaNet"](cfg)
    layer.reset_parameters()
    return layer


def _randomise(layer) -> None:
    """Away from the init's ones, so that a misplaced A_log, dt_bias or norm weight shows."""
    with torch.no_grad():
        layer.A_log.uniform_(-4.0, 0.5)  # slow decays (A from 0.02) too: earlier chunks count
        layer.dt_bias.normal_()
        layer.norm.weight.normal_(1.0, 0.5)


def _qwen35(cfg, monkeypatch):
    """transformers' Qwen3.5 layer, randomised, and ours with its weights."""
    hf = modeling_qwen3_5.Qwen3_5GatedDeltaNet(Qwen3_5TextConfig(**_hf_kwargs(cfg)), 0)
    _randomise(hf)
    ours = _ours(cfg, monkeypatch)
    state = {k.replace("conv1d", "conv"): v for k, v in hf.state_dict().items()}
    ours.load_state_dict(state)  # strict: the same names and shapes, but conv1d
    return hf, ours


def _unfuse(hf, cfg) -> dict[str, torch.Tensor]:
    """Qwen3-Next's fused in_proj_qkvz and in_proj_ba in Qwen3.5's separate layout. Their rows go
    by key head (fix_query_key_value_ordering): for each of the Hk key heads, q (Dk), k (Dk), then
    v and z of its r = Hv / Hk value heads (r·Dv each); in in_proj_ba, b then a of its r value
    heads (r each)."""
    Hk, Dk, Dv = cfg.mixer_key_heads, cfg.mixer_key_width, cfg.mixer_value_width
    r = cfg.mixer_value_heads // Hk
    qkvz = hf.in_proj_qkvz.weight.unflatten(0, (Hk, -1))  # (Hk, 2·Dk + 2·r·Dv, d)
    q, k, v, z = qkvz.split([Dk, Dk, r * Dv, r * Dv], dim=1)
    b, a = hf.in_proj_ba.weight.unflatten(0, (Hk, -1)).split([r, r], dim=1)  # (Hk, r, d) each
    fused = ("in_proj_qkvz", "in_proj_ba")
    state = {
        n.replace("conv1d", "conv"): t
        for n, t in hf.state_dict().items()
        if not n.startswith(fused)
    }
    # value head j of key head h is value head h·r + j, as in ours
    state["in_proj_qkv.weight"] = torch.cat([t.flatten(0, 1) for t in (q, k, v)])
    state.update(
        {f"in_proj_{n}.weight": t.flatten(0, 1) for n, t in (("z", z), ("b", b), ("a", a))}
    )
    return state


def _qwen3_next(cfg, monkeypatch):
    hf = modeling_qwen3_next.Qwen3NextGatedDeltaNet(Qwen3NextConfig(**_hf_kwargs(cfg)), 0)
    _randomise(hf)
    ours = _ours(cfg, monkeypatch)
    ours.load_state_dict(_unfuse(hf, cfg))
    return hf, ours


def _close(ours: torch.Tensor, theirs: torch.Tensor, rtol: float = RTOL) -> None:
    err = (ours - theirs).abs().max().item()
    scale = theirs.abs().max().item()
    assert err <= rtol * scale, f"max error {err:.3g} against max {scale:.3g}"


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


@pytest.mark.parametrize("Hk, Hv", [(2, 2), (2, 4)])
@pytest.mark.parametrize("T", [21, 5])  # above the chunk size (8), not a multiple of it; below it
def test_qwen35_parity(Hk, Hv, T, monkeypatch):
    cfg = _cfg(Hk, Hv)
    hf, ours = _qwen35(cfg, monkeypatch)
    x = torch.randn(2, T, D)
    with torch.no_grad():
        _close(ours(x), hf(x, chunk_size=CHUNK))


def test_transformers_takes_the_chunk_size(monkeypatch):
    """The forward's chunk_size keyword reaches torch_chunk_gated_delta_rule (else the parity
    above would be at 64)."""
    seen = []
    original = modeling_qwen3_5.torch_chunk_gated_delta_rule

    def spy(*args, **kwargs):
        seen.append(kwargs.get("chunk_size"))
        return original(*args, **kwargs)

    monkeypatch.setattr(modeling_qwen3_5, "torch_chunk_gated_delta_rule", spy)
    hf, _ = _qwen35(_cfg(2, 2), monkeypatch)
    with torch.no_grad():
        hf(torch.randn(1, 3, D), chunk_size=CHUNK)
    assert seen == [CHUNK]


def test_transformers_chunk_64(monkeypatch):
    """transformers' default chunk (64) against ours at 64, past one chunk."""
    cfg = _cfg(2, 4, Q=64)
    hf, ours = _qwen35(cfg, monkeypatch)
    x = torch.randn(1, 70, D)
    with torch.no_grad():
        _close(ours(x), hf(x))


@pytest.mark.parametrize("Hk, Hv", [(2, 4), (1, 1)])
def test_qwen3_next_parity(Hk, Hv, monkeypatch):
    cfg = _cfg(Hk, Hv, Dk=4, Dv=8, K=3)
    hf, ours = _qwen3_next(cfg, monkeypatch)
    x = torch.randn(2, 19, D)
    with torch.no_grad():
        _close(ours(x), hf(x, chunk_size=CHUNK))


@pytest.mark.parametrize("T", [13, 2])  # a prompt shorter than the conv's window too
def test_decode(T, monkeypatch):
    """The prompt at once, then 3 tokens one at a time: the full sequence's outputs at those
    positions; after the prompt, transformers' state and conv window; transformers' cached steps."""
    cfg = _cfg(2, 4)
    hf, ours = _qwen35(cfg, monkeypatch)
    x = torch.randn(2, T + 3, D)
    with torch.no_grad():
        full = ours(x)
        cache = ours.new_cache(2)
        hf_cache = DynamicCache(config=Qwen3_5TextConfig(**_hf_kwargs(cfg)))
        _close(ours(x[:, :T], cache), full[:, :T])
        hf(x[:, :T], cache=hf_cache, chunk_size=CHUNK)
        assert cache.seen == T
        _close(cache.ssm_state, hf_cache.get_recurrent_state(0))
        # transformers keeps the last K inputs, ours K - 1
        assert torch.equal(cache.conv_state, hf_cache.get_conv_state(0)[..., 1:])
        for t in range(T, T + 3):
            step = ours(x[:, t : t + 1], cache)
            _close(step, full[:, t : t + 1])
            _close(step, hf(x[:, t : t + 1], cache=hf_cache))
        assert cache.seen == T + 3
        _close(cache.ssm_state, hf_cache.get_recurrent_state(0))
        with pytest.raises(ValueError):
            ours(x[:, :2], cache)


def test_decode_with_conv_bias(monkeypatch):
    """With CONV_BIAS true (no transformers counterpart), the cached steps still give the full
    sequence's outputs."""
    cfg = _cfg(1, 2, K=3)
    ours = _ours(cfg, monkeypatch, conv_bias=True)
    with torch.no_grad():
        ours.conv.bias.normal_()
    x = torch.randn(1, 12, D)
    with torch.no_grad():
        full = ours(x)
        cache = ours.new_cache(1)
        ours(x[:, :9], cache)
        for t in range(9, 12):
            _close(ours(x[:, t : t + 1], cache), full[:, t : t + 1])


def test_chunk_delta_rule_from_a_state():
    """From a given state, two halves chunked one after the other equal the whole (and the chunk
    size does not matter): the function continues a state."""
    b, T, H, Dk, Dv = 2, 20, 3, 4, 5
    q, k = (deltanet.l2norm(torch.randn(b, T, H, Dk)) for _ in range(2))
    v = torch.randn(b, T, H, Dv)
    g, beta = -0.1 * torch.rand(b, T, H), torch.rand(b, T, H)
    y, final = deltanet.chunk_delta_rule(q, k, v, g, beta, 8, None)
    first, second = (
        [t[:, :11] for t in (q, k, v, g, beta)],
        [t[:, 11:] for t in (q, k, v, g, beta)],
    )
    y1, s1 = deltanet.chunk_delta_rule(*first, 4, None)
    y2, s2 = deltanet.chunk_delta_rule(*second, 16, s1)
    _close(torch.cat([y1, y2], dim=1), y)
    _close(s2, final)


def test_reset_parameters(monkeypatch):
    ours = _ours(_cfg(2, 4), monkeypatch)
    assert torch.equal(ours.dt_bias, torch.ones(4))
    A = ours.A_log.exp()
    assert ((A >= 0.01 - 1e-6) & (A <= 16 + 1e-5)).all()
    assert torch.equal(ours.norm.weight, torch.ones(6))
    # in __init__'s order (named_parameters lists the layer's own two before its submodules')
    modules = ["in_proj_qkv", "in_proj_z", "in_proj_b", "in_proj_a", "conv", "norm", "out_proj"]
    assert list(ours._modules) == modules
    assert list(ours._parameters) == ["dt_bias", "A_log"]


def _counted(fn) -> int:
    counter = FlopCounterMode(display=False)
    with torch.no_grad(), counter:
        fn()
    return counter.get_total_flops()


SHAPES = [(2, 21, 2, 4, 8, 6, 4, 8), (1, 16, 1, 1, 4, 8, 3, 4), (3, 5, 2, 6, 6, 4, 2, 8)]


@pytest.mark.parametrize("b, T, Hk, Hv, Dk, Dv, K, Q", SHAPES)
@pytest.mark.parametrize("conv_bias", [False, True])
def test_flops(b, T, Hk, Hv, Dk, Dv, K, Q, conv_bias, monkeypatch):
    cfg = _cfg(Hk, Hv, Dk=Dk, Dv=Dv, K=K, Q=Q)
    ours = _ours(cfg, monkeypatch, conv_bias=conv_bias)
    x = torch.randn(b, T, D)
    assert _counted(lambda: ours(x)) == chunked_forward_flops(b, T, D, Hk, Hv, Dk, Dv, K, Q)
    cache = ours.new_cache(b)
    assert _counted(lambda: ours(x, cache)) == chunked_forward_flops(b, T, D, Hk, Hv, Dk, Dv, K, Q)
    token = torch.randn(b, 1, D)
    assert _counted(lambda: ours(token, cache)) == step_flops(b, D, Hk, Hv, Dk, Dv, K)
