"""``archcalc run``'s limits and output (issue 26): ``--nproc`` is bounded by the machine (CPU cores on the CPU, visible
GPUs on CUDA) and each rank's memory is checked before any process starts, like the single-process run's; rates are
printed in a unit that fits (never "0.000 TFLOP/s"); progress goes to stderr, the results to stdout after it."""

from __future__ import annotations

import pytest

import archcalc.codegen.device
import archcalc.codegen.distributed
from archcalc.cli.run_cmd import figure, flop_rate
from archcalc.codegen.device import check_processes
from archcalc.codegen.distributed import RankReport
from archcalc.errors import UsageError

TINY_GPT2 = ["gpt2", "--size", "small", "--set", "L=2", "--set", "d=32", "--set", "H=4", "--set", "V=97", "--set", "T=32",
             "--batch", "2", "--seq-len", "8", "--steps", "2", "--device", "cpu"]
LLAMA_7B = ["llama", "--size", "2-7b", "--batch", "2", "--seq-len", "128", "--device", "cpu"]
GiB = 2**30


def one_line_exit_2(run) -> str:
    assert run.status == 2, (run.status, run.err)
    assert "Traceback" not in run.err and run.err.count("\n") == 1, run.err
    return run.err.strip()


@pytest.fixture
def launches(monkeypatch):
    """No process is started: the launcher is replaced by one that records its jobs and reports each rank empty."""
    jobs = []

    def launch_isolated(**job):
        jobs.append(job)
        return [RankReport(rank, losses=[1.0] * job["steps"]) for rank in range(job["nproc"])]

    monkeypatch.setattr(archcalc.codegen.distributed, "launch_isolated", launch_isolated)
    return jobs


@pytest.fixture
def two_cores(monkeypatch):
    monkeypatch.setattr(archcalc.codegen.device, "usable_cores", lambda: 2)


# -- how many processes ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("nproc", ["3", "1000", "1000000000000000000"])
def test_more_processes_than_cores_are_refused_before_any_starts(cli, launches, two_cores, nproc):
    message = one_line_exit_2(cli("run", *TINY_GPT2, "--nproc", nproc, "--batch", nproc))
    assert f"--nproc {int(nproc):,}" in message and "2 CPU core(s)" in message and "--nproc 2 or fewer" in message
    assert launches == []


def test_as_many_processes_as_cores_start(cli, launches, two_cores):
    cli("run", *TINY_GPT2, "--nproc", "2")
    assert [job["nproc"] for job in launches] == [2]


def test_cuda_ranks_are_bounded_by_the_visible_gpus(monkeypatch):
    class Cuda:
        @staticmethod
        def device_count() -> int:
            return 2

    class Torch:
        cuda = Cuda

    check_processes(2, "cuda", Torch)
    with pytest.raises(UsageError, match="--nproc 3: one process per GPU, and this machine has 2 CUDA device"):
        check_processes(3, "cuda", Torch)
    with pytest.raises(UsageError, match="--device cuda:1 with --nproc: rank r takes cuda:r"):
        check_processes(1, "cuda:1", Torch)


def test_usable_cores_is_at_least_one_and_at_most_the_machines():
    import os

    assert 1 <= archcalc.codegen.device.usable_cores() <= (os.cpu_count() or 1)


# -- memory per rank ------------------------------------------------------------------------------------------------


def test_llama_7b_on_two_cpu_ranks_is_refused_before_any_starts(cli, launches, two_cores, monkeypatch):
    """Each rank builds the whole model in fp32 (27 GB for Llama-2-7B) before sharding it: two ranks share the CPU's
    memory. 64 GiB free holds neither two builds nor two halves of the training state (16 bytes a parameter / 2)."""
    monkeypatch.setattr(archcalc.codegen.device, "free_bytes", lambda device, torch=None: 64 * GiB)
    message = one_line_exit_2(cli("run", *LLAMA_7B, "--nproc", "2"))
    assert message.startswith("2 processes (each builds 6,738,415,616 fp32 parameters (25.1 GiB)")
    assert "on cpu, which has 64.0 GiB free" in message and "--nproc" in message
    assert launches == []


