"""Formulas as MathML, rendered at build time (browsers draw MathML natively: no script, no network).

>>> from archcalc.spec.expr import symbol
>>> block(symbol("L") * symbol("d") ** 2).startswith('<math display="block"')
True
"""

from __future__ import annotations

import sympy
from sympy.printing.mathml import mathml

ROW = 48  # characters of a formula's plain text on one line, about what a phone's column holds


def block(expr: sympy.Expr) -> str:
    """A displayed formula; a long sum broken into lines by its terms, each line after the first starting with its
    sign (a term that is a factor times a long sum is broken inside its parentheses)."""
    rows = _rows(expr)
    if len(rows) == 1:
        return f'<math display="block" xmlns="http://www.w3.org/1998/Math/MathML">{_ml(expr)}</math>'
    table = "".join(f"<mtr><mtd>{row}</mtd></mtr>" for row in rows)
    return (f'<math display="block" xmlns="http://www.w3.org/1998/Math/MathML"><mtable columnalign="left">{table}'
            "</mtable></math>")


def _ml(expr: sympy.Expr) -> str:
    return mathml(expr, printer="presentation")


def _rows(expr: sympy.Expr) -> list[str]:
    """The lines of ``expr``'s MathML, each about ROW characters of its plain text at most (one term may be longer)."""
    if not isinstance(expr, sympy.Add) or len(str(expr)) <= ROW:
        return [_ml(expr)]
    rows: list[tuple[int, str]] = []  # each line's plain-text length and MathML
    for i, term in enumerate(expr.as_ordered_terms()):
        minus = term.could_extract_minus_sign()
        sign = "<mo>&#8722;</mo>" if minus else "" if i == 0 else "<mo>+</mo>"
        magnitude = -term if minus else term
        size = len(str(magnitude)) + 3
        if size > ROW and _factor_and_sum(magnitude):
            rows += [(ROW, row) for row in _inside(magnitude, sign)]  # full: the next term starts a line
        elif rows and rows[-1][0] + size <= ROW:
            rows[-1] = (rows[-1][0] + size, rows[-1][1] + sign + _ml(magnitude))
        else:
            rows.append((size, sign + _ml(magnitude)))
    return [row for _, row in rows]


def _factor_and_sum(term: sympy.Expr) -> tuple[sympy.Expr, sympy.Add] | None:
    """``term`` as a factor times a sum (L·(a + b)), or None."""
    if not isinstance(term, sympy.Mul):
        return None
    sums = [f for f in term.args if isinstance(f, sympy.Add)]
    if len(sums) != 1:
        return None
    return sympy.Mul(*[f for f in term.args if f is not sums[0]]), sums[0]


def _inside(term: sympy.Expr, sign: str) -> list[str]:
    """A factor times a long sum over several lines: the factor and the opening parenthesis with the sum's first
    terms, its further terms a line each group, the closing parenthesis after the last."""
    split = _factor_and_sum(term)
    assert split is not None
    factor, total = split
    inner = _rows(total)
    open_ = f"{sign}{_ml(factor)}<mo>&#8290;</mo><mo>(</mo>"
    return [open_ + inner[0], *inner[1:-1], inner[-1] + "<mo>)</mo>"] if len(inner) > 1 else \
        [open_ + inner[0] + "<mo>)</mo>"]


def inline(expr: sympy.Expr) -> str:
    return f'<math xmlns="http://www.w3.org/1998/Math/MathML">{mathml(expr, printer="presentation")}</math>'
