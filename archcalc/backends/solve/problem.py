"""The solver's view of a spec: which hyperparameters are free, the exact count as a formula in them, the
family's proportions (taken from the size nearest the target), the ranges of its sizes' ratios, the grids
widths are snapped to, and the whole-number constraints the architecture imposes.

- Free: integer hyperparameters with no default (or whose default every size overrides) that ``--fix`` does not
  give, or exactly those ``--free`` names (the rest then keep their defaults, or the reference size's value where
  they have none, as ``held`` assumptions). Those that change the count
  are solved (one or two of them) or, beyond two, filled from the family's proportions (d_ff = 2.6875·d as
  in Llama 2 7B); those that do not (H when d_head = d/H and KV = H) are completed to keep the family's
  proportion (the head width) while keeping every derived value whole.
- Constraints: every default that must come out whole (d_head = d/H), kv_heads dividing heads, and even
  rotary widths. They set the grid of a solved hyperparameter where they can (d on multiples of 2·H when
  H is fixed and the head is rotary) and are checked on every shape (a cheap exact check, then ``bind``).

Problems are built by :func:`archcalc.backends.solve.build.setup`:

>>> from archcalc.backends.solve.build import setup
>>> from archcalc.spec import load_spec
>>> p = setup(load_spec("llama"), 7 * 10**9, {"L": 32, "H": 32, "KV": 8})
>>> p.axis("d", 64), p.direction("d"), p.inferred_step("d")
(Axis(name='d', step=64, lo=64, hi=1000000000000000000, sign=1), 1, 64)
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction

import sympy

from archcalc.backends.count import count
from archcalc.backends.solve.exact import compile_exact
from archcalc.backends.solve.pairs import Ratio
from archcalc.backends.solve.rules import Check, Rule
from archcalc.backends.solve.search import Axis, first_at_least
from archcalc.errors import ArchcalcError
from archcalc.spec import Spec
from archcalc.spec.bind import bind
from archcalc.spec.expr import parse, symbol
from archcalc.spec.schema import MAX_VALUE

WIDEN = Fraction(11, 10)  # the family's ratio range is widened by 10% on either side
COMPLETION_WINDOW = 32  # a completed hyperparameter is searched within its guess ± this, and a factor of 2
NO_SIZES_RANGE = (Fraction(1, 4096), Fraction(4096))


@dataclass
class Problem:
    spec: Spec
    target: int
    fixed: dict
    reference: str | None  # the size nearest the target, whose proportions fill and complete
    ref: dict
    sizes: dict[str, dict]
    free: list[str]
    solved: list[str]
    fills: list[Rule]
    completions: list[Rule]
    formula: sympy.Expr
    numbers: dict[str, int]  # fixed and literal-default integers
    defaults: dict[str, str]  # defaults in use, as written in the spec
    derived: list[str]  # hyperparameters whose default follows the free ones (d_head = d/H)
    checks: list[Check]
    depth: set[str]
    width: str | None
    multiple_of: dict[str, int]  # per name, and "*" for every solved width
    user_ranges: dict[str, tuple[Fraction, Fraction]]
    probe: dict = field(default_factory=dict)  # a valid shape (the reference size's free values, scaled)
    overridden: dict = field(default_factory=dict)  # defaults the reference size overrides: name -> default
    reasons: dict = field(default_factory=dict)  # why each grid step is what it is, in words
    held: dict = field(default_factory=dict)  # with --free: the others without a default, at the reference size's value
    user_fixed: dict = field(default_factory=dict)  # what --fix gave (``fixed`` adds ``held``)
    steps: dict[str, int] = field(default_factory=dict)
    _count: object = None
    _checks: list = field(default_factory=list)

    # -- counting -----------------------------------------------------------------------------
    def with_fills(self, values: dict) -> dict:
        out = dict(values)
        anchors = {**self.numbers, **values}
        for rule in self.fills:
            out[rule.name] = rule.guess(anchors)
        return out

    def total(self, values: dict) -> int | Fraction:
        """The exact count of a shape given the solved values (fills added)."""
        if self._count is None:
            self._count = compile_exact(self.formula)
        return self._count(self.with_fills(values))

    # -- whole-number constraints ------------------------------------------------------------------
    def quick_ok(self, values: dict) -> bool:
        if not self._checks:
            self._checks = [(compile_exact(c.expr), c.minimum) for c in self.checks]
        try:
            for fn, minimum in self._checks:
                v = fn(values)
                if isinstance(v, Fraction) or v < minimum:
                    return False
        except (ZeroDivisionError, KeyError):
            return False
        return True

    def valid(self, values: dict) -> dict | None:
        """The shape completed (fills, then completed hyperparameters nearest their guesses) if every
        constraint holds, else None. Bounded: each completion tries at most 2·COMPLETION_WINDOW + 1 values."""
        shape = self.with_fills(values)
        for rule in self.completions:
            shape[rule.name] = rule.guess({**self.numbers, **shape})
        for rule in self.completions:
            guess = shape[rule.name]
            aim = rule.aim({**self.numbers, **shape})
            hp = self.spec.hyperparameters[rule.name]
            low, high = max(hp.min, math.floor(aim / 2)), max(hp.min, math.ceil(aim * 2))  # within a factor of 2
            tries = sorted(range(max(low, guess - COMPLETION_WINDOW), min(high, guess + COMPLETION_WINDOW) + 1),
                           key=lambda v: (abs(math.log(v / aim)), v))
            for value in tries:
                if hp.max is not None and value > hp.max:
                    continue
                if self.quick_ok({**shape, rule.name: value}):
                    shape[rule.name] = value
                    break
            else:
                return None
        if not self.quick_ok(shape) or not self.binds(shape):
            return None
        return {**self.fixed, **shape}

    def binds(self, shape: dict) -> bool:
        try:
            bind(self.spec, None, overrides(self.spec, {**self.fixed, **shape}))
        except ArchcalcError:
            return False
        return True

    def exact_count(self, values: dict) -> int:
        return count(bind(self.spec, None, overrides(self.spec, values))).total

    def derived_values(self, values: dict) -> dict:
        """The derived hyperparameters that change with the shape (d_head = d/H, KV = H), as bound."""
        bound = bind(self.spec, None, overrides(self.spec, values)).values
        return {n: bound[n] for n in self.derived if n in bound}

    # -- grids and ranges ------------------------------------------------------------------------
    def widthlike(self, name: str, estimate: int) -> bool:
        return name not in self.depth and max(self.ref.get(name) or 0, estimate) >= 256

    def step(self, name: str, estimate: int, share: int = 256) -> int:
        """The grid of a solved or filled hyperparameter: at most 1/``share`` of its value (see the package's
        docstring). Why, in words, is kept in ``self.reasons``."""
        hp = self.spec.hyperparameters[name]
        m = self.multiple_of
        if name in m:
            step, why = m[name], f"--multiple-of {name}={m[name]}"
        elif "*" in m and self.widthlike(name, estimate):
            step, why = m["*"], f"--multiple-of {m['*']}"
        elif name in self.depth:
            step, why = 1, ""
        else:
            family = self.ref.get(name) or 128
            step = 1
            while step < 128 and family % (2 * step) == 0 and 2 * step * share <= estimate:
                step *= 2
            why = f"{step} from the family's widths" if step > 1 else ""
        parts = [why] if why else []
        if hp.multiple_of and step % hp.multiple_of:
            parts.append(f"{hp.multiple_of} declared by the spec")
        inferred = self.inferred_step(name)
        if math.lcm(step, hp.multiple_of or 1) % inferred:
            parts.append(f"{inferred} for {'; '.join(dict.fromkeys(self.inferred_by(name)))}")
        total = math.lcm(step, hp.multiple_of or 1, inferred)
        self.reasons[name] = ", ".join(parts)
        return total

    def inferred_by(self, name: str) -> list[str]:
        """The constraints that set ``name``'s inferred step (for the message)."""
        x = symbol(name)
        return [text for text, expr in self._step_constraints()
                if x in expr.free_symbols and (slope := sympy.diff(expr, x)).is_Rational and slope.q > 1]

    def _step_constraints(self) -> list[tuple[str, sympy.Expr]]:
        """Each constraint with the filled hyperparameters in their proportion (H = d/128), and for a filled
        one that a constraint involves, the condition that its proportion comes out whole on its grid."""
        fills = {symbol(r.name): r.ratio * symbol(r.anchor) if r.ratio is not None and r.anchor else
                 sympy.Integer(r.constant or 1) for r in self.fills}
        out = []
        for check in self.checks:
            involved = [r for r in self.fills if symbol(r.name) in check.expr.free_symbols]
            names = " and ".join(r.text().split(",")[0] for r in involved)
            out.append((check.text + (f" with {names}" if names else ""), check.expr.xreplace(fills)))
            for r in involved:
                if r.ratio is not None and r.anchor and r.step > 1:
                    out.append((f"{r.name} on multiples of {r.step}", r.ratio * symbol(r.anchor) / r.step))
        return out

    def inferred_step(self, name: str) -> int:
        """The step that keeps every constraint linear in ``name`` whole (d/64 whole: 64), with the filled
        hyperparameters in their proportion (H = d/128 and KV = 8 dividing H: d on multiples of 1024)."""
        step, x = 1, symbol(name)
        for _, expr in self._step_constraints():
            if x in expr.free_symbols:
                slope = sympy.diff(expr, x)
                if slope.is_Rational and slope != 0:
                    step = math.lcm(step, int(slope.q))
        return step

    def axis(self, name: str, step: int) -> Axis:
        hp = self.spec.hyperparameters[name]
        high = min(hp.max if hp.max is not None else MAX_VALUE, MAX_VALUE)
        return Axis(name, step, -(-max(hp.min, 1) // step) * step, high // step * step, self.direction(name))

    def direction(self, name: str) -> int:
        """+1 if the count grows with ``name`` near the probe shape, -1 if it falls (H in d·KV·d/H)."""
        base = dict(self.probe)
        try:
            return -1 if self.total({**base, name: 2 * base[name]}) < self.total(base) else 1
        except (ZeroDivisionError, KeyError):
            return 1

    def ratio(self, a: str, b: str) -> tuple[Ratio, str]:
        """The range of the pair's ratio (larger over smaller in the family), from --range or the sizes."""
        num, den = (b, a) if (self.ref.get(b) or 0) >= (self.ref.get(a) or 0) else (a, b)
        if self.width in (a, b) and not self.ref:
            num, den = self.width, b if self.width == a else a
        for (n, m), (lo, hi) in self.user_ranges.items():
            if (n, m) == (num, den):
                return Ratio(num, den, lo, hi), "--range"
            if (n, m) == (den, num):
                return Ratio(num, den, 1 / hi, 1 / lo), "--range"
        seen = [Fraction(s[num], s[den]) for s in self.sizes.values() if s.get(num) and s.get(den)]
        if not seen:
            lo, hi = NO_SIZES_RANGE
            return Ratio(num, den, lo, hi), "no sizes to take it from: a wide default"
        lo, hi = min(seen), max(seen)
        shown = f"{float(lo):.2f}" if lo == hi else f"{float(lo):.2f} to {float(hi):.2f}"
        return Ratio(num, den, lo / WIDEN, hi * WIDEN), f"the family's sizes have {shown}; widened by 10%"

    def goal(self, ratio: Ratio) -> Fraction:
        """The reference size's ratio, inside the range: the shape the family would choose."""
        if self.ref.get(ratio.num) and self.ref.get(ratio.den):
            return min(max(Fraction(self.ref[ratio.num], self.ref[ratio.den]), ratio.lo), ratio.hi)
        return Fraction(math.isqrt(int(ratio.lo * ratio.hi * 10**12)), 10**6)

    def estimate(self) -> dict[str, int]:
        """Rough magnitudes of the solved values (on a unit grid), to choose their grids."""
        t = self.target
        if len(self.solved) == 1:
            (name,) = self.solved
            axis = self.axis(name, 1)
            i = first_at_least(lambda j: self.total({name: axis.value(j)}), axis.first, axis.last, t)
            return {name: axis.value(min(i, axis.last))}
        ratio, _ = self.ratio(*self.solved)
        r = self.goal(ratio)
        den = self.axis(ratio.den, 1)
        ray = lambda v: self.total({ratio.den: v, ratio.num: max(1, round(r * v))})  # noqa: E731
        rising = ray(2 * max(self.probe.get(ratio.den, 1), 1)) >= ray(max(self.probe.get(ratio.den, 1), 1))
        g = ray if rising else (lambda v: -ray(v))
        i = min(first_at_least(g, den.first, den.last, t if rising else -t), den.last)
        return {ratio.den: i, ratio.num: max(1, round(r * i))}


def overrides(spec: Spec, values: dict) -> dict:
    kinds = spec.kinds()
    return {n: parse(str(v).lower(), kinds, kinds[n]) for n, v in values.items()}
