"""archcalc infer's generation figures are what the generated module does: FlopCounterMode over the prefill and over
each cached decode step of ``generate()``'s calls equals ``prefill_matmul_dense`` (the counter counts SDPA's full
P x P square) and each ``decode_step_matmul``, and the cache holds ``kv_cache_bytes`` — for a tiny model of every
decoder model type we import (windows, sinks, soft-capping, MoE routing, DeepSeek's latent attention, GQA/MQA).
On the CPU, with SDPA's math backend, which FlopCounterMode counts as the matmuls it is made of."""

from __future__ import annotations

import pytest
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

transformers = pytest.importorskip("transformers")

from archcalc.backends.infer import infer  # noqa: E402
from archcalc.hf import spec_from_hf_config  # noqa: E402
from archcalc.spec.bind import bind  # noqa: E402
from tests.codegen.hf_cases import CASES, configs, generated  # noqa: E402
from tests.helpers import cache_bytes, pin_real_slots  # noqa: E402

DECODERS = [case for case in CASES if not case.startswith(("t5", "bert"))]


def _counted(fn) -> int:
    with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter, torch.no_grad():
        fn()
    return counter.get_total_flops()


@pytest.mark.parametrize("case", DECODERS)
def test_prefill_and_every_decode_step_equal_flop_counter(case):
    config, _ = configs(case)
    spec = spec_from_hf_config(config.to_dict(), "tiny.json")
    batch, prompt, new = 2, 7, 9  # past the cases' windows of 5
    binding = bind(spec, next(iter(spec.sizes)))
    r = infer(binding, "h100", batch, prompt, new, dtype="float32")
    model = generated(config).build().eval()
    pin_real_slots(model, binding)  # zero-compute experts: each token's real slots as the FLOPs count them
    cache = model.new_cache(batch, prompt + new)
    ids = torch.randint(0, config.vocab_size, (batch, prompt), generator=torch.Generator().manual_seed(0))
    assert _counted(lambda: model(ids, cache=cache)) == r.flops.prefill_dense
    for step in r.flops.decode_steps:
        token = torch.randint(0, config.vocab_size, (batch, 1))
        assert _counted(lambda token=token: model(token, cache=cache)) == step
    assert cache_bytes(cache) == (r.kv_cache_bytes, r.state_bytes)


ZERO_EXPERTS = [case for case in DECODERS if CASES[case][1].get("zero_expert_num")]


@pytest.mark.parametrize("case", ZERO_EXPERTS)
def test_zero_experts_forward_and_train_step_equal_flop_counter(case):
    """Zero-compute experts: with each token's real slots pinned to real_top_k (pin_real_slots), FlopCounterMode over a
    forward pass is archcalc's forward_matmul and over forward + backward its train_step_matmul (a slot on a zero
    expert, the identity, adds no matmul either way)."""
    from archcalc.backends.flops import flops

    config, _ = configs(case)
    spec = spec_from_hf_config(config.to_dict(), "tiny.json")
    binding = bind(spec, next(iter(spec.sizes)))
    model = generated(config).build()
    pin_real_slots(model, binding)
    batch, seq = 2, 9
    ids = torch.randint(0, config.vocab_size, (batch, seq), generator=torch.Generator().manual_seed(0))
    exact = flops(binding, seq, batch)
    with sdpa_kernel(SDPBackend.MATH):
        with FlopCounterMode(display=False) as forward:
            model(ids)
        with FlopCounterMode(display=False) as step:
            model(ids).float().sum().backward()
    assert (forward.get_total_flops(), step.get_total_flops()) == (exact.forward_matmul, exact.train_step_matmul)
