"""Issue 16's acceptance list, and any two free hyperparameters of every bundled family."""

from __future__ import annotations

from fractions import Fraction
from itertools import combinations

import pytest

from archcalc.backends.solve import solve
from archcalc.errors import UsageError
from archcalc.spec import load_spec
from archcalc.spec.bind import bind
from archcalc.spec.library import bundled_names
from tests.backends.solve_helpers import count_of, valid_count

ACCEPTANCE = [
    ("llama", "7B", {"L": 32, "H": 32, "KV": 8}),
    ("llama", "70B", {"L": 80, "H": 64, "KV": 8}),
    ("llama", "7B", {"L": 32, "H": 32, "KV": 32}),
    ("mistral", "12B", {"L": 40, "H": 32, "KV": 8, "d_head": 128}),
    ("mixtral", "47B", {"L": 32, "H": 32, "KV": 8, "E": 8, "K": 2}),
    ("qwen3", "8B", {"L": 36, "H": 32, "KV": 8, "d_head": 128}),
    ("gemma2", "9B", {"L": 42, "H": 16, "KV": 8, "d_head": 256}),
    ("gpt3", "7B", {}),
    ("gpt3", "1T", {"L": 128}),
    ("gpt2", "1B", {"L": 36}),
]


@pytest.mark.parametrize("name,target,fixed", ACCEPTANCE, ids=[f"{n}-{t}-{len(f)}fixed" for n, t, f in ACCEPTANCE])
def test_acceptance(cli, name, target, fixed):
    args = [a for k, v in fixed.items() for a in ("--fix", f"{k}={v}")]
    r = cli("solve", name, "--target-params", target, *args, "--json")
    assert r.status == 0, r.err
    payload = r.json()
    best = payload["candidates"][0]
    assert abs(Fraction(best["rel_error_exact"])) < Fraction(1, 100)
    ratio = payload["solution"]["ratio"]
    for c in payload["candidates"]:
        assert {k: c["values"][k] for k in fixed} == fixed
        assert c["total"] == count_of(name, c["values"])  # what `archcalc count --set` says
        assert valid_count(name, tuple(c["values"].items())) == c["total"]  # every constraint kept
        if ratio:
            num, den = ratio["name"].split("/")
            assert Fraction(ratio["min_exact"]) <= Fraction(c["values"][num], c["values"][den]) <= Fraction(ratio["max_exact"])
    text = cli("solve", name, "--target-params", target, *args)
    assert text.status == 0 and f"{best['total']:,}" in text.out


def _pairs():
    """Every pair of free hyperparameters (no default) of every bundled spec that both change the count,
    with the rest as the spec's last size gives them."""
    cases = []
    for name in bundled_names():
        spec = load_spec(name)
        size = list(spec.sizes)[-1]
        values = bind(spec, size).values
        free = [n for n, hp in spec.hyperparameters.items() if hp.type == "int" and hp.default is None]
        given = [n for n in spec.sizes[size].values if n in values]
        for a, b in combinations(free, 2):
            cases.append((name, size, a, b, {k: values[k] for k in given if k not in (a, b)}))
    return cases


@pytest.mark.parametrize("name,size,a,b,fixed", _pairs(), ids=[f"{c[0]}-{c[2]}-{c[3]}" for c in _pairs()])
def test_any_two_free_recover_the_size(name, size, a, b, fixed):
    """On the unit grid the size itself is in the box (its ratio is one of the family's), so the best shape
    is exact: error 0, whichever two are free."""
    spec = load_spec(name)
    values = bind(spec, size).values
    total = count_of(name, {**fixed, a: values[a], b: values[b]})
    try:
        solution = solve(spec, total, fixed, multiple_of={a: 1, b: 1})
    except UsageError as e:  # neither changes the count (OLMoE's H with KV = H and d_head = d / H; a MoE's K): said so
        assert "no free hyperparameter changes the count" in str(e)
        for n in (a, b):
            assert count_of(name, {**fixed, a: values[a], b: values[b], n: 2 * values[n]}) == total, n
        return
    best = solution.candidates[0]
    assert best.total == total and best.rel_error == 0, (solution.solved, best.values)
    assert best.total == count_of(name, best.values)
