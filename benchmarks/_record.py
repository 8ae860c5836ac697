"""Write one benchmark's section of docs/benchmarks.md, between its own markers."""

from __future__ import annotations

import datetime as dt
import os
import platform
import time
from pathlib import Path


def machine_line() -> str:
    return (f"- measured {dt.date.today().isoformat()} on {platform.machine()}, {os.cpu_count()} cores, "
            f"Python {platform.python_version()}; this machine's speed: {reference_seconds():.2f} s for the reference loop "
            "(2,000,000 additions in pure Python, best of 5: compare figures of two machines by it)")


def reference_seconds() -> float:
    """A fixed pure-Python workload's best time of 5: the machines these benchmarks run on differ by 2x and more."""
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        total = 0
        for i in range(2_000_000):
            total += i
        best = min(best, time.perf_counter() - start)
    return best


def record(path: Path, key: str, title: str, lines: list[str]) -> None:
    """Replace (or append) the section ``key`` of ``path``."""
    begin, end = f"<!-- bench:{key}:begin -->", f"<!-- bench:{key}:end -->"
    section = "\n".join([begin, f"## {title}", "", *lines, end])
    text = path.read_text(encoding="utf-8") if path.exists() else "# Benchmarks\n"
    if begin in text and end in text:
        text = text[: text.index(begin)] + section + text[text.index(end) + len(end):]
    else:
        text = text.rstrip("\n") + "\n\n" + section + "\n"
    path.write_text(text, encoding="utf-8")


def drop_section(path: Path, key: str) -> None:
    """Remove the section ``key`` of ``path``, if it has one."""
    begin, end = f"<!-- bench:{key}:begin -->", f"<!-- bench:{key}:end -->"
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    if begin in text and end in text:
        text = text[: text.index(begin)].rstrip("\n") + "\n" + text[text.index(end) + len(end):].lstrip("\n")
        path.write_text(text.rstrip("\n") + "\n", encoding="utf-8")
