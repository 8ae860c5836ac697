"""The families beyond GPT: every bundled spec that codegen emits verifies on the meta device (names,
shapes, total), the test specs of tests/data/codegen behave like language models (causal, windows that
hold, routing that matches a naive mixture of experts), generated files are lint-clean, and what is
not generated raises UnsupportedError with a clear message."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
import yaml

from archcalc.backends.count import count
from archcalc.codegen.device import MAX_TENSORS
from archcalc.codegen.emit import UnsupportedError, emit
from archcalc.codegen.load import load_source
from archcalc.codegen.verify import verify
from archcalc.errors import UsageError
from archcalc.ir import lower
from archcalc.spec import load_spec, load_spec_text
from archcalc.spec.bind import bind
from archcalc.spec.library import bundled_names
from tests.helpers import assert_ruff_clean, codegen_spec, lowered

DATA = Path(__file__).parent.parent / "data" / "codegen"
FAMILIES = ["rotary", "reordered", "gemma", "moe", "sinks", "parallel_rotary", "encoder", "latent"]
# bundled spec: what its UnsupportedError says
UNSUPPORTED: dict[str, str] = {}
SEQ2SEQ = {"t5": dict(V=101, L=2, d=32, H=4, d_head=6, d_ff=40, buckets=8), "transformer_2017": dict(V=101, L=2, d=32, H=4)}


def _lowered(name: str, size: str | None = None):
    return lowered(codegen_spec(name) if name in FAMILIES else name, size)


def _model(name: str):
    torch.manual_seed(0)
    model = load_source(emit(_lowered(name), "test")).build().eval()
    with torch.no_grad():
        for p in model.parameters():  # off the initial ones and zeros, so norms and biases matter
            p.add_(torch.randn_like(p) * 0.1)
    return model


@pytest.mark.parametrize("name, size", [(name, size) for name in bundled_names() for size in load_spec(name).sizes])
def test_every_bundled_size_verifies_on_meta(name, size):
    low = lower(bind(load_spec(name), size))
    if name in UNSUPPORTED:
        with pytest.raises(UnsupportedError, match=UNSUPPORTED[name]):
            emit(low, "test")
        return
    counted = count(low.binding)
    if sum(int(leaf.repeat.xreplace(low.binding.numeric())) for leaf in counted.leaves) > MAX_TENSORS:
        with pytest.raises(UsageError, match="parameter tensors; archcalc builds modules of at most"):
            verify(low, device="meta")  # too many tensors to build in seconds (Qwen3-Next's 512 experts a layer)
        return
    report = verify(low, device="meta")
    assert report.ok, (size, report.missing[:3], report.extra[:3], report.shape_mismatches[:3])
    assert report.module_total == count(low.binding).total


@pytest.mark.parametrize("name", FAMILIES)
def test_logits_are_finite_and_causal(name):
    model = _model(name)
    ids = torch.randint(0, 101, (2, 14), generator=torch.Generator().manual_seed(0))
    changed = ids.clone()
    changed[:, 9] = (changed[:, 9] + 1) % 101
    with torch.no_grad():
        a, b = model(ids), model(changed)
    assert a.shape[:2] == (2, 14) and torch.isfinite(a).all()
    if name == "encoder":  # bidirectional: every position sees the change
        assert not torch.allclose(a[:, :9], b[:, :9])
        assert model.pooler(a).shape == (2, a.shape[-1])
    else:
        torch.testing.assert_close(a[:, :9], b[:, :9])  # MoE: experts see other batches, so not bit-exact
        assert not torch.allclose(a[:, 9:], b[:, 9:])


def _seq2seq(name: str):
    low = lowered(name, **SEQ2SEQ[name])
    torch.manual_seed(0)
    model = load_source(emit(low, "test")).build().eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.1)
    return model


@pytest.mark.parametrize("name", list(SEQ2SEQ))
def test_encoder_decoder_decoder_is_causal_and_reads_the_whole_source(name):
    """The decoder's logits at t do not depend on decoder tokens after t; every position sees every source token."""
    model = _seq2seq(name)
    gen = torch.Generator().manual_seed(0)
    src, tgt = torch.randint(0, 101, (2, 9), generator=gen), torch.randint(0, 101, (2, 12), generator=gen)
    tgt2, src2 = tgt.clone(), src.clone()
    tgt2[:, 7] = (tgt2[:, 7] + 1) % 101
    src2[:, 8] = (src2[:, 8] + 1) % 101
    with torch.no_grad():
        a, b, c = model(src, tgt), model(src, tgt2), model(src2, tgt)
    assert a.shape == (2, 12, 101) and torch.isfinite(a).all()
    torch.testing.assert_close(a[:, :7], b[:, :7])
    assert not torch.allclose(a[:, 7:], b[:, 7:])
    assert not torch.allclose(a[:, 0], c[:, 0])


