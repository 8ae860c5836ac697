"""Exact integers from human-written sizes: ``124439808``, ``1.3B``, ``175e9``, ``100T``, ``1_000``.

>>> parse_count("1.3B"), parse_count("100e12"), parse_count("125M"), parse_count(7)
(1300000000, 100000000000000, 125000000, 7)
"""

from __future__ import annotations

import re
from fractions import Fraction

SUFFIXES = {"": 1, "K": 10**3, "M": 10**6, "B": 10**9, "G": 10**9, "T": 10**12, "P": 10**15}
_COUNT = re.compile(r"\s*([0-9]+(?:[_,][0-9]+)*(?:\.[0-9]+)?(?:[eE][+]?[0-9]{1,2})?)\s*([KMBGTP]?)\s*", re.IGNORECASE | re.ASCII)


def parse_count(text: str | int) -> int:
    """An exact non-negative integer from ``text``; ValueError if it is malformed or not whole."""
    if isinstance(text, bool):
        raise ValueError("expected a count such as 124439808, 1.3B or 100e12, got a boolean")
    if isinstance(text, int):
        if text < 0:
            raise ValueError(f"expected a non-negative count, got {text}")
        return text
    m = _COUNT.fullmatch(str(text))
    if not m or len(m.group(1)) > 40:
        raise ValueError(f"expected a count such as 124439808, 1.3B or 100e12, got {text!r}")
    value = Fraction(m.group(1).replace("_", "").replace(",", "")) * SUFFIXES[m.group(2).upper()]
    if value.denominator != 1:
        raise ValueError(f"{text!r} is not a whole number")
    return int(value)
