"""The solver's inputs from the command line, checked: ``--fix``, ``--range``, ``--multiple-of`` and exact
decimals (``--tokens-per-param 20``). Each bad value is a one-line UsageError, never an exception from
deeper down (a 25-digit ``--fix``, ``nan``, ``1e-320``).

>>> parse_decimal("20", "--tokens-per-param"), parse_decimal("2.5e-1", "--x")
(Fraction(20, 1), Fraction(1, 4))
>>> parse_range("d_ff/d=2.5:4")
(('d_ff', 'd'), (Fraction(5, 2), Fraction(4, 1)))
"""

from __future__ import annotations

import re
from fractions import Fraction

from archcalc.errors import UsageError
from archcalc.quantity import parse_count
from archcalc.spec import Spec
from archcalc.spec.schema import MAX_VALUE
from archcalc.spec.suggest import did_you_mean

_DECIMAL = re.compile(r"\s*(\d{1,30}(?:\.\d{0,30})?|\.\d{1,30})(?:[eE]([+-]?\d{1,3}))?\s*")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")


def parse_decimal(text: str, what: str) -> Fraction:
    """A positive exact decimal such as ``20``, ``0.5`` or ``1e-3``; UsageError otherwise (nan, -20, 0)."""
    m = _DECIMAL.fullmatch(str(text))
    if not m:
        raise UsageError(f"{what} {text!r}: expected a positive decimal number such as 20 or 0.5")
    value = Fraction(m.group(1)) * Fraction(10) ** int(m.group(2) or 0)
    if value <= 0:
        raise UsageError(f"{what} {text!r}: expected a positive number")
    return value


def parse_fixed(spec: Spec, items: list[str]) -> dict[str, int | bool]:
    """``--fix L=512`` and ``--fix tie_embeddings=true`` into values (range checks come with the spec). The same
    name twice with two values is a contradiction, refused (never the last one silently)."""
    out: dict[str, int | bool] = {}
    kinds = spec.kinds()
    for item in items:
        name, sep, text = item.partition("=")
        name, text = name.strip(), text.strip().lower()
        if not sep or not _NAME.fullmatch(name):
            raise UsageError(f"--fix {item[:80]!r}: expected NAME=INTEGER (or NAME=true/false for a switch), e.g. --fix L=512")
        if name not in kinds:
            raise UsageError(f"--fix {name}: {spec.name} has no hyperparameter {name!r}{did_you_mean(name, kinds)}; "
                             f"it has: {', '.join(kinds)}")
        if kinds[name] == "bool":
            if text not in ("true", "false"):
                raise UsageError(f"--fix {item[:80]!r}: {name} is a switch; expected {name}=true or {name}=false")
            _once(out, name, text == "true", "--fix")
            continue
        if not re.fullmatch(r"-?\d{1,40}", text):
            raise UsageError(f"--fix {item[:80]!r}: expected NAME=INTEGER, e.g. --fix L=512")
        value = int(text)
        if not 1 <= value <= MAX_VALUE:
            shown = text if len(text) <= 24 else f"a {len(text.lstrip('-'))}-digit number"
            raise UsageError(f"--fix {name}={shown}: expected an integer from 1 to {MAX_VALUE:.0e}")
        _once(out, name, value, "--fix")
    return out


def _once(out: dict, name: str, value, option: str) -> None:
    """``out[name] = value``, refusing a second, different value for the same name."""
    if name in out and out[name] != value:
        def shown(v) -> str:
            return str(v).lower() if isinstance(v, bool) else str(v)
        raise UsageError(f"{option} {name}={shown(out[name])} and {option} {name}={shown(value)} contradict each other; "
                         f"give {name} once")
    out[name] = value


