"""The command line: help that explains every option, the JSON contract, the terminal report."""

from __future__ import annotations

import json

import pytest

from archcalc.cli import build_parser

CONTRACT_KEYS = {"size", "values", "total", "active", "reported", "formula", "latex", "by_role", "by_path", "warnings"}
ROLES = ["token_embedding", "position_embedding", "attention", "mlp", "norm", "lm_head", "other"]


def _subcommands():
    parser = build_parser()
    action = next(a for a in parser._actions if a.dest == "command")
    return action.choices


def test_top_level_help_lists_commands_and_examples(cli, capsys):
    with pytest.raises(SystemExit) as e:
        cli("--help")
    out = capsys.readouterr().out
    assert e.value.code == 0
    for word in ("count", "specs", "examples:", "exit status"):
        assert word in out


@pytest.mark.parametrize("name", sorted(_subcommands()))
def test_every_option_of_every_subcommand_has_help(name):
    sub = _subcommands()[name]
    for action in sub._actions:
        if action.dest != "help":
            assert action.help and len(action.help) > 15, (name, action.dest)
    text = sub.format_help()
    for action in sub._actions:
        for flag in action.option_strings:
            assert flag in text


def test_json_contract(cli):
    r = cli("count", "gpt3", "--json")
    assert r.status == 0 and r.err == ""
    payload = r.json()
    assert payload["spec"] == "gpt3" and len(payload["results"]) == 9
    for result in payload["results"]:
        assert CONTRACT_KEYS <= set(result)
        assert set(result["by_role"]) == set(ROLES) - {"lm_head"}  # GPT-3's head is tied
        for key in ("total", "active"):
            assert type(result[key]) is int
        assert all(type(n) is int for n in result["by_role"].values())
        assert all(type(n) is int for n in result["by_path"].values())
        assert sum(result["by_path"].values()) == result["total"]
    # integers stay integers in the text too (no 1.7e+11)
    assert "e+" not in r.out


def test_untied_head_has_lm_head_role(cli):
    result = cli("count", "gpt2", "--size", "small", "--set", "tie_embeddings=false", "--json").json()["results"][0]
    assert set(result["by_role"]) == set(ROLES)


def test_reported_is_not_compared_after_set(cli):
    result = cli("count", "gpt2", "--size", "small", "--set", "L=13", "--json").json()["results"][0]
    assert result["reported"] is None and result["rel_error"] is None
    assert result["values"]["L"] == 13


def test_terminal_report_for_every_size(cli):
    r = cli("count", "gpt3")
    assert r.status == 0
    assert "params = L*(4*H*d*d_head + 3*H*d_head + 8*d**2 + 10*d) + T*d + V*d + 2*d" in r.out
    assert "leading term for large sizes: 12·L·d²" in r.out
    assert "174,604,259,328" in r.out and "+16.70%" in r.out
    assert "warnings:" in r.out and "xl: attention inner width" in r.out


def test_terminal_report_for_one_size_lists_roles_and_tensors(cli):
    r = cli("count", "gpt2", "--size", "small")
    assert "124,439,808" in r.out
    assert "blocks.attn.qkv.weight" in r.out and "2,304 × 768" in r.out
    assert "tied to embed.token.weight" in r.out
    assert "token_embedding      38,597,376" in r.out


def test_several_sizes_in_order(cli):
    results = cli("count", "gpt2", "--size", "xl", "--size", "small", "--json").json()["results"]
    assert [r["size"] for r in results] == ["xl", "small"]


def test_specs_lists_the_library(cli):
    r = cli("specs", "--json")
    names = {s["name"]: s for s in r.json()["specs"]}
    assert {"gpt2", "gpt3"} <= set(names)
    assert names["gpt3"]["sizes"][-1] == "100t"


@pytest.mark.parametrize("argv,needle", [
    (["count", "gpt2", "--size", "tiny"], "no size 'tiny'"),
    (["count", "gpt2", "--set", "dd=3"], "did you mean 'd'"),
    (["count", "gpt2", "--set", "L"], "expected NAME=VALUE"),
    (["count", "gpt2", "--set", "qkv_bias=maybe"], "expected true or false"),
    (["count", "gtp2"], "did you mean 'gpt2'"),
    (["count"], "SPEC"),
    (["cuont", "gpt2"], "invalid choice"),
    (["count", "gpt2", "--bogus"], "unrecognized arguments"),
])
def test_usage_errors_are_one_line_exit_2(cli, argv, needle):
    r = cli(*argv)
    assert r.status == 2 and r.out == ""
    assert len(r.err.strip().splitlines()) == 1 and needle in r.err


def test_python_dash_m_works(process):
    proc = process.run(["-m", "archcalc", "count", "gpt2", "--size", "small", "--json"],
                       capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["results"][0]["total"] == 124_439_808
