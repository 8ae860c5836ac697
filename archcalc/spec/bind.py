"""Binding a size: every hyperparameter gets an exact value, checked once, with its source in the file.

A hyperparameter's value comes from ``--set``, else from the size, else from its default. Integer
values must be whole and within their declared range; ``d_head: d / H`` with H not dividing d is an
error that points at the expression. The binding also says how to write the size's formula: a
hyperparameter given as a number stays a symbol (``d``), one given as an expression is replaced by it
(``d_head`` → ``d/H``), so GPT-2's formula reads ``L*(12*d**2 + 13*d) + T*d + V*d + 2*d``.

>>> from archcalc.spec import load_spec
>>> b = bind(load_spec("gpt2"), "small")
>>> b.values["d_head"], b.values["qkv_bias"], sorted(map(str, b.substitutions))
(64, True, ['d_ff', 'd_head'])
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from fractions import Fraction
from functools import lru_cache
from typing import TypeVar

import sympy

from archcalc.errors import SpecError, UsageError, Where
from archcalc.spec.expr import Expr, ExprError, Node, parse, symbol
from archcalc.spec.expr_eval import evaluate
from archcalc.spec.limits import first_excess
from archcalc.spec.loader import where
from archcalc.spec.schema import MAX_VALUE, Spec
from archcalc.spec.suggest import did_you_mean

Value = int | bool


@dataclass(frozen=True)
class Binding:
    """One size of a spec with every hyperparameter bound."""

    spec: Spec
    size: str
    values: dict[str, Value]
    substitutions: dict[sympy.Symbol, sympy.Expr] = field(default_factory=dict)
    reported: int | None = None
    overrides: dict[str, Expr] = field(default_factory=dict)

    def numeric(self) -> dict[sympy.Symbol, sympy.Integer]:
        """Every integer hyperparameter's symbol mapped to its value (for ``xreplace``); a fresh dict each time, built
        once (the backends ask for it per tensor, per plan)."""
        built = self.__dict__.get("_numeric")
        if built is None:
            built = {symbol(k): sympy.Integer(v) for k, v in self.values.items() if not isinstance(v, bool)}
            object.__setattr__(self, "_numeric", built)  # frozen: the values never change
        return dict(built)

    def memo(self, key: str, build: Callable[[], T]) -> T:
        """``build()``, once for this binding: what depends on it alone (its IR, its count), which a docs build asks
        for many times a size (the calculator, the charts, the roofline). Frozen: the values never change."""
        if key not in self.__dict__:
            object.__setattr__(self, key, build())
        return self.__dict__[key]

    def generic_substitutions(self) -> dict[sympy.Symbol, sympy.Expr]:
        """Every hyperparameter with an expression default replaced by it, whatever the size gives:
        the family's shape (GPT-3's d_head = d/H), used for the leading term."""
        defaults = {}
        for n, hp in self.spec.hyperparameters.items():
            if hp.type == "int" and hp.default is not None and not hp.default.constant:
                try:  # a default that this size overrides was never evaluated: it may divide by zero
                    defaults[symbol(n)] = hp.default.to_sympy()
                except ExprError as e:
                    raise SpecError.at(where(self.spec, ("hyperparameters", n, "default")), f"{n} = {hp.default.text}: {e}") from None
        return _closed(defaults)


def parse_overrides(spec: Spec, items: list[str]) -> dict[str, Expr]:
    """``["qkv_bias=false", "L=24"]`` from ``--set`` into parsed expressions; UsageError if malformed."""
    kinds = spec.kinds()
    out: dict[str, Expr] = {}
    for item in items:
        name, sep, text = item.partition("=")
        name, text = name.strip(), text.strip()
        shown = _shown(item)
        if not sep or not name or not text:
            raise UsageError(f"--set {shown}: expected NAME=VALUE, e.g. --set L=24 or --set qkv_bias=false")
        if name not in kinds:
            raise UsageError(
                f"--set {shown}: {spec.name} has no hyperparameter {_shown(name)}{did_you_mean(name[:100], kinds)}; "
                f"it has: {', '.join(kinds)}"
            )
        try:
            value = parse(text, kinds, kinds[name])  # type: ignore[arg-type]
        except ExprError as e:
            want = "true or false" if kinds[name] == "bool" else "an integer or an expression such as 4*d"
            raise UsageError(f"--set {shown}: {e}; expected {want}") from None
        if name in out and out[name].text != value.text:  # the same value twice is harmless; two values are a mistake
            raise UsageError(f"--set {shown}: {name} is already set to {_shown(out[name].text)}; give each hyperparameter once")
        out[name] = value
    return out


def _shown(text: str) -> str:
    """A command-line value as a message shows it: itself if short, else its start and its length (a pasted
    100,000-digit value must not push the reason out of the one line)."""
    return repr(text) if len(text) <= 60 else f"{text[:40]!r}... ({len(text):,} characters)"


T = TypeVar("T")
_PLAIN: dict[tuple[int, str | None], tuple[Spec, Binding]] = {}  # bind(spec, size) without overrides: the last few
_PLAIN_LIMIT = 512


def bind(spec: Spec, size: str | None, overrides: dict[str, Expr] | None = None) -> Binding:
    """Bind ``size`` (None: no size, only defaults and overrides) with ``overrides`` from ``--set``. Without overrides
    the same spec and size give the same Binding (the last 512 kept), so what it memoises (:meth:`Binding.memo`) is
    shared by everything that asks for that size."""
    if overrides:
        return _bind(spec, size, overrides)
    key = (id(spec), size)
    held = _PLAIN.get(key)
    if held is not None and held[0] is spec:  # the same object: an id can be reused once a spec is collected
        return held[1]
    binding = _bind(spec, size, {})
    if len(_PLAIN) >= _PLAIN_LIMIT:
        del _PLAIN[next(iter(_PLAIN))]  # the oldest
    _PLAIN[key] = (spec, binding)
    return binding


def _bind(spec: Spec, size: str | None, overrides: dict[str, Expr]) -> Binding:
    if size is not None and size not in spec.sizes:
        raise UsageError(
            f"{spec.name} has no size {size!r}{did_you_mean(size, spec.sizes)}; sizes: {', '.join(spec.sizes) or 'none'}"
        )
    exprs = _sources(spec, size, overrides)
    values: dict[str, Value] = {}
    trail: list[str] = []

    def value_of(name: str) -> Value:
        if name in values:
            return values[name]
        if name not in exprs:
            doc = spec.hyperparameters[name].doc
            place = where(spec, ("sizes", size) if size is not None else ("hyperparameters", name))
            what = f"size {size!r} does not set" if size is not None else "no size given and no value for"
            raise SpecError.at(place, f"{what} {name}{f' ({doc})' if doc else ''}, which has no default; expected {name}: <value> or --set {name}=<value>")
        if name in trail:
            cycle = " -> ".join(trail[trail.index(name):] + [name])
            raise _error(exprs[name], f"cycle among values: {cycle}")
        trail.append(name)
        expr, place, origin = exprs[name]
        env = {n: value_of(n) for n in sorted(expr.names)}
        trail.pop()
        try:
            raw = expr.evaluate(env)
        except ExprError as e:
            raise _error(exprs[name], f"{name} = {expr.text}: {e}") from None
        values[name] = _check(spec, name, raw, expr, env, origin, exprs[name])
        return values[name]

    for name in spec.hyperparameters:
        value_of(name)
    substituted = {n for n, (e, _, _) in exprs.items() if spec.hyperparameters[n].type == "int" and not e.constant}
    _bound_formulas(spec, size, exprs, substituted)
    subs = {symbol(n): exprs[n][0].to_sympy() for n in substituted}
    # A reported figure describes the size as published; once --set changes it, there is nothing to compare.
    reported = spec.sizes[size].reported if size is not None and not overrides else None
    return Binding(spec, size or "default", values, _closed(subs), reported, dict(overrides))


def _sources(spec: Spec, size: str | None, overrides: dict[str, Expr]) -> dict[str, tuple[Expr, Where | None, str]]:
    """Each hyperparameter's expression, where it is written and what gives it: ``--set``, the size, or its default."""
    given = spec.sizes[size].values if size is not None else {}
    exprs: dict[str, tuple[Expr, Where | None, str]] = {}
    for name, hp in spec.hyperparameters.items():
        if name in overrides:
            exprs[name] = (overrides[name], None, f"--set {name}={overrides[name].text}")
        elif name in given:
            exprs[name] = (given[name], where(spec, ("sizes", size, name)), f"size {size!r}")
        elif hp.default is not None:
            exprs[name] = (hp.default, where(spec, ("hyperparameters", name, "default")), "its default")
    return exprs