def parse_ranges(items: list[str]) -> dict[tuple[str, str], tuple[Fraction, Fraction]]:
    """Every ``--range``; the same ratio twice (or once each way up, d/L and L/d) with other bounds is refused."""
    out: dict[tuple[str, str], tuple[Fraction, Fraction]] = {}
    for text in items:
        (num, den), bounds = parse_range(text)
        same = out.get((num, den)) or (tuple(1 / b for b in reversed(out[(den, num)])) if (den, num) in out else None)
        if same is not None and same != bounds:
            raise UsageError(f"--range {num}/{den}={_decimal(bounds[0])}:{_decimal(bounds[1])} contradicts an earlier "
                             f"--range of the same ratio ({num}/{den} in [{_decimal(same[0])}, {_decimal(same[1])}]); "
                             "give it once")
        if same is None:
            out[(num, den)] = bounds
    return out


def _decimal(x: Fraction) -> str:
    return str(x.numerator) if x.denominator == 1 else f"{float(x):g}"


def parse_free(items: list[str]) -> list[str] | None:
    """``--free d,d_ff`` (repeatable): the names, in order, once each; None when not given."""
    if not items:
        return None
    names: list[str] = []
    for item in items:
        for name in (part.strip() for part in item.split(",")):
            if not _NAME.fullmatch(name):
                raise UsageError(f"--free {item[:80]!r}: expected hyperparameter names separated by commas, "
                                 "e.g. --free d,d_ff")
            if name not in names:
                names.append(name)
    return names


def parse_range(text: str) -> tuple[tuple[str, str], tuple[Fraction, Fraction]]:
    """``d_ff/d=2.5:4`` into (("d_ff", "d"), (5/2, 4))."""
    ratio, sep, bounds = text.partition("=")
    num, slash, den = ratio.strip().partition("/")
    lo, colon, hi = bounds.partition(":")
    if not (sep and slash and colon and _NAME.fullmatch(num.strip()) and _NAME.fullmatch(den.strip())):
        raise UsageError(f"--range {text[:80]!r}: expected RATIO=MIN:MAX, e.g. --range d/L=64:160 or --range d_ff/d=2.5:4")
    low, high = parse_decimal(lo, f"--range {ratio}"), parse_decimal(hi, f"--range {ratio}")
    if low > high:
        raise UsageError(f"--range {text[:80]!r}: expected MIN <= MAX")
    return (num.strip(), den.strip()), (low, high)


def parse_aspect(text: str) -> tuple[Fraction, Fraction]:
    """``--aspect MIN:MAX``: the range of the two solved hyperparameters' ratio."""
    lo, colon, hi = text.partition(":")
    if not colon:
        raise UsageError(f"--aspect {text[:80]!r}: expected MIN:MAX, e.g. --aspect 64:160")
    low, high = parse_decimal(lo, "--aspect"), parse_decimal(hi, "--aspect")
    if low > high:
        raise UsageError(f"--aspect {text[:80]!r}: expected MIN <= MAX")
    return low, high


def parse_multiple_of(items: list[str]) -> int | dict[str, int] | None:
    """``--multiple-of 128`` (every solved width) or ``--multiple-of d_ff=256`` (one hyperparameter)."""
    bare: int | None = None
    named: dict[str, int] = {}
    for item in items:
        name, sep, text = item.rpartition("=")
        try:
            value = parse_count(text)
        except ValueError as e:
            raise UsageError(f"--multiple-of {item[:80]!r}: {e}") from None
        if not 1 <= value <= MAX_VALUE:
            raise UsageError(f"--multiple-of {item[:80]!r}: expected a step from 1 to {MAX_VALUE:.0e}")
        if sep:
            if not _NAME.fullmatch(name.strip()):
                raise UsageError(f"--multiple-of {item[:80]!r}: expected M or NAME=M, e.g. --multiple-of d_ff=256")
            _once(named, name.strip(), value, "--multiple-of")
        else:
            if bare is not None and bare != value:
                raise UsageError(f"--multiple-of {bare} and --multiple-of {value} contradict each other; give one step "
                                 "(or NAME=M for one hyperparameter)")
            bare = value
    if named:
        return named | ({"*": bare} if bare else {})
    return bare
