"""The solver: hyperparameters whose exact count is nearest a target, with the best shape proved best.

Free: the integer hyperparameters with no default, or whose default every size overrides (the sizes' proportion
is kept, as for no default), less those fixed; or exactly the ``free`` names (``--free d,d_ff``), the others then
keeping their defaults or the reference size's values (see :func:`.build.setup`).

- One free hyperparameter that changes the count (GPT-3 at L = 512: d): the count is solved exactly with
  sympy (``d = -58963/12288 + sqrt(...)/12288``) and the grid values are walked outwards from the crossing.
- Two (L and d, d and d_ff, d and E...): the pair's ratio (named larger over smaller in the family: d/L,
  d_ff/d) is bounded by the range of the family's sizes widened by 10%, or ``--range``; the search
  enumerates one and walks the other (see :mod:`.search`), so the first candidate is the shape nearest the
  target in the whole box, and the rest are the Pareto front of error against the family's ratio.
- More than two: the rest are filled from the family's proportions at the size nearest the target (stated
  as assumptions, overridden by ``--fix``); those that do not change the count (heads when
  d_head = d/H) are completed to keep the family's head width while keeping every value whole.

Grids: ``--multiple-of``, else the hyperparameter's declared ``multiple_of``, else the largest power of two
up to 128 that divides the family's value and is at most 1/256 of the solved value (d on multiples of 128
for a 100T GPT-3, of 4 for a 1B GPT-2), times what the constraints need (d on multiples of 2·H when H is
fixed and the rotary head d/H must be even). Work is bounded: at most :data:`.search.MAX_ENUMERATED` values
enumerated, walks of :data:`.search.MAX_WALK` steps, :data:`.search.MAX_VALIDATIONS` shapes checked.

>>> from archcalc.spec import load_spec
>>> s = solve(load_spec("gpt3"), target=100 * 10**12, fixed={"L": 512})
>>> best = s.candidates[0]
>>> best.values["d"], best.values["H"], f"{float(best.rel_error):+.4%}"
(127616, 997, '+0.0677%')
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction

import sympy

from archcalc.backends.solve.build import role, setup
from archcalc.backends.solve.inputs import parse_fixed
from archcalc.backends.solve.pairs import Ratio, two_free
from archcalc.backends.solve.problem import Problem
from archcalc.backends.solve.rules import Rule
from archcalc.backends.solve.search import Found, NoShape, Shape, Space, first_at_least, one_free
from archcalc.errors import UsageError
from archcalc.spec import Spec
from archcalc.spec.expr import symbol

TOLERANCE = Fraction(1, 100)  # a shape within 1% "reaches" the target; beyond, say what stops it


@dataclass(frozen=True)
class Candidate:
    values: dict  # what ``archcalc count --set`` needs for this shape
    total: int
    rel_error: Fraction  # (total - target) / target, exactly
    error: int = 0  # total - target
    ratio_name: str | None = None
    ratio: Fraction | None = None
    in_range: bool = True
    outside: str | None = None  # why a shape shown outside the range is outside
    derived: dict = field(default_factory=dict)  # values the constraints are about (d_head, KV)
    extras: dict = field(default_factory=dict)  # tokens, FLOPs and memory (see .plan)

    @property
    def aspect(self) -> float | None:
        return float(self.ratio) if self.ratio is not None else None


@dataclass
class Solution:
    target: int
    fixed: dict
    free: list[str]
    solved: list[str]
    exact: list[str] = field(default_factory=list)  # sympy's solutions, as text (one solved)
    real_value: float | None = None
    candidates: list[Candidate] = field(default_factory=list)
    outside: list[Candidate] = field(default_factory=list)  # nearest shapes outside the range, when needed
    ratio: Ratio | None = None
    ratio_source: str = ""
    grids: dict[str, int] = field(default_factory=dict)
    grid_reasons: dict[str, str] = field(default_factory=dict)
    assumptions: list[str] = field(default_factory=list)
    held: dict[str, int] = field(default_factory=dict)  # with --free: the others, at the reference size's values
    defaults: dict[str, str] = field(default_factory=dict)
    constraints: list[str] = field(default_factory=list)
    searched: str = ""
    exhaustive: bool = True
    reference: str | None = None
    notes: list[str] = field(default_factory=list)
    work: dict = field(default_factory=dict)  # exact count evaluations and shape validations, bounded

    @property
    def solved_for(self) -> str:
        return ", ".join(self.solved)

    @property
    def aspect_range(self) -> tuple[float, float] | None:
        return (float(self.ratio.lo), float(self.ratio.hi)) if self.ratio else None


def solve(spec: Spec, target: int, fixed: dict, aspect: tuple[Fraction, Fraction] | None = None,
          multiple_of: int | dict[str, int] | None = None, keep: int = 6,
          ranges: dict[tuple[str, str], tuple[Fraction, Fraction]] | None = None, free: list[str] | None = None) -> Solution:
    """Hyperparameters of ``spec`` whose exact count is nearest ``target``, best first. ``free``: exactly the
    hyperparameters that vary (``--free``); by default those with no default, or whose default every size overrides."""
    p = setup(spec, target, fixed, multiple_of, ranges, free)
    if aspect is not None:
        if len(p.solved) != 2:
            raise UsageError(f"--aspect bounds the ratio of two solved hyperparameters; here only {p.solved[0]} is solved")
        r, _ = p.ratio(*p.solved)
        if (r.num, r.den) in p.user_ranges or (r.den, r.num) in p.user_ranges:
            raise UsageError(f"--aspect and --range {r.name} both bound the ratio of the solved {r.num} and {r.den}; "
                             "give one of them")
        p.user_ranges[(r.num, r.den)] = (Fraction(aspect[0]), Fraction(aspect[1]))
    _check_ranges(p)
    estimate = p.estimate()
    for rule in p.fills:
        rule.step = p.step(rule.name, rule.guess({**p.numbers, **estimate}))
    share = 256 if len(p.solved) == 1 else 16  # two solved: the other one makes up for a coarser grid
    p.steps = {n: p.step(n, estimate[n], share) for n in p.solved}
    for rule in p.completions:
        rule.step = 1
    counted = {"evaluations": 0, "validations": 0}

    def total(values: dict):
        counted["evaluations"] += 1
        return p.total(values)

    def valid(values: dict):
        counted["validations"] += 1
        return p.valid(values)

    space = Space(target, total, valid)
    held = [Rule(n, "hold", f"size {p.reference}", constant=v) for n, v in p.held.items()]
    solution = Solution(target, dict(fixed), p.free, p.solved, grids=dict(p.steps), reference=p.reference,
                        grid_reasons={n: p.reasons.get(n, "") for n in p.steps},
                        defaults=p.defaults, constraints=[c.text for c in p.checks],
                        assumptions=[r.text() for r in held + p.fills + p.completions], held=dict(p.held))
    try:
        if len(p.solved) == 1:
            found = _one(p, space, solution, keep)
        else:
            found = _two(p, space, solution, keep)
    except NoShape as e:
        raise UsageError(f"target {target:,}: {e}") from None
    if not found.shapes:
        raise UsageError(f"no whole-number shape near target {target:,} meets the constraints "
                         f"({'; '.join(solution.constraints) or 'none'}); fix more hyperparameters or change --multiple-of")
    _refuse_below_smallest(p, found.shapes[0], solution)
    solution.work = dict(counted)
    solution.candidates = [_candidate(p, s, solution.ratio) for s in found.shapes]
    return solution


def _one(p: Problem, space: Space, solution: Solution, keep: int) -> Found:
    (name,) = p.solved
    axis = p.axis(name, p.steps[name])
    end = axis.value(axis.last)
    largest = p.total({name: end})
    if largest < p.target:
        shown = f"{end:,}" if end < 10**15 else f"{end:.0e}"
        raise UsageError(f"target {p.target:,} is above the count of every shape: the largest, at {name} = {shown}, "
                         f"is {largest:,}; expected a smaller target")
    found = one_free(space, axis, keep)
    solution.exhaustive = found.exhaustive
    solution.searched = (f"{name} on multiples of {axis.step:,}" if axis.step > 1 else f"every whole {name}") + \
        ", walked outwards from where the count crosses the target (the count grows with it)"
    solution.exact, solution.real_value = _exact_root(p, name)
    if found.shapes and abs(Fraction(found.shapes[0].error, p.target)) > TOLERANCE and axis.step > 1:
        solution.notes.append(f"on multiples of {axis.step:,} no {name} comes within 1% of the target; "
                              f"a smaller --multiple-of gets closer")
    return found


def _two(p: Problem, space: Space, solution: Solution, keep: int) -> Found:
    a, b = (p.axis(n, p.steps[n]) for n in p.solved)
    ratio, source = p.ratio(a.name, b.name)
    solution.ratio, solution.ratio_source = ratio, source
    goal = p.goal(ratio)
    found = two_free(space, a, b, ratio, goal, keep, TOLERANCE)
    solution.exhaustive = found.exhaustive
    solution.notes += found.notes
    lo, hi = found.enumerated_range or (0, 0)
    other = b.name if found.enumerated == a.name else a.name
    how = (f"every {found.enumerated} from {lo:,} to {hi:,} ({found.enumerated_count:,} values)" if not found.sampled
           else f"{found.sampled:,} of the {found.enumerated_count:,} values of {found.enumerated} from {lo:,} to {hi:,}, "
                "evenly spaced (not exhaustive)")
    solution.searched = f"{how}; for each, {other} walked outwards from its crossing inside the {ratio.name} range"
    if found.shapes and abs(Fraction(found.shapes[0].error, p.target)) > TOLERANCE:
        wide = Ratio(ratio.num, ratio.den, ratio.lo / 2, ratio.hi * 2)
        try:
            relaxed = two_free(space, a, b, wide, goal, keep, TOLERANCE)
        except NoShape:
            relaxed = Found([])
        outside = [s for s in relaxed.shapes if not ratio.lo <= _ratio_of(s, ratio) <= ratio.hi
                   and abs(Fraction(s.error, p.target)) <= TOLERANCE][:3]
        solution.outside = [_candidate(p, s, ratio) for s in outside]
        span = f"{ratio.name} in [{float(ratio.lo):.2f}, {float(ratio.hi):.2f}]"
        if outside:
            upper = _ratio_of(outside[0], ratio) > ratio.hi
            bound = f"{ratio.name} ≤ {float(ratio.hi):.2f}" if upper else f"{ratio.name} ≥ {float(ratio.lo):.2f}"
            solution.notes.append(f"no shape with {span} comes within 1% of the target: the {'upper' if upper else 'lower'} "
                                  f"bound {bound} stops them; the nearest shapes outside the range are listed, marked "
                                  f"(widen it with --range {ratio.name}=MIN:MAX)")
        else:
            grids = ", ".join(f"{n} on multiples of {g:,}" for n, g in p.steps.items() if g > 1) or "the unit grid"
            solution.notes.append(f"no shape with {span} comes within 1% of the target on these grids ({grids}), nor "
                                  f"with the range doubled: a finer --multiple-of, or --fix of a filled hyperparameter, "
                                  "gets closer")
    return found


def _exact_root(p: Problem, name: str) -> tuple[list[str], float | None]:
    """sympy's exact positive roots when the count is a polynomial of degree at most 3 in ``name``; and the
    real root, from the exact count on the unit grid."""
    x = sympy.Symbol(name)
    formula = p.formula.xreplace({symbol(name): x})
    exact: list[str] = []
    roots: list = []
    try:
        if not formula.has(sympy.ceiling, sympy.floor, sympy.Min, sympy.Max, sympy.Mod) and sympy.Poly(formula, x).degree() <= 3:
            roots = [r for r in sympy.solve(sympy.Eq(formula, p.target), x) if r.is_real and r.is_positive]
            exact = [f"{name} = {r}" for r in roots]
    except (NotImplementedError, ValueError, sympy.PolynomialError):
        pass
    if roots:
        return exact, float(roots[0])
    axis = p.axis(name, 1)
    g = lambda i: p.total({name: axis.value(i)})  # noqa: E731
    c = first_at_least(g, axis.first, axis.last, p.target)
    if c <= axis.first or c > axis.last:
        return exact, None
    below, above = g(c - 1), g(c)
    at = c - 1 + Fraction(p.target - below, above - below) if above != below else Fraction(c)
    return exact, float(at * axis.step if axis.sign > 0 else (axis.first + axis.last - at) * axis.step)


def _ratio_of(shape: Shape, ratio: Ratio) -> Fraction:
    return Fraction(shape.values[ratio.num], shape.values[ratio.den])


def _candidate(p: Problem, shape: Shape, ratio: Ratio | None) -> Candidate:
    values = {n: shape.values[n] for n in p.spec.hyperparameters if n in shape.values}
    exact = p.exact_count(values)
    if exact != shape.total:  # the formula and the count disagree: a bug, never a silent wrong answer
        raise AssertionError(f"solver formula gives {shape.total} but count gives {exact} for {values}")
    value = _ratio_of(shape, ratio) if ratio else None
    inside = ratio is None or ratio.lo <= value <= ratio.hi
    outside = None if inside else (f"{ratio.name} = {float(value):.2f} is outside [{float(ratio.lo):.2f}, "
                                   f"{float(ratio.hi):.2f}]")
    derived = p.derived_values(values)
    return Candidate(values, exact, Fraction(exact - p.target, p.target), exact - p.target,
                     ratio.name if ratio else None, value, inside, outside, derived)


def _refuse_below_smallest(p: Problem, best: Shape, solution: Solution) -> None:
    """A target below every shape's count is bad input: say the smallest count and what it is made of."""
    if best.total <= p.target:
        return
    smallest = {n: (a.lo if a.sign > 0 else a.hi) for n in p.solved for a in [p.axis(n, 1)]}
    low = p.total(smallest)
    if low <= p.target:
        return
    feasible = best.total if p.valid(smallest) is None else min(best.total, low)
    shown = ", ".join(f"{k} = {v:,}" for k, v in smallest.items())
    raise UsageError(f"target {p.target:,} is below the smallest count of {p.spec.name} with these fixes "
                     f"({feasible:,}, at {shown}): the embeddings alone are larger; "
                     f"the nearest feasible target is {feasible:,}")


def _check_ranges(p: Problem) -> None:
    pairs = set()
    if len(p.solved) == 2:
        r, _ = p.ratio(*p.solved)
        pairs.add((r.num, r.den))
    pairs |= {(r.name, r.anchor) for r in p.fills if r.anchor}
    for (n, m) in p.user_ranges:
        if (n, m) not in pairs and (m, n) not in pairs:
            ok = ", ".join(f"{x}/{y}" for x, y in sorted(pairs)) or "none"
            varying = set(p.solved) | {r.name for r in p.fills}
            still = next((x for x in (n, m) if x not in varying), None)
            why = f"{role(p, still)}; " if still else ""
            raise UsageError(f"--range {n}/{m}: {why}a range bounds the ratio of the two solved hyperparameters or of a "
                             f"filled one to the width; here: {ok}")


__all__ = ["Candidate", "Solution", "parse_fixed", "solve"]
