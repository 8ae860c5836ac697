"""The generated module behaves like a language model: shapes, finiteness, causality, learning."""

from __future__ import annotations

import pytest
import torch

from archcalc.codegen.train import train
from tests.helpers import TINY, module

VARIANTS = [
    ("gpt2", {}),
    ("gpt2", {"qkv_bias": False, "tie_embeddings": False}),
    ("gpt3", {"d_head": 4, "H": 3}),  # inner width 12 != d = 32, as in GPT-3 XL
]


@pytest.mark.parametrize("spec,extra", VARIANTS)
def test_logits_have_shape_b_t_v_and_are_finite(spec, extra):
    torch.manual_seed(0)
    model = module(spec, None, **{**TINY, **extra}).build()
    ids = torch.randint(0, TINY["V"], (3, 11))
    logits = model(ids)
    assert logits.shape == (3, 11, TINY["V"])
    assert torch.isfinite(logits).all()


@pytest.mark.parametrize("spec,extra", VARIANTS)
def test_changing_a_later_token_never_changes_earlier_logits(spec, extra):
    torch.manual_seed(0)
    model = module(spec, None, **{**TINY, **extra}).build().eval()
    ids = torch.randint(0, TINY["V"], (2, 16))
    changed = ids.clone()
    changed[:, 9] = (changed[:, 9] + 1) % TINY["V"]
    with torch.no_grad():
        a, b = model(ids), model(changed)
    torch.testing.assert_close(a[:, :9], b[:, :9], rtol=0, atol=0)
    assert not torch.allclose(a[:, 9:], b[:, 9:])


def test_a_few_steps_on_one_batch_lower_the_loss():
    model = module("gpt2", None, **TINY).build()
    report = train(model, TINY["V"], device="cpu", batch=4, seq_len=16, steps=8, lr=3e-3)
    assert report.losses[-1] < report.losses[0] - 0.5
    assert report.tokens_per_second > 0 and report.peak_bytes > 0


def test_tied_head_shares_the_embedding_matrix():
    model = module("gpt2", None, **TINY).build()
    assert model.head.weight is model.embed.token.weight
    untied = module("gpt2", None, **TINY, tie_embeddings=False).build()
    assert untied.head.weight is not untied.embed.token.weight


def test_build_on_meta_allocates_nothing_and_casts_dtype():
    model = module("gpt3", "175b").build(device="meta", dtype=torch.bfloat16)
    p = next(model.parameters())
    assert p.device.type == "meta" and p.dtype == torch.bfloat16


@pytest.mark.parametrize("spec,extra", [("gpt2", {}), ("llama", {"KV": 2, "d_ff": 48})], ids=["gpt2", "llama-fused"])
def test_no_graph_breaks_under_dynamo(spec, extra):
    """The benchmark's dense models compile to one graph (the llama one with fused projections)."""
    values = {k: v for k, v in TINY.items() if k != "T" or spec == "gpt2"}
    model = module(spec, "2-7b" if spec == "llama" else None, fused=spec == "llama", **values, **extra).build()
    explanation = torch._dynamo.explain(model)(torch.randint(0, TINY["V"], (2, 8)))
    assert explanation.graph_break_count == 0 and explanation.graph_count == 1


@pytest.mark.gpu
@pytest.mark.parametrize("spec,extra", VARIANTS)
def test_forward_and_backward_on_cuda_in_bf16(spec, extra):
    model = module(spec, None, **{**TINY, "L": 4, "d": 256, "H": 8, **extra}).build(device="cuda")
    ids = torch.randint(0, TINY["V"], (4, 32), device="cuda")
    with torch.autocast("cuda", dtype=torch.bfloat16):
        logits = model(ids)
    assert logits.dtype == torch.bfloat16 and torch.isfinite(logits.float()).all()
    logits.float().sum().backward()
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in model.parameters())


def test_torch_compile_gives_the_eager_logits():
    torch.manual_seed(0)
    model = module("gpt2", None, **TINY).build().eval()
    ids = torch.randint(0, TINY["V"], (2, 8))
    with torch.no_grad():
        eager = model(ids)
        compiled = torch.compile(model)(ids)
    torch.testing.assert_close(compiled, eager, rtol=1e-4, atol=1e-5)


def test_a_banded_layer_sees_only_its_window():
    """GPT-3's alternating dense / locally banded layers: a local layer's output at position t does not
    depend on inputs more than `band` tokens back; the dense layer's does."""
    torch.manual_seed(0)
    model = module("gpt3", None, **{**TINY, "band": 3}).build().eval()
    dense, local = model.blocks[0].attn, model.blocks[1].attn
    assert dense.window is None and local.window == 3
    x = torch.randn(1, 12, TINY["d"])
    changed = x.clone()
    changed[:, 4] += 1.0
    with torch.no_grad():
        assert torch.equal(local(x)[:, 7:], local(changed)[:, 7:])  # 7 - 4 >= band: out of reach
        assert not torch.allclose(local(x)[:, 4:7], local(changed)[:, 4:7])
        assert not torch.allclose(dense(x)[:, 7:], dense(changed)[:, 7:])


def _check_checkpointing(model, inputs: tuple, targets: torch.Tensor) -> None:
    """Switching model.checkpointing on keeps the loss and the gradients and keeps under 60% of the saved tensors."""
    import torch.nn.functional as F

    from archcalc.codegen.measure import saved_activation_bytes

    def step():
        logits = model(*inputs)
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1))

    results = {}
    for flag in (False, True):
        model.checkpointing = flag
        assert model.checkpointing is flag
        model.zero_grad()
        loss = step()
        loss.backward()
        results[flag] = (loss.item(), {n: p.grad.clone() for n, p in model.named_parameters()},
                         saved_activation_bytes(step, model.parameters()))
    (loss0, grads0, saved0), (loss1, grads1, saved1) = results[False], results[True]
    assert loss0 == pytest.approx(loss1, rel=1e-6)
    for name in grads0:
        torch.testing.assert_close(grads0[name], grads1[name], rtol=1e-5, atol=1e-6)
    assert saved1 < 0.6 * saved0, (saved0, saved1)


def test_activation_checkpointing_keeps_gradients_and_saves_memory():
    """model.checkpointing = True recomputes each block in backward: same loss and gradients, and autograd
    keeps far less from the forward pass (each block's input instead of its activations)."""
    torch.manual_seed(0)
    model = module("gpt2", None, **{**TINY, "L": 4}).build()
    ids = torch.randint(0, TINY["V"], (2, 16))
    _check_checkpointing(model, (ids,), ids)


@pytest.mark.parametrize("spec,size", [("t5", "small"), ("transformer_2017", "base")])
def test_activation_checkpointing_in_both_towers_of_an_encoder_decoder(spec, size):
    """Encoder-decoder models: model.checkpointing switches both towers; same loss and gradients, less kept."""
    torch.manual_seed(0)
    model = module(spec, size, V=97, L=3, d=32, H=4, d_head=8, d_ff=48).build()
    src, tgt = torch.randint(0, 97, (2, 12)), torch.randint(0, 97, (2, 9))
    model.checkpointing = True
    assert model.encoder.checkpointing and model.decoder.checkpointing
    _check_checkpointing(model, (src, tgt), tgt)
