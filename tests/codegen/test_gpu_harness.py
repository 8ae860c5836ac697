"""The GPU benchmark harness runs end to end on the CPU with tiny configs (its figures are not recorded)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_gpu_benchmark_harness_runs_on_cpu(process):
    pytest.importorskip("transformers")
    proc = process.run(["benchmarks/gpu.py", "--tiny", "--device", "cpu", "--compile", "off"], cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = [line for line in proc.stdout.splitlines() if line.startswith("- ")]
    assert sum("ratio" in line for line in lines) == 4  # gpt2-small, llama-1b, gpt3-xl-1.3b, mixtral-moe
    assert "device CPU" in proc.stdout and "fused projections" in proc.stdout
    for line in [line for line in lines if "ratio" in line]:  # the generated model got transformers' weights: the same first loss (fp32 on the CPU)
        ours, theirs = re.search(r"first loss ([\d.]+) vs ([\d.]+)", line).groups()
        assert abs(float(ours) - float(theirs)) <= 1e-4, line


def test_gpu_benchmark_refuses_models_that_compute_different_functions(process):
    """The harness stops if the two models disagree before timing (here: dropout left on in transformers' GPT-2, at
    0.9 and from a fixed seed: a tiny random model's loss barely moves under dropout, so an unseeded 0.1 could land
    within the tolerance now and then)."""
    pytest.importorskip("transformers")
    code = ("import sys; sys.argv = ['gpu.py', '--tiny', '--device', 'cpu', '--compile', 'off', '--models', 'gpt2-small'];"
            "sys.path.insert(0, 'benchmarks'); import torch; torch.manual_seed(0); import gpu; gpu.NO_DROPOUT.clear();"
            "gpu.MODELS['gpt2-small'] = {**gpu.MODELS['gpt2-small'], 'resid_pdrop': 0.9, 'embd_pdrop': 0.9, 'attn_pdrop': 0.9};"
            "sys.exit(gpu.main())")
    proc = process.run(["-c", code], cwd=ROOT)
    assert proc.returncode != 0 and "first losses differ" in proc.stderr + proc.stdout


def test_recording_a_model_replaces_its_section_and_drops_the_placeholder(tmp_path):
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from _record import drop_section, record

    page = tmp_path / "benchmarks.md"
    page.write_text("# Benchmarks\n\n<!-- bench:gpu:begin -->\n## GPU\n\n- not yet\n<!-- bench:gpu:end -->\n\n"
                    "<!-- bench:other:begin -->\nkept\n<!-- bench:other:end -->\n")
    record(page, "gpu-llama-1b", "llama", ["- first"])
    record(page, "gpu-llama-1b", "llama", ["- second"])
    drop_section(page, "gpu")
    text = page.read_text()
    assert "not yet" not in text and "- first" not in text and text.count("- second") == 1 and "kept" in text


def test_decode_benchmark_harness_runs_on_cpu_and_records_nothing(process, tmp_path):
    pytest.importorskip("transformers")
    target = tmp_path / "benchmarks.md"
    proc = process.run(["benchmarks/infer.py", "--tiny", "--device", "cpu", "--batches", "1,2", "--write", str(target)], cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert sum(line.startswith("- batch ") and "roofline bound" in line for line in proc.stdout.splitlines()) == 2
    assert not target.exists() and "not recorded" in proc.stderr


def test_the_recorded_command_keeps_what_decides_the_figures_only():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from gpu import command_line

    argv = ["--models", "llama-1b", "--write", "docs/benchmarks.md", "--json=out.json", "--profile", "2", "--batch", "16"]
    assert command_line(argv) == "--models llama-1b --batch 16"


def test_profiling_needs_cuda(process):
    proc = process.run(["benchmarks/gpu.py", "--tiny", "--device", "cpu", "--profile", "1"], cwd=ROOT)
    assert proc.returncode == 2 and "--profile needs a CUDA device" in proc.stderr


def test_kernels_are_grouped_by_what_they_do():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from gpu import kernel_kind, kernel_summary

    kernels = [("nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT", 3000.0),
               ("cudnn_generated_fort_native_sdpa_sm90_flash_bprop", 1000.0),
               ("triton_red_fused__to_copy_add_mean_mul_pow_rsqrt_0", 500.0),
               ("void at::native::(anonymous namespace)::multi_tensor_apply_kernel<FusedAdamMathFunctor>", 400.0),
               ("void at::native::vectorized_elementwise_kernel<4, CUDAFunctor_add>", 100.0)]
    assert [kernel_kind(name) for name, _ in kernels] == [
        "matmul", "attention", "fused by inductor (Triton)", "optimizer", "ATen elementwise and reductions"]
    summary = kernel_summary(kernels, steps=2, step_ms=5.0, rows=2)
    assert "kernels busy 2.5 ms" in summary  # 5,000 µs over 2 steps
    assert "matmul" in summary.splitlines()[1] and "1.50 ms   30.0% of the step" in summary.splitlines()[1]
    assert summary.count("nvjet") == 1 and "FusedAdam" not in summary  # only the top 2 kernels are listed


def test_each_setting_and_card_gets_its_own_section(monkeypatch):
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import argparse

    import gpu

    monkeypatch.setattr(gpu.torch.cuda, "get_device_name", lambda: "NVIDIA H200")
    defaults = argparse.Namespace(weights="fp32", batch=8, seq_len=1024, loss="model", separate=False)
    assert gpu.section("llama-1b", defaults) == ("gpu-llama-1b-h200", "Generated vs transformers on the GPU: llama-1b (NVIDIA H200)")
    other = argparse.Namespace(**{**vars(defaults), "batch": 16, "weights": "bf16"})
    key, title = gpu.section("llama-1b", other)
    assert key == "gpu-llama-1b-bf16-weights-16-1024-tokens-h200"
    assert title == "Generated vs transformers on the GPU: llama-1b (bf16 weights, 16 × 1024 tokens) (NVIDIA H200)"
