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
from archcalc.backends.solve.names import check_fixed, check_names
from archcalc.backends.solve.problem import Problem, overrides
from archcalc.backends.solve.rules import Check, Rule
from archcalc.errors import ArchcalcError, UsageError
from archcalc.ir import lower
from archcalc.ir.attrs import Attention, Block, Embeddings, LatentAttention, StateMixer
from archcalc.spec import Spec
from archcalc.spec.bind import _closed, bind
from archcalc.spec.expr import symbol


def setup(spec: Spec, target: int, fixed: dict, multiple_of: int | dict[str, int] | None = None,
          ranges: dict[tuple[str, str], tuple[Fraction, Fraction]] | None = None, free: list[str] | None = None) -> Problem:
    """Everything the search needs, or a UsageError that says what to fix.

    ``free``: exactly the hyperparameters that vary (``--free d,d_ff``); every other integer keeps its default, or
    where it has none (or the nearest size overrides it) that size's value, stated as an assumption. Without it,
    the free ones are those with no default, and those whose default every size overrides (the family's own
    proportion is kept, as for one with no default)."""
    check_fixed(spec, fixed)
    if isinstance(multiple_of, int):
        multiple_of = {"*": multiple_of}
    check_names(spec, fixed, multiple_of or {}, ranges or {}, free)
    if target < 1:
        raise UsageError(f"target {target:,}: expected a positive number of parameters")
    sizes, reference, ref = _reference(spec, target)
    hps = spec.hyperparameters
    unset = [n for n, hp in hps.items() if hp.type == "bool" and hp.default is None and n not in fixed]
    if unset:
        raise UsageError(f"{unset[0]} is a switch with no default; give it with --fix {unset[0]}=true or false")
    everywhere = _overridden_everywhere(spec, sizes, fixed)
    overridden = {n: t for n, t in _overridden(spec, reference, sizes, fixed).items() if n not in everywhere}
    user_fixed, held, named = dict(fixed), {}, free is not None
    if free is None:
        free = [n for n, hp in hps.items() if hp.type == "int" and n not in fixed
                and (hp.default is None or n in everywhere or n in overridden)]
    else:
        held = _held(spec, reference, ref, fixed, free, everywhere | set(overridden))
        free, overridden = [n for n in hps if n in free], {}
        fixed = {**fixed, **held}
    probe = _probe(spec, ref, fixed, free)
    derived = [n for n, hp in hps.items() if hp.type == "int" and hp.default is not None
               and not hp.default.constant and n not in fixed and n not in free]
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
                         + ("name one that does in --free" if named else "fix fewer with --fix"))
    root = lower(probe).root
    depth = {str(s) for _, c in root.walk() if isinstance(c.attrs, Block) for s in sympy.sympify(c.repeat).free_symbols}
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
                  if hp.type == "int" and hp.default is not None and n not in fixed and n not in free and n in mentioned},
        derived=[n for n in derived if close(symbol(n)).free_symbols],
        checks=_checks(spec, derived, root, close), depth=depth, width=width, multiple_of=dict(multiple_of or {}),
        user_ranges=dict(ranges or {}), probe={n: probe.values[n] for n in free}, overridden=overridden,
        held=held, user_fixed=user_fixed,
    )
    if filled and not sizes:
        raise UsageError(f"{len(in_formula)} free hyperparameters change the count ({', '.join(in_formula)}) and "
                         f"{spec.name} has no sizes to take proportions from; fix all but two with --fix NAME=VALUE")
    problem.fills = [_rule(problem, n, "fill") for n in filled]
    problem.completions = [_rule(problem, n, "complete") for n in free if n not in in_formula]
    _grid_checks(problem, {n: close(symbol(n)) for n in derived}, {**numbers, **fixed})
    return problem


def _reference(spec: Spec, target: int) -> tuple[dict[str, dict], str | None, dict]:
    """Every size's values, the size whose count is nearest ``target`` (by ratio; None without sizes) and its integer
    values."""
    sizes = {s: bind(spec, s).values for s in spec.sizes}
    totals = {s: count(bind(spec, s)).total for s in spec.sizes}
    reference = min(totals, key=lambda s: abs(math.log(max(totals[s], 1) / target))) if totals else None
    ref = {k: v for k, v in sizes[reference].items() if not isinstance(v, bool)} if reference else {}
    return sizes, reference, ref


def _held(spec: Spec, reference: str | None, ref: dict, fixed: dict, free: list[str], overridden: set[str]) -> dict:
    """With ``--free``: the integers outside it that have no default of their own in use (none, or one the nearest
    size overrides) take that size's value."""
    out = {}
    for n, hp in spec.hyperparameters.items():
        if hp.type != "int" or n in fixed or n in free or (hp.default is not None and n not in overridden):
            continue
        if reference is None:
            raise UsageError(f"{n} has no default and {spec.name} has no sizes to take it from; give it with "
                             f"--fix {n}=VALUE or name it in --free")
        out[n] = ref[n]
    return out


def _grid_checks(p: Problem, derived: dict, known: dict) -> None:
    """``--multiple-of NAME=M`` for a name that is not on a grid of its own (a solved or filled one is: see
    :meth:`Problem.step`): a completed or derived value becomes a constraint kept on every shape (H on multiples of
    4); a value already settled (fixed, held, a default, a constant fill) must already be a multiple, else refused."""
    fills = {r.name: r for r in p.fills}
    completed = {r.name for r in p.completions}
    for name, step in p.multiple_of.items():
        if name == "*" or name in p.solved or (name in fills and fills[name].constant is None):
            continue
        if name in completed or (name in derived and derived[name].free_symbols):
            expr = symbol(name) if name in completed else derived[name]
            p.checks.append(Check(f"{name} on multiples of {step:,} (--multiple-of)", expr / step))
            continue
        value = fills[name].constant if name in fills else known.get(name)
        if value is None and name in derived:
            value = derived[name]
        if value is not None and int(value) % step:
            hp = p.spec.hyperparameters[name]
            why = ("given with --fix" if name in p.user_fixed else f"as in size {p.reference}" if name in fills or name in p.held
                   else f"its default {hp.default.text}")
            raise UsageError(f"--multiple-of {name}={step}: {name} = {int(value):,} ({why}), not a multiple of {step:,}; "
                             f"--fix {name}=VALUE (or --free naming {name}) to choose it")


