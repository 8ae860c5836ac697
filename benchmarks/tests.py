"""Benchmark: the test suite as a contributor runs it, on a fresh clone.

Targets (issue 25, this project's 2-core machines): the whole suite (`python -m pytest`, the README's command) in
under 8 minutes of wall time; the fast tier (`python -m pytest -m "not slow"`) in under 3; the browser and signal
tests pass 10 runs in a row with every core kept busy by other processes.

The committed HEAD is cloned into a temporary folder (no bytecode, no hypothesis database, a fresh torch compile
cache: what a new contributor has), and each command runs there with its wall time, test counts and exit status.
`--under-load N` then runs the browser and signal tests N times, one after the other, beside one busy loop per core.

    python benchmarks/tests.py [--tiers full,fast] [--under-load 10] [--write docs/benchmarks.md]

Exits 1 if a target is missed or a run fails. The temporary folder and the busy loops are gone afterwards.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _record import machine_line, record  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
TIERS = {"full": ([], 8 * 60), "fast": (["-m", "not slow"], 3 * 60)}  # pytest arguments, target in seconds
UNDER_LOAD = ["tests/site/test_browser.py", "tests/cli/test_output.py", "tests/cli/test_run_interrupt.py", "tests/cli/test_hostile_cli.py::test_ctrl_c_in_the_first_half_second",
              "tests/site/test_docs_cmd.py::test_stopping_docs_midway_leaves_no_example_folder"]
BUSY = "while True: pass"


def pytest(clone: Path, args: list[str], env: dict[str, str]) -> tuple[float, int, str]:
    """Wall seconds, exit status and pytest's summary line of ``python -m pytest -q ARGS`` in ``clone``."""
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args], cwd=clone, env=env,
                          capture_output=True, text=True)
    seconds = time.perf_counter() - start
    summary = next((line.strip("= ") for line in reversed(proc.stdout.splitlines()) if re.search(r"\d+ (passed|failed)", line)),
                   f"no summary (exit {proc.returncode}): {proc.stderr[-300:]}")
    for line in proc.stdout.splitlines():  # which tests failed, so that a missed target can be looked into
        if line.startswith(("FAILED ", "ERROR ")):
            print(f"    {line[:300]}", flush=True)
    return seconds, proc.returncode, summary


def under_load(clone: Path, runs: int, env: dict[str, str]) -> tuple[int, list[str]]:
    """Failures among ``runs`` runs of the browser and signal tests, each beside one busy loop per core."""
    busy = [subprocess.Popen([sys.executable, "-c", BUSY]) for _ in range(os.cpu_count() or 1)]
    failures = []
    try:
        for i in range(runs):
            seconds, status, summary = pytest(clone, ["-n", "0", *UNDER_LOAD], env)
            print(f"  under load, run {i + 1}/{runs}: {summary} in {seconds:.0f} s", flush=True)
            if status != 0:
                failures.append(f"run {i + 1}: {summary}")
    finally:
        for p in busy:
            p.kill()
            p.wait()
    return runs, failures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tiers", default="full,fast", help="which of full, fast to time (comma-separated)")
    parser.add_argument("--under-load", type=int, default=0, metavar="N", help="run the browser and signal tests N times under load")
    parser.add_argument("--write", metavar="FILE", help="record the result in this markdown file")
    args = parser.parse_args()
    tiers = [t for t in args.tiers.split(",") if t]
    if unknown := set(tiers) - set(TIERS):
        parser.error(f"unknown tier(s) {', '.join(sorted(unknown))}: choose from {', '.join(TIERS)}")
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()
    lines, ok = [], True
    with tempfile.TemporaryDirectory(prefix="archcalc-tests-bench-") as tmp:
        clone = Path(tmp) / "clone"
        subprocess.run(["git", "clone", "--quiet", str(ROOT), str(clone)], check=True)
        # PYTHONPATH: every child process (the CLI tests' ``python -m archcalc``) imports the clone too, not the
        # checkout an editable install points at
        env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(Path(tmp) / "inductor"), "HYPOTHESIS_PROFILE": "dev",
               "PYTHONPATH": str(clone)}
        for tier in tiers:
            extra, target = TIERS[tier]
            seconds, status, summary = pytest(clone, extra, env)
            met = status == 0 and seconds <= target
            ok &= met
            command = "python -m pytest" + (' -m "not slow"' if extra else "")
            lines.append(f"- `{command}` on a fresh clone of {head}: {seconds / 60:.1f} min wall ({summary}), exit {status} — "
                         f"target under {target // 60} min: {'met' if met else 'MISSED'}")
            print(lines[-1], flush=True)
        if args.under_load:
            runs, failures = under_load(clone, args.under_load, env)
            ok &= not failures
            loaded = [f"- the browser and signal tests ({', '.join(UNDER_LOAD)}) on a fresh clone of {head}, {runs} runs "
                      f"in a row beside {os.cpu_count()} busy loops: {len(failures)} failed"
                      + (f" ({'; '.join(failures)})" if failures else "")]
            print(loaded[0], flush=True)
    if args.write and lines:  # each part its own section, so that one can be measured again without the other
        record(Path(args.write), "tests", "The test suite on a fresh clone", [*lines, machine_line()])
    if args.write and args.under_load:
        record(Path(args.write), "tests-under-load", "The browser and signal tests under load", [*loaded, machine_line()])
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
