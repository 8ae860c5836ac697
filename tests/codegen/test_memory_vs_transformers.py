"""What a training step keeps for backward, generated module vs transformers, on the GPU benchmark's model
shapes (scaled down), fp32 on the CPU: the generated module keeps no more, fused or not. The GPU benchmark
measures the real peak; this catches, without a GPU, a change that makes the generated module hold more (such
as a fused projection whose value view keeps the whole qkv output alive)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

pytest.importorskip("transformers")
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from gpu import MODELS, build_pair  # noqa: E402

from archcalc.codegen.measure import saved_activation_bytes  # noqa: E402

SMALL = {"gpt2": {"n_embd": 128, "n_layer": 2, "n_head": 4, "vocab_size": 300, "n_positions": 64},
         "llama": {"hidden_size": 128, "intermediate_size": 344, "num_hidden_layers": 2, "num_attention_heads": 8,
                   "num_key_value_heads": 2, "vocab_size": 300, "max_position_embeddings": 64},
         "mixtral": {"hidden_size": 128, "intermediate_size": 344, "num_hidden_layers": 2, "num_attention_heads": 8,
                     "num_key_value_heads": 2, "vocab_size": 300, "max_position_embeddings": 64, "num_local_experts": 4,
                     "num_experts_per_tok": 2}}


@pytest.mark.parametrize("fused", [False, True], ids=["separate", "fused"])
@pytest.mark.parametrize("name", list(MODELS))
def test_generated_keeps_no_more_for_backward_than_transformers(name, fused):
    config = {**MODELS[name], **SMALL[MODELS[name]["model_type"]]}
    generated, reference, _ = build_pair(config, "cpu", fused=fused)
    ids = torch.randint(0, config["vocab_size"], (2, 64), generator=torch.Generator().manual_seed(0))

    def loss(logits):
        return F.cross_entropy(logits.float().view(-1, logits.shape[-1]), ids.view(-1))

    ours = saved_activation_bytes(lambda: loss(generated(ids)), generated.parameters())
    theirs = saved_activation_bytes(lambda: loss(reference(input_ids=ids).logits), reference.parameters())
    assert ours <= theirs, (ours, theirs)


@pytest.mark.parametrize("name", list(MODELS))
def test_bf16_autocast_losses_agree_with_transformers(name):
    """The GPU benchmark's precision (bf16 autocast), on the CPU: with the same weights the first losses agree (to 0.1%;
    measured: 4e-5 at most; the benchmark allows 2% on the GPU), and every gradient is finite."""
    config = {**MODELS[name], **SMALL[MODELS[name]["model_type"]]}
    generated, reference, _ = build_pair(config, "cpu", fused=True)
    ids = torch.randint(0, config["vocab_size"], (2, 65), generator=torch.Generator().manual_seed(0))
    losses = {}
    for label, model in (("generated", generated), ("transformers", reference)):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            logits = model(ids[:, :-1]) if label == "generated" else model(input_ids=ids[:, :-1]).logits
        assert logits.dtype == torch.bfloat16
        loss = F.cross_entropy(logits.float().flatten(0, 1), ids[:, 1:].flatten())
        loss.backward()
        assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)
        losses[label] = loss.item()
    assert abs(losses["generated"] - losses["transformers"]) <= 1e-3 * losses["transformers"], losses
