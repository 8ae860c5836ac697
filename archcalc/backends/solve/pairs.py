"""Two free hyperparameters (L and d, d and d_ff...) with their ratio in a range: one enumerated over its grid,
the other walked from its crossing inside the window the ratio leaves (:mod:`archcalc.backends.solve.search` has
the walks and the one-free search; its docstring tells the method).

>>> from archcalc.backends.solve.search import Axis, Space
>>> space = Space(target=10_000, total=lambda v: v["L"] * v["d"] ** 2, valid=dict)
>>> found = two_free(space, Axis("L", 1, 1, 100), Axis("d", 1, 1, 1000), Ratio("d", "L", Fraction(2), Fraction(8)),
...                  Fraction(4), keep=1, tolerance=Fraction(1, 10))
>>> [(s.values, s.total) for s in found.shapes][:1]
[({'L': 6, 'd': 41}, 10086)]
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass
from fractions import Fraction

from archcalc.backends.solve.search import (
    MAX_ENUMERATED,
    MAX_VALIDATIONS,
    MAX_WALK,
    SAMPLED,
    Axis,
    Found,
    NoShape,
    Shape,
    Space,
    first_at_least,
    walk,
)


@dataclass(frozen=True)
class Ratio:
    """``num / den`` in [lo, hi]: the range of two solved hyperparameters' ratio."""

    num: str
    den: str
    lo: Fraction
    hi: Fraction

    @property
    def name(self) -> str:
        return f"{self.num}/{self.den}"


def two_free(space: Space, a: Axis, b: Axis, ratio: Ratio, goal: Fraction, keep: int, tolerance: Fraction) -> Found:
    """The shape nearest the target with ``ratio`` in range, then the Pareto front of (error, distance of the
    ratio from ``goal``) among the shapes within ``tolerance`` of the target, at most ``keep`` in all."""
    plans = [_plan(space, x, y, ratio) for x, y in ((a, b), (b, a))]
    plans = [p for p in plans if p is not None]
    if not plans:
        raise NoShape("it is above the count of every shape in range (widths up to the largest allowed)")
    plan = min(plans, key=lambda p: (not p.proved, p.count))
    x, y = plan.x, plan.y
    found = Found([], enumerated=x.name, enumerated_range=tuple(sorted((x.value(plan.start), x.value(plan.stop)))),
                  enumerated_count=plan.count)
    if not plan.proved:
        found.exhaustive = False
        found.notes.append(f"the count falls as {x.name if x.sign < 0 else y.name} grows, so the range of {x.name} "
                           "was bracketed by a doubling scan rather than bounded exactly")
    heap = _crossings(space, plan, found)
    if not heap:
        raise NoShape(f"no {y.name} on multiples of {y.step} has {ratio.name} in [{float(ratio.lo):.2f}, "
                      f"{float(ratio.hi):.2f}] for any {x.name} that could reach the target")
    accepted, front = _validated(space, plan, heap, goal, keep, tolerance, found)
    picks = _spread(front, 3)
    rest = [s for s in accepted if s not in picks][: max(0, keep - len(picks))]
    found.shapes = sorted(picks + rest, key=lambda s: abs(s.error))
    return found


