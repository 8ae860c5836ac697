"""Sharded training on the CPU with two (four) processes (gloo, loopback): the generated file's parallelize() under
torch.distributed's elastic launcher, for GPT-2-, Llama- and Mixtral-shaped tiny models.

(a) data parallel with FSDP2 (ZeRO-3), (b) tensor parallel and (c) pipeline stages (1F1B; with tensor parallelism
inside each) give the loss trajectory of one process on the same data (fp32); (d) each rank holds exactly the parameter, gradient and AdamW-state bytes that
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


@pytest.mark.parametrize("nproc, tp", [(2, 1), (4, 2)], ids=["pp2", "pp2-tp2"])
def test_pipeline_stages_train_as_one_process_and_hold_what_archcalc_says(single, nproc, tp):
    """Llama-shaped, two pipeline stages (1F1B, two micro-batches), alone or with tensor parallelism inside each stage:
    each rank holds its stage's blocks (and the embeddings or the norm and head), as parallel_plan places them."""
    from archcalc.codegen.distributed import launch

    low = _lowered("llama")
    reports = launch(emit(low, "test"), nproc, tp=tp, pp=2, vocab=MODELS["llama"]["V"])
    plan = Plan(dp=nproc // (2 * tp), zero=3, tp=tp, pp=2, microbatches=2, precision="fp32")
    held = []
    for report in reports:
        assert report.losses == pytest.approx(single["llama"].losses, rel=1e-5, abs=1e-6)
        stage = report.rank // (tp * plan.dp)
        expected = states_by_stage(low, plan, tp_rank=report.rank % tp, dp_rank=report.rank // tp % plan.dp)[stage]
        assert [report.parameter_bytes, report.gradient_bytes, report.optimizer_bytes] == expected, report
        held.append(report.parameter_bytes)
    if tp == 1:  # the stages together hold the model once over (tp ranks would each hold the norms)
        assert sum(held) == single["llama"].parameter_bytes


def test_expert_parallelism_trains_as_one_process_and_holds_what_archcalc_says(single):
    """Mixtral-shaped, two data-parallel ranks that are also two expert-parallel ranks: each holds half of every
    layer's routed experts, the tokens go to their experts' rank and back by all-to-all."""
    from archcalc.codegen.distributed import launch

    low = _lowered("mixtral")
    reports = launch(emit(low, "test"), 2, ep=2, vocab=MODELS["mixtral"]["V"])
    plan = Plan(dp=2, zero=3, ep=2, precision="fp32")
    for report in reports:
        assert report.losses == pytest.approx(single["mixtral"].losses, rel=1e-5, abs=1e-6)
        expected = states_by_stage(low, plan, dp_rank=report.rank)[0]
        assert [report.parameter_bytes, report.gradient_bytes, report.optimizer_bytes] == expected, report


@pytest.mark.parametrize("name, layers", [("llama", 5), ("mixtral", 4)])
@pytest.mark.parametrize("pp", [2, 3, 4])
def test_pipeline_stages_cut_the_model_where_memory_places_it(name, layers, pp):
    """Without processes: the generated Pipeline keeps on each stage the parameters parallel_plan puts there (uneven
    pieces, a stage with no blocks), and the stages' forwards chained give the whole model's logits."""
    import torch

    from archcalc.codegen.load import load_source

    low = lowered(name, separate=True, **{**MODELS[name], "L": layers})
    module = load_source(emit(low, "test"))
    torch.manual_seed(0)
    whole = module.build()
    tokens = torch.randint(0, MODELS[name]["V"], (2, 8))
    expected = whole(tokens)
    x = tokens
    for stage in range(pp):
        torch.manual_seed(0)
        part = module.Pipeline(module.build(), stage, pp)
        held = sum(p.numel() * p.element_size() for p in part.parameters())
        assert held == states_by_stage(low, Plan(pp=pp, precision="fp32"))[stage][0], stage
        x = part(x)
    assert torch.allclose(x, expected, atol=1e-5)


def test_pipeline_parallelism_is_refused_where_a_stage_cannot_stand_in():
    from archcalc.codegen.parallel import pipeline_unsupported

    assert pipeline_unsupported(_lowered("llama").root) == pipeline_unsupported(_lowered("mixtral").root) == []
    assert any("tied" in r for r in pipeline_unsupported(_lowered("gpt2").root))


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


def test_run_nproc_pp_reports_each_stage_beside_archcalc_memory(cli):
    r = cli("run", *TINY_LLAMA, "--nproc", "2", "--pp", "2", "--json")
    assert r.status == 0, r.err
    result = r.json()["results"][0]
    assert result["pipeline_parallel"] == 2 and result["microbatches"] == 2 and result["data_parallel"] == 1
    assert [rank["stage"] for rank in result["ranks"]] == [0, 1]
    for rank in result["ranks"]:
        assert rank["equal"] and rank["measured"] == rank["archcalc"] and len(rank["losses"]) == 2
    assert result["ranks"][0]["losses"] == result["ranks"][1]["losses"]


TINY_MIXTRAL = ["mixtral", "--size", "8x7b", "--set", "L=2", "--set", "d=32", "--set", "H=4", "--set", "KV=2", "--set",
                "d_ff=20", "--set", "E=4", "--set", "K=2", "--set", "V=64", "--steps", "2", "--batch", "2", "--seq-len", "8",
                "--device", "cpu"]


def test_run_nproc_ep_reports_each_rank_beside_archcalc_memory(cli):
    r = cli("run", *TINY_MIXTRAL, "--nproc", "2", "--ep", "2", "--json")
    assert r.status == 0, r.err
    result = r.json()["results"][0]
    assert result["expert_parallel"] == 2 and result["data_parallel"] == 2 and len(result["ranks"]) == 2
    for rank in result["ranks"]:
        assert rank["equal"] and rank["measured"] == rank["archcalc"] and len(rank["losses"]) == 2


def test_run_nproc_pp_tp_on_four_processes(cli):
    """The issue's `--nproc 4 --pp 2 --tp 2`: two stages of two tensor-parallel ranks (a machine of 4 cores or more)."""
    from archcalc.codegen.device import usable_cores

    if usable_cores() < 4:
        pytest.skip("archcalc run refuses more processes than this machine's cores")
    r = cli("run", *TINY_LLAMA, "--nproc", "4", "--pp", "2", "--tp", "2", "--json")
    assert r.status == 0, r.err
    ranks = r.json()["results"][0]["ranks"]
    assert [rank["stage"] for rank in ranks] == [0, 0, 1, 1] and all(rank["equal"] for rank in ranks)


@pytest.mark.parametrize("extra, message", [
    (["--nproc", "3", "--tp", "2"], "--tp 2 does not divide --nproc 3"),
    (["--tp", "2"], "give --nproc too"),
    (["--nproc", "2", "--tp", "2", "--set", "H=3", "--set", "KV=3", "--set", "d=30"], "--tp 2"),
    (["--nproc", "2", "--sequence-parallel"], "--sequence-parallel needs --tp"),
    (["--nproc", "2", "--compile"], "without --compile"),
    (["--pp", "2"], "give --nproc too"),
    (["--nproc", "2", "--pp", "2", "--set", "L=1"], "--pp 2: more pipeline stages than the model's 1 blocks"),
    (["--nproc", "2", "--pp", "2", "--microbatches", "1"], "the 1F1B schedule needs at least one per stage"),
    (["--nproc", "2", "--microbatches", "2"], "--microbatches needs --pp"),
    (["--nproc", "2", "--pp", "2", "--batch", "3"], "--batch 3 does not split evenly"),
    (["--nproc", "2", "--ep", "2"], "--ep 2: llama has no routed experts to place"),
    (["--ep", "2"], "give --nproc too"),
])
def test_run_nproc_refuses_bad_settings(cli, extra, message):
    _refused(cli, TINY_LLAMA, extra, message)


@pytest.mark.parametrize("extra, message", [
    (["--nproc", "2", "--ep", "3"], "--ep 3 does not divide the 2 data-parallel ranks"),
    (["--nproc", "2", "--tp", "2", "--ep", "2"], "--ep 2 does not divide the 1 data-parallel ranks"),
    (["--nproc", "2", "--ep", "2", "--set", "E=1", "--set", "K=1"], "--ep 2: more expert-parallel ranks than the 1"),
])
def test_run_nproc_refuses_bad_expert_parallelism(cli, extra, message):
    _refused(cli, TINY_MIXTRAL, extra, message)


def test_expert_parallelism_that_leaves_a_rank_without_experts_is_refused():
    """4 experts in torch.chunk pieces over 3 ranks: 2, 2 and none (a plan `memory` counts, the run refuses)."""
    from archcalc.cli.run_sharded import _check_experts
    from archcalc.errors import UsageError

    low = lowered("mixtral", separate=True, **{**MODELS["mixtral"], "E": 4})
    with pytest.raises(UsageError, match="--ep 3: pieces of 2 of the 4 routed experts leave the last rank without any"):
        _check_experts(3, 3, low)
    _check_experts(2, 2, low)  # 2 and 2: allowed


def _refused(cli, command, extra, message):
    changed = {extra[i + 1].split("=")[0] for i, a in enumerate(extra) if a == "--set"}  # each hyperparameter set once
    base = [x for i, x in enumerate(command) if not (x == "--set" and command[i + 1].split("=")[0] in changed)
            and not (i and command[i - 1] == "--set" and x.split("=")[0] in changed)]
    r = cli("run", *base, *extra)
    assert r.status == 2 and message in r.err and len(r.err.strip().splitlines()) == 1, r.err
