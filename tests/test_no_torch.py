"""The symbolic commands never import torch (nor archcalc.codegen, the package that will)."""

from __future__ import annotations

SCRIPT = """
import sys
from archcalc.cli import main
status = main(["count", "gpt3", "--json"])
heavy = sorted(m for m in sys.modules
               if m.split(".")[0] in ("torch", "numpy", "transformers") or m.startswith("archcalc.codegen"))
print("STATUS", status, "HEAVY", heavy, file=sys.stderr)
"""


def test_count_gpt3_does_not_import_torch(process):
    proc = process.run(["-c", SCRIPT], timeout=120)
    assert "STATUS 0 HEAVY []" in proc.stderr, proc.stderr[-2000:]