def test_t5_relative_bias_matches_transformers_buckets():
    transformers = pytest.importorskip("transformers")
    bucket = transformers.models.t5.modeling_t5.T5Attention._relative_position_bucket
    model = _seq2seq("t5")
    distance = torch.arange(-60, 61)
    for tower, bidirectional in ((model.encoder, True), (model.decoder, False)):
        want = bucket(distance, bidirectional=bidirectional, num_buckets=8, max_distance=128)
        assert torch.equal(tower.rel_bias.bucket(distance), want)


def test_sinusoidal_positions_are_vaswani_et_al():
    embed = _seq2seq("transformer_2017").embed
    ids = torch.zeros(1, 5, dtype=torch.long)
    with torch.no_grad():
        table = embed(ids)[0] - embed.token(ids)[0] * 32**0.5
    pos, i = 3, 5  # PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i + 1) = cos(...)
    torch.testing.assert_close(table[pos, 2 * i], torch.tensor(math.sin(pos / 10000 ** (2 * i / 32))))
    torch.testing.assert_close(table[pos, 2 * i + 1], torch.tensor(math.cos(pos / 10000 ** (2 * i / 32))))


@pytest.mark.parametrize("name", list(SEQ2SEQ))
def test_generated_encoder_decoder_files_pass_ruff(tmp_path, name):
    assert_ruff_clean(emit(_lowered(name, next(iter(load_spec(name).sizes))), "test"), tmp_path)


@pytest.mark.parametrize("name", ["rotary", "gemma", "sinks"])
def test_a_sliding_window_layer_sees_only_its_window(name):
    """Layer 0 is a local layer of window w (SDPA with a band mask, or written-out scores for sinks and
    soft-capping): its output at t does not depend on inputs w or more tokens back."""
    model = _model(name)
    attn, window = model.blocks[0].attn, model.cfg.window
    x = torch.randn(1, 12, model.cfg.width)
    changed = x.clone()
    changed[:, 3] += 1.0
    rope = model.rotary(0, 12, x.device)
    with torch.no_grad():
        y, z = attn(x, rope), attn(changed, rope)
    assert torch.equal(y[:, 3 + window:], z[:, 3 + window:])
    assert not torch.allclose(y[:, 3:3 + window], z[:, 3:3 + window])


def _assert_token_by_token(moe, naive) -> None:
    """The layer on a (2, 5, d) batch equals ``naive`` applied to each token alone."""
    x = torch.randn(2, 5, moe.router.in_features)
    with torch.no_grad():
        got = moe(x)
        want = torch.stack([torch.stack([naive(x[b, t]) for t in range(5)]) for b in range(2)])
    torch.testing.assert_close(got, want)


def test_moe_matches_a_naive_mixture_of_experts():
    """Each token: softmax over its top-k router logits, the weighted sum of those experts, plus the
    shared expert scaled by its sigmoid gate."""
    moe = _model("moe").blocks[0].mlp
    def naive(token):
        logits, chosen = moe.router(token).topk(moe.top_k)
        out = sum(w * moe.experts[int(e)](token) for w, e in zip(logits.softmax(-1), chosen))
        return out + moe.shared(token) * torch.sigmoid(moe.shared_gate(token))

    _assert_token_by_token(moe, naive)


def test_sigmoid_routing_matches_a_naive_deepseek_router():
    """DeepSeek-V3 routing, token by token: sigmoid scores; the best group_top_k groups by the sum of their two best
    (score + score_bias); the top_k experts there; their scores renormalised and scaled; plus the shared expert."""
    model = _model("latent")
    moe = model.blocks[0].mlp
    with torch.no_grad():
        moe.score_bias.copy_(torch.randn(moe.score_bias.shape, generator=torch.Generator().manual_seed(3)) * 0.1)
    per_group = len(moe.experts) // moe.groups

    def naive(token):
        scores = moe.router(token).sigmoid()
        choice = scores + moe.score_bias
        groups = sorted(range(moe.groups), key=lambda g: -choice[g * per_group:(g + 1) * per_group].topk(2)[0].sum())
        allowed = [e for g in groups[:moe.group_top_k] for e in range(g * per_group, (g + 1) * per_group)]
        chosen = sorted(allowed, key=lambda e: -choice[e])[:moe.top_k]
        weights = scores[chosen] / scores[chosen].sum() * moe.routed_scale
        return sum(w * moe.experts[e](token) for w, e in zip(weights, chosen)) + moe.shared(token)

    _assert_token_by_token(moe, naive)


