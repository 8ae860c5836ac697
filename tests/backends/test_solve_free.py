"""Which hyperparameters the solver varies (issue 26.19): a default every size overrides keeps the sizes' proportion,
exactly as no default does; ``--free`` names exactly the ones that vary; ``--range d_ff/d`` bounds d_ff whenever d
and d_ff both vary; a width shown by one size keeps its proportion; ``--multiple-of NAME=M`` holds for every name."""

from __future__ import annotations

import re
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from archcalc.backends.solve import solve
from archcalc.errors import UsageError
from archcalc.spec import load_spec, load_spec_text
from tests.backends.solve_helpers import count_of
from tests.helpers import examples

WITHOUT_DEFAULT = """\
name: fam
hyperparameters:
  V: {default: 32000}
  L: {doc: blocks}
  d: {doc: width}
  H: {doc: heads}
  d_head: {default: d / H}
  d_ff: {doc: MLP width}
model:
  embedding: {vocab: V, width: d, position: {kind: rotary, base: 10000}}
  block:
    repeat: L
    residual: pre-norm
    norm: rmsnorm
    attention: {heads: H, kv_heads: H, head_width: d_head, qkv_bias: false, out_bias: false}
    mlp: {kind: gated, hidden: d_ff, activation: silu, bias: false}
  final_norm: rmsnorm
  head: {tied: false}
sizes:
  1b: {L: 16, d: 2048, H: 16, d_ff: 5632}
  3b: {L: 32, d: 2560, H: 20, d_ff: 8192}
"""
WITH_DEFAULT = WITHOUT_DEFAULT.replace("d_ff: {doc: MLP width}", "d_ff: {doc: MLP width, default: 4 * d}")


def _shapes(solution) -> list[tuple[dict, int]]:
    return [(c.values, c.total) for c in solution.candidates]


@pytest.mark.parametrize("target", [10**9, 3 * 10**9, 30 * 10**9])
def test_a_default_every_size_overrides_is_solved_as_if_it_had_none(target):
    """The issue's spec: with d_ff = 4 * d as a default that both sizes override, 3B held d_ff at the constant 8,192."""
    without, with_ = (solve(load_spec_text(text), target, {}) for text in (WITHOUT_DEFAULT, WITH_DEFAULT))
    assert _shapes(with_) == _shapes(without) and with_.assumptions == without.assumptions
    assert "d_ff" in with_.free and "d_ff" not in with_.defaults
    ref = {"1b": {"d": 2048, "H": 16, "d_ff": 5632}, "3b": {"d": 2560, "H": 20, "d_ff": 8192}}[with_.reference]
    assert with_.assumptions[0].startswith(f"d_ff ≈ {float(Fraction(ref['d_ff'], ref['d'])):.4g}·d")
    for values, _ in _shapes(with_):  # the reference size's proportion, to the grid (not a constant d_ff)
        assert abs(Fraction(values["d_ff"], values["d"]) - Fraction(ref["d_ff"], ref["d"])) <= Fraction(64, values["d"])
    held = solve(load_spec_text(WITH_DEFAULT), target, {}, free=["L", "d"])  # asked for: then it is held, and said
    assert held.held == {"H": ref["H"], "d_ff": ref["d_ff"]}
    assert all(c.values["d_ff"] == ref["d_ff"] for c in held.candidates)


def test_free_names_exactly_what_varies(cli):
    payload = cli("solve", "llama", "--target-params", "7B", "--free", "d,d_ff", "--json").json()
    solution = payload["solution"]
    assert solution["solved"] == ["d", "d_ff"] and solution["held"] == {"L": 32, "H": 32}
    assert solution["assumptions"][:2] == ["L = 32, as in size 2-7b", "H = 32, as in size 2-7b"]
    for c in payload["candidates"]:
        assert (c["values"]["L"], c["values"]["H"]) == (32, 32) and c["total"] == count_of("llama", c["values"])
    text = cli("solve", "llama", "--target-params", "7B", "--free", "d", "--free", "d_ff").out
    assert "assumed: L = 32, as in size 2-7b (--fix L=... to choose)" in text
    assert text.splitlines()[text.splitlines().index("") + 1].split()[:2] == ["d", "d_ff"]  # held: not columns
    # a hyperparameter with a default is solved when named (GPT-3's d_ff = 4 * d)
    gpt3 = cli("solve", "gpt3", "--target-params", "7B", "--free", "d,d_ff", "--json").json()
    assert gpt3["solution"]["solved"] == ["d", "d_ff"] and "d_ff" not in gpt3["solution"]["defaults"]
    assert {c["values"]["d_ff"] == 4 * c["values"]["d"] for c in gpt3["candidates"]} != {True}


