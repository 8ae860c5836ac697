"""The CPU speed benchmark (benchmarks/cpu_speed.py) runs end to end in its --quick form: for each model the first
training losses agree and the greedy tokens equal transformers' (it exits otherwise), and a --quick run is never
recorded."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_cpu_speed_benchmark_quick_run(process, tmp_path):
    pytest.importorskip("transformers")
    page = tmp_path / "benchmarks.md"
    proc = process.run(["benchmarks/cpu_speed.py", "--quick", "--write", str(page)], cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = [line for line in proc.stdout.splitlines() if line.startswith("| ") and "×" in line]
    assert len(rows) == 9, proc.stdout  # 3 models x (training step, decode at batch 1, decode at batch 8)
    assert {row.split(" | ")[0].strip("| ") for row in rows} == {"mixtral-moe", "llama-dense", "gpt2-mini"}
    assert "transformers' experts:" in proc.stdout and "torch " in proc.stdout
    assert not page.exists() and "not recorded" in proc.stderr
