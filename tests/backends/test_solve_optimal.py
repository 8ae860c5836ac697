"""Proof of optimality by brute force: on small boxes, no whole-number shape is nearer the target than the
solver's best. Each example draws a family, fixes, a ratio range and a target; the brute force counts
every integer shape of the box with ``count`` (independently of the solver's formula and grids) and keeps
those that satisfy the range and the architecture's constraints."""

from __future__ import annotations

import os
from fractions import Fraction

from hypothesis import HealthCheck, assume, given
from hypothesis import strategies as st

from archcalc.backends.solve import solve
from archcalc.backends.solve.search import first_at_least, walk
from archcalc.errors import UsageError
from tests.backends.solve_helpers import spec_of as load_spec
from tests.backends.solve_helpers import valid_count  # noqa: I001
from tests.helpers import examples

EXAMPLES = int(os.environ.get("ARCHCALC_SOLVE_EXAMPLES", "20"))  # raise it for a longer hunt
SETTINGS = examples(EXAMPLES, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
RATIOS = st.tuples(st.fractions(Fraction(1, 4), Fraction(8), max_denominator=8), st.integers(1, 8))


def _brute(name: str, fixed: dict, a: str, b: str, box_a: int, box_b: int, ratio, target: int) -> int | None:
    """The smallest |count - target| over every valid shape with a <= box_a, b <= box_b and b/a in range."""
    lo, hi = ratio
    best = None
    for x in range(1, box_a + 1):
        for y in range(1, box_b + 1):
            if not lo <= Fraction(y, x) <= hi:
                continue
            total = valid_count(name, tuple(sorted({**fixed, a: x, b: y}.items())))
            if total is not None and (best is None or abs(total - target) < best):
                best = abs(total - target)
    return best


def _check(name: str, fixed: dict, a: str, b: str, box: tuple[int, int], ratio, target: int) -> None:
    try:
        solution = solve(load_spec(name), target, fixed, multiple_of={a: 1, b: 1}, ranges={(b, a): ratio})
    except UsageError:
        assume(False)  # below every shape: the refusal is tested elsewhere
        return
    assert solution.exhaustive and solution.ratio.name == f"{b}/{a}"
    best = solution.candidates[0]
    assert valid_count(name, tuple(sorted(best.values.items()))) == best.total
    assert ratio[0] <= Fraction(best.values[b], best.values[a]) <= ratio[1]
    brute = _brute(name, fixed, a, b, *box, ratio, target)
    assert brute is None or abs(best.error) <= brute, (best.values, best.error, brute)


@SETTINGS
@given(V=st.integers(1, 200), T=st.integers(1, 64), H=st.integers(1, 4), ratio=RATIOS,
       shape=st.tuples(st.integers(1, 8), st.integers(1, 64)), offset=st.integers(-300, 300))
def test_gpt2_depth_and_width(V, T, H, ratio, shape, offset):
    lo, spread = ratio
    fixed = {"V": V, "T": T, "H": H}
    total = valid_count("gpt2", tuple(sorted({**fixed, "L": shape[0], "d": shape[1]}.items())))
    assume(total is not None)
    _check("gpt2", fixed, "L", "d", (10, 96), (lo, lo * spread), total + offset)


@SETTINGS
@given(V=st.integers(1, 100), L=st.integers(1, 3), heads=st.sampled_from([(1, 1), (2, 1), (2, 2), (4, 2), (4, 1)]),
       ratio=RATIOS, shape=st.tuples(st.integers(1, 24), st.integers(1, 90)), offset=st.integers(-500, 500))
def test_llama_width_and_mlp_width(V, L, heads, ratio, shape, offset):
    """d must keep H | d and an even rotary head d/H; d_ff is free of constraints."""
    lo, spread = ratio
    fixed = {"V": V, "L": L, "H": heads[0], "KV": heads[1]}
    total = valid_count("llama", tuple(sorted({**fixed, "d": shape[0], "d_ff": shape[1]}.items())))
    assume(total is not None)
    _check("llama", fixed, "d", "d_ff", (32, 128), (lo, lo * spread), total + offset)


@SETTINGS
@given(V=st.integers(1, 100), d_ff=st.integers(1, 16), ratio=RATIOS,
       shape=st.tuples(st.integers(1, 12), st.integers(2, 40)), offset=st.integers(-500, 500))
def test_mixtral_experts_and_width(V, d_ff, ratio, shape, offset):
    """A mixture of experts with the width and the number of experts free (d/E named larger over smaller)."""
    lo, spread = ratio
    fixed = {"V": V, "L": 2, "H": 2, "KV": 1, "d_ff": d_ff, "K": 1}
    total = valid_count("mixtral", tuple(sorted({**fixed, "E": shape[0], "d": shape[1]}.items())))
    assume(total is not None)
    _check("mixtral", fixed, "E", "d", (14, 48), (lo, lo * spread), total + offset)


@SETTINGS
@given(L=st.integers(1, 6), H=st.integers(1, 6), V=st.integers(1, 300), width=st.integers(1, 60),
       offset=st.integers(-2000, 2000))
def test_one_free_width(L, H, V, width, offset):
    fixed = {"L": L, "H": H, "V": V, "T": 8}
    target = valid_count("gpt3", tuple(sorted({**fixed, "d": H * width}.items()))) + offset
    try:
        best = solve(load_spec("gpt3"), target, fixed, multiple_of={"d": 1}).candidates[0]
    except UsageError:
        assume(False)
        return
    brute = min(abs(t - target) for d in range(1, 500)
                if (t := valid_count("gpt3", tuple(sorted({**fixed, "d": d}.items())))) is not None)
    assert abs(best.error) <= brute and best.values["d"] % H == 0


@examples(300)
@given(values=st.lists(st.integers(-50, 50), max_size=40), target=st.integers(-60, 60),
       hint=st.one_of(st.none(), st.integers(-5, 45)))
def test_crossing_and_walk_agree_with_a_scan(values, target, hint):
    """The two primitives under every search: the first index that reaches the target, and the walk that
    yields indices nearest the target first."""
    values = sorted(values)
    g = values.__getitem__
    last = len(values) - 1
    assert first_at_least(g, 0, last, target, hint) == next((i for i, v in enumerate(values) if v >= target), last + 1)
    walked = list(walk(g, target, 0, last, cap=100))
    assert sorted(i for _, i, _ in walked) == list(range(len(values)))
    errors = [e for e, _, _ in walked]
    assert errors == sorted(errors) and all(e == abs(values[i] - target) for e, i, _ in walked)
