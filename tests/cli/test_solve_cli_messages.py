"""Untrusted input to ``archcalc solve`` (and to every command that takes a SPEC) gets one line and exit status 2:
every name an option takes is checked against the spec (the closest named), options given twice with two values
are refused rather than the last kept, a value with a leading '-' is explained, and a spec file name that is
nearly right names the file that exists (issue 26.10 and 26.24)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given
from hypothesis import strategies as st

from archcalc.spec import load_spec
from tests.helpers import examples

ROOT = Path(__file__).resolve().parents[2]

SOLVE = ("solve", "llama", "--target-params", "7B")
NAMED = [  # every option of solve that takes a hyperparameter's name, with a misspelt d_ff
    ("--multiple-of", "dff=256", "--multiple-of dff=256"),
    ("--fix", "dff=11008", "--fix dff"),
    ("--range", "dff/d=2:3", "--range dff/d"),
    ("--range", "d_ff/dd=2:3", "--range d_ff/dd"),
    ("--free", "d,dff", "--free dff"),
]


def _one_line_exit_2(r) -> str:
    assert r.status == 2 and r.out == "" and len(r.err.splitlines()) == 1, (r.status, r.err)
    assert "Traceback" not in r.err
    return r.err.strip()


@pytest.mark.parametrize("option,value,said", NAMED, ids=[f"{o} {v}" for o, v, _ in NAMED])
def test_every_name_taking_option_checks_the_name(cli, option, value, said):
    err = _one_line_exit_2(cli(*SOLVE, option, value))
    assert err.startswith(f"{said}: llama has no hyperparameter")
    assert "(did you mean 'd_ff'?)" in err or "(did you mean 'd'?)" in err


def test_a_switch_is_not_a_name_for_grids_ranges_or_free(cli):
    for option, value in (("--multiple-of", "tie_embeddings=2"), ("--range", "tie_embeddings/d=1:2"),
                          ("--free", "tie_embeddings")):
        assert "tie_embeddings is a switch" in _one_line_exit_2(cli(*SOLVE, option, value))


@examples(40, suppress_health_check=[HealthCheck.function_scoped_fixture])  # cli keeps nothing between runs
@given(name=st.text("abcdefghijklmnopqrstuvwxyzLVHKD_", min_size=1, max_size=12).filter(lambda n: not n[0] == "_"))
def test_no_unknown_name_is_ignored(cli, name):
    """Any name the spec does not declare is refused, whichever option carries it; a declared one is not."""
    declared = load_spec("llama").kinds()
    for argv in (("--multiple-of", f"{name}=64"), ("--free", name), ("--range", f"{name}/L=1:1000"), ("--fix", f"{name}=8")):
        r = cli(*SOLVE, *argv)
        if name in declared:
            assert "has no hyperparameter" not in r.err
        else:
            assert f"llama has no hyperparameter {name!r}" in _one_line_exit_2(r)


@pytest.mark.parametrize("argv,said", [
    (["--fix", "L=12", "--fix", "L=24"], "--fix L=12 and --fix L=24 contradict each other; give L once"),
    (["--fix", "tie_embeddings=true", "--fix", "tie_embeddings=false"], "--fix tie_embeddings=true and --fix "
                                                                         "tie_embeddings=false contradict"),
    (["--multiple-of", "d=128", "--multiple-of", "d=256"], "--multiple-of d=128 and --multiple-of d=256 contradict"),
    (["--multiple-of", "128", "--multiple-of", "256"], "--multiple-of 128 and --multiple-of 256 contradict"),
    (["--range", "d/L=60:70", "--range", "d/L=80:90"], "--range d/L=80:90 contradicts an earlier --range"),
    (["--range", "d/L=60:70", "--range", "L/d=0.01:0.02"], "--range L/d=0.01:0.02 contradicts an earlier --range"),
    (["--range", "d/L=60:70", "--aspect", "80:90"], "--aspect and --range d/L both bound the ratio"),
    (["--free", "d,d_ff", "--fix", "d=4096"], "--free d and --fix d=4096 contradict each other"),
])
def test_contradictions_are_refused_not_overwritten(cli, argv, said):
    assert said in _one_line_exit_2(cli(*SOLVE, *argv))


def test_the_same_value_twice_is_no_contradiction(cli):
    twice = cli(*SOLVE, "--fix", "L=32", "--fix", "L=32", "--range", "d_ff/d=2.5:4", "--range", "d/d_ff=0.25:0.4",
                "--json")
    once = cli(*SOLVE, "--fix", "L=32", "--range", "d_ff/d=2.5:4", "--json")
    assert twice.status == 0 and twice.json()["candidates"] == once.json()["candidates"]


@pytest.mark.parametrize("option", ["--target-params", "--target-flops"])
def test_a_leading_minus_is_explained(cli, option):
    err = _one_line_exit_2(cli("solve", "llama", option, "-3B"))
    assert f"{option} -3B: expected a value after {option}, but '-3B' starts with '-'" in err
    assert f"{option}=-3B" in err
    attached = _one_line_exit_2(cli("solve", "llama", f"{option}=-3B"))  # given as it says: the value is judged
    assert attached.startswith(f"{option} '-3B': expected a positive number")


SPEC_COMMANDS = [  # every command that takes a SPEC, with the options it needs before it reads the spec
    ("count",), ("flops", "--seq-len", "8"), ("memory", "--seq-len", "8", "--batch", "1"),
    ("solve", "--target-params", "1B"), ("generate", "-o", "out.py"), ("verify",), ("run",),
    ("export-hf", "-o", "out.json"),
    ("infer", "--hardware", "a100-80gb", "--batch", "1", "--prompt", "8", "--new-tokens", "8"),
]


@pytest.mark.parametrize("typed,meant", [("my1b.yml", "my1b.yaml"), ("my1b", "my1b.yaml"), ("my1bb.yaml", "my1b.yaml"),
                                         ("other.yaml", "other.yml"), ("sub/my1b.yml", "sub/my1b.yaml")])
@pytest.mark.parametrize("command", SPEC_COMMANDS, ids=[c[0] for c in SPEC_COMMANDS])
def test_a_nearly_right_spec_file_name_names_the_file(cli, tmp_path, monkeypatch, command, typed, meant):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sub").mkdir()
    text = (ROOT / "spec" / "gpt2.yaml").read_text()
    for path in ("my1b.yaml", "other.yml", "sub/my1b.yaml"):
        (tmp_path / path).write_text(text)
    err = _one_line_exit_2(cli(command[0], typed, *command[1:]))
    assert err == f"no spec file or bundled spec named {typed!r} (did you mean {meant!r}?)"
    assert cli("count", meant, "--size", "small").status == 0  # and that one is a spec


def test_a_name_close_to_no_file_keeps_the_bundled_hint(cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert "(did you mean 'llama'?); bundled specs:" in _one_line_exit_2(cli("count", "lama"))
    assert "bundled specs:" in _one_line_exit_2(cli("count", "nothing/near.yaml"))


@pytest.mark.parametrize("argv", [["--fix", "L=32"], ["--free", "d"], ["--range", "d/L=60:70"], ["--aspect", "60:70"],
                                  ["--multiple-of", "d=256"]])
def test_memory_alone_refuses_the_options_it_would_ignore(cli, argv):
    err = _one_line_exit_2(cli("solve", "llama", "--memory", "80G", "--seq-len", "4096", *argv))
    assert err.startswith(f"{argv[0]} goes with --target-params or --target-flops")
    assert cli("solve", "llama", "--memory", "80G", "--seq-len", "4096").status == 0


def test_free_naming_nothing_that_counts_says_what_to_do(cli):
    assert _one_line_exit_2(cli(*SOLVE, "--free", "H")).endswith("(free: H); name one that does in --free")
