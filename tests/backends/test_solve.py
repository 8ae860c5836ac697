"""The solver from the command line: the 100T question, named ratio ranges, assumptions, budgets, bad input."""

from __future__ import annotations

import math
from fractions import Fraction
from pathlib import Path

import pytest

from archcalc.backends.solve import solve
from archcalc.backends.solve.search import MAX_ENUMERATED, MAX_VALIDATIONS, MAX_WALK
from archcalc.spec import load_spec
from tests.backends.solve_helpers import count_of

FAMILIES = Path(__file__).parent.parent / "data" / "families"


def test_gpt3_100t_at_512_layers(cli):
    r = cli("solve", "spec/gpt3.yaml", "--target-params", "100e12", "--fix", "L=512", "--json")
    assert r.status == 0, r.err
    payload = r.json()
    assert payload["target"] == 100 * 10**12 and payload["fixed"] == {"L": 512}
    assert abs(payload["solution"]["real_value"] - 127_572.79) < 0.01
    best = payload["candidates"][0]
    assert best["values"] == {"L": 512, "d": 127_616, "H": 997} and best["total"] == 100_067_746_815_872
    assert best["total"] == count_of("gpt3", best["values"])
    assert Fraction(best["rel_error_exact"]) == Fraction(best["total"] - 10**14, 10**14)
    assert best["derived"]["d_head"] == 128  # GPT-3's head width kept
    assert payload["solution"]["exact"] == ["d = -58963/12288 + sqrt(2457600003476635369)/12288"]
    errors = [abs(c["rel_error"]) for c in payload["candidates"]]
    assert errors == sorted(errors) and all(c["values"]["d"] % 128 == 0 for c in payload["candidates"])


def test_the_gpt3_shaped_guess_is_105_6t(cli):
    total = cli("count", "gpt3", "--size", "100t", "--json").json()["results"][0]["total"]
    assert total == 105_560_844_664_832


def test_two_free_shapes_are_inside_the_named_range(cli):
    payload = cli("solve", "gpt3", "--target-params", "7B", "--json").json()
    ratio = payload["solution"]["ratio"]
    assert ratio["name"] == "d/L" and ratio["source"].startswith("the family's sizes have 42.67 to 256.00")
    assert 2 <= len(payload["candidates"]) <= 6
    for c in payload["candidates"]:
        value = Fraction(c["values"]["d"], c["values"]["L"])
        assert Fraction(ratio["min_exact"]) <= value <= Fraction(ratio["max_exact"]) and c["in_range"]
        assert c["ratio"] == {"d/L": float(value)}
    text = cli("solve", "gpt3", "--target-params", "7B").out
    assert "with d/L in [38.79, 281.60]" in text and text.count("(outside)") == 0


def _help(command: str) -> str:
    from archcalc.cli import build_parser

    sub = next(a for a in build_parser()._actions if a.dest == "command")
    return sub.choices[command].format_help()


def test_ratio_ranges_are_named_the_same_in_help_errors_tables_and_json(cli):
    assert "d_ff/d=2.5:4" in _help("solve") and "d/L=64:160" in _help("solve")
    args = ("solve", "llama", "--target-params", "7B", "--fix", "L=32", "--fix", "H=32", "--fix", "KV=8")
    payload = cli(*args, "--range", "d_ff/d=3:3.5", "--json").json()
    assert payload["solution"]["ratio"]["name"] == "d_ff/d" and payload["solution"]["ratio"]["source"] == "--range"
    assert all(3 <= c["values"]["d_ff"] / c["values"]["d"] <= 3.5 for c in payload["candidates"])
    inverted = cli(*args, "--range", "d/d_ff=0.2:0.25", "--json").json()["solution"]["ratio"]
    assert (inverted["name"], inverted["min"], inverted["max"]) == ("d_ff/d", 4.0, 5.0)
    lines = cli(*args).out.splitlines()
    assert any("with d_ff/d in [2.44, 3.85]" in line for line in lines)
    assert lines[lines.index("") + 1].split()[-1] == "d_ff/d"  # the table's last column
    wrong = cli(*args, "--range", "d/L=64:160")
    assert wrong.status == 2 and "--range d/L" in wrong.err and "here: d_ff/d" in wrong.err


def test_aspect_names_the_pair_it_bounds(cli):
    payload = cli("solve", "gpt3", "--target-params", "175B", "--aspect", "120:136", "--json").json()
    assert payload["solution"]["ratio"]["name"] == "d/L"
    assert all(120 <= c["aspect"] <= 136 for c in payload["candidates"])