def test_latent_attention_with_rope_scaling():
    """YaRN changes DeepSeek-V3's frequencies and its softmax scale (mscale squared): the imported config generates both
    (logits and tokens against transformers: tests/codegen/test_rope_scaling.py); a bare `scaling: yarn`, without its
    numbers, is refused."""
    from archcalc.hf import spec_from_hf_file

    spec = spec_from_hf_file(Path(__file__).parent.parent / "data" / "hf" / "deepseek-v3.json")
    source = emit(lower(bind(spec, next(iter(spec.sizes)))), "test")
    assert "YaRN scaling" in source and "* cfg.attn_mscale**2" in source
    text = (DATA / "latent.yaml").read_text().replace("position: rotary", "position: {kind: rotary, scaling: yarn}")
    with pytest.raises(UnsupportedError, match="rotary scaling 'yarn' needs its numbers to be generated: factor, original_context"):
        emit(lower(bind(load_spec_text(text, "latent.yaml"), None)), "test")


def test_moe_builds_on_meta_and_runs_under_autocast():
    model = load_source(emit(_lowered("sinks"), "test")).build(device="meta")
    assert sum(p.numel() for p in model.parameters()) > 0 and all(p.is_meta for p in model.parameters())
    model = _model("sinks")
    with torch.autocast("cpu", dtype=torch.bfloat16):
        logits = model(torch.randint(0, 101, (2, 6)))
    assert torch.isfinite(logits.float()).all()


def test_rotary_models_keep_only_their_frequencies_and_have_no_graph_breaks():
    """One buffer, the rotary frequencies, which checkpoints leave out; a cast of the model to bf16 casts it too, and
    forward then computes them afresh in float32: the tables do not change."""
    model = _model("rotary")
    assert [name for name, _ in model.named_buffers()] == ["rotary.inv_freq"]
    assert not any("inv_freq" in name for name in model.state_dict())
    tables = model.rotary(1000, 8, torch.device("cpu"))
    cast = model.to(torch.bfloat16).rotary(1000, 8, torch.device("cpu"))
    assert model.rotary.inv_freq.dtype == torch.bfloat16 and all(map(torch.equal, tables, cast))
    model.float()
    explanation = torch._dynamo.explain(model)(torch.randint(0, 101, (2, 8)))
    assert explanation.graph_break_count == 0


@pytest.mark.parametrize("name", FAMILIES)
def test_generated_files_pass_ruff(tmp_path, name):
    assert_ruff_clean(emit(_lowered(name), "test"), tmp_path)


def _with_hf(name: str, model_type: str):
    data = yaml.safe_load((DATA / f"{name}.yaml").read_text(encoding="utf-8"))
    return load_spec_text(yaml.safe_dump({**data, "hf": {"model_type": model_type}}), f"{name}.yaml")


def test_hf_weight_maps_name_what_they_cannot_load():
    with pytest.raises(UnsupportedError, match="no transformers weight names for model_type 'zamba'"):
        emit(lower(bind(_with_hf("moe", "zamba"), None)), "test")  # Zamba1: not supported
    with pytest.raises(UnsupportedError, match="no transformers name for 'blocks.{i}.mlp.shared.gate.weight'"):
        emit(lower(bind(_with_hf("moe", "mixtral"), None)), "test")
    source = emit(lower(bind(_with_hf("rotary", "qwen3"), None)), "test")
    assert 'HF_MODEL_TYPE = "qwen3"' in source and "def load_hf_state_dict(" in source
    assert "def load_hf_state_dict(" not in emit(_lowered("rotary"), "test")


def test_a_model_type_is_validated_before_it_reaches_the_source():
    for hostile in ("llama'\nimport os", "Llama", "a b", "x" * 41):
        with pytest.raises(Exception, match="model_type"):
            _with_hf("rotary", hostile)


@pytest.mark.gpu
@pytest.mark.parametrize("name", FAMILIES)
def test_forward_and_backward_on_cuda_in_bf16(name):
    model = load_source(emit(_lowered(name), "test")).build(device="cuda")
    ids = torch.randint(0, 101, (4, 32), device="cuda")
    with torch.autocast("cuda", dtype=torch.bfloat16):
        out = model(ids)
    assert torch.isfinite(out.float()).all()
    out.float().sum().backward()
    grads = [p.grad for p in model.parameters() if p.grad is not None]  # an expert no token chose has none
    assert model.embed.token.weight.grad is not None and all(torch.isfinite(g).all() for g in grads)
