"""Building the solver's :class:`Problem` from a spec, a target and the ``--fix`` values.

>>> from archcalc.spec import load_spec
>>> p = setup(load_spec("llama"), 7 * 10**9, {"L": 32, "H": 32, "KV": 8})
>>> p.solved, [c.text for c in p.checks]
(['d', 'd_ff'], ['d_head = d/H is whole (H divides d)', 'rotary head width d_head is even'])
>>> p = setup(load_spec("llama"), 7 * 10**9, {})
>>> p.solved, [r.text() for r in p.fills + p.completions]
(['L', 'd'], ['d_ff ≈ 2.688·d, as in size 2-7b', 'H ≈ d/128 (the nearest value that keeps the shape whole), as in size 2-7b'])
"""

from __future__ import annotations

import math
import re
from fractions import Fraction

import sympy

from archcalc.backends.count import count
from archcalc.backends.solve.problem import Problem, overrides
from archcalc.backends.solve.rules import Check, Rule
from archcalc.errors import ArchcalcError, UsageError
from archcalc.ir import lower
from archcalc.ir.attrs import Attention, Embeddings, LatentAttention
from archcalc.spec import Spec
from archcalc.spec.bind import _closed, bind
from archcalc.spec.expr import symbol
from archcalc.spec.schema import MAX_VALUE
from archcalc.spec.suggest import did_you_mean


def setup(spec: Spec, target: int, fixed: dict, multiple_of: int | dict[str, int] | None = None,
          ranges: dict[tuple[str, str], tuple[Fraction, Fraction]] | None = None) -> Problem:
    """Everything the search needs, or a UsageError that says what to fix."""
    check_fixed(spec, fixed)
    if isinstance(multiple_of, int):
        multiple_of = {"*": multiple_of}
    if target < 1:
        raise UsageError(f"target {target:,}: expected a positive number of parameters")
    sizes = {s: bind(spec, s).values for s in spec.sizes}
    totals = {s: count(bind(spec, s)).total for s in spec.sizes}
    reference = min(totals, key=lambda s: abs(math.log(max(totals[s], 1) / target))) if totals else None
    ref = {k: v for k, v in sizes[reference].items() if not isinstance(v, bool)} if reference else {}
    hps = spec.hyperparameters
    unset = [n for n, hp in hps.items() if hp.type == "bool" and hp.default is None and n not in fixed]
    if unset:
        raise UsageError(f"{unset[0]} is a switch with no default; give it with --fix {unset[0]}=true or false")
    overridden = _overridden(spec, reference, sizes, fixed)
    free = [n for n, hp in hps.items() if hp.type == "int" and (hp.default is None or n in overridden) and n not in fixed]
    probe = _probe(spec, ref, fixed, free)
    derived = [n for n, hp in hps.items() if hp.type == "int" and hp.default is not None
               and not hp.default.constant and n not in fixed and n not in overridden]
    defaults = _closed({symbol(n): hps[n].default.to_sympy() for n in derived})
    numbers = {n: v for n, v in probe.values.items()
               if not isinstance(v, bool) and n not in free and n not in derived}
    subs = {symbol(n): sympy.Integer(v) for n, v in numbers.items()}

    def close(e: sympy.Expr) -> sympy.Expr:
        return sympy.expand(sympy.sympify(e).xreplace(defaults).xreplace(subs))

    result = count(probe)
    raw = sympy.Add(*(leaf.count for leaf in result.leaves if not leaf.tensor.tied_to))
    formula = close(raw)
    in_formula = [n for n in free if symbol(n) in formula.free_symbols]
    if not in_formula:
        raise UsageError(f"no free hyperparameter changes the count (free: {', '.join(free) or 'none'}); "
                         "fix fewer with --fix")
    root = lower(probe).root
    depth = {str(s) for _, c in root.walk() if c.kind == "block" for s in sympy.sympify(c.repeat).free_symbols}
    width_expr = root.attrs.width
    width = str(width_expr) if isinstance(width_expr, sympy.Symbol) else None
    order = sorted(in_formula, key=lambda n: (n in overridden, n != width, n not in depth, -(ref.get(n) or 0), n))
    chosen = [n for n in order if n not in overridden][:2]
    if not chosen:
        raise UsageError(f"no free hyperparameter changes the count (the rest: {', '.join(in_formula)}, follow size "
                         f"{reference}); fix fewer with --fix")
    solved = [n for n in free if n in chosen]  # in the spec's order: L before d
    filled = [n for n in order if n not in chosen]
    mentioned = {str(s) for s in raw.free_symbols} | {str(s) for n in derived for s in defaults[symbol(n)].free_symbols}
    problem = Problem(
        spec=spec, target=target, fixed=dict(fixed), reference=reference, ref=ref, sizes=sizes, free=free,
        solved=solved, fills=[], completions=[], formula=formula, numbers=numbers,
        defaults={n: hps[n].default.text for n, hp in hps.items()
                  if hp.type == "int" and hp.default is not None and n not in fixed and n in mentioned},
        derived=[n for n in derived if close(symbol(n)).free_symbols],
        checks=_checks(spec, derived, root, close), depth=depth, width=width, multiple_of=dict(multiple_of or {}),
        user_ranges=dict(ranges or {}), probe={n: probe.values[n] for n in free}, overridden=overridden,
    )
    if filled and not sizes:
        raise UsageError(f"{len(in_formula)} free hyperparameters change the count ({', '.join(in_formula)}) and "
                         f"{spec.name} has no sizes to take proportions from; fix all but two with --fix NAME=VALUE")
    problem.fills = [_rule(problem, n, "fill") for n in filled]
    problem.completions = [_rule(problem, n, "complete") for n in free if n not in in_formula]
    return problem