def test_the_ranks_share_the_cpus_memory(cli, launches, two_cores, monkeypatch):
    """What fits one rank does not fit two on the same memory: the need is counted per rank, times the ranks."""
    from archcalc.backends.count import count
    from tests.helpers import bound

    build = 4 * count(bound("gpt2", "small", L=2, d=32, H=4, V=97, T=32)).total  # the largest a rank holds here
    monkeypatch.setattr(archcalc.codegen.device, "free_bytes", lambda device, torch=None: build + build // 2)
    one_line_exit_2(cli("run", *TINY_GPT2, "--nproc", "2"))
    assert launches == []
    monkeypatch.setattr(archcalc.codegen.device, "free_bytes", lambda device, torch=None: 2 * build + 2**20)
    cli("run", *TINY_GPT2, "--nproc", "2")
    assert len(launches) == 1


def test_each_gpu_is_checked_for_its_rank(monkeypatch):
    from archcalc.cli.run_sharded import _check_fits
    from tests.helpers import lowered

    low = lowered("gpt2", "small")
    need = 4 * 124439808
    free = {"cuda:0": 2 * need, "cuda:1": need // 2}
    monkeypatch.setattr(archcalc.codegen.device, "free_bytes", lambda device, torch=None: free[device])
    with pytest.raises(UsageError, match=r"^rank 1 \(which builds 124,439,808 fp32 parameters .* on cuda:1, which has"):
        _check_fits(low, need, 2, "cuda", 1, 128)
    _check_fits(low, need, 1, "cuda", 1, 128)  # rank 0 alone fits cuda:0


# -- what run prints ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("rate, shown", [(3.2e14, "320 TFLOP/s"), (1.5e12, "1.50 TFLOP/s"), (2.345e10, "23.4 GFLOP/s"),
                                         (7.1e8, "710 MFLOP/s"), (999.96e9, "1.00 TFLOP/s"), (0.0, "0 FLOP/s")])
def test_flop_rates_take_the_unit_that_fits(rate, shown):
    assert flop_rate(rate) == shown


@pytest.mark.parametrize("value, shown", [(1234567.8, "1,234,568"), (100.0, "100"), (12.345, "12.3"), (0.4, "0.400"),
                                          (0.0001234, "0.000123"), (9.996, "10.0")])
def test_small_rates_keep_three_significant_digits(value, shown):
    assert figure(value) == shown


def test_run_prints_progress_on_stderr_and_the_results_on_stdout(cli):
    r = cli("run", *TINY_GPT2, "--steps", "4")
    assert r.status == 0, r.err
    assert r.err.splitlines() == [f"step {n}/4  loss " + line.split("loss ")[1] for n, line in enumerate(r.err.splitlines(), 1)]
    lines = r.out.splitlines()
    assert len(lines) == 4 and "0.000 TFLOP/s" not in r.out and "step " not in r.out
    assert lines[3].split(" achieved")[0].endswith("FLOP/s") and float(lines[3].split()[0].replace(",", "")) > 0
    assert "tokens/s" in lines[2] and not lines[2].startswith("0 tokens/s")


def test_a_compiler_failure_is_one_line_that_says_to_run_without_compile(cli, monkeypatch):
    """Inductor failed to build a kernel for a hybrid model on an H100 (torch 2.11): one line, not an internal error.
    The failure is stood in for by an exception of Inductor's module raised by the compiled model."""
    import torch

    failure = type("InductorError", (RuntimeError,), {"__module__": "torch._inductor.exc"})

    def compiled(model, *args, **kwargs):
        def call(*inputs, **named):
            raise failure("TypeError: list indices must be integers or slices, not NoneType")
        return call

    monkeypatch.setattr(torch, "compile", compiled)
    message = one_line_exit_2(cli("run", *TINY_GPT2, "--compile"))
    assert "torch.compile failed on this model (InductorError: TypeError: list indices" in message
    assert message.endswith("it runs without --compile")


def test_an_error_of_the_model_itself_is_not_blamed_on_the_compiler(cli, monkeypatch):
    import torch

    def compiled(model, *args, **kwargs):
        def call(*inputs, **named):
            raise ValueError("a bug in the model")
        return call

    monkeypatch.setattr(torch, "compile", compiled)
    r = cli("run", *TINY_GPT2, "--compile")
    assert r.status == 3 and "internal error (ValueError: a bug in the model" in r.err and "torch.compile" not in r.err
