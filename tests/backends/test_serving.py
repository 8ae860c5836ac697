"""archcalc serve: paged KV blocks, the sequences that fit, block-scaled weight formats — each figure derived by hand
here, and the per-token KV bytes checked against what a generated module caches."""

from __future__ import annotations

from fractions import Fraction

import pytest

from archcalc.backends.formats import FORMATS, weight_format
from archcalc.backends.infer.hardware import hardware
from archcalc.backends.serving import KvGroup, blocks_held, kv_bytes_per_token, plan_serving, sequence_bytes
from archcalc.errors import UsageError
from tests.helpers import lowered


def test_opt_13b_caches_819200_bytes_a_token():
    """The PagedAttention paper (Kwon et al. 2023): OPT-13B's KV cache is about 800 KB a token: 2 (K, V) x 40 layers
    x 5,120 x 2 bytes."""
    assert kv_bytes_per_token(lowered("opt", "13b"), Fraction(2)) == 2 * 40 * 5120 * 2 == 819_200


@pytest.mark.parametrize(("tokens", "window", "blocks"), [
    (1, None, 1), (16, None, 1), (17, None, 2), (100, None, 7),
    (100, 32, 3),  # positions 68..99: blocks 4, 5, 6
    (96, 32, 2),  # positions 64..95: blocks 4, 5 (aligned)
    (20, 32, 2),  # shorter than the window: every block
])
def test_blocks_by_hand(tokens, window, blocks):
    assert blocks_held(tokens, window, 16) == blocks


def test_a_sequence_of_a_sliding_and_full_model_by_hand():
    """Two full layers of 64 elements a token and three sliding ones of window 32: at 100 tokens in blocks of 16, the
    full layers keep 7 blocks, the sliding ones 3; bf16; plus 1,000 bytes of state."""
    groups = [KvGroup(2, 64, None), KvGroup(3, 64, 32)]
    assert sequence_bytes(groups, 100, 16, Fraction(2), Fraction(1000)) == (2 * 7 + 3 * 3) * 16 * 64 * 2 + 1000


def test_llama_3_8b_on_one_h100_by_hand():
    """Llama-3-8B in bf16 on one H100 80GB at gpu_memory_utilization 0.9, prefill chunks of 8,192 tokens, 256
    sequences a step: the blocks and the sequences that fit at 8k context."""
    L, d, KV, d_head, d_ff, V, params = 32, 4096, 8, 128, 14336, 128256, 8_030_261_248
    weights = 2 * params
    activations = 8192 * d * 2 + 8192 * 3 * d_ff * 2 + 256 * V * 4  # residual, gate/up/product, fp32 logits
    budget = Fraction(9, 10) * 80 * 10**9 - weights - activations
    block = 16 * 2 * L * KV * d_head * 2  # 16 tokens of K and V in every layer: 2,097,152 B
    plan = plan_serving(lowered("llama", "3-8b"), hardware("h100-sxm"))
    assert plan.weights_bytes == weights and plan.activation_bytes == activations and plan.block_bytes == block
    assert plan.blocks == budget // block == 26_243
    assert plan.concurrency(8192) == budget // (8192 // 16 * block) == 51
    longest = plan.largest_context(51)
    assert 51 * plan.per_sequence(longest) <= budget < 51 * plan.per_sequence(longest + 1)


def test_nvfp4_and_mxfp4_of_a_4096_square_by_hand():
    n = 4096
    assert FORMATS["nvfp4"].bytes(n, n) == n * n // 2 + n * (n // 16) * 1 + 4  # E4M3 per 16, FP32 per tensor
    assert FORMATS["mxfp4"].bytes(n, n) == n * n // 2 + n * (n // 32) * 1  # E8M0 per 32
    assert FORMATS["mxfp8"].bytes(n, n) == n * n + n * (n // 32)
    assert FORMATS["fp8-block"].bytes(n, n) == n * n + (n // 128) ** 2 * 4
    assert weight_format("int4-g64").bytes(n, n) == n * n // 2 + n * (n // 64) * 2
    assert FORMATS["nvfp4"].bytes(3, 17) == 26 + 3 * 2 + 4  # 51 elements: 25.5 bytes, whole; a partial block


def test_a_bad_format_is_refused():
    with pytest.raises(UsageError, match="expected one of nvfp4"):
        weight_format("fp3")
    with pytest.raises(UsageError, match="group size"):
        weight_format("int4-g0")


@pytest.mark.parametrize("case", ["deepseek_v3", "gpt_oss"])
def test_per_token_bytes_are_what_the_generated_module_caches(case):
    """Latent attention (DeepSeek-V3: the latent and the rotary key, for all heads) and sliding windows with sinks
    (gpt-oss, shorter than its window here): after generating T tokens in fp32 the cache holds T x the per-token bytes."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from archcalc.hf import spec_from_hf_config
    from archcalc.ir import lower
    from archcalc.spec.bind import bind
    from tests.codegen.hf_cases import configs, generated
    from tests.helpers import cache_bytes, generate_keeping_cache

    config, _ = configs(case)
    window = getattr(config, "sliding_window", None) or 10**9
    prompt, new = 2, min(3, window - 2)
    model = generated(config).build().eval()
    cache = generate_keeping_cache(model, torch.randint(0, config.vocab_size, (1, prompt)), new)
    spec = spec_from_hf_config(config.to_dict(), "tiny.json")
    low = lower(bind(spec, next(iter(spec.sizes))))
    assert cache_bytes(cache)[0] == (prompt + new) * kv_bytes_per_token(low, Fraction(4))


def test_prefix_caching_holds_the_shared_blocks_once():
    """8,192-token sequences sharing their first 2,048 tokens (128 whole blocks, every layer full attention): the
    budget holds the shared blocks once and each sequence's own 6,144 tokens."""
    plan = plan_serving(lowered("llama", "3-8b"), hardware("h100-sxm"), shared_prefix=2048)
    block = 16 * 131_072
    assert plan.concurrency(8192) == (plan.budget - 128 * block) // ((512 - 128) * block)
    assert plan.concurrency(8192) > plan_serving(lowered("llama", "3-8b"), hardware("h100-sxm")).concurrency(8192)


def test_decode_that_never_turns_compute_bound_says_why():
    """Llama-2-7B (multi-head attention) on the A100 at 640 tokens: each added sequence brings ~44 FLOPs per byte (its
    KV cache read dominates), below the A100's ridge of 312 TFLOP/s / 2.039 TB/s = 153: no batch is compute-bound.
    Llama-3-8B (8 key/value heads) at a short context crosses the H100's ridge at some batch."""
    from archcalc.backends.serving import latency
    from tests.helpers import bound

    never = latency(bound("llama", "2-7b"), "a100-80gb", 16, 512, 128, "bfloat16", "bfloat16", None, 1)
    assert never.compute_bound_batch is None and never.marginal_intensity < never.ridge == Fraction(312_000, 2039)
    crosses = latency(bound("llama", "3-8b"), "h100-sxm", 16, 16, 4, "bfloat16", "bfloat16", None, 1)
    assert crosses.compute_bound_batch is not None and crosses.marginal_intensity > crosses.ridge