def check_fixed(spec: Spec, fixed: dict) -> None:
    kinds = spec.kinds()
    for name, value in fixed.items():
        if name not in kinds:
            raise UsageError(f"--fix {name}: {spec.name} has no hyperparameter {name!r}{did_you_mean(name, kinds)}; "
                             f"it has: {', '.join(kinds)}")
        hp = spec.hyperparameters[name]
        if hp.type == "bool":
            if not isinstance(value, bool):
                raise UsageError(f"--fix {name}={value}: {name} is a switch; expected true or false")
            continue
        if isinstance(value, bool) or not isinstance(value, int):
            raise UsageError(f"--fix {name}={value}: expected an integer")
        top = min(hp.max if hp.max is not None else MAX_VALUE, MAX_VALUE)
        if not hp.min <= value <= top:
            shown = f"{value:,}" if len(str(value)) <= 30 else f"a {len(str(abs(value)))}-digit number"
            raise UsageError(f"--fix {name}={shown}: expected an integer from {hp.min} to {top:,}")


def _probe(spec: Spec, ref: dict, fixed: dict, free: list[str]):
    """Any valid binding with these fixes: the formula's structure (switches, stacks) is all it gives."""
    ints = [v for v in fixed.values() if not isinstance(v, bool) and v > 0]
    common = math.lcm(*ints) if ints else 1
    factors = [1] + ([common, 64 * common] if common <= 10**9 else [])
    error: ArchcalcError | None = None
    for factor in factors:
        values = {n: (ref.get(n) or 1) * factor for n in free}
        try:
            return bind(spec, None, overrides(spec, {**values, **fixed}))
        except ArchcalcError as e:
            error = error or e
    assert error is not None
    raise error


