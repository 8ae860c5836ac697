"""archcalc memory's per-GPU split under pipeline, context, expert and sequence parallelism, worked out by hand
on small shapes (the data- and tensor-parallel split is measured on real runs in tests/codegen/test_distributed.py)."""

from __future__ import annotations

import pytest

from archcalc.backends.activations import activations
from archcalc.backends.count import count
from archcalc.backends.memory import memory
from archcalc.backends.parallel_plan import Plan, kv_by_stage, states_by_stage
from archcalc.errors import UsageError
from archcalc.ir import lower
from archcalc.spec import load_spec
from archcalc.spec.bind import bind, parse_overrides

LLAMA = dict(V=100, L=4, d=32, H=4, KV=2, d_ff=64)


def _bind(name, **values):
    spec = load_spec(name)
    return bind(spec, None, parse_overrides(spec, [f"{k}={str(v).lower()}" for k, v in values.items()]))


def test_pipeline_stages_split_the_blocks_and_put_the_ends_on_the_first_and_last():
    b = _bind("llama", **LLAMA)
    low = lower(b)
    total = count(b).total
    stages = states_by_stage(low, Plan(pp=2, precision="fp32"))
    d, V = 32, 100
    assert sum(s[0] for s in stages) == 4 * total  # untied: every tensor on exactly one stage
    embedding, head_end = 4 * V * d, 4 * (V * d + d)  # the head and the final norm on the last stage
    assert stages[0][0] - embedding == stages[1][0] - head_end  # two blocks each


def test_a_tied_head_keeps_a_copy_on_the_last_stage():
    b = _bind("gpt2", V=100, T=16, L=4, d=32, H=4)
    stages = states_by_stage(lower(b), Plan(pp=2, precision="fp32"))
    assert sum(s[0] for s in stages) == 4 * (count(b).total + 100 * 32)


def test_1f1b_keeps_pp_minus_stage_micro_batches_in_flight():
    b = _bind("llama", **LLAMA)
    low = lower(b)
    acts = activations(low, 64, 8, mixed=True)
    per_layer = acts.per_layer_bytes()
    one_stage = memory(b, 64, 8, plan=Plan(pp=1, microbatches=4)).per_gpu()["activations_bytes"]
    assert one_stage == -(-(4 * per_layer + acts.outside_bytes()) // 4)  # one micro-batch of 2 sequences at a time
    two = memory(b, 64, 8, plan=Plan(pp=2, microbatches=4)).per_gpu()
    first = -(-(2 * per_layer) * 2 // 4)  # stage 0: 2 blocks, min(2 - 0, 4) = 2 micro-batches
    last = -(-(2 * per_layer + acts.outside_bytes()) // 4)  # stage 1: 1 micro-batch, and the head's tensors
    assert two["activations_bytes"] in (first, last)


def test_context_parallelism_splits_tokens_of_activations_and_kv():
    b = _bind("llama", **LLAMA)
    whole, halves = (memory(b, 64, 2, plan=Plan(cp=c)).per_gpu() for c in (1, 2))
    assert halves["kv_cache_bytes"] * 2 == whole["kv_cache_bytes"]
    assert halves["activations_bytes"] == -(-whole["activations_bytes"] // 2)


def test_sequence_parallelism_splits_the_residual_stream_too():
    b = _bind("llama", **LLAMA)
    tp, sp = (memory(b, 64, 2, plan=Plan(tp=2, sp=s)).per_gpu()["activations_bytes"] for s in (False, True))
    acts = activations(lower(b), 64, 2, mixed=True)
    assert sp == sum(x // 2 for _, x, _ in acts.per_layer) * 4 + sum(x // 2 for _, x, _ in acts.outside) < tp


def test_expert_parallelism_places_experts_and_shards_them_over_the_rest():
    b = _bind("mixtral", V=64, L=2, d=32, H=4, KV=2, d_ff=16, E=8, K=2)
    low = lower(b)
    expert = 3 * 32 * 16  # gate, up, down of one expert
    dense = states_by_stage(low, Plan(dp=8, zero=3, ep=1, precision="fp32"))[0][0]
    placed = states_by_stage(low, Plan(dp=8, zero=3, ep=4, precision="fp32"))[0][0]
    # ep=1: 8 experts a layer sharded 8 ways; ep=4: 2 experts a layer on this rank, sharded over 8 / 4 = 2 ranks
    assert placed - dense == 4 * 2 * (2 * expert // 2 - 8 * expert // 8)
    assert kv_by_stage(low, Plan(ep=4, dp=8), 10, 1) == kv_by_stage(low, Plan(), 10, 1)


@pytest.mark.parametrize("plan, message", [
    (Plan(sp=True), "--sp"), (Plan(dp=6, ep=4), "--ep 4 must divide --dp 6"), (Plan(pp=9), "--pp 9"),
    (Plan(zero=4), "--zero 4"), (Plan(precision="fp8"), "--precision"),
])
def test_impossible_plans_are_usage_errors(plan, message):
    with pytest.raises(UsageError, match=message):
        memory(_bind("llama", **LLAMA), 16, 1, plan=plan).per_gpu()


def test_the_command_line_takes_the_plan(cli):
    r = cli("memory", "llama", "--size", "3-70b", "--seq-len", "4096", "--batch", "8", "--dp", "8", "--zero", "3", "--tp", "8",
            "--sp", "--pp", "2", "--microbatches", "8", "--cp", "2", "--json")
    assert r.status == 0, r.err
    parallel = r.json()["results"][0]["parallel"]
    assert parallel["pipeline_parallel"] == 2 and parallel["sequence_parallel"] is True and parallel["conventions"]
    assert all(isinstance(v, int) for v in parallel["per_gpu"].values())
    bad = cli("memory", "llama", "--size", "3-8b", "--seq-len", "16", "--batch", "3", "--microbatches", "2")
    assert bad.status == 2 and "--microbatches 2 does not divide --batch 3" in bad.err
