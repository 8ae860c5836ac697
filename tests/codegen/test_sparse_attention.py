"""DeepSeek Sparse Attention in the generated module (DeepSeek-V3.2, GLM-5): its forward FLOPs are what FlopCounterMode
counts (the indexer's projections and its scores of the full square, the attention dense over the square with the
unchosen keys masked, as transformers computes it), and GLM-5's layers that reuse the previous layer's selection are
refused with the reason. Logits, loss, greedy generation, the cache's bytes and each decode step's FLOPs are the
tiny cases' (tests/codegen/hf_cases.py: deepseek_v32, glm_moe_dsa) in test_hf_parity, test_generate and
test_infer_flops."""

from __future__ import annotations

import pytest
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

transformers = pytest.importorskip("transformers")

from archcalc.backends.flops import flops  # noqa: E402
from archcalc.codegen.emit import emit  # noqa: E402
from archcalc.codegen.errors import UnsupportedError  # noqa: E402
from archcalc.hf import spec_from_hf_config  # noqa: E402
from archcalc.ir import lower  # noqa: E402
from archcalc.spec.bind import bind  # noqa: E402
from tests.codegen.hf_cases import configs, generated  # noqa: E402


@pytest.mark.parametrize("case", ["deepseek_v32", "glm_moe_dsa"])
@pytest.mark.parametrize("seq", [2, 11])  # fewer tokens than top_k (3): every earlier key; more: the top 3
def test_forward_flops_equal_flop_counter(case, seq):
    config, _ = configs(case)
    spec = spec_from_hf_config(config.to_dict(), "tiny.json")
    model = generated(config).build().eval()
    ids = torch.randint(0, config.vocab_size, (2, seq), generator=torch.Generator().manual_seed(0))
    with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter, torch.no_grad():
        model(ids)
    assert counter.get_total_flops() == flops(bind(spec, next(iter(spec.sizes))), seq_len=seq, batch=2).forward_matmul


def test_layers_that_reuse_the_previous_selection_are_refused():
    config, _ = configs("glm_moe_dsa")
    data = config.to_dict() | {"indexer_types": ["full", "shared", "full"]}
    spec = spec_from_hf_config(data, "tiny.json")
    with pytest.raises(UnsupportedError, match="reuse the previous layer's top-k selection"):
        emit(lower(bind(spec, next(iter(spec.sizes)))), "test")