def _checks(spec: Spec, derived: list[str], root, close) -> list[Check]:
    """Whole-number constraints that involve a free hyperparameter, each with a reason."""
    out: dict[str, Check] = {}

    def add(text: str, expr, minimum: int = 1) -> None:
        closed = close(expr)
        if closed.free_symbols and text not in out and not _always_whole(closed, minimum):
            out[text] = Check(text, closed, minimum)

    for n in derived:
        hp = spec.hyperparameters[n]
        text = hp.default.text.replace(" ", "")
        m = re.fullmatch(r"(\w+)/(\w+)", text)
        add(f"{n} = {text} is whole" + (f" ({m.group(2)} divides {m.group(1)})" if m else ""),
            hp.default.to_sympy(), hp.min)
    rotary = next((c.attrs for _, c in root.walk() if isinstance(c.attrs, Embeddings) and c.attrs.position == "rotary"), None)
    for _, c in root.walk():
        a = c.attrs
        if not isinstance(a, Attention):
            continue
        if a.kv_heads != a.heads:
            add(f"{a.kv_heads} divides {a.heads}", a.heads / a.kv_heads)
        if rotary is None or a.cross:
            continue
        fraction = rotary.rotary_fraction
        if isinstance(a, LatentAttention):
            add(f"rotary width {a.rope_width} is even", a.rope_width / 2)
        elif fraction is None:
            add(f"rotary head width {a.head_width} is even", a.head_width / 2)
        else:
            add(f"rotary width floor({a.head_width}·{fraction}) is even",
                sympy.floor(a.head_width * fraction) / 2)
    return list(out.values())


def _always_whole(expr: sympy.Expr, minimum: int) -> bool:
    """A polynomial with whole coefficients (KV = H, d_ff = 4*d) needs no check when it can't fall below 1."""
    try:
        poly = sympy.Poly(expr, *sorted(expr.free_symbols, key=str))
    except sympy.PolynomialError:
        return False
    return minimum <= 1 and all(c.is_Integer and c >= 0 for c in poly.coeffs()) and poly.degree() >= 1


def _overridden(spec: Spec, reference: str | None, sizes: dict, fixed: dict) -> dict[str, str]:
    """Hyperparameters whose default (KV = H) the reference size overrides (Llama 3 70B: KV = 8): the family's
    choice at that size, so they are filled with it rather than given their default."""
    if reference is None:
        return {}
    given, values, out = spec.sizes[reference].values, sizes[reference], {}
    for n, hp in spec.hyperparameters.items():
        if hp.type == "int" and hp.default is not None and not hp.default.constant and n in given and n not in fixed:
            try:
                implied = hp.default.evaluate(values)
            except (ArchcalcError, ValueError, ZeroDivisionError):
                implied = None
            if implied != values[n]:
                out[n] = hp.default.text
    return out


def _rule(p: Problem, name: str, kind: str) -> Rule:
    """Fill or complete ``name`` the way the family does: its value at the reference size where that size
    overrides its default, a constant if every size agrees, else in proportion to the model width (or the
    first solved hyperparameter) at the reference size."""
    if name in p.overridden:
        return Rule(name, kind, f"size {p.reference} (not its default {p.overridden[name]})", constant=p.ref[name])
    seen = {s[name] for s in p.sizes.values() if name in s}
    if len(seen) == 1:
        return Rule(name, kind, "every size of the family", constant=seen.pop())
    anchors = [a for a in [p.width, *p.solved] if a and a != name and (a in p.solved or a in p.numbers)]
    anchor = next((a for a in anchors if p.ref.get(a)), None)
    source = f"size {p.reference}"
    if anchor is None or not p.ref.get(name):
        if p.ref.get(name):
            return Rule(name, kind, source, constant=p.ref[name])
        raise UsageError(f"{name} is free and {p.spec.name} has no size to take its value from; give it with --fix {name}=VALUE")
    ratio = Fraction(p.ref[name], p.ref[anchor])
    for (n, m), (lo, hi) in p.user_ranges.items():
        if (n, m) == (name, anchor):
            ratio, source = min(max(ratio, lo), hi), "--range"
        elif (n, m) == (anchor, name):
            ratio, source = 1 / min(max(1 / ratio, lo), hi), "--range"
    return Rule(name, kind, source, ratio=ratio, anchor=anchor)