def _bound_formulas(spec: Spec, size: str | None, exprs: dict[str, tuple[Expr, Where | None, str]], substituted: set[str]) -> None:
    """The formulas with ``substituted`` hyperparameters written out stay within the limits, checked before sympy builds
    anything (see archcalc.spec.limits)."""
    excess = first_excess({n: e for n, (e, _, _) in exprs.items()}, substituted, spec.model)
    if excess is None:
        return
    loc, why = excess
    if len(loc) == 1:
        expr, _, origin = exprs[loc[0]]
        raise _error(exprs[loc[0]], f"{loc[0]} = {expr.text} from {origin} {why}")
    raise SpecError.at(where(spec, loc), f"{'.'.join(map(str, loc[1:]))} {why} (size {size or 'default'!r})")


def _check(spec: Spec, name: str, raw, expr: Expr, env, origin: str, entry) -> Value:
    hp = spec.hyperparameters[name]
    if hp.type == "bool":
        return bool(raw)
    assert isinstance(raw, Fraction)
    shown = expr.text if expr.constant else f"{expr.text} = {_fmt(raw)}" + (
        f" (with {', '.join(f'{k}={v}' for k, v in env.items())})" if env else "")
    if raw.denominator != 1:
        uneven = _uneven_division(expr.tree, env)
        raise _error(entry, f"{name} = {shown} from {origin} is not an integer; expected a whole number"
                     + (f" ({uneven})" if uneven else ""))
    value = int(raw)
    if value < hp.min:
        what = "a positive integer" if hp.min == 1 else f"an integer of at least {hp.min}"
        raise _error(entry, f"{name} = {shown} from {origin}; expected {what}{f' ({hp.doc})' if hp.doc else ''}")
    if hp.max is not None and value > hp.max:
        raise _error(entry, f"{name} = {shown} from {origin}; expected at most {hp.max}")
    if value > MAX_VALUE:
        raise _error(entry, f"{name} = {shown} from {origin} is absurdly large; expected at most {MAX_VALUE:.0e}")
    if hp.multiple_of and value % hp.multiple_of:
        raise _error(entry, f"{name} = {shown} from {origin}; expected a multiple of {hp.multiple_of}")
    return value


