"""Benchmark: `archcalc docs` writing the site project, and `mkdocs build --strict` of it.

Targets (docs issues): `archcalc docs` writes the whole project in 15 s or less with a peak RSS of 600 MB or less; the
strict build of the site takes under 10 s, on this project's 2-core machines. The project is written --runs times
with `archcalc docs -o` into a fresh temporary folder (as a user would: a new process each time), each run's wall
time, CPU time and peak RSS measured (the `archcalc docs` process itself, and apart from it the largest of the
processes it starts to run the pages' torch examples: they run beside it, a process each; and, for information, the
peak of all of them together, in one more run that is not timed); then the project is built
--runs times into a fresh folder each. Medians, best and worst are reported, with the page count.

    python benchmarks/site.py [--runs 3] [--write docs/benchmarks.md]

Exits 1 if a median misses its target. The temporary folders are removed afterwards.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _record import machine_line, record  # noqa: E402

TARGET_S = 10.0
DOCS_TARGET_S, DOCS_TARGET_MB = 15.0, 600

# `archcalc docs -o DIR` in this wrapper process, which then prints what it and its children cost
WRAPPER = """
import json, resource, sys, time
from archcalc.cli import main
start = time.perf_counter()
status = main(["docs", "-o", sys.argv[1]])
wall = time.perf_counter() - start
me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({"status": status, "wall": wall, "cpu": me.ru_utime + me.ru_stime, "kids_cpu": kids.ru_utime + kids.ru_stime,
                  "mb": me.ru_maxrss / 1024, "kids_mb": kids.ru_maxrss / 1024}))
"""


def write_project(out: Path, sample: bool = False) -> dict:
    """One `archcalc docs -o out` in a new process: its wall and CPU seconds and peak RSS, and its children's; with
    ``sample`` (Linux), also the peak of all its processes' memory together, read every 50 ms (reading it walks their
    page tables: it slows the run by about a second, so a sampled run's time is not one of the timed runs)."""
    proc = subprocess.Popen([sys.executable, "-c", WRAPPER, str(out)], stdout=subprocess.PIPE, text=True)
    tree_kb = 0
    while sample and proc.poll() is None:
        tree_kb = max(tree_kb, sum(_pss_kb(pid) for pid in _tree(proc.pid)))
        time.sleep(0.05)
    stdout, _ = proc.communicate()
    if proc.returncode != 0:
        raise subprocess.CalledProcessError(proc.returncode, "archcalc docs")
    return {**json.loads(stdout.strip().splitlines()[-1]), "tree_mb": tree_kb / 1024}


def _tree(pid: int) -> list[int]:
    """``pid`` and its descendants (Linux: /proc/PID/task/*/children; elsewhere none)."""
    found = [pid]
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as f:
                found += [p for child in f.read().split() for p in _tree(int(child))]
    except OSError:  # it ended meanwhile, or no /proc
        pass
    return found


def _pss_kb(pid: int) -> int:
    """The proportional set size of ``pid`` in KiB: its private pages and its share of those it shares (0 if unknown)."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            return next((int(line.split()[1]) for line in f if line.startswith("Pss:")), 0)
    except OSError:
        return 0


def build(project: Path, out: Path) -> float:
    start = time.perf_counter()
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}  # mkdocs-material's banner about its successor, on every build
    subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "-d", str(out)], cwd=project,
                   check=True, stdout=subprocess.DEVNULL, env=env)
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3, help="builds to time (default 3)")
    parser.add_argument("--write", metavar="FILE", help="record the result in this markdown file")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="archcalc-site-bench-") as tmp:
        runs = [write_project(Path(tmp) / f"project{i}") for i in range(args.runs)]
        tree_mb = write_project(Path(tmp) / "sampled", sample=True)["tree_mb"]  # one more run, not timed
        project = Path(tmp) / "project0"
        pages = sum(1 for _ in (project / "docs").rglob("*.md"))
        times = [build(project, Path(tmp) / f"site{i}") for i in range(args.runs)]
    median = statistics.median(times)
    verdict = "met" if median < TARGET_S else "MISSED"
    wall = [r["wall"] for r in runs]
    docs_median = statistics.median(wall)
    mb = max(r["mb"] for r in runs)
    kids_mb = max(r["kids_mb"] for r in runs)
    docs_met = docs_median <= DOCS_TARGET_S and max(mb, kids_mb) <= DOCS_TARGET_MB
    lines = [
        f"- `archcalc docs -o` ({pages} pages): median {docs_median:.1f} s over {args.runs} runs (best {min(wall):.1f}, worst "
        f"{max(wall):.1f}); CPU {statistics.median(r['cpu'] for r in runs):.1f} s in the process, "
        f"{statistics.median(r['kids_cpu'] for r in runs):.1f} s in the ones it starts for the torch examples; peak RSS "
        f"{mb:.0f} MB (the process), {kids_mb:.0f} MB (the largest example process) — targets 15 s and 600 MB: "
        f"{'met' if docs_met else 'MISSED'}"
        + (f"; all its processes together at most {tree_mb:.0f} MB (proportional set sizes summed, sampled every 50 ms "
           "in one more run; shared pages counted once; for information, the target is a process's)" if tree_mb else ""),
        f"- `mkdocs build --strict` of the {pages}-page project `archcalc docs -o` writes: median {median:.1f} s over "
        f"{args.runs} builds (best {min(times):.1f}, worst {max(times):.1f}) — target under {TARGET_S:.0f} s: {verdict}",
        machine_line(),
    ]
    print("\n".join(lines))
    if args.write:
        record(Path(args.write), "site", "Docs site: `archcalc docs` and the strict mkdocs build", lines)
    return 0 if median < TARGET_S and docs_met else 1


if __name__ == "__main__":
    sys.exit(main())