def role(p: Problem, name: str) -> str:
    """What the solver does with ``name``, in words, and how to make it vary (for messages)."""
    hp = p.spec.hyperparameters[name]
    rules = {r.name: r for r in p.fills + p.completions}
    if name in p.user_fixed:
        return f"{name} is fixed with --fix {name}={str(p.user_fixed[name]).lower()}"
    if name in p.held:
        return f"{name} is held as in size {p.reference} ({p.held[name]:,}; name it in --free to vary it)"
    if name in p.solved:
        return f"{name} is solved"
    if name in rules:
        rule = rules[name]
        return f"{name} is {'filled' if rule.kind == 'fill' else 'completed'} ({rule.text()})"
    if hp.default is not None:
        return f"{name} follows its default {hp.default.text} (name it in --free to vary it)"
    return f"{name} is not free"


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
        for whole, part, _, _ in a.divisors if isinstance(a, StateMixer) else ():
            if part != whole:
                add(f"{part} divides {whole}", whole / part)
        if isinstance(a, Attention):
            _attention_checks(a, rotary, add)
    return list(out.values())


def _attention_checks(a: Attention, rotary: Embeddings | None, add) -> None:
    """An attention's whole-number constraints: its head width, its heads per key/value head, its rotary width even."""
    if not a.head_width.is_Symbol:  # a spec may write d / H there (Jamba's) rather than name a d_head
        add(f"head width {a.head_width} is whole", a.head_width)
    if a.kv_heads != a.heads:
        add(f"{a.kv_heads} divides {a.heads}", a.heads / a.kv_heads)
    if rotary is None or a.cross:
        return
    fraction = rotary.rotary_fraction
    if isinstance(a, LatentAttention):
        add(f"rotary width {a.rope_width} is even", a.rope_width / 2)
    elif fraction is None:
        add(f"rotary head width {a.head_width} is even", a.head_width / 2)
    else:
        add(f"rotary width floor({a.head_width}·{fraction}) is even", sympy.floor(a.head_width * fraction) / 2)


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


def _overridden_everywhere(spec: Spec, sizes: dict, fixed: dict) -> set[str]:
    """Integers whose default every size overrides (d_ff: 4 * d where each size gives its own d_ff): the default
    is not the family's rule, so they are free and keep the sizes' proportion, as if they had no default."""
    out = set()
    for n, hp in spec.hyperparameters.items():
        if hp.type != "int" or hp.default is None or n in fixed or not sizes:
            continue
        if all(n in spec.sizes[s].values and _implied(hp, values) != values[n] for s, values in sizes.items()):
            out.add(n)
    return out


def _implied(hp, values: dict):
    try:
        return hp.default.evaluate(values)
    except (ArchcalcError, ValueError, ZeroDivisionError):
        return None


def _rule(p: Problem, name: str, kind: str) -> Rule:
    """Fill or complete ``name`` the way the family does: a constant where the sizes agree on it (every size, or
    every size that overrides its default, as Llama 3's KV = 8), else in proportion to the model width (or the
    first solved hyperparameter) at the reference size. A ``--range`` naming it and its anchor always makes it
    proportional (clamped to the range)."""
    anchors = [a for a in [p.width, *p.solved] if a and a != name and (a in p.solved or a in p.numbers)]
    ranged = [a for (n, m) in p.user_ranges for a in [m if n == name else n if m == name else None] if a in anchors]
    anchor = next((a for a in ranged + anchors if p.ref.get(a)), None)
    source = f"size {p.reference}"
    if name in p.overridden:
        source += f" (not its default {p.overridden[name]})"
        agreeing, said = [p.sizes[s] for s, size in p.spec.sizes.items() if name in size.values], source
    else:
        agreeing, said = list(p.sizes.values()), "every size of the family"
    seen = {s[name] for s in agreeing}
    # sizes that agree at different widths hold it constant (Llama 3's KV = 8); a width the sizes only show at one
    # model width (one size: d_ff = 14,336 at d = 4,096) keeps its proportion instead
    widths = {s.get(anchor) for s in agreeing} if anchor else set()
    if len(seen) == 1 and not ranged and (len(widths) > 1 or not p.widthlike(name, 0)):
        return Rule(name, kind, said, constant=seen.pop())
    if anchor is None or not p.ref.get(name):
        if p.ref.get(name):
            return Rule(name, kind, source, constant=p.ref[name])
        raise UsageError(f"{name} is free and {p.spec.name} has no size to take its value from; give it with --fix {name}=VALUE")
    ratio = Fraction(p.ref[name], p.ref[anchor])
    for (n, m), (lo, hi) in p.user_ranges.items():
        if (n, m) in ((name, anchor), (anchor, name)):
            up = (n, m) == (name, anchor)
            clamped = min(max(ratio if up else 1 / ratio, lo), hi)
            clamped = clamped if up else 1 / clamped
            source = "--range" if clamped != ratio else f"{source}, inside --range {n}/{m}"
            ratio = clamped
    return Rule(name, kind, source, ratio=ratio, anchor=anchor)
