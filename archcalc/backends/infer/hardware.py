"""The accelerator table (``hardware.yaml`` beside this module), as exact integers.

>>> h = hardware("a100-80gb")
>>> h.bandwidth, h.peak("bfloat16"), h.memory
(2039000000000, 312000000000000, 80000000000)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from functools import cache
from pathlib import Path

import yaml

from archcalc.errors import UsageError
from archcalc.spec.suggest import did_you_mean

TABLE = Path(__file__).with_name("hardware.yaml")


@dataclass(frozen=True)
class Hardware:
    """One accelerator: bytes of memory, bytes/s of bandwidth, dense peak FLOP/s per dtype (exact integers)."""

    key: str
    name: str
    memory: int
    bandwidth: int
    peaks: dict[str, int] = field(default_factory=dict)
    source: str = ""
    per_node: int | None = None  # GPUs in one server (archcalc plan); None: not in the table
    link: int | None = None  # bytes/s a GPU sends within its server (NVLink, one direction)
    network: int | None = None  # bytes/s a GPU sends to other servers (its network adapter)
    node_source: str = ""

    def peak(self, dtype: str) -> int:
        if dtype not in self.peaks:
            raise UsageError(f"{self.key} has no published dense {dtype} peak in archcalc's table "
                             f"(it lists {', '.join(self.peaks)}); give one with --peak")
        return self.peaks[dtype]


def _exact(value, unit: int) -> int:
    """A datasheet figure (e.g. 3.35 TB/s) in base units, exactly: the decimal as written, not the float."""
    return int(Fraction(str(value)) * unit)


@cache
def table() -> dict[str, Hardware]:
    rows = yaml.safe_load(TABLE.read_text(encoding="utf-8"))
    out = {}
    for key, row in rows.items():
        node = row.get("node", {})
        out[key] = Hardware(key, row["name"], _exact(row["memory_gb"], 10**9), _exact(row["bandwidth_tb_s"], 10**12),
                            {dtype: _exact(v, 10**12) for dtype, v in row["peak_tflops"].items()}, " ".join(row["source"].split()),
                            node.get("gpus"), _exact(node["link_gb_s"], 10**9) if "link_gb_s" in node else None,
                            _exact(node["network_gb_s"], 10**9) if "network_gb_s" in node else None,
                            " ".join(node.get("source", "").split()))
        for alias in row.get("aliases", []):
            out[alias] = out[key]
    return out


ALIASES = {"bf16": "bfloat16", "fp16": "float16", "fp8": "float8", "fp32": "float32"}


def hardware(name: str) -> Hardware:
    rows = table()
    key = name.strip().lower()
    if key not in rows:
        names = sorted(k for k, h in rows.items() if h.key == k)
        raise UsageError(f"--hardware {name!r}: unknown{did_you_mean(key, names)}; known: {', '.join(names)}")
    return rows[key]
