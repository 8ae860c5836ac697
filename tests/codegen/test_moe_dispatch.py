"""The generated mixture of experts' dispatch (tokens sorted by expert once, one contiguous slice per expert, summed
back with index_add_): the same function as running every expert on every token and keeping the chosen ones, with
experts that get no tokens too; without autograd such experts do not run (decoding one token runs top_k experts,
not all), with it every expert runs, so each has a gradient; FlopCounterMode still counts the routed top-k FLOPs."""

from __future__ import annotations

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from archcalc.codegen.emit import emit
from archcalc.ir.ops import BATCH, SEQ, forward_ops
from tests.helpers import codegen_spec, loaded, lowered

E, K = 5, 2


@pytest.fixture(scope="module")
def low():
    return lowered(codegen_spec("moe"), E=E, K=K, d_ff=12)


@pytest.fixture(scope="module")
def model(low):
    torch.manual_seed(0)
    return loaded(emit(low, "test")).build(dtype=torch.float64).eval()


def dense_reference(moe, x: torch.Tensor) -> torch.Tensor:
    """Every expert on every token, then each token's chosen experts mixed by the softmax over their logits."""
    B, T, d = x.shape
    flat = x.reshape(-1, d)
    logits, chosen = moe.router(flat).topk(moe.top_k, dim=-1)  # (N, k)
    weights = logits.float().softmax(dim=-1)  # (N, k): in float32, as the generated module mixes them
    every = torch.stack([expert(flat) for expert in moe.experts])  # (E, N, d)
    picked = every[chosen, torch.arange(flat.shape[0])[:, None]]  # (N, k, d)
    y = (picked * weights[..., None]).sum(dim=1)
    y = y + moe.shared(flat) * torch.sigmoid(moe.shared_gate(flat))
    return y.view(B, T, d)


@pytest.mark.parametrize("grad", [False, True], ids=["no-grad", "grad"])
@pytest.mark.parametrize("shape", [(1, 1), (1, 2), (3, 7)], ids=["one-token", "two-tokens", "batch"])
def test_dispatch_equals_every_expert_on_every_token(model, shape, grad):
    moe = model.blocks[0].mlp
    x = torch.randn(*shape, moe.router.in_features, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    with torch.set_grad_enabled(grad):
        torch.testing.assert_close(moe(x), dense_reference(moe, x), rtol=1e-12, atol=1e-12)


def test_experts_without_tokens_run_only_under_autograd(model):
    moe = model.blocks[0].mlp
    calls = []
    hooks = [expert.register_forward_pre_hook(lambda m, args: calls.append(args[0].shape[0])) for expert in moe.experts]
    try:
        x = torch.randn(1, 1, moe.router.in_features, dtype=torch.float64)
        with torch.no_grad():
            moe(x)
        assert sorted(calls) == [1] * K  # decoding one token: its top_k experts only
        calls.clear()
        moe(x).sum().backward()
        assert sorted(calls) == [0] * (E - K) + [1] * K  # training: every expert, so that each has a gradient
        for expert in moe.experts:
            assert all(p.grad is not None for p in expert.parameters())
    finally:
        for hook in hooks:
            hook.remove()
        model.zero_grad(set_to_none=True)


@pytest.mark.parametrize("batch,seq", [(1, 1), (2, 3)])
def test_flop_counter_counts_routed_top_k_with_idle_experts(low, batch, seq):
    """One token (or six) over five experts: some experts get none; FlopCounterMode counts exactly forward_matmul's
    matmuls (scaled_dot_product_attention counts 0 on the CPU)."""
    torch.manual_seed(0)
    model = loaded(emit(low, "test")).build().eval()
    numeric = {**low.binding.numeric(), BATCH: batch, SEQ: seq}
    matmuls = sum(int(op.total_full.xreplace(numeric)) for op in forward_ops(low) if op.kind == "matmul")
    with FlopCounterMode(display=False) as counter, torch.no_grad():
        model(torch.randint(0, 101, (batch, seq)))
    assert counter.get_total_flops() == matmuls
