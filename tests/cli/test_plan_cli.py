"""archcalc plan on the command line: the report, the JSON, and one clear line for bad input."""

from __future__ import annotations

import json

import pytest

ARGS = ("plan", "llama", "--size", "2-7b", "--gpus", "16", "--hardware", "h100", "--tokens", "100B", "--seq-len", "4096")


def test_the_report_names_the_best_plan_and_the_time(cli):
    run = cli(*ARGS, "--mfu", "40%", "--price", "2.5")
    assert run.status == 0, run.err
    assert "best plan: tp " in run.out and "days" in run.out and "GPU-hours" in run.out and "$" in run.out
    assert "MFU 40.0%" in run.out and "estimates:" in run.out


def test_json_matches_the_report_and_is_exact_where_it_counts(cli):
    data = json.loads(cli(*ARGS, "--json").out)
    assert data["command"] == "plan" and data["size"] == "2-7b"
    assert data["global_batch_sequences"] == 4 * 2**20 // 4096 and data["steps"] == -(-100 * 10**9 // (4 * 2**20))
    assert isinstance(data["model_flops_per_step"], int) and data["model_flops_total"] == data["model_flops_per_step"] * data["steps"]
    best = data["best"]
    assert best["data_parallel"] * best["tensor_parallel"] * best["pipeline_parallel"] * best["context_parallel"] == 16
    assert all(isinstance(v["bytes"], int) for v in best["communication_per_gpu"].values())
    assert abs(best["mfu"] - 0.4) < 1e-6 and "assumed" in data["notes"][0]  # the default MFU, said
    assert data["gpu_hours"] == pytest.approx(16 * data["train_seconds"] / 3600)


def test_calibrate_reads_a_run(cli, tmp_path):
    run = tmp_path / "run.json"
    run.write_text(json.dumps({"command": "run", "results": [{"achieved_tflops": 400.0, "peak_tflops": 989.4,
                                                              "device_name": "NVIDIA H100 80GB HBM3"}]}))
    data = json.loads(cli(*ARGS, "--calibrate", str(run), "--json").out)
    assert data["matmul_efficiency"] == pytest.approx(400 / 989.4) and "measured" in data["matmul_efficiency_from"]


@pytest.mark.parametrize(("extra", "said"), [
    (("--mfu", "1.5"), "--mfu '1.5': expected a number above 0 and at most 1"),
    (("--mfu", "x"), "--mfu 'x': expected a number"),
    (("--price", "-1"), "--price '-1': expected a number above 0"),
    (("--global-batch", "0"), "--global-batch '0': expected at least 1"),
    (("--gpus", "1e30"), None),
    (("--memory-reserve", "0.95"), "at most 9/10"),
    (("--hardware", "h1000"), "unknown"),
    (("--calibrate", "/nonexistent/run.json"), "--calibrate /nonexistent/run.json: cannot read it"),
])
def test_bad_input_is_one_line(cli, extra, said):
    args = list(ARGS)
    if "--hardware" in extra:
        args[args.index("--hardware") + 1] = extra[1]
        extra = ()
    if "--gpus" in extra:
        args[args.index("--gpus") + 1] = str(10**30)
        extra = ()
    run = cli(*args, *extra)
    assert run.status == 2 and run.out == "" and len(run.err.strip().splitlines()) == 1, run.err
    assert said is None or said in run.err


def test_a_calibration_file_that_is_not_a_run(cli, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    run = cli(*ARGS, "--calibrate", str(bad))
    assert run.status == 2 and f"{bad}:1:1: expected the output of 'archcalc run --json'" in run.err


def test_a_huge_cluster_is_refused_before_any_work(cli):
    run = cli(*ARGS[:4], "--gpus", str(10**12), *ARGS[6:])
    assert run.status == 2 and "--gpus 1,000,000,000,000: at most 16,777,216" in run.err


def test_nothing_fits(cli):
    run = cli("plan", "llama", "--size", "3.1-405b", "--gpus", "8", "--hardware", "h100", "--tokens", "1T")
    assert run.status == 2 and "no plan fits" in run.err and len(run.err.strip().splitlines()) == 1


def test_causal_attention_flops_count_less_for_the_same_step(cli):
    full = json.loads(cli(*ARGS, "--json").out)
    causal = json.loads(cli(*ARGS, "--attention-flops", "causal", "--json").out)
    assert causal["attention_flops"] == "causal" and causal["model_flops_per_step"] < full["model_flops_per_step"]
