"""The parameter-count backend: exact totals, formulas and breakdowns from the IR.

Conventions (see docs/conventions.md): every distinct tensor counts once, so a tied head adds
nothing; buffers (rotary tables, masks) are not parameters. ``active`` counts what one token uses:
routed experts scaled by top_k / experts, embedding lookups excluded, the output head included
(tied or not), as the gpt-oss model card does.

>>> from archcalc.spec import load_spec
>>> r = count_size(load_spec("gpt2"), "small")
>>> r.total, r.formula_text, pretty(r.leading)
(124439808, 'L*(12*d**2 + 13*d) + T*d + V*d + 2*d', '12·L·d²')
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from fractions import Fraction
from functools import lru_cache

import sympy

from archcalc.errors import ArchcalcError, SpecError
from archcalc.ir import ROLES, Leaf, leaves, lower
from archcalc.spec import Spec
from archcalc.spec.bind import Binding, bind
from archcalc.spec.expr import Expr, symbol
from archcalc.spec.limits import formula_too_large
from archcalc.spec.loader import where


@dataclass(frozen=True)
class CountResult:
    """The parameter count of one size."""

    binding: Binding
    total: int
    active: int
    formula: sympy.Expr
    leading: sympy.Expr
    leading_value: int
    by_role: dict[str, int]
    by_path: dict[str, int]
    leaves: tuple[Leaf, ...] = field(repr=False)
    warnings: tuple[str, ...] = ()

    @property
    def size(self) -> str:
        return self.binding.size

    @property
    def reported(self) -> int | None:
        return self.binding.reported

    @property
    def rel_error(self) -> Fraction | None:
        """(computed − reported) / reported, exactly; None without a reported figure."""
        if not self.reported:
            return None
        return Fraction(self.total - self.reported, self.reported)

    @property
    def formula_text(self) -> str:
        """The formula expanded and collected by the block counts, e.g. ``L*(12*d**2 + 13*d) + ...``."""
        return render(self.formula, _repeat_symbols(self.leaves))[0]

    @property
    def formula_latex(self) -> str:
        return render(self.formula, _repeat_symbols(self.leaves))[1]

    def share(self, part: int) -> float:
        return 100.0 * part / self.total if self.total else 0.0

    def to_json(self) -> dict:
        """The JSON contract of ``archcalc count`` for one size (integers stay integers)."""
        numeric = self.binding.numeric()
        return {
            "size": self.size,
            "values": dict(self.binding.values),
            "total": self.total,
            "active": self.active,
            "reported": self.reported,
            "rel_error": float(self.rel_error) if self.rel_error is not None else None,
            "formula": self.formula_text,
            "latex": self.formula_latex,
            "leading_term": str(self.leading),
            "leading_term_pretty": pretty(self.leading),
            "leading_term_value": self.leading_value,
            "by_role": self.by_role,
            "shares": {role: round(self.share(n), 4) for role, n in self.by_role.items()},
            "by_path": self.by_path,
            "tensors": [
                {
                    "path": leaf.path,
                    "role": leaf.tensor.role,
                    "shape": [int(s.xreplace(numeric)) for s in leaf.tensor.shape],
                    "shape_formula": [str(s) for s in leaf.tensor.shape],
                    "repeat": int(leaf.repeat.xreplace(numeric)),
                    "count": int(leaf.count.xreplace(numeric)),
                    **({"tied_to": leaf.tensor.tied_to} if leaf.tensor.tied_to else {}),
                }
                for leaf in self.leaves
            ],
            "warnings": list(self.warnings),
        }


def count(binding: Binding) -> CountResult:
    """Count the parameters of one bound size (once a binding: the result is frozen)."""
    return binding.memo("_count", lambda: _count(binding))


def _count(binding: Binding) -> CountResult:
    lowered = lower(binding)
    all_leaves = tuple(leaves(lowered.root))
    numeric = binding.numeric()
    by_role = {role: 0 for role in ROLES}
    by_path: dict[str, int] = {}
    active = 0
    for leaf in all_leaves:
        active += int(leaf.active_count.xreplace(numeric))
        if leaf.tensor.tied_to:
            continue
        n = int(leaf.count.xreplace(numeric))
        by_role[leaf.tensor.role] += n
        by_path[leaf.path] = n
    for role in ("mixer", "mtp"):  # models without state-space layers or counted MTP modules: their shares as before
        if by_role[role] == 0:
            del by_role[role]
    if by_role["lm_head"] == 0 and any(leaf.tensor.tied_to for leaf in all_leaves if leaf.tensor.role == "lm_head"):
        del by_role["lm_head"]  # a tied head has no parameters of its own
    raw = sympy.Add(*(leaf.count for leaf in all_leaves))
    formula = check_formula(binding, raw.xreplace(binding.substitutions), "parameter")
    leading = leading_term(check_formula(binding, raw.xreplace(binding.generic_substitutions()), "parameter"),
                           _large_size(binding))
    return CountResult(
        binding=binding,
        total=sum(by_path.values()),
        active=active,
        formula=formula,
        leading=leading,
        leading_value=int(sympy.floor(leading.xreplace(numeric))),
        by_role=by_role,
        by_path=by_path,
        leaves=all_leaves,
        warnings=lowered.warnings,
    )


def check_formula(binding: Binding, formula: sympy.Expr, what: str) -> sympy.Expr:
    """``formula``, if expanding it is cheap (see archcalc.spec.limits); else a SpecError at the spec's model."""
    why = formula_too_large(formula, what)
    if why is not None:
        raise SpecError.at(where(binding.spec, ("model",)), f"{why} at size {binding.size!r}")
    return formula