def test_nothing_in_range_shows_the_nearest_and_the_bound_that_stops_them(cli):
    args = ("solve", "gpt3", "--target-params", "50M", "--range", "d/L=1000:2000")  # d >= 1000 is already 64M
    payload = cli(*args, "--json").json()
    assert any("the lower bound d/L ≥ 1000.00 stops them" in n for n in payload["solution"]["notes"])
    assert payload["candidates"][0]["rel_error"] > 0.01 and all(c["in_range"] for c in payload["candidates"])
    assert payload["outside"] and all(not c["in_range"] and "outside [1000.00, 2000.00]" in c["outside"]
                                      for c in payload["outside"])
    assert min(abs(c["rel_error"]) for c in payload["outside"]) < 0.01
    assert cli(*args).out.count("(outside)") == len(payload["outside"])


def test_more_than_two_free_are_filled_from_the_family_and_stated(cli):
    r = cli("solve", "llama", "--target-params", "7B", "--json")
    assert r.status == 0, r.err
    payload = r.json()
    solution = payload["solution"]
    assert solution["solved"] == ["L", "d"] and solution["reference_size"] == "2-7b"
    assert solution["assumptions"][0].startswith("d_ff ≈ 2.688·d")
    assert any(a.startswith("H ≈ d/128") for a in solution["assumptions"])
    best = payload["candidates"][0]
    assert abs(best["rel_error"]) < 0.01 and best["derived"]["d_head"] == 128
    text = cli("solve", "llama", "--target-params", "7B").out
    assert "assumed: d_ff ≈ 2.688·d" in text and "(--fix d_ff=... to choose)" in text
    fixed = cli("solve", "llama", "--target-params", "7B", "--fix", "d_ff=11008", "--json").json()
    assert all(c["values"]["d_ff"] == 11008 for c in fixed["candidates"])


