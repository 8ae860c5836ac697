"""Benchmark: issue 26's hostile cases re-run as a user runs them, each in a fresh ``python -m archcalc`` process.

Each case states the exit status it must end with (0: answered, 2: refused) and is timed as a whole process,
start-up included. Target: every case within 3 s, a refusal in one line on stderr, no traceback.

    python benchmarks/hostile.py [--write docs/benchmarks.md]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _record import machine_line, record  # noqa: E402

REFERENCE = ROOT / "tests" / "data" / "hf-reference"
LIMIT_S = 3.0
INFER = ["--hardware", "h100-sxm", "--batch", "1", "--prompt", "128"]


def _config(folder: Path, name: str, base: str, **keys) -> str:
    config = json.loads((REFERENCE / base).read_text(encoding="utf-8")) if base else {}
    config.pop("layer_types", None)  # the hostile key alone decides each layer's kind
    config.update(keys)
    path = folder / f"{name}.json"
    path.write_text(json.dumps(config), encoding="utf-8")
    return str(path)


def _pattern_spec(folder: Path, entries: int) -> str:
    """A spec whose attention pattern has ``entries`` entries over as many layers (issue 26.2)."""
    kinds = ", ".join("local" if (i * i + 3 * i) % 7 < 3 else "global" for i in range(entries))
    text = (ROOT / "spec" / "gemma2.yaml").read_text(encoding="utf-8")
    path = folder / "long_pattern.yaml"
    path.write_text(text.replace("pattern: [local, global]", f"pattern: [{kinds}]"), encoding="utf-8")
    return str(path)


def cases(folder: Path) -> list[tuple[str, list[str], int]]:
    """(what, argv after ``archcalc``, expected exit status)."""
    fifo = folder / "config.json"
    os.mkfifo(fifo)
    gemma3 = dict(model_type="gemma3_text", vocab_size=262144, hidden_size=1152, intermediate_size=6912,
                  num_hidden_layers=26, num_attention_heads=4, num_key_value_heads=1, head_dim=256)
    out = [
        ("qwen2 max_window_layers = L = 10^9", ["count", "--hf", _config(
            folder, "qwen2_1e9", "qwen2-7b.json", num_hidden_layers=10**9, max_window_layers=10**9,
            use_sliding_window=False)], 0),
        ("qwen2 max_window_layers = L = 10^18", ["count", "--hf", _config(
            folder, "qwen2_1e18", "qwen2-7b.json", num_hidden_layers=10**18, max_window_layers=10**18,
            use_sliding_window=False)], 0),
        ("gemma3 sliding_window_pattern = 10^9", ["count", "--hf", _config(
            folder, "gemma3_1e9", "", **gemma3, sliding_window_pattern=10**9)], 0),
        ("gemma3 pattern 2,000 over 26 layers", ["count", "--hf", _config(
            folder, "gemma3_2000", "", **gemma3, sliding_window_pattern=2000)], 0),
        ("attention pattern of 9,500 entries, L = 10,000", ["count", _pattern_spec(folder, 9_500),
                                                             "--set", "L=10000"], 0),
        ("infer --new-tokens 10^7, sliding window", ["infer", "mistral", *INFER, "--new-tokens", "10000000"], 0),
        ("infer --new-tokens 10^7, does not fit", ["infer", "llama", "--size", "2-7b", *INFER, "--new-tokens",
                                                   "10000000"], 2),
        ("infer --new-tokens 10^18", ["infer", "llama", "--size", "2-7b", *INFER, "--new-tokens", "10**18"], 2),
        ("run --nproc 10^18", ["run", "gpt2", "--size", "small", "--nproc", "1000000000000000000"], 2),
        ("run --nproc 1000", ["run", "gpt2", "--size", "small", "--nproc", "1000"], 2),
        ("count --hf FIFO", ["count", "--hf", str(fifo)], 2),
        ("import-hf FIFO", ["import-hf", str(fifo)], 2),
        ("solve --multiple-of typo", ["solve", "llama", "--target-params", "7B", "--multiple-of", "dd=64"], 2),
        ("solve --target-params -3B", ["solve", "llama", "--target-params", "-3B"], 2),
        ("solve --fix repeated", ["solve", "llama", "--target-params", "7B", "--fix", "L=32", "--fix", "L=30"], 2),
        ("a mamba config", ["count", "--hf", _config(folder, "mamba", "", model_type="mamba", hidden_size=768,
                                                      num_hidden_layers=24, vocab_size=50280)], 2),
        ("my1b.yml when my1b.yaml exists", ["count", str(folder / "my1b.yml")], 2),
    ]
    (folder / "my1b.yaml").write_text((ROOT / "spec" / "gpt2.yaml").read_text(encoding="utf-8"), encoding="utf-8")
    return out


def run_case(argv: list[str], cwd: Path) -> tuple[float, int, str]:
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "archcalc", *argv], cwd=cwd, capture_output=True, text=True,
                          timeout=60, stdin=subprocess.DEVNULL)
    return time.perf_counter() - start, proc.returncode, proc.stderr


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", type=Path, help="record the result in this markdown file")
    args = parser.parse_args()
    rows, bad = [], 0
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for what, argv, expected in cases(folder):
            seconds, status, stderr = run_case(argv, folder)
            lines = [line for line in stderr.splitlines() if line.strip()]
            ok = status == expected and seconds <= LIMIT_S and "Traceback" not in stderr and (
                expected == 0 or len(lines) == 1)
            bad += not ok
            said = lines[-1].replace(tmp, "…")[:110] if lines else ""
            rows.append(f"| {what} | {seconds:.2f} | {status} | {len(lines)} | {said.replace('|', '/')} |"
                        + ("" if ok else " **missed** |"))
            print(f"{'ok ' if ok else 'BAD'} {seconds:5.2f}s exit {status} {what}: {said}", flush=True)
    summary = f"{len(rows) - bad} of {len(rows)} cases within {LIMIT_S:g} s with the expected exit and one line"
    print(summary)
    if args.write:
        record(args.write, "hostile", "Hostile inputs (issue 26), each a fresh process", [
            machine_line(), "- command: `python benchmarks/hostile.py --write docs/benchmarks.md`",
            f"- {summary} (time includes Python start-up and imports)", "",
            "| case | seconds | exit | stderr lines | last line |", "|---|---:|---:|---:|---|", *rows])
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
