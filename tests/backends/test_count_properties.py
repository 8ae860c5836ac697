"""Property tests: the formula, the leaves, the roles and an independent closed form agree."""

from __future__ import annotations

import sympy
from hypothesis import given
from hypothesis import strategies as st

from archcalc.backends.count import count
from archcalc.spec import load_spec
from archcalc.spec.bind import bind, parse_overrides
from archcalc.spec.expr import symbol
from tests.helpers import examples

SPECS = {name: load_spec(name) for name in ("gpt2", "gpt3")}


@st.composite
def gpt_values(draw):
    H = draw(st.integers(1, 64))
    d_head = draw(st.integers(1, 256))
    explicit_head = draw(st.booleans())  # give d_head, or let the default d / H derive it
    d = draw(st.integers(1, 16384)) if explicit_head else H * d_head
    values = {
        "V": draw(st.integers(1, 300_000)), "T": draw(st.integers(1, 131_072)), "L": draw(st.integers(1, 512)),
        "d": d, "H": H, "qkv_bias": draw(st.booleans()), "tie_embeddings": draw(st.booleans()),
    }
    if explicit_head:
        values["d_head"] = d_head
    if draw(st.booleans()):
        values["d_ff"] = draw(st.integers(1, 65_536))
    return values


def closed_form(v) -> int:
    """GPT-2/3 written out by hand, independently of the IR."""
    d, H, L = v["d"], v["H"], v["L"]
    dh = v.get("d_head", d // H)
    ff = v.get("d_ff", 4 * d)
    inner = H * dh
    block = d * 3 * inner + (3 * inner if v["qkv_bias"] else 0) + inner * d + d + 2 * d * ff + ff + d + 4 * d
    head = 0 if v["tie_embeddings"] else v["V"] * d
    return L * block + v["V"] * d + v["T"] * d + 2 * d + head


@examples(150)
@given(name=st.sampled_from(sorted(SPECS)), values=gpt_values())
def test_formula_equals_sum_of_leaves_and_roles_sum_to_total(name, values):
    spec = SPECS[name]
    overrides = parse_overrides(spec, [f"{k}={str(v).lower()}" for k, v in values.items()])
    result = count(bind(spec, None, overrides))
    numeric = result.binding.numeric()
    assert result.formula.xreplace(numeric) == sympy.Integer(result.total)
    assert sum(result.by_role.values()) == result.total
    assert sum(result.by_path.values()) == result.total
    assert result.total == closed_form(values)
    assert isinstance(result.total, int) and all(isinstance(n, int) for n in result.by_role.values())
    # the formula is exact: only integers and rationals, never floats
    assert not result.formula.atoms(sympy.Float)


@examples(60)
@given(L=st.integers(1, 300), H=st.integers(1, 128), dh=st.integers(1, 256))
def test_derived_defaults_are_substituted_into_the_formula(L, H, dh):
    """Sizes that give d but not d_head get the formula in d alone: d_head = d / H cancels."""
    spec = SPECS["gpt2"]
    result = count(bind(spec, None, parse_overrides(spec, [f"L={L}", f"H={H}", f"d={H * dh}"])))
    assert symbol("d_head") not in result.formula.free_symbols
    assert symbol("d_ff") not in result.formula.free_symbols
    assert sympy.expand(result.formula - (symbol("L") * (12 * symbol("d") ** 2 + 13 * symbol("d"))
                                          + (symbol("V") + symbol("T") + 2) * symbol("d"))) == 0