def count_size(spec: Spec, size: str | None, overrides: dict[str, Expr] | None = None) -> CountResult:
    return count(bind(spec, size, overrides))


def count_spec(spec: Spec, sizes: list[str] | None = None, overrides: dict[str, Expr] | None = None) -> list[CountResult]:
    """Counts for ``sizes`` (default: every size of the spec, or the defaults if it has none)."""
    names: list[str | None] = list(sizes) if sizes else (list(spec.sizes) or [None])
    return [count_size(spec, name, overrides) for name in names]


def leading_term(formula: sympy.Expr, at: dict[sympy.Symbol, sympy.Expr] | None = None, share: float = 0.1) -> sympy.Expr:
    """The terms that dominate for large sizes: every monomial worth at least ``share`` of the largest one
    when evaluated ``at`` a large size (the spec's largest); without ``at``, those of highest total degree.
    Rounding (``ceiling``, ``floor``) is dropped first, since it does not change the growth."""
    return _leading_term(formula, None if at is None else tuple(at.items()), share)


@lru_cache(maxsize=1024)
def _leading_term(formula: sympy.Expr, at_items: tuple | None, share: float) -> sympy.Expr:
    """:func:`leading_term`, once for each formula and large size: the sizes of a spec share them."""
    at = None if at_items is None else dict(at_items)
    smooth = formula.replace(sympy.ceiling, lambda x: x).replace(sympy.floor, lambda x: x)
    terms = sympy.Add.make_args(sympy.expand(smooth))
    if at is not None:
        values = [abs(float(t.xreplace(at))) for t in terms]
        if values and all(v == v for v in values):  # no NaN: every symbol had a value
            top = max(values)
            return sympy.Add(*(t for t, v in zip(terms, values) if v >= share * top))

    def degree(term: sympy.Expr) -> sympy.Expr:
        return sum((e for b, e in term.as_powers_dict().items() if b.is_Symbol), sympy.Integer(0))

    degrees = [degree(t) for t in terms]
    top_degree = max(degrees, key=lambda x: float(x)) if degrees else 0
    return sympy.Add(*(t for t, g in zip(terms, degrees) if g == top_degree))


def _large_size(binding: Binding) -> dict[sympy.Symbol, sympy.Expr]:
    """Values of the spec's last (largest) size, with the same --set overrides; else this size's."""
    spec = binding.spec
    if spec.sizes:
        try:
            return bind(spec, list(spec.sizes)[-1], binding.overrides).numeric()
        except ArchcalcError:
            pass
    return binding.numeric()


def _repeat_symbols(all_leaves: tuple[Leaf, ...]) -> tuple[sympy.Symbol, ...]:
    """The symbols that repeat blocks (L): the formula is collected by them."""
    found: list[sympy.Symbol] = []
    for leaf in all_leaves:
        for s in sorted(leaf.repeat.free_symbols, key=str):
            if s not in found:
                found.append(s)
    return tuple(found)


@lru_cache(maxsize=256)
def render(formula: sympy.Expr, collect_by: tuple[sympy.Symbol, ...] = ()) -> tuple[str, str]:
    """The formula expanded and collected by the repeat symbols, as text and as LaTeX."""
    expr = collected_formula(formula, collect_by)
    return str(expr), sympy.latex(expr)


@lru_cache(maxsize=256)
def collected_formula(formula: sympy.Expr, collect_by: tuple[sympy.Symbol, ...] = ()) -> sympy.Expr:
    """The formula expanded and collected by the repeat symbols (L), as the command line prints it."""
    expr = sympy.expand(formula)
    return sympy.collect(expr, list(collect_by)) if collect_by else expr


_SUPERSCRIPT = str.maketrans("0123456789-", "⁰¹²³⁴⁵⁶⁷⁸⁹⁻")


def pretty(expr: sympy.Expr) -> str:
    """A compact reading form: ``12*L*d**2`` becomes ``12·L·d²``."""
    text = re.sub(r"\*\*(-?\d+)", lambda m: m.group(1).translate(_SUPERSCRIPT), str(expr))
    return text.replace("*", "·")


__all__ = ["CountResult", "count", "count_size", "count_spec", "leading_term", "pretty", "render", "symbol"]
