"""Sharded training on the CPU with two processes (gloo, loopback): the generated file's parallelize() under
torch.distributed's elastic launcher, for GPT-2-, Llama- and Mixtral-shaped tiny models.

(a) data parallel with FSDP2 (ZeRO-3) and (b) tensor parallel give the loss trajectory of one process on the same
data (fp32); (c) each rank holds exactly the parameter, gradient and AdamW-state bytes that
archcalc.backends.parallel_plan computes (the figures behind `archcalc memory --dp 2 --zero 3 / --tp 2
--precision fp32`). Slow (the module is in tests/conftest.py's SLOW_MODULES): each case starts processes, about 10 s on 2 cores.
"""

from __future__ import annotations

import pytest

from archcalc.backends.parallel_plan import Plan, states_by_stage
from archcalc.codegen.emit import emit
from tests.helpers import lowered

pytest.importorskip("torch.distributed")

MODELS = {  # odd widths on purpose: shards of unequal length (torch.chunk's last piece is shorter)
    "gpt2": dict(V=65, T=32, L=2, d=24, H=4),
    "llama": dict(V=67, L=2, d=32, H=4, KV=2, d_ff=50),
    "mixtral": dict(V=64, L=2, d=32, H=4, KV=2, d_ff=20, E=4, K=2),
}


def _lowered(name: str):
    return lowered(name, separate=True, **MODELS[name])  # tensor parallelism splits q, k, v apart


@pytest.fixture(scope="module")
def single():
    from archcalc.codegen.distributed import launch

    return {name: launch(emit(_lowered(name), "test"), 1, vocab=MODELS[name]["V"])[0] for name in MODELS}


@pytest.mark.parametrize("name", list(MODELS))
@pytest.mark.parametrize("tp", [1, 2], ids=["dp2-zero3", "tp2"])
def test_two_processes_train_as_one_and_hold_what_archcalc_says(single, name, tp):
    from archcalc.codegen.distributed import launch

    low = _lowered(name)
    reports = launch(emit(low, "test"), 2, tp=tp, vocab=MODELS[name]["V"])
    for report in reports:
        assert report.losses == pytest.approx(single[name].losses, rel=1e-5, abs=1e-6)
        dp = 2 // tp
        plan = Plan(dp=dp, zero=3, tp=tp, precision="fp32")
        expected = states_by_stage(low, plan, tp_rank=report.rank % tp, dp_rank=report.rank // tp)[0]
        assert [report.parameter_bytes, report.gradient_bytes, report.optimizer_bytes] == expected, report
    assert single[name].parameter_bytes == states_by_stage(low, Plan(precision="fp32"))[0][0]  # one process holds all


def test_sequence_parallelism_trains_as_one_process(single):
    """Llama-shaped, tp=2 with sequence-parallel norms: the residual stream split along the sequence between blocks."""
    from archcalc.codegen.distributed import launch

    reports = launch(emit(_lowered("llama"), "test"), 2, tp=2, vocab=MODELS["llama"]["V"], sequence_parallel=True)
    for report in reports:
        assert report.losses == pytest.approx(single["llama"].losses, rel=1e-5, abs=1e-6)


def test_sequence_parallelism_is_refused_where_the_plan_has_no_answer():
    from archcalc.backends.sharding import sequence_parallel_plan

    assert sequence_parallel_plan(_lowered("llama").root)[1] == []
    assert "mixtures of experts" in sequence_parallel_plan(_lowered("mixtral").root)[1]
    assert any("learned positions" in r for r in sequence_parallel_plan(_lowered("gpt2").root)[1])


TINY_LLAMA = ["llama", "--size", "2-7b", "--set", "L=2", "--set", "d=32", "--set", "H=4", "--set", "KV=2", "--set", "d_ff=48",
              "--set", "V=64", "--steps", "2", "--batch", "2", "--seq-len", "8", "--device", "cpu"]


def test_run_nproc_reports_each_rank_beside_archcalc_memory(cli):
    r = cli("run", *TINY_LLAMA, "--nproc", "2", "--json")
    assert r.status == 0, r.err
    result = r.json()["results"][0]
    assert result["data_parallel"] == 2 and result["zero_stage"] == 3 and len(result["ranks"]) == 2
    for rank in result["ranks"]:
        assert rank["equal"] and rank["measured"] == rank["archcalc"] and len(rank["losses"]) == 2
    assert result["ranks"][0]["losses"] == result["ranks"][1]["losses"]


@pytest.mark.parametrize("extra, message", [
    (["--nproc", "3", "--tp", "2"], "--tp 2 does not divide --nproc 3"),
    (["--tp", "2"], "give --nproc too"),
    (["--nproc", "2", "--tp", "2", "--set", "H=3", "--set", "KV=3", "--set", "d=30"], "--tp 2"),
    (["--nproc", "2", "--sequence-parallel"], "--sequence-parallel needs --tp"),
    (["--nproc", "2", "--compile"], "without --compile"),
])
def test_run_nproc_refuses_bad_settings(cli, extra, message):
    changed = {extra[i + 1].split("=")[0] for i, a in enumerate(extra) if a == "--set"}  # each hyperparameter set once
    base = [x for i, x in enumerate(TINY_LLAMA) if not (x == "--set" and TINY_LLAMA[i + 1].split("=")[0] in changed)
            and not (i and TINY_LLAMA[i - 1] == "--set" and x.split("=")[0] in changed)]
    r = cli("run", *base, *extra)
    assert r.status == 2 and message in r.err and len(r.err.strip().splitlines()) == 1, r.err
