"""Activation memory: the estimate against what autograd really saves for the generated module (CPU,
fp32; on a GPU the same estimate under bf16 autocast is checked with torch.cuda.max_memory_allocated)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from archcalc.backends.activations import activations
from archcalc.codegen.measure import saved_activation_bytes
from tests.helpers import lowered, module

GPT2_SMALL = dict(V=50257, T=1024, L=12, d=768, H=12)


def measure(model, vocab: int, batch: int, seq: int) -> int:
    ids = torch.randint(0, vocab, (batch, seq))

    def step():
        logits = model(ids)
        return F.cross_entropy(logits.float().view(-1, logits.shape[-1]), ids.reshape(-1))

    return saved_activation_bytes(step, model.parameters())


@pytest.mark.parametrize("values,batch,seq", [
    (GPT2_SMALL, 1, 128),
    ({**GPT2_SMALL, "qkv_bias": False, "tie_embeddings": False}, 2, 64),
    (dict(V=1000, T=256, L=2, d=128, H=4), 2, 256),
])
def test_gpt2_activation_estimate_within_15_percent_of_measured(values, batch, seq):
    torch.manual_seed(0)
    model = module("gpt2", None, **values).build()
    measured = measure(model, values["V"], batch, seq)
    estimate = activations(lowered("gpt2", None, **values), seq, batch, mixed=False).total_bytes()
    assert abs(estimate - measured) / measured < 0.15, (estimate, measured)


@pytest.mark.gpu
def test_gpt2_small_activations_on_cuda_bf16():
    model = module("gpt2", "small").build(device="cuda")
    ids = torch.randint(0, 50257, (4, 1024), device="cuda")

    def step():
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = model(ids)
        return F.cross_entropy(logits.float().view(-1, logits.shape[-1]), ids.view(-1))

    measured = saved_activation_bytes(step, model.parameters())
    estimate = activations(lowered("gpt2", "small"), 1024, 4, mixed=True).total_bytes()
    assert abs(estimate - measured) / measured < 0.15, (estimate, measured)
