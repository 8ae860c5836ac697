"""Every command archcalc prints for the user to run next runs as printed and shows what it says it shows: solve's
"check the first: archcalc count ..." (exactly one row, the solver's first shape), import-hf's and export-hf's
"count it with" / "read it back with", the hint for a transformers config given as SPEC, and the pointer to
'archcalc import-hf --list'. Each is parsed with shlex and run in-process."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HF = ROOT / "tests" / "data" / "hf"

# a Llama-like family of two sizes whose d_ff default (4 * d) every size overrides
FAMILY = """\
name: fam
hyperparameters:
  V: {default: 32000}
  L: {doc: blocks}
  d: {doc: width}
  H: {doc: heads}
  KV: {default: H}
  d_head: {default: d / H}
  d_ff: {doc: MLP width, default: 4 * d}
model:
  embedding: {vocab: V, width: d, position: {kind: rotary, base: 10000}}
  block:
    repeat: L
    residual: pre-norm
    norm: rmsnorm
    attention: {heads: H, kv_heads: KV, head_width: d_head, qkv_bias: false, out_bias: false}
    mlp: {kind: gated, hidden: d_ff, activation: silu, bias: false}
  final_norm: rmsnorm
  head: {tied: false}
sizes:
  1b: {L: 16, d: 2048, H: 16, d_ff: 5632}
  3b: {V: 64000, L: 32, d: 2560, H: 20, KV: 4, d_ff: 8192}
"""
NO_SIZES = FAMILY.split("sizes:")[0]

SOLVES = [
    ("llama", "--target-params", "7B"),  # issue 26.17: H = 30 against the Llama 3 sizes' KV = 8
    ("llama", "--target-params", "70B"),
    ("llama", "--target-params", "7B", "--fix", "L=32", "--fix", "H=32", "--fix", "KV=8"),
    ("llama", "--target-params", "7B", "--free", "d,d_ff"),
    ("gpt3", "--target-params", "100T", "--fix", "L=512"),
    ("gpt2", "--target-params", "1B", "--fix", "L=36"),
    ("gpt3", "--target-params", "7B", "--free", "d,d_ff"),  # every size gives d_head: the command sets d/H's value
    ("mistral", "--target-flops", "1e23"),
    ("spec/llama.yaml", "--target-params", "13B"),
    ("my1b.yaml", "--target-params", "3B"),  # a spec file, named as the user named it
    ("my1b.yaml", "--target-params", "40B", "--fix", "KV=2"),  # size 3b's own V and KV must not leak in
    ("my models/my1b.yaml", "--target-params", "1B"),  # a path the shell must quote
    ("nosizes.yaml", "--target-params", "1B", "--fix", "L=12", "--fix", "H=16"),  # no sizes: no --size
    ("--hf", str(HF / "llama-3.1-8b.json"), "--target-params", "3B"),
]


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    (tmp_path / "my1b.yaml").write_text(FAMILY)
    (tmp_path / "my models").mkdir()
    (tmp_path / "my models" / "my1b.yaml").write_text(FAMILY)
    (tmp_path / "nosizes.yaml").write_text(NO_SIZES)
    (tmp_path / "spec").symlink_to(ROOT / "spec")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def count_rows(text: str) -> list[dict[str, str]]:
    """The rows of ``archcalc count``'s sizes table (header ``size ...``), as {column: cell}."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.split()[:1] == ["size"])
    header = lines[start].split()
    rows = []
    for line in lines[start + 1:]:
        if not line.strip():
            break
        rows.append(dict(zip(header, line.split())))
    return rows


def run_printed(cli, line: str, prefix: str):
    """Run the command that ``line`` prints after ``prefix`` exactly as a shell would split it."""
    assert line.startswith(prefix), line
    argv = shlex.split(line[len(prefix):])
    assert argv[0] == "archcalc"
    return argv[1:], cli(*argv[1:])


@pytest.mark.parametrize("args", SOLVES, ids=[" ".join(a)[:50] for a in SOLVES])
def test_the_check_command_prints_exactly_the_first_shape(cli, workdir, args):
    r = cli("solve", *args)
    assert r.status == 0, r.err
    answer = cli("solve", *args, "--json").json()
    best = answer["candidates"][0]
    argv, checked = run_printed(cli, r.out.splitlines()[-1], "check the first: ")
    assert checked.status == 0, checked.err
    rows = count_rows(checked.out)
    assert len(rows) == 1 and int(rows[0]["total"].replace(",", "")) == best["total"]
    results = cli(*argv, "--json").json()["results"]
    assert len(results) == 1 and results[0]["total"] == best["total"]
    assert ["archcalc", *argv] == answer["check"]  # the JSON carries the same command
    given = args[:2] if args[0] == "--hf" else args[:1]
    assert argv[1:1 + len(given)] == list(given)  # the spec as given, never the spec's name in its place
    assert ("--size" in argv) == (args[0] != "nosizes.yaml")


def test_import_hf_says_how_to_count_what_it_wrote(cli, workdir):
    config = HF / "mistral-7b-instruct-v0.3.json"
    r = cli("import-hf", str(config), "-o", "imported.yaml")
    assert r.status == 0, r.err
    line = r.out.strip().splitlines()[-1]
    argv, counted = run_printed(cli, line[line.index("archcalc count"):].rstrip(")"), "")
    assert counted.status == 0, counted.err
    rows = count_rows(counted.out)
    expected = cli("count", "--hf", str(config), "--json").json()["results"][0]["total"]
    assert len(rows) == 1 and int(rows[0]["total"].replace(",", "")) == expected


def test_export_hf_says_how_to_read_it_back(cli, workdir):
    r = cli("export-hf", "llama", "--size", "3-8b", "-o", "config.json")
    assert r.status == 0, r.err
    line = r.out.strip().splitlines()[-1]
    argv, counted = run_printed(cli, line[line.index("archcalc count"):].rstrip(")"), "")
    assert counted.status == 0, counted.err
    expected = cli("count", "llama", "--size", "3-8b", "--json").json()["results"][0]["total"]
    assert [int(row["total"].replace(",", "")) for row in count_rows(counted.out)] == [expected]


def test_a_transformers_config_given_as_spec_names_two_commands_that_run(cli, workdir):
    (workdir / "config.json").write_text((HF / "mistral-7b-instruct-v0.3.json").read_text())
    r = cli("count", "config.json")
    assert r.status == 2 and len(r.err.splitlines()) == 1
    with_hf = re.search(r"archcalc count --hf (\S+) ", r.err).group(1)
    imported = re.search(r"archcalc import-hf (\S+)\)", r.err).group(1)
    counted = cli("count", "--hf", with_hf)
    assert counted.status == 0 and len(count_rows(counted.out)) == 1, counted.err
    assert cli("import-hf", imported).status == 0


def test_an_unsupported_model_type_points_at_a_list_that_runs(cli, workdir):
    (workdir / "typo.json").write_text('{"model_type": "lamma", "vocab_size": 10}')
    r = cli("count", "--hf", "typo.json")
    assert r.status == 2 and "'archcalc import-hf --list'" in r.err
    listed = cli(*shlex.split(re.search(r"'(archcalc import-hf --list)'", r.err).group(1))[1:])
    assert listed.status == 0 and re.search(r"^llama\s", listed.out, re.M)