def _uneven_division(node: Node, env: dict) -> str | None:
    """Which division in ``node`` leaves a remainder at these values, in words: ``H = 7 does not divide d = 768``."""
    for arg in node.args:
        if found := _uneven_division(arg, env):
            return found
    if node.op != "/":
        return None
    try:
        top, bottom = (evaluate(arg, env) for arg in node.args)
    except (ExprError, ZeroDivisionError):
        return None
    if not isinstance(top, Fraction) or not isinstance(bottom, Fraction) or not bottom or (top / bottom).denominator == 1:
        return None
    said = [f"{arg.value} = {_fmt(v)}" if arg.op == "name" else _fmt(v) for arg, v in zip(node.args, (top, bottom))]
    return f"{said[1]} does not divide {said[0]}"


def _fmt(value: Fraction) -> str:
    if max(abs(value.numerator), value.denominator).bit_length() > 256:  # too long to show (or for float())
        exponent = round((abs(value.numerator).bit_length() - value.denominator.bit_length()) * 0.30103)
        return f"{'-' if value < 0 else ''}about 10^{exponent}"
    if value.denominator == 1:
        return str(value.numerator)
    return f"{value.numerator}/{value.denominator} ≈ {float(value):.6g}"


def _error(entry, message: str) -> Exception:
    _, place, _ = entry
    if place is None:
        return UsageError(message)
    return SpecError.at(place, message)


def _closed(subs: dict[sympy.Symbol, sympy.Expr]) -> dict[sympy.Symbol, sympy.Expr]:
    """Each substitution with the others substituted into it, once each, in dependency order (they are acyclic,
    and their written-out size is bounded by archcalc.spec.limits). Every size of a spec has the same defaults:
    the result is cached, since sympy's min/max simplification is the costly part of a count."""
    return dict(_closed_items(tuple(subs.items())))


@lru_cache(maxsize=128)
def _closed_items(items: tuple[tuple[sympy.Symbol, sympy.Expr], ...]) -> tuple[tuple[sympy.Symbol, sympy.Expr], ...]:
    subs = dict(items)
    out: dict[sympy.Symbol, sympy.Expr] = {}

    def close(key: sympy.Symbol, trail: tuple = ()) -> sympy.Expr:
        if key not in out:
            if key in trail:
                raise ValueError(f"cycle among substitutions: {' -> '.join(map(str, trail + (key,)))}")
            value = subs[key]
            used = {s: close(s, trail + (key,)) for s in value.free_symbols if s in subs}
            out[key] = value.xreplace(used) if used else value
        return out[key]

    for key in subs:
        close(key)
    return tuple(out.items())