def test_constraints_are_kept_and_listed(cli):
    payload = cli("solve", "llama", "--target-params", "7B", "--fix", "L=32", "--fix", "H=32", "--fix", "KV=8",
                  "--json").json()
    assert payload["solution"]["constraints"] == ["d_head = d/H is whole (H divides d)", "rotary head width d_head is even"]
    assert payload["solution"]["grids"]["d"] % 64 == 0  # H = 32 divides d, and d/32 is even
    for c in payload["candidates"]:
        assert c["values"]["d"] % 32 == 0 and (c["values"]["d"] // 32) % 2 == 0
    kv = cli("solve", "llama", "--target-params", "6.2B", "--fix", "L=32", "--fix", "d=4096", "--fix", "KV=8",
             "--fix", "d_ff=11008", "--json").json()  # the count falls as H grows (fewer key/value heads per head)
    assert kv["solution"]["solved"] == ["H"] and all(c["values"]["H"] % 8 == 0 for c in kv["candidates"])
    assert "KV divides H" in kv["solution"]["constraints"]
    step = cli("solve", "llama", "--target-params", "7B", "--fix", "L=32", "--fix", "H=32", "--fix", "KV=8",
               "--multiple-of", "256", "--json").json()
    assert all(c["values"]["d"] % 256 == 0 and c["values"]["d_ff"] % 256 == 0 for c in step["candidates"])
    one = cli("solve", "llama", "--target-params", "7B", "--fix", "L=32", "--fix", "H=32", "--fix", "KV=8",
              "--multiple-of", "d_ff=1000", "--json").json()
    assert all(c["values"]["d_ff"] % 1000 == 0 for c in one["candidates"])


def test_infeasible_targets_name_the_nearest_feasible(cli):
    r = cli("solve", "gpt2", "--target-params", "1000")
    assert r.status == 2 and "nearest feasible target is 51,308" in r.err and len(r.err.splitlines()) == 1
    r = cli("solve", "gpt3", "--target-params", "1000", "--fix", "L=2")
    assert r.status == 2 and "nearest feasible target" in r.err
    r = cli("solve", "gpt3", "--target-params", "1e80", "--fix", "L=2")
    assert r.status == 2 and "above the count of every shape" in r.err
    r = cli("solve", "llama", "--target-params", "7B", "--fix", "L=32", "--fix", "d=4096", "--fix", "KV=8",
            "--fix", "d_ff=11008")
    assert r.status == 2 and "the largest, at H = 8, is 6,738,415,616" in r.err


def test_compute_budgets_are_exact(cli):
    payload = cli("solve", "gpt3", "--target-flops", "3.14e23", "--tokens", "300e9", "--json").json()
    assert payload["target"] == 314 * 10**21 // (6 * 300 * 10**9)
    assert all(c["tokens"] == 300 * 10**9 and c["train_flops_6nd"] == 6 * c["total"] * 300 * 10**9
               for c in payload["candidates"])
    chinchilla = cli("solve", "gpt3", "--target-flops", "5.76e23", "--json").json()  # R = 20 by default
    assert chinchilla["target"] == math.isqrt(576 * 10**21 // 120) == 69_282_032_302
    assert chinchilla["solution"]["from_flops"]["tokens_per_param"] == "20"
    assert all(c["tokens"] == 20 * c["total"] for c in chinchilla["candidates"])
    odd = cli("solve", "gpt3", "--target-flops", "1e24", "--tokens-per-param", "20.5", "--json").json()
    assert odd["target"] == math.isqrt(10**24 * 2 // (6 * 41))  # exact, not via a float


def test_training_flops_per_candidate_match_the_flops_command(cli):
    payload = cli("solve", "gpt2", "--target-flops", "1e20", "--fix", "L=12", "--seq-len", "1024", "--json").json()
    best = payload["candidates"][0]
    sets = [a for k, v in best["values"].items() for a in ("--set", f"{k}={v}")]
    step = cli("flops", "gpt2", *sets, "--seq-len", "1024", "--json").json()["results"][0]["train_step_matmul"]
    assert best["train_flops_matmul"] * 1024 == step * best["tokens"]


def test_memory_budgets_mark_what_fits(cli):
    args = ("solve", "llama", "--target-params", "7B", "--fix", "L=32", "--fix", "H=32", "--fix", "KV=8",
            "--seq-len", "4096", "--json")
    inference = cli(*args, "--memory", "80G").json()
    assert all(c["memory"]["fits"] and c["memory"]["inference_bytes"] == c["memory"]["weights_bytes"]
               + c["memory"]["kv_cache_bytes"] for c in inference["candidates"])
    assert inference["candidates"][0]["memory"]["weights_bytes"] == 2 * inference["candidates"][0]["total"]
    training = cli(*args, "--memory", "80G", "--memory-for", "training").json()
    assert not any(c["memory"]["fits"] for c in training["candidates"])  # 16 bytes a parameter: 112 GB
    text = cli(*args[:-1], "--memory", "80G", "--memory-for", "training").out
    assert "does not fit 80,000,000,000 bytes for training" in text
    fit = cli("solve", str(FAMILIES / "llama2.yaml"), "--memory", "80G", "--seq-len", "4096", "--json").json()
    assert fit["largest_that_fits"] == "13b"


@pytest.mark.parametrize("extra", [
    ["--target-params", "7B", "--tokens", "0"],
    ["--target-flops", "1e24", "--tokens", "0"],
    ["--target-flops", "1e24", "--tokens-per-param", "nan"],
    ["--target-flops", "1e24", "--tokens-per-param", "-20"],
    ["--target-flops", "1e24", "--tokens-per-param", "1e-320"],
    ["--target-flops", "1e24", "--tokens-per-param", "0"],
    ["--target-flops", "1e24", "--tokens-per-param", "inf"],
    ["--target-flops", "1e24", "--tokens-per-param", "1e-99999999"],
    ["--target-params", "7B", "--fix", "L=1234567890123456789012345"],
    ["--target-params", "7B", "--fix", "L=0"],
    ["--target-params", "7B", "--fix", "L=-5"],
    ["--target-params", "7B", "--fix", "L=1e3"],
    ["--target-params", "7B", "--fix", "nope=3"],
    ["--target-params", "7B", "--multiple-of", "1e30"],
    ["--target-params", "7B", "--multiple-of", "0"],
    ["--target-params", "7B", "--multiple-of", "1000000000000000000000000000000"],
    ["--target-params", "7B", "--range", "d/L=5"],
    ["--target-params", "7B", "--range", "d/L=9:3"],
    ["--target-params", "7B", "--aspect", "nan:3"],
    ["--target-params", "0"],
    ["--target-params", "7B", "--seq-len", "0", "--memory", "80G"],
    ["--target-params", "7B", "--batch", "1" + "0" * 4000, "--memory", "80G"],
    ["--target-params", "7B", "--tokens-per-param", "20"],
])
def test_bad_input_is_one_line_and_exit_2(cli, extra):
    r = cli("solve", "gpt3", *extra)
    assert r.status == 2, (r.status, r.err)
    assert len(r.err.strip().splitlines()) == 1 and "internal error" not in r.err


@pytest.mark.parametrize("target,fixed", [("1e20", ["L=512"]), ("1e26", ["L=512"]), ("1e30", []), ("1e20", []),
                                          ("1e30", ["L=128"])])
def test_huge_targets_answer_with_bounded_work(target, fixed):
    """Issue 15: 1e20 at L=512 took 89 s and 1e26 ran out of memory. The work is bounded by construction."""
    spec = load_spec("gpt3")
    solution = solve(spec, int(float(target)), {k: int(v) for k, v in (f.split("=") for f in fixed)})
    assert solution.candidates and abs(solution.candidates[0].rel_error) < Fraction(1, 10**4)
    assert solution.work["validations"] <= MAX_VALIDATIONS
    assert solution.work["evaluations"] <= MAX_ENUMERATED * (2 * 64 + MAX_WALK) + 10_000
