"""Benchmark: every solve answers in under a second — the acceptance list of issue 16, the designer's
questions of docs/solve.md, and targets of 10^20 and 10^30.

Each case is timed in-process (the solver, after the spec is loaded; best and median of several runs),
and a few are also timed as whole commands (process start and imports included) beside a bare
``archcalc count gpt3 --size small`` measured alternately, since start-up dominates on a shared machine.

    python benchmarks/solve.py [--runs 5] [--write docs/benchmarks.md]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _record import machine_line, record  # noqa: E402

from archcalc.backends.solve import solve  # noqa: E402
from archcalc.spec import load_spec  # noqa: E402

CASES = [  # (spec, target, fixed)
    ("llama", "7B", {"L": 32, "H": 32, "KV": 8}),
    ("llama", "70B", {"L": 80, "H": 64, "KV": 8}),
    ("llama", "7B", {"L": 32, "H": 32, "KV": 32}),
    ("mistral", "12B", {"L": 40, "H": 32, "KV": 8, "d_head": 128}),
    ("mixtral", "47B", {"L": 32, "H": 32, "KV": 8, "E": 8, "K": 2}),
    ("qwen3", "8B", {"L": 36, "H": 32, "KV": 8, "d_head": 128}),
    ("gemma2", "9B", {"L": 42, "H": 16, "KV": 8, "d_head": 256}),
    ("gpt3", "7B", {}),
    ("gpt3", "1T", {"L": 128}),
    ("gpt2", "1B", {"L": 36}),
    ("llama", "7B", {}),
    ("llama", "70B", {}),
    ("mixtral", "1T", {"E": 64}),
    ("gpt3", "100T", {"L": 512}),
    ("gpt3", "100T", {}),
    ("gpt3", "1e20", {"L": 512}),
    ("gpt3", "1e26", {"L": 512}),
    ("gpt3", "1e20", {}),
    ("gpt3", "1e30", {}),
    ("llama", "1e30", {}),
    ("mixtral", "1e30", {}),
]
COMMANDS = [["gpt3", "--target-params", "100T"], ["gpt3", "--target-params", "1e30"],
            ["llama", "--target-params", "7B"]]


def _target(text: str) -> int:
    from archcalc.quantity import parse_count

    return parse_count(text)


def _percent(x) -> str:
    shown = f"{100 * float(x):+.4f}%"
    return shown if x == 0 or float(shown[:-1]) != 0 else f"{100 * float(x):+.1e}%"


def _command(args: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "archcalc", *args], check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5, help="runs of each case (default 5)")
    parser.add_argument("--write", metavar="FILE", help="record the results in this markdown file")
    args = parser.parse_args()
    lines, worst = [], 0.0
    for name, target, fixed in CASES:
        spec = load_spec(name)
        times = []
        for _ in range(args.runs):
            start = time.perf_counter()
            solution = solve(spec, _target(target), fixed)
            times.append(time.perf_counter() - start)
        best = solution.candidates[0]
        fixes = ", ".join(f"{k}={v}" for k, v in fixed.items()) or "nothing fixed"
        shape = ", ".join(f"{k} = {v:,}" for k, v in best.values.items() if k not in fixed)
        worst = max(worst, statistics.median(times))
        lines.append(f"- `{name}` {target} ({fixes}): {shape}, {_percent(best.rel_error)}; "
                     f"median {1000 * statistics.median(times):.0f} ms, best {1000 * min(times):.0f} ms, "
                     f"{solution.work['evaluations']:,} exact counts, "
                     f"{'exhaustive' if solution.exhaustive else 'sampled'}")
        print(lines[-1], flush=True)
    whole, bare = [], []
    for _ in range(args.runs):
        for cmd in COMMANDS:
            bare.append(_command(["count", "gpt3", "--size", "small"]))
            whole.append((cmd, _command(["solve", *cmd])))
    by_cmd = {" ".join(c): statistics.median(t for cc, t in whole if cc == c) for c in COMMANDS}
    base = statistics.median(bare)
    lines.append(f"- slowest solver median {1000 * worst:.0f} ms over {len(CASES)} cases — target under 1 s for every "
                 f"solve: {'met' if worst < 1 else 'MISSED'}")
    lines.append("- whole commands, median of " + str(args.runs) + ": " + "; ".join(
        f"`archcalc solve {c}` {1000 * t:.0f} ms" for c, t in by_cmd.items())
        + f"; a bare `archcalc count gpt3 --size small` measured alternately {1000 * base:.0f} ms (start-up and imports)")
    lines.append(machine_line())
    print("\n".join(lines[-3:]))
    if args.write:
        record(Path(args.write), "solve", "Solver: every solve under a second", lines)
    return 0 if worst < 1 else 1


if __name__ == "__main__":
    sys.exit(main())
