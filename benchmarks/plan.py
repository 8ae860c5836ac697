"""Benchmark: ``archcalc plan`` answers in under 5 s — issue 30's acceptance command (Llama 3 405B on 16,384 H100s),
a MoE (DeepSeek-V3 on 2,048 H800s) and a small dense model, each timed as a whole command (process start, imports,
every plan enumerated, checked against memory and timed) beside a bare ``archcalc count gpt3 --size small`` measured
alternately, since start-up is a share of it on a shared machine.

    python benchmarks/plan.py [--runs 3] [--write docs/benchmarks.md]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _record import machine_line, record  # noqa: E402

COMMANDS = [
    ["llama", "--size", "3.1-405b", "--gpus", "16384", "--hardware", "h100-sxm", "--tokens", "15.6T", "--seq-len", "8192",
     "--mfu", "0.40"],
    ["deepseek_v3", "--gpus", "2048", "--hardware", "h800", "--tokens", "14.8T", "--seq-len", "4096",
     "--global-batch", "62914560"],
    ["llama", "--size", "3-8b", "--gpus", "64", "--hardware", "h100", "--tokens", "1T", "--seq-len", "8192"],
]
LIMIT = 5.0


def _timed(args: list[str]) -> tuple[float, str]:
    start = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "archcalc", *args], check=True, capture_output=True, text=True).stdout
    return time.perf_counter() - start, out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3, help="runs of each command (default 3)")
    parser.add_argument("--write", metavar="FILE", help="record the results in this markdown file")
    args = parser.parse_args()
    lines, worst = [], 0.0
    for cmd in COMMANDS:
        times, bare = [], []
        for _ in range(args.runs):
            bare.append(_timed(["count", "gpt3", "--size", "small"])[0])
            seconds, _ = _timed(["plan", *cmd])
            times.append(seconds)
        data = json.loads(_timed(["plan", *cmd, "--json"])[1])
        best = data["best"]
        layout = (f"tp {best['tensor_parallel']}, pp {best['pipeline_parallel']}, dp {best['data_parallel']}, "
                  f"cp {best['context_parallel']}, ep {best['expert_parallel']}, ZeRO-{best['zero_stage']}")
        worst = max(worst, statistics.median(times))
        lines.append(f"- `archcalc plan {' '.join(cmd)}`: median {statistics.median(times):.2f} s, best {min(times):.2f} s "
                     f"({data['plans_fitting'] + data['plans_not_fitting']:,} plans, {data['plans_fitting']:,} fit; best "
                     f"{layout}); a bare `archcalc count gpt3 --size small` alternately {statistics.median(bare):.2f} s")
        print(lines[-1], flush=True)
    lines.append(f"- slowest median {worst:.2f} s over {len(COMMANDS)} commands — target under {LIMIT:.0f} s: "
                 f"{'met' if worst < LIMIT else 'MISSED'}")
    lines.append(machine_line())
    print(lines[-2])
    if args.write:
        record(Path(args.write), "plan", "Training plans: every plan under 5 seconds", lines)
    return 0 if worst < LIMIT else 1


if __name__ == "__main__":
    sys.exit(main())