def _crossings(space: Space, plan: _Plan, found: Found) -> list:
    """For each enumerated value of ``plan.x`` (all, or a sample of :data:`SAMPLED` of them), the walk of ``plan.y``
    from its crossing of the target inside the ratio's window, with its first shape: a heap, nearest first."""
    x, y = plan.x, plan.y
    indices: range | list[int] = range(plan.start, plan.stop + 1)
    if plan.count > MAX_ENUMERATED:
        spread = [plan.start + (plan.count - 1) * k // (SAMPLED - 1) for k in range(SAMPLED)]
        indices, found.sampled, found.exhaustive = sorted(set(spread)), SAMPLED, False
    heap: list = []
    hint = None  # the crossing moves little from one enumerated value to the next
    for i in indices:
        xv = x.value(i)
        lo_j, hi_j = plan.window(xv)
        if lo_j > hi_j:
            continue
        g = lambda j, xv=xv: space.total({x.name: xv, y.name: y.value(j)})  # noqa: E731
        stream = walk(g, space.target, lo_j, hi_j, hint=hint)
        first = next(stream, None)
        if first is not None:
            hint = first[1]
            heap.append((first[0], xv, y.value(first[1]), first[2], 1, stream))
    heapq.heapify(heap)
    return heap


def _validated(space: Space, plan: _Plan, heap: list, goal: Fraction, keep: int, tolerance: Fraction,
               found: Found) -> tuple[list[Shape], list[Shape]]:
    """The shapes of the walks, nearest the target first, that pass the space's checks (at most
    :data:`MAX_VALIDATIONS` checked): the accepted ones, and among them the Pareto front of the ratio's distance
    from ``goal``."""
    x, y, ratio, t = plan.x, plan.y, plan.ratio, space.target

    def deviation(values: dict) -> float:
        return abs(math.log(Fraction(values[ratio.num], values[ratio.den]) / goal)) if goal else 0.0

    accepted: list[Shape] = []  # the best valid shape of each enumerated value, nearest the target first
    front: list[Shape] = []  # those nearer the family's ratio than every better one: the Pareto front
    best_deviation, validations = math.inf, 0
    while heap and validations < MAX_VALIDATIONS:
        err, xv, yv, total, walked, stream = heapq.heappop(heap)
        values = {x.name: xv, y.name: yv}
        dev = deviation(values)
        if accepted and (abs(Fraction(total - t, t)) > tolerance or (len(accepted) >= keep and dev >= best_deviation)):
            continue
        validations += 1
        completed = space.valid(values)
        if completed is None:
            found.rejected += 1
            nxt = next(stream, None)
            if nxt is not None:
                heapq.heappush(heap, (nxt[0], xv, y.value(nxt[1]), nxt[2], walked + 1, stream))
            elif walked >= MAX_WALK:
                found.exhaustive = False  # this walk stopped at its cap, not at the end of its window
            continue
        shape = Shape(completed, total, total - t)
        accepted.append(shape)
        if dev < best_deviation:
            front.append(shape)
            best_deviation = dev
    if validations >= MAX_VALIDATIONS and not accepted:
        found.exhaustive = False  # stopped before any shape passed the checks
    return accepted, front


def _spread(front: list[Shape], keep: int) -> list[Shape]:
    """At most ``keep`` of the front (sorted by error): both ends and evenly spaced members between."""
    if len(front) <= keep:
        return front
    picks = sorted({round(k * (len(front) - 1) / (keep - 1)) for k in range(keep)})
    return [front[k] for k in picks]


@dataclass
class _Plan:
    x: Axis  # enumerated
    y: Axis  # solved in the window the ratio leaves
    ratio: Ratio
    start: int  # grid indices of x
    stop: int
    proved: bool = True  # False: the range of x is bracketed by a scan, not bounded by monotonicity

    @property
    def count(self) -> int:
        return self.stop - self.start + 1

    def window(self, xv: int) -> tuple[int, int]:
        """Grid indices of y whose ratio with x = xv is in range."""
        r = self.ratio
        if r.num == self.y.name:
            return self.y.indices(r.lo * xv, r.hi * xv)
        return self.y.indices(Fraction(xv) / r.hi, Fraction(xv) / r.lo)


def _plan(space: Space, x: Axis, y: Axis, ratio: Ratio) -> _Plan | None:
    """The grid values of x for which some y in the window can come near the target. When the count grows
    with both (or falls with both) the window's edges are monotone in x and two searches bound the range
    exactly; otherwise (H falls, d grows) a doubling scan brackets it, and the result says it is not proved."""
    plan = _Plan(x, y, ratio, x.first, x.last)
    t = space.target

    def edge(i: int, top: bool) -> int | Fraction:
        lo_j, hi_j = plan.window(x.value(i))
        j = max(hi_j, y.first) if top else min(max(lo_j, y.first), y.last)
        return space.total({x.name: x.value(i), y.name: y.value(j)})

    if x.sign == y.sign:
        start = first_at_least(lambda i: edge(i, True), x.first, x.last, t)
        if start > x.last:
            return None
        end = first_at_least(lambda i: edge(i, False), x.first, x.last, t + 1) - 1
        plan.start, plan.stop = _nonempty(plan, start - 1, -1), _nonempty(plan, max(start, end) + 1, 1)
        return plan
    points = sorted({x.index(min(x.last, x.first * 2**k) * x.step) for k in range(64)})  # doubling values
    side = [(edge(i, False) > t) - (edge(i, True) < t) for i in points]  # +1 all above, -1 all below, 0 straddles
    reach = [k for k in range(len(points)) if side[k] == 0 or (k and side[k] != side[k - 1])]
    reach += [k - 1 for k in reach if k and side[k] != side[k - 1]]
    if not reach:
        return None
    plan.start, plan.stop = points[max(0, min(reach) - 1)], points[min(len(points) - 1, max(reach) + 1)]
    plan.proved = False
    return plan


def _nonempty(plan: _Plan, i: int, direction: int) -> int:
    """From ``i`` outwards, the first index of x whose window holds some y: beyond the crossing region the
    nearest shapes are there (the count only moves away from the target further out). Bounded; a plan that
    runs out of x stays within range."""
    x = plan.x
    for _ in range(MAX_ENUMERATED):
        if i < x.first or i > x.last:
            return min(max(i, x.first), x.last)
        lo_j, hi_j = plan.window(x.value(i))
        if lo_j <= hi_j:
            return i
        i += direction
    plan.proved = False
    return i
