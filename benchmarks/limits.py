"""Benchmark: the limits that bound work by construction (docs/limits.md), timed at the limits.

- Chained defaults (``h2: min(h1, h0) + min(h0, h1 + 1)``, ...): for each kind of step, the longest chain archcalc
  accepts, counted and FLOP-counted at every size of gpt2 (in-process, imports done); the issue's 12-step chain,
  which took minutes before the limits, now refused; and the slowest of many random chains.
- Module builds: ``verify`` on the meta device of the largest bundled model by tensors (DeepSeek-V3) and of GPT-2
  stretched to just under :data:`archcalc.codegen.device.MAX_TENSORS` parameter tensors, in fresh processes; and the
  refusal of ``--set L=10**18``.

Target: every accepted case under 5 s of work, every refusal under 1 s (start-up excluded where in-process).

    python benchmarks/limits.py [--random 200] [--write docs/benchmarks.md]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import random
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _record import machine_line, record  # noqa: E402

GPT2 = (ROOT / "spec" / "gpt2.yaml").read_text(encoding="utf-8")
STEPS = [
    "min({a}, {b}) + min({b}, {a} + 1)",  # the issue's
    "max({a}, {b} + 1)",
    "{a} % ({b} + 7) + {b} % ({a} + 3) + 1",
    "round_up({a} + {b}, 8) + floor({a} / 3)",
    "{a} + {b} + 1",
    "{a} * {b} + 1",
]
OPERATIONS = ["{a} + {b}", "{a} - {b} + 100", "{a} * {b}", "{a} * 3 + 1", "{a} / 2", "{a} // ({b} + 1)", "{a} % ({b} + 2)",
              "min({a}, {b})", "max({a}, {b} + 1)", "round_up({a}, 8)", "round_down({a} + 9, 4)", "floor({a} / 3)",
              "ceil({a} / 7)", "({a} + {b}) ** 2", "{a} ** 2 + {b}", "min({a}, {b}) + min({b}, {a} + 1)"]


def chain(steps: list[str]) -> str:
    lines = ["  h0: {default: 3}", "  h1: {default: 5}"] + [f'  h{i + 2}: {{default: "{s}"}}' for i, s in enumerate(steps)]
    text = GPT2.replace("  L: {doc: blocks}\n", "  L: {doc: blocks}\n" + "\n".join(lines) + "\n", 1)
    return text.replace("hidden: d_ff,", f"hidden: d_ff + h{len(steps) + 1},", 1)


def timed(text: str, path: Path) -> tuple[int, float]:
    """``count`` then ``flops --seq-len 1024`` of every size, in-process: (status, seconds)."""
    from archcalc.cli import main

    path.write_text(text, encoding="utf-8")
    start = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        status = main(["count", str(path)]) or main(["flops", str(path), "--seq-len", "1024"])
    return status, time.perf_counter() - start


def fresh(argv: list[str]) -> tuple[int, float]:
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "archcalc", *argv], capture_output=True, text=True, cwd=ROOT)
    return proc.returncode, time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--random", type=int, default=200, help="random chains to time (default 200)")
    parser.add_argument("--write", metavar="FILE", help="record the results in this markdown file")
    args = parser.parse_args()
    path = Path("/tmp") / "archcalc-bench-limits.yaml"
    timed(GPT2, path)  # imports
    lines, worst_accepted, worst_refused = [], 0.0, 0.0
    for step in STEPS:
        accepted = None
        for n in range(1, 60):
            steps = [step.format(a=f"h{i + 1}", b=f"h{i}") for i in range(n)]
            status, seconds = timed(chain(steps), path)
            if status != 0:
                worst_refused = max(worst_refused, seconds)
                break
            accepted = (n, seconds)
        if accepted:
            worst_accepted = max(worst_accepted, accepted[1])
            lines.append(f"- chain of `{step}`: longest accepted {accepted[0]} defaults, count + flops of 4 sizes "
                         f"{accepted[1] * 1000:,.0f} ms; one more is refused in {seconds * 1000:,.0f} ms")
    issue = [STEPS[0].format(a=f"h{i + 1}", b=f"h{i}") for i in range(11)]
    status, seconds = timed(chain(issue), path)
    lines.append(f"- the issue's chain of 13 defaults h0 .. h12 (still running after 60 s in the issue; before the limits, h0 .. h10 took 15.7 s here): exit {status} in {seconds * 1000:,.0f} ms")
    rng, slowest, codes = random.Random(0), 0.0, {0: 0, 2: 0}
    for _ in range(args.random):
        n = rng.randint(2, 40)
        steps = [rng.choice(OPERATIONS).format(a=f"h{rng.randint(0, i + 1)}", b=f"h{rng.randint(0, i + 1)}") for i in range(n - 2)]
        status, seconds = timed(chain(steps), path)
        codes[status] = codes.get(status, 0) + 1
        slowest = max(slowest, seconds)
    lines.append(f"- {args.random} random chains of 2 to 40 defaults: {codes.get(0, 0)} accepted, {codes.get(2, 0)} refused "
                 f"(exit 2), slowest {slowest * 1000:,.0f} ms")
    builds = [("deepseek_v3 (45,337 tensors)", ["verify", "deepseek_v3"]),
              ("gpt2 --set L=4999 (59,993 tensors, just under the limit)", ["verify", "gpt2", "--size", "small", "--set", "L=4999"]),
              ("gpt2 --set L=10**18 (refused)", ["verify", "gpt2", "--size", "small", "--set", f"L={10**18}"])]
    build_times = []
    for label, argv in builds:
        status, seconds = fresh(argv)
        build_times.append((status, seconds))
        lines.append(f"- `archcalc verify` on meta, {label}: exit {status}, {seconds:,.1f} s in a fresh process")
    met = worst_accepted < 5 and worst_refused < 1 and slowest < 5
    lines.append(f"- slowest accepted chain {worst_accepted * 1000:,.0f} ms, slowest refusal {worst_refused * 1000:,.0f} ms — "
                 f"target under 5 s accepted, 1 s refused: {'met' if met else 'MISSED'}")
    lines.append(machine_line())
    print("\n".join(lines))
    if args.write:
        record(Path(args.write), "limits", "Limits: chained defaults and module builds at their bounds", lines)
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
