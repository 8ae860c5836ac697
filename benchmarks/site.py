"""Benchmark: `mkdocs build --strict` of the site `archcalc docs` generates.

Target (docs-site issue): the strict build of the whole generated site takes under 10 s on this project's 2-core
machines. The project is written once with `archcalc docs -o` into a temporary folder (as a user would), then built
several times into a fresh folder each; the median, best and worst are reported, with the page count.

    python benchmarks/site.py [--runs 3] [--write docs/benchmarks.md]

Exits 1 if the median is 10 s or more. The temporary folder is removed afterwards.
"""

from __future__ import annotations

import argparse
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
        project = Path(tmp) / "project"
        subprocess.run([sys.executable, "-m", "archcalc", "docs", "-o", str(project)], check=True, stdout=subprocess.DEVNULL)
        pages = sum(1 for _ in (project / "docs").rglob("*.md"))
        times = [build(project, Path(tmp) / f"site{i}") for i in range(args.runs)]
    median = statistics.median(times)
    verdict = "met" if median < TARGET_S else "MISSED"
    lines = [
        f"- `mkdocs build --strict` of the {pages}-page project `archcalc docs -o` writes: median {median:.1f} s over "
        f"{args.runs} builds (best {min(times):.1f}, worst {max(times):.1f}) — target under {TARGET_S:.0f} s: {verdict}",
        machine_line(),
    ]
    print("\n".join(lines))
    if args.write:
        record(Path(args.write), "site", "Docs site: the strict mkdocs build", lines)
    return 0 if median < TARGET_S else 1


if __name__ == "__main__":
    sys.exit(main())
