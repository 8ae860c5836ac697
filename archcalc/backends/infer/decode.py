"""The decode steps summed in closed form: work independent of the number of new tokens.

The step of the token at position p sees x = p + 1 keys (at most ``window`` in a sliding-window layer; a chunked
layer's ring of one block, as a window), so its FLOPs and the bytes it moves are both of the form
``c0 + Σ c · min(x, w)`` (w: a window, or none). Between consecutive windows every min is x or w throughout, so each is
a line ``a + b·x`` there, and a run of steps sums as an arithmetic series. The roofline takes each step to be compute-
or memory-bound as FLOPs / peak or bytes / bandwidth is larger; on a line the difference of the two changes sign at
most once, so each piece splits into at most two runs, each summed whole. Exact: integers and Fractions, no floats.

>>> f = Line(10, ((2, None), (3, 4)))  # 10 + 2x + 3·min(x, 4)
>>> [f.at(x) for x in range(1, 7)], f.total(1, 6) == sum(f.at(x) for x in range(1, 7))
([15, 20, 25, 30, 32, 34], True)
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

Number = int | Fraction


@dataclass(frozen=True)
class Line:
    """x ↦ ``const`` + Σ coef · min(x, window) over ``terms`` (window None: x itself)."""

    const: Number
    terms: tuple[tuple[Number, int | None], ...]

    def at(self, x: int) -> Number:
        return self.const + sum(c * (x if w is None else min(x, w)) for c, w in self.terms)

    def windows(self) -> set[int]:
        return {w for _, w in self.terms if w is not None}

    def on(self, lo: int, hi: int) -> tuple[Number, Number]:
        """(a, b) with value(x) = a + b·x for lo <= x <= hi, a range no window falls strictly inside (see pieces)."""
        a, b = self.const, 0
        for c, w in self.terms:
            if w is None or hi <= w:
                b += c
            else:  # lo > w: the whole range past the window
                a += c * w
        return a, b

    def total(self, lo: int, hi: int) -> Number:
        """Σ value(x) for x = lo .. hi (0 when hi < lo)."""
        return sum((series(*self.on(a, b), a, b) for a, b in pieces(lo, hi, self.windows())), 0)


def pieces(lo: int, hi: int, windows: set[int]) -> list[tuple[int, int]]:
    """lo .. hi cut after every window inside it: on each piece, min(x, w) is x throughout or w throughout."""
    out, start = [], lo
    for w in sorted(w for w in windows if lo <= w < hi):
        out.append((start, w))
        start = w + 1
    if start <= hi:
        out.append((start, hi))
    return out


def series(a: Number, b: Number, lo: int, hi: int) -> Number:
    """Σ (a + b·x) for x = lo .. hi, exactly (0 when hi < lo)."""
    n = hi - lo + 1
    if n <= 0:
        return 0
    return a * n + b * ((lo + hi) * n // 2)  # (lo + hi)·n is even


@dataclass(frozen=True)
class DecodeSums:
    """The decode steps at contexts ``first`` .. ``last`` summed: FLOPs and bytes in all, and the roofline's split,
    the FLOPs of the compute-bound steps and the bytes of the memory-bound ones."""

    flops: Number
    bytes: Number
    compute_flops: Number
    memory_bytes: Number


def decode_sums(flops: Line, bytes_: Line, first: int, last: int, peak: int, bandwidth: int) -> DecodeSums:
    """Steps at contexts x = ``first`` .. ``last``: a step is compute-bound when flops(x) · bandwidth >= bytes(x) · peak.
    O(windows) whatever the number of steps."""
    total_f = total_b = compute = memory = 0
    for lo, hi in pieces(first, last, flops.windows() | bytes_.windows()):
        fa, fb = flops.on(lo, hi)
        ba, bb = bytes_.on(lo, hi)
        total_f += series(fa, fb, lo, hi)
        total_b += series(ba, bb, lo, hi)
        start, slope = fa * bandwidth - ba * peak, fb * bandwidth - bb * peak  # compute-bound where start + slope·x >= 0
        if slope == 0:
            split = (lo, hi, hi + 1, hi) if start >= 0 else (lo, lo - 1, lo, hi)
        elif slope > 0:  # compute-bound from the root on
            t = min(max(math.ceil(Fraction(-start) / slope), lo), hi + 1)
            split = (t, hi, lo, t - 1)
        else:  # compute-bound up to the root
            t = max(min(math.floor(Fraction(-start) / slope), hi), lo - 1)
            split = (lo, t, t + 1, hi)
        compute += series(fa, fb, split[0], split[1])
        memory += series(ba, bb, split[2], split[3])
    return DecodeSums(total_f, total_b, compute, memory)
