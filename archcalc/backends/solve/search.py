"""The search: whole-number shapes whose exact count is nearest the target, best first, with bounded work.

Counts grow with every hyperparameter, so along one hyperparameter the shapes nearest the target sit on
either side of the crossing (the first value whose count reaches the target), found by galloping and
bisection on the exact count. With one free hyperparameter the candidates are the values walked outwards
from the crossing, nearest first. With two, one of them (the one with fewer values in range, usually the
depth) is enumerated over every grid value where the ratio range lets the other reach the target, plus one
value beyond each end, and the other is walked from its crossing inside the ratio's window: a best-first
merge of those walks gives the shape nearest the target in the whole box, and then the Pareto front of
(error, distance from the family's ratio). Beyond :data:`MAX_ENUMERATED` values the enumeration is sampled
evenly, and the result says it is not exhaustive.

>>> space = Space(target=1000, total=lambda v: v["d"] ** 2, valid=dict)
>>> best = one_free(space, Axis("d", 1, 1, 100), keep=2).shapes
>>> [(s.values["d"], s.total) for s in best]
[(32, 1024), (31, 961)]
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from fractions import Fraction

MAX_ENUMERATED = 5000  # values of the enumerated hyperparameter searched exhaustively; beyond, ...
SAMPLED = 800  # ... this many, evenly spaced (far apart, each costs more: its crossing moves further)
MAX_WALK = 64  # steps along one walk away from its crossing
MAX_VALIDATIONS = 300  # shapes checked against the architecture's whole-number constraints


class NoShape(Exception):
    """Nothing in the box: the message says why (the target is beyond every shape, or the windows are empty)."""


@dataclass(frozen=True)
class Axis:
    """A solved hyperparameter: values ``lo``, ``lo + step``, ... ``hi`` (multiples of ``step``). The search
    works on indices along which the count never decreases: ``sign`` -1 reverses them for a hyperparameter
    the count falls with (H when d_head = d/H and KV is fixed: the key/value projections shrink)."""

    name: str
    step: int
    lo: int
    hi: int
    sign: int = 1

    @property
    def first(self) -> int:
        return -(-self.lo // self.step)

    @property
    def last(self) -> int:
        return self.hi // self.step

    def value(self, i: int) -> int:
        return i * self.step if self.sign > 0 else (self.first + self.last - i) * self.step

    def index(self, value: int) -> int:
        """The index of a grid value (the inverse of :meth:`value`)."""
        return value // self.step if self.sign > 0 else self.first + self.last - value // self.step

    def indices(self, low: Fraction | int, high: Fraction | int) -> tuple[int, int]:
        """The index range of the values in [low, high] (empty when the first exceeds the second)."""
        a, b = max(self.first, math.ceil(Fraction(low) / self.step)), min(self.last, math.floor(Fraction(high) / self.step))
        return (a, b) if self.sign > 0 else (self.first + self.last - b, self.first + self.last - a)


@dataclass
class Space:
    """What the search needs: the target, the exact count of a shape (with any filled hyperparameters), and
    the check that completes a shape (heads for the width...) or rejects it (None)."""

    target: int
    total: Callable[[dict], int | Fraction]
    valid: Callable[[dict], dict | None]


@dataclass(frozen=True)
class Shape:
    values: dict
    total: int | Fraction
    error: int | Fraction  # total - target


@dataclass
class Found:
    shapes: list[Shape]
    exhaustive: bool = True
    enumerated: str | None = None  # the hyperparameter walked value by value (two free)
    enumerated_range: tuple[int, int] | None = None
    enumerated_count: int = 0
    sampled: int = 0  # > 0: only this many of enumerated_count were searched
    rejected: int = 0  # shapes that broke a whole-number constraint
    notes: list[str] = field(default_factory=list)


def first_at_least(g: Callable[[int], int | Fraction], lo: int, hi: int, target: int, hint: int | None = None) -> int:
    """The smallest i in [lo, hi] with g(i) >= target (g non-decreasing), or hi + 1 if there is none.
    Gallops from ``hint`` (default ``lo``) and bisects: O(log distance) evaluations."""
    if lo > hi:
        return hi + 1
    start = hint if hint is not None and lo <= hint <= hi else lo
    if g(start) >= target:  # the answer is in [lo, start]: gallop down
        above, jump = start, 1
        while above - jump >= lo and g(above - jump) >= target:
            above, jump = above - jump, 2 * jump
        below = max(above - jump, lo - 1)  # g(below) < target, or below is left of the range
    else:  # the answer is in (start, hi + 1]: gallop up
        below, jump = start, 1
        while below + jump <= hi and g(below + jump) < target:
            below, jump = below + jump, 2 * jump
        above = below + jump
        if above > hi:
            if g(hi) < target:
                return hi + 1
            above = hi
    while above - below > 1:
        mid = (below + above) // 2
        below, above = (mid, above) if g(mid) < target else (below, mid)
    return above


def walk(g: Callable[[int], int | Fraction], target: int, lo: int, hi: int, cap: int = MAX_WALK,
         hint: int | None = None) -> Iterator[tuple[int | Fraction, int, int | Fraction]]:
    """(|error|, i, g(i)) for i in [lo, hi], nearest the target first, outwards from the crossing."""
    c = first_at_least(g, lo, hi, target, hint)
    down, up = c - 1, c
    low = g(down) if down >= lo else None
    high = g(up) if up <= hi else None
    for _ in range(cap):
        if low is None and high is None:
            return
        if high is None or (low is not None and target - low <= high - target):
            yield target - low, down, low
            down -= 1
            low = g(down) if down >= lo else None
        else:
            yield high - target, up, high
            up += 1
            high = g(up) if up <= hi else None


def one_free(space: Space, axis: Axis, keep: int) -> Found:
    """The ``keep`` valid values of one hyperparameter nearest the target, best first."""
    t = space.target
    g = lambda i: space.total({axis.name: axis.value(i)})  # noqa: E731
    found = Found([])
    tried = 0
    for _, i, total in walk(g, t, axis.first, axis.last, cap=MAX_VALIDATIONS):
        tried += 1
        completed = space.valid({axis.name: axis.value(i)})
        if completed is None:
            found.rejected += 1
            continue
        found.shapes.append(Shape(completed, total, total - t))
        if len(found.shapes) >= keep:
            break
    else:
        found.exhaustive = tried < MAX_VALIDATIONS
    return found
