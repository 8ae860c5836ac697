"""What a training step keeps for backward, generated module vs transformers, on the GPU benchmark's three model
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

from codegen.measure import saved_activation_bytes  # noqa: E402

SMALL = {"gpt2": {"n_embd": 128, "n_layer": 2, "n_head": 4, "vocab_size": 300, "n_positions": 64},
         "llama": {"hidden_size": 128, "intermediate_size": 344, "num_hidden_layers": 2, "num_attention_heads": 8,
                   "num_key_value_heads": 2, "vocab_size": 300, "max_position_embeddings": 64}}


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
