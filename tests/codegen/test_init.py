"""Initialisation: a freshly built generated module starts as transformers' ``_init_weights`` starts the same model.

For every model type, a tiny transformers model and the generated module are built fresh from the same config
(initializer_range 0.05, not the default 0.02, so the importer must read it; T5: initializer_factor 0.7); the
module's weights, exported under transformers' names (``to_hf_state_dict``), are compared tensor by tensor: a
tensor transformers starts at a constant (norm weights one, or zero for Gemma's (1 + w) norms; biases zero) is
that constant, every other tensor has transformers' standard deviation within 20% (GPT-2's residual projections at
0.05 / sqrt(2 L), T5's per-matrix scales, gpt-oss's sinks and router bias) and a mean near zero.
The bundled GPT-3 and the 2017 Transformer (no transformers class) are checked against their recipes directly.
"""

from __future__ import annotations

import math

import pytest
import torch

transformers = pytest.importorskip("transformers")

from tests.codegen.hf_cases import CASES, build_hf, configs, generated  # noqa: E402
from tests.helpers import module  # noqa: E402


def _fresh_pair(case: str):
    config, _ = configs(case)
    if config.model_type == "t5":
        config.initializer_factor = 0.7
    else:
        config.initializer_range = 0.05
    torch.manual_seed(0)
    hf = build_hf(config)
    gen = generated(config)
    return hf.state_dict(), gen.to_hf_state_dict(gen.build())


@pytest.mark.parametrize("case", list(CASES))
def test_init_statistics_equal_transformers(case):
    theirs, ours = _fresh_pair(case)
    assert set(ours) == set(theirs)
    for name, reference in theirs.items():
        mine = ours[name].float()
        reference = reference.float()
        if torch.equal(mine, reference):  # a tensor transformers computes, not draws (Mamba's A_log = log(1..N))
            continue
        if bool((reference == reference.flatten()[0]).all()):
            assert torch.equal(mine, reference), f"{name}: transformers starts it at {reference.flatten()[0].item()}"
        elif reference.numel() >= 256:
            ratio = mine.std().item() / reference.std().item()
            assert 0.8 < ratio < 1.25, f"{name}: std {mine.std().item():.4g}, transformers {reference.std().item():.4g}"
            assert abs(mine.mean().item()) < 5 * reference.std().item() / math.sqrt(reference.numel()), name


def test_gpt3_scales_its_residual_projections_by_depth():
    model = module("gpt3", None, V=64, T=16, L=8, d=256, H=4, band=4).build()
    block = model.blocks[3]
    assert abs(block.attn.qkv.weight.std().item() - 0.02) < 0.002
    for weight in (block.attn.out.weight, block.mlp.down.weight):
        assert abs(weight.std().item() - 0.02 / math.sqrt(16)) < 0.0005
    assert torch.equal(block.attn.qkv.bias, torch.zeros_like(block.attn.qkv.bias))


def test_the_2017_transformer_starts_as_fairseq():
    model = module("transformer_2017", "base", V=64, L=2, d=128, H=4, d_ff=256).build()
    w = model.encoder.blocks[0].mlp.up.weight  # (256, 128): Xavier-uniform bound sqrt(6 / (128 + 256))
    assert w.abs().max().item() <= math.sqrt(6 / 384) + 1e-6 and abs(w.std().item() - math.sqrt(2 / 384)) < 0.005
    assert abs(model.embed.token.weight.std().item() - 128**-0.5) < 0.01
    assert model.head.weight is model.embed.token.weight


def test_gpt2_small_starts_at_the_uniform_loss():
    """Initial loss of GPT-2 small on random tokens is within 5% of ln(V) (nanoGPT: about 10.82)."""
    torch.manual_seed(0)
    model = module("gpt2", "small").build()
    ids = torch.randint(0, 50257, (2, 64))
    with torch.no_grad():
        logits, loss = model(ids[:, :-1], targets=ids[:, 1:])
    assert logits.shape == (2, 63, 50257)
    assert abs(loss.item() - math.log(50257)) < 0.05 * math.log(50257)