def test_free_without_sizes_asks_for_the_rest():
    spec = load_spec_text(WITHOUT_DEFAULT.split("sizes:")[0])
    with pytest.raises(UsageError, match=r"L has no default and fam has no sizes .* --fix L=VALUE or name it in --free"):
        solve(spec, 10**9, {"H": 16}, free=["d", "d_ff"])
    solution = solve(spec, 10**9, {"H": 16, "L": 12}, free=["d", "d_ff"])
    assert solution.solved == ["d", "d_ff"] and all(c.values["L"] == 12 for c in solution.candidates)


RANGED = [  # d and d_ff both vary, in each of the ways they can
    ("llama", "7B", []),  # d solved, d_ff filled in proportion
    ("llama", "7B", ["--fix", "L=32", "--fix", "H=32", "--fix", "KV=8"]),  # both solved
    ("mistral", "70B", []),  # one size: d_ff used to be held at 14,336
    ("gpt3", "7B", ["--free", "d,d_ff"]),  # a default, freed
    ("gpt3", "7B", ["--free", "L,d,d_ff,H"]),  # a default, freed and filled
    ("fam.yaml", "3B", []),  # a default every size overrides
]


@pytest.mark.parametrize("name,target,extra", RANGED, ids=[f"{n}-{t}-{' '.join(e)}" for n, t, e in RANGED])
@pytest.mark.parametrize("low,high", [(2, 2.5), (3.75, 4.5)])
def test_range_of_d_ff_over_d_works_whenever_both_vary(cli, tmp_path, monkeypatch, name, target, extra, low, high):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "fam.yaml").write_text(WITH_DEFAULT)
    r = cli("solve", name, "--target-params", target, *extra, "--range", f"d_ff/d={low}:{high}", "--json")
    assert r.status == 0, r.err
    solution = r.json()["solution"]
    fill = next((a for a in solution["assumptions"] if a.startswith("d_ff ≈")), None)
    step = int(re.search(r"on multiples of (\d+)", fill).group(1)) if fill else 0  # a fill is rounded to its grid
    assert fill or solution["ratio"]["name"] == "d_ff/d"
    for c in r.json()["candidates"]:
        d, d_ff = c["values"]["d"], c["values"]["d_ff"]
        assert Fraction(str(low)) * d - step <= d_ff <= Fraction(str(high)) * d + step, (d, d_ff)


@pytest.mark.parametrize("argv,why", [
    (["llama", "--fix", "d=4096"], "d is fixed with --fix d=4096"),
    (["gpt3"], "d_ff follows its default 4 * d (name it in --free to vary it)"),
    (["llama", "--free", "L,d"], "d_ff is held as in size 2-7b (11,008; name it in --free to vary it)"),
])
def test_range_of_one_that_does_not_vary_says_why(cli, argv, why):
    r = cli("solve", argv[0], "--target-params", "7B", *argv[1:], "--range", "d_ff/d=2:3")
    assert r.status == 2 and len(r.err.splitlines()) == 1 and r.err.startswith(f"--range d_ff/d: {why}; ")


def test_a_width_one_size_shows_keeps_its_proportion(cli):
    """Mistral has one size (d_ff = 14,336 at d = 4,096): a 70B keeps d_ff/d = 3.5 instead of 14,336."""
    payload = cli("solve", "mistral", "--target-params", "70B", "--json").json()
    assert payload["solution"]["assumptions"][0].startswith("d_ff ≈ 3.5·d")
    for c in payload["candidates"]:
        assert abs(c["values"]["d_ff"] - Fraction(7, 2) * c["values"]["d"]) <= 64
    kv = cli("solve", "llama", "--target-params", "70B", "--json").json()  # heads the sizes agree on stay constant
    assert "KV = 8, as in size 3-70b (not its default H)" in kv["solution"]["assumptions"]


LLAMA_INTS = ["V", "L", "d", "H", "KV", "d_head", "d_ff"]


@examples(60)
@given(name=st.sampled_from(LLAMA_INTS), step=st.integers(1, 8), fixed=st.booleans())
def test_multiple_of_a_name_holds_on_every_shape_or_is_refused(name, step, fixed):
    """Solved, filled, completed, derived (d_head = d/H), fixed or default: every candidate's value is a multiple,
    or the command says which value is not, in one line."""
    fixes = {"L": 30} if fixed else {}
    try:
        solution = solve(load_spec("llama"), 7 * 10**9, fixes, multiple_of={name: step})
    except UsageError as e:
        assert "\n" not in str(e)
        assert f"--multiple-of {name}={step}: {name} = " in str(e) and "not a multiple" in str(e) or \
            "no whole-number shape" in str(e) and f"{name} on multiples of {step} (--multiple-of)" in str(e)
        return
    for c in solution.candidates:
        value = c.values.get(name, c.derived.get(name))
        if value is None:  # not in the shape (V): the spec's value
            value = 32000
        assert value % step == 0, (name, step, c.values, c.derived)
