"""Hostile and malformed spec files: one located line on stderr, exit 2, nothing run, and fast.

Every case starts from the text of ``spec/gpt2.yaml``, changes one thing, writes the result into
``tmp_path`` and runs ``archcalc count FILE`` in-process. A spec-file problem must give exit status
2, exactly one line on stderr of the form ``FILE:LINE:COL: what was expected`` whose LINE is the line
of the offending value (computed from the text written), nothing on stdout, no traceback, and all of
no wall-clock limit (work is bounded by construction; timings live in benchmarks/). Payloads that would run code try to create ``MARKER`` in the working
directory (``tmp_path``); it must never appear.
"""

from __future__ import annotations

import builtins
import json
import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from archcalc.cli import main
from archcalc.spec.schema import MAX_HYPERPARAMETERS, MAX_SIZES
from archcalc.spec.source import MAX_BYTES

ROOT = Path(__file__).resolve().parents[2]
GPT2 = (ROOT / "spec" / "gpt2.yaml").read_text(encoding="utf-8")
LOCATED = re.compile(r"^\S.*:\d+:\d+: .+$")


def edit(old: str, new: str, text: str = GPT2) -> str:
    """``text`` with the one occurrence of ``old`` replaced by ``new``."""
    assert text.count(old) == 1, f"{old!r} occurs {text.count(old)} times"
    return text.replace(old, new)


def line_of(text: str, needle: str) -> int:
    """The 1-based line on which the one occurrence of ``needle`` in ``text`` starts."""
    assert text.count(needle) == 1, f"{needle!r} occurs {text.count(needle)} times"
    return text[: text.index(needle)].count("\n") + 1


@dataclass
class Outcome:
    status: int
    out: str
    err: str


def run_cli(capsys, *argv: str) -> Outcome:
    capsys.readouterr()
    status = main(list(argv))
    captured = capsys.readouterr()
    return Outcome(status, captured.out, captured.err)


def check_one_line(result: Outcome) -> str:
    """Exit 2, one stderr line, empty stdout, no traceback; returns the line."""
    assert result.status == 2, (result.status, result.err)
    assert result.out == ""
    assert "Traceback" not in result.err
    lines = result.err.splitlines()
    assert len(lines) == 1, result.err
    return lines[0]


def expect_spec_error(capsys, path: Path, content: str | bytes, line: int, *args: str) -> str:
    """Write ``content`` to ``path``, run ``count`` on it; return the message after ``FILE:LINE:COL: ``."""
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    err = check_one_line(run_cli(capsys, "count", str(path), *args))
    assert LOCATED.match(err), err
    m = re.match(re.escape(str(path)) + r":(\d+):(\d+): (.+)$", err)
    assert m, f"does not start with the file path: {err}"
    assert int(m[1]) == line, f"expected line {line}: {err}"
    assert int(m[2]) >= 1
    assert "value error" not in m[3].lower(), f"an unexpected exception, wrapped by pydantic: {err}"
    return m[3]


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path, monkeypatch):
    """Run each case inside tmp_path, so a relative ``touch MARKER`` would land there."""
    monkeypatch.chdir(tmp_path)
    yield
    assert not (tmp_path / "MARKER").exists(), "a payload in the spec ran"


@pytest.fixture(scope="module", autouse=True)
def _warm():
    """Import everything once (sympy, pydantic) and check the unchanged spec counts."""
    assert main(["count", str(ROOT / "spec" / "gpt2.yaml"), "--size", "small", "--json"]) == 0


@pytest.fixture
def spec_path(tmp_path) -> Path:
    return tmp_path / "bad.yaml"


def test_the_unchanged_spec_counts(capsys, spec_path):
    spec_path.write_text(GPT2, encoding="utf-8")
    result = run_cli(capsys, "count", str(spec_path), "--size", "small")
    assert result.status == 0, result.err
    assert "124,439,808" in result.out and result.err == ""


# -- malformed YAML, and YAML that is not a mapping -----------------------------------------------

MALFORMED = {
    "bad-bracket": ("  L: {doc: blocks}", "  L: {doc: blocks]"),
    "second-colon": ("name: gpt2", "name: gpt2: x"),
    "text-after-quote": ('source: "Radford', 'source: "Rad"ford'),
    "unterminated-quote": ("  d: {doc: model width d_model}", '  d: {doc: "model width d_model}'),
    "tab-indent": ("  L: {doc: blocks}", "\tL: {doc: blocks}"),
    "over-indent": ("  L: {doc: blocks}", "    L: {doc: blocks}"),
    "reserved-char": ("  L: {doc: blocks}", "  L: {doc: @blocks}"),
    "unclosed-flow": ("  L: {doc: blocks}", "  L: {doc: blocks"),
}


@pytest.mark.parametrize("old, new", MALFORMED.values(), ids=MALFORMED.keys())
def test_malformed_yaml(capsys, spec_path, old, new):
    text = edit(old, new)
    # An unclosed flow mapping is only noticed on the next line, where the parser finds "d:".
    line = line_of(text, new) + (1 if new.endswith("blocks") else 0)
    message = expect_spec_error(capsys, spec_path, text, line)
    assert "YAML" in message


def test_a_second_document(capsys, spec_path):
    text = GPT2 + "---\nname: other\n"
    assert "another document" in expect_spec_error(capsys, spec_path, text, line_of(text, "---"))


NOT_A_MAPPING = {
    "list": ("- name: gpt2\n- title: GPT-2\n", 1, "list"),
    "list-after-blank-lines": ("\n\n- 1\n", 3, "list"),
    "scalar": ("just some text\n", 1, "single value"),
    "number": ("# a comment\n42\n", 2, "single value"),
    "null": ("null\n", 1, "single value"),
    "empty": ("", 1, "empty"),
    "only-comments": ("# nothing here\n# at all\n", 1, "empty"),
    "only-whitespace": ("\n\n   \n", 1, "empty"),
}


@pytest.mark.parametrize("text, line, word", NOT_A_MAPPING.values(), ids=NOT_A_MAPPING.keys())
def test_not_a_mapping(capsys, spec_path, text, line, word):
    message = expect_spec_error(capsys, spec_path, text, line)
    assert "mapping" in message and word in message


# -- unknown keys, with a "did you mean" hint when one is close ------------------------------------

UNKNOWN_KEYS = {
    # id: (old, new, the line's needle, the hint or None)
    "top-level": ("sizes:\n", "sizez:\n", "sizez:", "sizes"),
    "top-level-far": ("sizes:\n", "zzzzzz: 1\nsizes:\n", "zzzzzz", None),
    "attention": ("qkv_bias: qkv_bias,", "qkv_bais: qkv_bias,", "qkv_bais", "qkv_bias"),
    "block": ("residual: pre-norm", "residaul: pre-norm", "residaul", "residual"),
    "mlp": ("activation: gelu_tanh", "activaton: gelu_tanh", "activaton", "activation"),
    "position": ("length: T}", "lenght: T}", "lenght", "length"),
    "hyperparameter-declaration": ("  L: {doc: blocks}", "  L: {doc: blocks, defualt: 12}", "defualt", "default"),
    "hyperparameter-declaration-far": ("  L: {doc: blocks}", "  L: {doc: blocks, xyzzy: 12}", "xyzzy", None),
    "size": ("small:  {L: 12,", "small:  {L: 12, d_haed: 64,", "d_haed", "d_head"),
    "size-far": ("small:  {L: 12,", "small:  {L: 12, wibble: 64,", "wibble", None),
}


@pytest.mark.parametrize("old, new, needle, hint", UNKNOWN_KEYS.values(), ids=UNKNOWN_KEYS.keys())
def test_unknown_key(capsys, spec_path, old, new, needle, hint):
    text = edit(old, new)
    message = expect_spec_error(capsys, spec_path, text, line_of(text, needle))
    assert needle in message and "unknown" in message
    if hint:
        assert f"did you mean {hint!r}" in message
    else:
        assert "did you mean" not in message


# -- missing required values ---------------------------------------------------------------------


def test_size_without_L(capsys, spec_path):
    text = edit("small:  {L: 12, ", "small:  {")
    message = expect_spec_error(capsys, spec_path, text, line_of(text, "small:"))
    assert "L" in message and "small" in message


def test_model_without_embedding(capsys, spec_path):
    text = edit("  embedding: {vocab: V, width: d, position: {kind: learned, length: T}}\n", "")
    # The model's mapping starts at its first remaining key.
    message = expect_spec_error(capsys, spec_path, text, line_of(text, "  block:"))
    assert "missing" in message and "embedding" in message


def test_attention_without_heads(capsys, spec_path):
    text = edit("attention: {heads: H, ", "attention: {")
    message = expect_spec_error(capsys, spec_path, text, line_of(text, "attention:"))
    assert "missing" in message and "heads" in message


def test_spec_without_hyperparameters(capsys, spec_path):
    start, end = GPT2.index("hyperparameters:"), GPT2.index("model:")
    text = GPT2[:start] + GPT2[end:]
    message = expect_spec_error(capsys, spec_path, text, line_of(text, "name: gpt2"))
    assert "hyperparameters" in message


# -- zero, negative and fractional widths ----------------------------------------------------------

WIDTHS = {
    "d-zero": ("small:  {L: 12, d: 768,", "small:  {L: 12, d: 0,", "small:", "d = 0"),
    "H-negative": ("d: 768,  H: 12,", "d: 768,  H: -1,", "small:", "H = -1"),
    "L-zero": ("small:  {L: 12,", "small:  {L: 0,", "small:", "L = 0"),
    "d_ff-default-zero": ("default: 4 * d}", "default: 0}", "d_ff:", "d_ff = 0"),
    "V-default-negative": ("default: 50257}", "default: -50257}", "V:", "V = -50257"),
    "model-hidden-zero": ("hidden: d_ff,", "hidden: 0,", "mlp:", "0"),
    "model-hidden-expression-zero": ("hidden: d_ff,", "hidden: d - 768,", "mlp:", "d - 768"),
    "model-heads-negative": ("heads: H,", "heads: -2,", "attention:", "-2"),
    "model-repeat-zero": ("repeat: L", "repeat: L - L", "repeat:", "L - L"),
}


@pytest.mark.parametrize("old, new, needle, shown", WIDTHS.values(), ids=WIDTHS.keys())
def test_zero_or_negative_width(capsys, spec_path, old, new, needle, shown):
    text = edit(old, new)
    message = expect_spec_error(capsys, spec_path, text, line_of(text, needle), "--size", "small")
    assert shown in message and "positive integer" in message


NOT_WHOLE = {
    "H-7-makes-d_head-fractional": ("d: 768,  H: 12,", "d: 768,  H: 7,", "d_head:"),
    "d_ff-default-fractional": ("default: 4 * d}", "default: 4 * d / 5}", "d_ff:"),
    "model-width-fractional": ("hidden: d_ff,", "hidden: d / 5,", "mlp:"),
    "model-heads-fractional": ("heads: H,", "heads: H / 5,", "attention:"),
}


@pytest.mark.parametrize("old, new, needle", NOT_WHOLE.values(), ids=NOT_WHOLE.keys())
def test_not_an_integer(capsys, spec_path, old, new, needle):
    text = edit(old, new)
    message = expect_spec_error(capsys, spec_path, text, line_of(text, needle), "--size", "small")
    assert "not an integer" in message


@pytest.mark.parametrize("value", ["768.5", "7.685e+2", "768.25", ".nan", ".inf", "-.inf", "1e400"])
def test_non_integer_number(capsys, spec_path, value):
    text = edit("small:  {L: 12, d: 768,", f"small:  {{L: 12, d: {value},")
    message = expect_spec_error(capsys, spec_path, text, line_of(text, "small:"))
    assert "integer" in message or "number" in message


# -- names -----------------------------------------------------------------------------------------

UNKNOWN_NAMES = {
    "in-default": ("default: 4 * d}", "default: 4 * dd}", "d_ff:", "dd", "d"),
    "in-model": ("heads: H,", "heads: HH,", "attention:", "HH", "H"),
    "in-size": ("small:  {L: 12, d: 768,", "small:  {L: 12, d: 3 * wxyz,", "small:", "wxyz", None),
    "bool-in-model": ("qkv_bias: qkv_bias,", "qkv_bias: qkv_biass,", "attention:", "qkv_biass", "qkv_bias"),
    "function": ("default: 4 * d}", "default: sqrt(d)}", "d_ff:", "sqrt", None),
}


@pytest.mark.parametrize("old, new, needle, name, hint", UNKNOWN_NAMES.values(), ids=UNKNOWN_NAMES.keys())
def test_unknown_symbol(capsys, spec_path, old, new, needle, name, hint):
    text = edit(old, new)
    message = expect_spec_error(capsys, spec_path, text, line_of(text, needle))
    assert "unknown" in message and repr(name) in message
    if hint:
        assert f"did you mean {hint!r}" in message


CYCLES = {
    "two": ("  L: {doc: blocks}\n", "  L: {doc: blocks}\n  a: {default: b}\n  b: {default: a}\n", "  a:", "a -> b -> a"),
    "self": ("  L: {doc: blocks}\n", "  L: {doc: blocks}\n  a: {default: a + 1}\n", "  a:", "a -> a"),
    "three": ("  L: {doc: blocks}\n", "  L: {doc: blocks}\n  a: {default: b}\n  b: {default: 2 * c}\n  c: {default: a}\n",
              "  a:", "a -> b -> c -> a"),
    "through-widths": ("default: d / H}", "default: d_ff / H}", "d_head:", "d_head -> d_ff -> d_head"),
}


@pytest.mark.parametrize("old, new, needle, cycle", CYCLES.values(), ids=CYCLES.keys())
def test_cycle_among_defaults(capsys, spec_path, old, new, needle, cycle):
    text = edit(old, new)
    if cycle.startswith("d_head"):
        text = edit("default: 4 * d}", "default: 4 * d_head}", text)
    message = expect_spec_error(capsys, spec_path, text, line_of(text, needle))
    assert "cycle" in message and cycle in message


# -- Python smuggled into expressions: parsed by archcalc's own grammar, never run ------------------

PYTHON = [
    "__import__('os').system('touch MARKER')",
    "eval('1')",
    "().__class__",
    "lambda: 1",
    "d.__class__",
    "[x for x in ()]",
    "f'{d}'",
    "f\"{__import__('os').system('touch MARKER')}\"",
    "exec('import os; os.system(\"touch MARKER\")')",
    "open('/etc/passwd')",
    "open('/etc/passwd').read()",
    "().__class__.__bases__[0].__subclasses__()",
    "getattr(d, 'real')",
    "os.system('touch MARKER')",
    "exec",
    "eval",
    "__builtins__",
    "import os",
    "d if d else H",
    "d; __import__('os').system('touch MARKER')",
]
PLACES = {  # where the payload goes: (old, template, the line's needle)
    "default": ("default: 4 * d}", "default: {}}}", "d_ff:"),
    "model": ("hidden: d_ff,", "hidden: {},", "mlp:"),
    "size": ("small:  {L: 12, d: 768,", "small:  {{L: 12, d: {},", "small:"),
}


@pytest.fixture
def no_code_runs(monkeypatch):
    """Make every way of running code fail loudly while archcalc reads a spec."""

    def refuse(*args, **kwargs):
        raise AssertionError(f"archcalc tried to run code: {args!r:.100}")

    monkeypatch.setattr(builtins, "eval", refuse)  # (not exec: importing a module runs it)
    monkeypatch.setattr(os, "system", refuse)
    monkeypatch.setattr(os, "popen", refuse)
    monkeypatch.setattr(subprocess, "Popen", refuse)


@pytest.mark.parametrize("place", PLACES.values(), ids=PLACES.keys())
@pytest.mark.parametrize("payload", PYTHON)
def test_python_in_expressions_is_not_run(capsys, spec_path, tmp_path, no_code_runs, payload, place):
    old, template, needle = place
    text = edit(old, template.format(json.dumps(payload)))  # a YAML double-quoted string
    expect_spec_error(capsys, spec_path, text, line_of(text, needle))
    assert not (tmp_path / "MARKER").exists()


@pytest.mark.parametrize("payload", PYTHON)
def test_python_in_set_is_not_run(capsys, spec_path, tmp_path, no_code_runs, payload):
    spec_path.write_text(GPT2, encoding="utf-8")
    check_one_line(run_cli(capsys, "count", str(spec_path), "--size", "small", "--set", f"d_ff={payload}"))
    assert not (tmp_path / "MARKER").exists()


# -- YAML tags -------------------------------------------------------------------------------------

TAGS = {
    "python-apply": '!!python/object/apply:os.system ["touch MARKER"]',
    "python-apply-mapping": "!!python/object/apply:os.system {args: [touch MARKER]}",
    "python-new": '!!python/object/new:os.system ["touch MARKER"]',
    "python-object": "!!python/object:os.PathLike {doc: blocks}",
    "python-name": "!!python/name:os.system",
    "python-module": "!!python/module:os",
    "python-tuple": "!!python/tuple [1, 2]",
    "binary": "!!binary aGVsbG8=",
    "custom": "!custom {doc: blocks}",
    "custom-scalar": "!include other.yaml",
    "verbatim": '!<tag:yaml.org,2002:python/name:os.system> ""',
    "set": "!!set {a, b}",
    "omap": "!!omap [a: 1]",
    "timestamp": "!!timestamp 2001-12-14",
}


@pytest.mark.parametrize("tag", TAGS.values(), ids=TAGS.keys())
def test_yaml_tag_on_a_value(capsys, spec_path, tmp_path, no_code_runs, tag):
    text = edit("  L: {doc: blocks}", f"  L: {tag}")
    message = expect_spec_error(capsys, spec_path, text, line_of(text, "  L:"))
    assert "tag" in message
    assert not (tmp_path / "MARKER").exists()


@pytest.mark.parametrize("tag", [TAGS["python-name"], TAGS["custom-scalar"], TAGS["binary"]], ids=["python-name", "custom", "binary"])
def test_yaml_tag_on_a_key(capsys, spec_path, no_code_runs, tag):
    text = edit("  L: {doc: blocks}", f"  {tag} : {{doc: blocks}}")
    message = expect_spec_error(capsys, spec_path, text, line_of(text, tag))
    assert "tag" in message


def test_yaml_tag_inside_a_size(capsys, spec_path, tmp_path, no_code_runs):
    text = edit("small:  {L: 12,", 'small:  {L: !!python/object/apply:os.system ["touch MARKER"],')
    assert "tag" in expect_spec_error(capsys, spec_path, text, line_of(text, "small:"))


def test_yaml_tag_on_the_document(capsys, spec_path, tmp_path, no_code_runs):
    text = "!!python/object/apply:os.system\nargs: [touch MARKER]\n"
    expect_spec_error(capsys, spec_path, text, 1)
    assert not (tmp_path / "MARKER").exists()


def test_tag_directive(capsys, spec_path, no_code_runs):
    text = "%TAG !py! tag:yaml.org,2002:python/\n---\n" + edit("  L: {doc: blocks}", "  L: !py!name:os.system")
    assert "tag" in expect_spec_error(capsys, spec_path, text, line_of(text, "  L:"))


# -- anchors and aliases, merge keys, duplicate keys ---------------------------------------------


def billion_laughs(levels: int = 9) -> str:
    lines = ['lol0: &l0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for i in range(1, levels):
        lines.append(f"lol{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * 9) + "]")
    return "\n".join(lines) + "\n"


def test_alias_bomb_appended(capsys, spec_path):
    text = GPT2 + billion_laughs()
    message = expect_spec_error(capsys, spec_path, text, line_of(text, "lol0:"))
    assert "alias" in message or "anchor" in message


def test_alias_bomb_as_the_whole_file(capsys, spec_path):
    message = expect_spec_error(capsys, spec_path, billion_laughs(), 1)
    assert "alias" in message or "anchor" in message


def test_alias_bomb_in_notes(capsys, spec_path):
    bomb = billion_laughs().replace("\n", "\n  ")
    text = edit("notes: >\n", "notes:\n  " + bomb + "\nnotes_text: >\n")
    message = expect_spec_error(capsys, spec_path, text, line_of(text, "lol0:"))
    assert "alias" in message or "anchor" in message


def test_alias_without_anchor(capsys, spec_path):
    text = edit("d: 768,  H: 12,", "d: *width,  H: 12,")
    assert "alias" in expect_spec_error(capsys, spec_path, text, line_of(text, "*width"))


def test_anchor_and_alias(capsys, spec_path):
    text = edit("d: 768,  H: 12,", "d: &w 768,  H: 12,")
    text = edit("d: 1024, H: 16,", "d: *w, H: 16,", text)
    assert "anchor" in expect_spec_error(capsys, spec_path, text, line_of(text, "&w"))


def test_merge_key_in_flow_mapping(capsys, spec_path):
    text = edit("  L: {doc: blocks}", "  L: {<<: {doc: x}, doc: blocks}")
    assert "merge" in expect_spec_error(capsys, spec_path, text, line_of(text, "<<"))


def test_merge_key_in_block_mapping(capsys, spec_path):
    text = edit("  block:\n", "  block:\n    <<: {repeat: L}\n")
    assert "merge" in expect_spec_error(capsys, spec_path, text, line_of(text, "<<"))


def test_merge_key_with_anchor(capsys, spec_path):
    text = edit("  block:\n", "  defaults: &base {repeat: L}\n  block:\n    <<: *base\n")
    message = expect_spec_error(capsys, spec_path, text, line_of(text, "&base"))
    assert "anchor" in message


DUPLICATES = {
    "hyperparameter": ("  L: {doc: blocks}\n", "  L: {doc: blocks}\n  L: {doc: layers}\n", "  L: {doc: layers}"),
    "top-level": ("title: GPT-2\n", "title: GPT-2\ntitle: again\n", "title: again"),
    "flow-mapping": ("  L: {doc: blocks}", "  L: {doc: blocks, doc: x}", "  L:"),
    "size-value": ("small:  {L: 12,", "small:  {L: 12, L: 13,", "small:"),
    "size": ("  medium: {", "  small: {L: 1, d: 8, H: 1}\n  medium: {", "  small: {L: 1"),
    "quoted-and-plain": ("  L: {doc: blocks}\n", '  L: {doc: blocks}\n  "L": {doc: layers}\n', '"L"'),
}


@pytest.mark.parametrize("old, new, needle", DUPLICATES.values(), ids=DUPLICATES.keys())
def test_duplicate_key(capsys, spec_path, old, new, needle):
    text = edit(old, new)
    assert "duplicate" in expect_spec_error(capsys, spec_path, text, line_of(text, needle))


# -- absurd sizes ----------------------------------------------------------------------------------

ABSURD_DEFAULTS = [
    "d ** d ** d",
    "10 ** 10 ** 10",
    "(10**60)**64",
    "1" * 50,
    "1" * 50 + " * d",
    "2 ** 1000",
    "d ** 65",
    "(d ** 8) ** 9",
    "1e5000",
    "4 * d * 1e99999",
    "1e-5000",
    "*".join(["d**64"] * 24),
    "*".join(["99999**24"] * 39),
    "*".join(["99999**24"] * 39) + " / 7",
    "10 ** 18 * 10 ** 18",
]


@pytest.mark.parametrize("expression", ABSURD_DEFAULTS)
def test_absurd_default(capsys, spec_path, expression):
    text = edit("default: 4 * d}", f"default: {expression}}}")
    expect_spec_error(capsys, spec_path, text, line_of(text, "d_ff:"), "--size", "small")


@pytest.mark.parametrize("expression", ["d ** 7", "10 ** 40", "*".join(["d**64"] * 24), "*".join(["99999**24"] * 39) + " / 7"])
def test_absurd_width_in_model(capsys, spec_path, expression):
    text = edit("hidden: d_ff,", f"hidden: {expression},")
    expect_spec_error(capsys, spec_path, text, line_of(text, "mlp:"), "--size", "small")


@pytest.mark.parametrize("value", ["10 ** 40", "1" * 50, "99999999999999999999", "1e30", "9.9e29"])
def test_absurd_size_value(capsys, spec_path, value):
    text = edit("small:  {L: 12, d: 768,", f"small:  {{L: 12, d: {value},")
    expect_spec_error(capsys, spec_path, text, line_of(text, "small:"), "--size", "small")


@pytest.mark.parametrize("value", ["1" * 50, "1e400", ".inf", "-5", "1.5", "12e999999999B"])
def test_absurd_reported_figure(capsys, spec_path, value):
    text = edit("reported: 124439808", f"reported: {value}")
    expect_spec_error(capsys, spec_path, text, line_of(text, "small:"))


def test_huge_file(capsys, spec_path):
    text = GPT2 + "# " + "x" * (1 << 20) + "\n"
    assert "larger" in expect_spec_error(capsys, spec_path, text, 1)


def test_huge_file_of_small_values(capsys, spec_path):
    text = GPT2 + "extra: [" + ", ".join(["0"] * 60_000) + "]\n"
    expect_spec_error(capsys, spec_path, text, line_of(text, "extra:"))


def test_huge_scalar(capsys, spec_path):
    text = edit("name: gpt2", "name: " + "g" * 30_000)
    expect_spec_error(capsys, spec_path, text, line_of(text, "name:"))


FILLERS = {"blank-lines": "\n", "comment-lines": "# x\n", "spaces": " ", "long-comment": "#" + "x" * 1000 + "\n"}


@pytest.mark.parametrize("filler", FILLERS.values(), ids=FILLERS.keys())
def test_big_file_under_the_limit_with_a_late_error(capsys, spec_path, filler):
    room = MAX_BYTES - len(GPT2.encode()) - 100
    text = GPT2 + filler * (room // len(filler)) + "\nextra_key: 1\n"
    assert len(text.encode()) <= MAX_BYTES
    assert "unknown key" in expect_spec_error(capsys, spec_path, text, line_of(text, "extra_key"))


# -- deep nesting ----------------------------------------------------------------------------------

DEEP = {
    "flow-lists": "[" * 10_000 + "]" * 10_000,
    "unclosed-flow-lists": "[" * 10_000,
    "flow-mappings": "{a: " * 10_000 + "}" * 10_000,
    "block-lists": "\n" + "".join("    " + "  " * i + "-\n" for i in range(200)),
}


@pytest.mark.parametrize("value", DEEP.values(), ids=DEEP.keys())
def test_deep_nesting(capsys, spec_path, value):
    text = edit("  L: {doc: blocks}", f"  L: {value}")
    line = line_of(text, "  L:") if not value.startswith("\n") else None
    if line is None:  # block lists: the limit is reached 32 levels down, on the line that crosses it
        line = line_of(text, "  L:") + 31
    message = expect_spec_error(capsys, spec_path, text, line)
    assert "nest" in message


def test_deep_expression(capsys, spec_path):
    text = edit("default: 4 * d}", "default: " + "(" * 150 + "d" + ")" * 150 + "}")
    assert "nest" in expect_spec_error(capsys, spec_path, text, line_of(text, "d_ff:"))


def test_deeply_nested_unary_minus(capsys, spec_path):
    text = edit("default: 4 * d}", "default: " + "-" * 300 + "d}")
    expect_spec_error(capsys, spec_path, text, line_of(text, "d_ff:"))


# -- bytes that are not text ----------------------------------------------------------------------

NOT_TEXT = {
    "invalid-utf8": (b"title: GPT-2", b"title: GPT-\xff\xfe2", b"title:"),
    "latin1": (b"  4\xc2\xb7d", b"  4\xb7d", b"  4\xb7d"),
    "nul": (b"title: GPT-2", b"title: GPT-\x002", b"title:"),
    "form-feed": (b"title: GPT-2", b"title: GPT-\x0c2", b"title:"),
    "escape": (b"  H: {doc: attention heads}", b"  H: {doc: attention\x1b[31m heads}", b"  H:"),
    "bell-in-key": (b"  L: {doc: blocks}", b"  L\x07: {doc: blocks}", b"  L\x07"),
    "lone-surrogate": (b"title: GPT-2", b"title: GPT-\xed\xa0\x80", b"title:"),
}


@pytest.mark.parametrize("old, new, needle", NOT_TEXT.values(), ids=NOT_TEXT.keys())
def test_bytes_that_are_not_text(capsys, spec_path, old, new, needle):
    raw = GPT2.encode("utf-8")
    assert raw.count(old) == 1
    raw = raw.replace(old, new)
    line = raw[: raw.index(needle)].count(b"\n") + 1
    expect_spec_error(capsys, spec_path, raw, line)


def test_utf16_file(capsys, spec_path):
    expect_spec_error(capsys, spec_path, GPT2.encode("utf-16"), 1)


# -- expressions that divide by zero where the spec is only used later ------------------------------

DIVISION_BY_ZERO = {
    "model-width": ("hidden: d_ff,", "hidden: d / 0,", "mlp:"),
    "model-width-at-size": ("hidden: d_ff,", "hidden: d / (H - 12),", "mlp:"),
    "model-round_up": ("hidden: d_ff,", 'hidden: "round_up(d, H - H)",', "mlp:"),
    "model-modulo": ("hidden: d_ff,", 'hidden: "d % (H - H)",', "mlp:"),
    "model-flag": ("qkv_bias: qkv_bias,", "qkv_bias: d / (H - 12) == 1,", "attention:"),
    "unused-default": ("default: d / H}", "default: d / (H - H)}", "  d_head:"),
}


@pytest.mark.parametrize("old, new, needle", DIVISION_BY_ZERO.values(), ids=DIVISION_BY_ZERO.keys())
def test_division_by_zero(capsys, spec_path, old, new, needle):
    text = edit(old, new)
    if needle == "  d_head:":  # every size sets d_head, so only the formula's leading term uses the default
        text = text.replace("H: 12, reported", "H: 12, d_head: 64, reported")
    message = expect_spec_error(capsys, spec_path, text, line_of(text, needle), "--size", "small")
    assert "zero" in message or "positive integer" in message


# -- many parts: limits keep even a large valid-looking spec fast ---------------------------------


def test_long_chain_of_defaults(capsys, spec_path):
    chain = "".join(f"  a{i}: {{default: a{i + 1}}}\n" for i in range(1000)) + "  a1000: {default: 1}\n"
    text = edit("  L: {doc: blocks}\n", "  L: {doc: blocks}\n" + chain)
    first_too_many = f"  a{MAX_HYPERPARAMETERS - 3}:"  # V, T and L come first
    message = expect_spec_error(capsys, spec_path, text, line_of(text, first_too_many))
    assert str(MAX_HYPERPARAMETERS) in message


def test_long_chain_of_defaults_within_the_limit(capsys, spec_path):
    n = MAX_HYPERPARAMETERS - 10
    chain = "".join(f"  a{i}: {{default: a{i + 1} + 1}}\n" for i in range(n)) + f"  a{n}: {{default: 1}}\n"
    text = edit("  L: {doc: blocks}\n", "  L: {doc: blocks}\n" + chain)
    text = edit("hidden: d_ff,", "hidden: d_ff + a0,", text)
    text = edit("  d: {doc: model width d_model}", "  d: {doc: model width d_model, default: a0 - 1}", text)
    spec_path.write_text(text, encoding="utf-8")
    result = run_cli(capsys, "count", str(spec_path), "--size", "small")
    assert result.status == 0 and result.err == "", result.err


def test_many_sizes_with_a_bad_last_one(capsys, spec_path):
    sizes = "".join(f"  s{i}: {{L: {i + 1}, d: {768 * (i + 1)}, H: 12}}\n" for i in range(500)) + "  bad: {L: 12, d: 0, H: 12}\n"
    text = GPT2 + sizes
    first_too_many = f"  s{MAX_SIZES - 4}:"  # after small, medium, large and xl
    message = expect_spec_error(capsys, spec_path, text, line_of(text, first_too_many))
    assert str(MAX_SIZES) in message


def test_many_sizes_within_the_limit_with_a_bad_last_one(capsys, spec_path):
    n = MAX_SIZES - 5
    sizes = "".join(f"  s{i}: {{L: {i + 1}, d: {768 * (i + 1)}, H: 12}}\n" for i in range(n)) + "  bad: {L: 12, d: 0, H: 12}\n"
    text = GPT2 + sizes
    message = expect_spec_error(capsys, spec_path, text, line_of(text, "  bad:"))
    assert "d = 0" in message


# -- command-line mistakes: usage errors, one line, exit 2 -----------------------------------------

USAGE = {
    "missing-size": ("--size", "smal"),
    "missing-size-far": ("--size", "enormous"),
    "set-unknown-name": ("--set", "zz=1"),
    "set-misspelt-name": ("--set", "qkv_bais=false"),
    "set-bad-value": ("--set", "L=abc"),
    "set-empty-value": ("--set", "L="),
    "set-no-equals": ("--set", "L"),
    "set-zero-width": ("--set", "d_ff=0"),
    "set-negative-width": ("--set", "d=-768"),
    "set-fraction": ("--set", "d_ff=d/5"),
    "set-zero-heads": ("--set", "H=0"),
    "set-number-for-bool": ("--set", "qkv_bias=1"),
    "set-bool-for-number": ("--set", "L=true"),
    "set-absurd": ("--set", "d=10**40"),
    "set-huge-power": ("--set", "d=d ** d ** d"),
    "set-cycle": ("--set", "d=d_ff"),
}


@pytest.mark.parametrize("args", USAGE.values(), ids=USAGE.keys())
def test_usage_error(capsys, spec_path, args):
    spec_path.write_text(GPT2, encoding="utf-8")
    extra = ("--size", "small") if args[0] == "--set" else ()
    line = check_one_line(run_cli(capsys, "count", str(spec_path), *extra, *args))
    assert args[1].split("=")[0] in line


def test_set_zero_width_names_the_value(capsys, spec_path):
    spec_path.write_text(GPT2, encoding="utf-8")
    line = check_one_line(run_cli(capsys, "count", str(spec_path), "--size", "small", "--set", "d_ff=0"))
    assert "d_ff = 0" in line and "positive integer" in line


def test_missing_spec_file(capsys, tmp_path):
    line = check_one_line(run_cli(capsys, "count", str(tmp_path / "nowhere.yaml")))
    assert "nowhere.yaml" in line


def test_directory_as_spec(capsys, tmp_path):
    check_one_line(run_cli(capsys, "count", str(tmp_path)))


# -- the real process -----------------------------------------------------------------------------

PROCESS_CASES = {
    "malformed": edit("  L: {doc: blocks}", "  L: {doc: blocks]"),
    "python-tag": edit("  L: {doc: blocks}", '  L: !!python/object/apply:os.system ["touch MARKER"]'),
    "python-expression": edit("default: 4 * d}", "default: \"__import__('os').system('touch MARKER')\"}"),
    "alias-bomb": GPT2 + billion_laughs(),
    "cycle": edit("  L: {doc: blocks}\n", "  L: {doc: blocks}\n  a: {default: b}\n  b: {default: a}\n"),
    "control-character": edit("title: GPT-2", "title: GPT-\x0c2"),
    # In a subprocess: a regression here (building 10**999999999) would hang rather than fail.
    "huge-exponent": edit("default: 4 * d}", "default: 4 * d * 1e999999999}"),
}


@pytest.mark.parametrize("text", PROCESS_CASES.values(), ids=PROCESS_CASES.keys())
def test_no_traceback_from_the_real_process(process, tmp_path, text):
    path = tmp_path / "bad.yaml"
    path.write_text(text, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = process.run(["-m", "archcalc", "count", str(path)], cwd=tmp_path, env=env, timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == ""
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and LOCATED.match(lines[0]) and lines[0].startswith(f"{path}:"), proc.stderr
    assert not (tmp_path / "MARKER").exists()


def test_the_real_process_still_counts_gpt2(process, tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = process.run(["-m", "archcalc", "count", "gpt2", "--size", "small"], cwd=tmp_path, env=env, timeout=60)
    assert proc.returncode == 0 and "124,439,808" in proc.stdout and proc.stderr == ""


# -- issue 15: names with a trailing newline ("$" matches before "\n"; fullmatch does not) -----------

NEWLINE_NAMES = {
    "spec-name": ("name: gpt2", 'name: "gpt2\\n"', "name:"),
    "stack-name": ("    repeat: L\n", '    name: "blocks\\n"\n    repeat: L\n', '    name: "blocks'),
    "stack-name-prefixed": ("    repeat: L\n", '    name: "dense_blocks\\n"\n    repeat: L\n', '    name: "dense_blocks'),
    "hyperparameter-name": ("  L: {doc: blocks}", '  "L\\n": {doc: blocks}', '  "L'),
    "rope-scaling-type": ("position: {kind: learned, length: T}", 'position: {kind: learned, length: T, scaling: "yarn\\n"}', "position:"),
}


@pytest.mark.parametrize("old, new, needle", NEWLINE_NAMES.values(), ids=NEWLINE_NAMES.keys())
def test_names_with_a_trailing_newline(capsys, spec_path, old, new, needle):
    text = edit(old, new)
    expect_spec_error(capsys, spec_path, text, line_of(text, needle))


def test_hf_model_type_with_a_trailing_newline(capsys, spec_path):
    data = yaml.safe_load(GPT2)
    data["hf"] = {"model_type": "llama\n"}
    text = yaml.safe_dump(data, sort_keys=False, default_style=None, width=1000)
    expect_spec_error(capsys, spec_path, text, line_of(text, "model_type:"))


# -- issue 15: numbers YAML 1.1 reads in other bases or scripts --------------------------------------

ODD_NUMBERS = {
    "sexagesimal": ("1:30", "base-60"),
    "sexagesimal-float": ("1:30.5", "base-60"),
    "hexadecimal": ("0xC", "hexadecimal"),
    "octal": ("010", "octal"),
    "binary": ("0b1100", "binary"),
    "double-underscore": ("1__2", "'_' may only separate digits"),
    "trailing-underscore-float": ("1_.5", "'_' may only separate digits"),
    "arabic-indic": ("١٢", "0-9"),
    "quoted-double-underscore": ('"1__2"', "'_' may only separate digits"),
    "expression-double-underscore": ('"4 * 1__2"', "'_' may only separate digits"),
    "expression-arabic-indic": ('"٤ * d"', "0-9"),
    "fullwidth": ("１２", "0-9"),
}


@pytest.mark.parametrize("value, words", ODD_NUMBERS.values(), ids=ODD_NUMBERS.keys())
def test_numbers_in_other_bases_or_scripts(capsys, spec_path, value, words):
    text = edit("small:  {L: 12,", f"small:  {{L: {value},")
    message = expect_spec_error(capsys, spec_path, text, line_of(text, "small:"), "--size", "small")
    assert words in message, message


def test_underscores_between_digits_still_count(capsys, spec_path):
    spec_path.write_text(edit("default: 50257}", "default: 50_257}"), encoding="utf-8")
    result = run_cli(capsys, "count", str(spec_path), "--size", "small")
    assert result.status == 0 and "124,439,808" in result.out, result.err


# -- issue 15: real-valued settings out of range ------------------------------------------------------

OUT_OF_RANGE = {
    "eps-negative": ("    norm: layernorm\n", "    norm: {kind: layernorm, eps: -1}\n", "    norm:", "above 0"),
    "eps-zero": ("    norm: layernorm\n", "    norm: {kind: layernorm, eps: 0}\n", "    norm:", "above 0"),
    "final-eps-zero": ("  final_norm: layernorm\n", "  final_norm: {kind: layernorm, eps: 0.0}\n", "  final_norm:", "above 0"),
    "attention-softcap-zero": ("out_bias: true}", "out_bias: true, softcap: 0}", "attention:", "above 0"),
    "attention-softcap-negative": ("out_bias: true}", "out_bias: true, softcap: -1}", "attention:", "above 0"),
    "head-softcap-zero": ("head: {tied: tie_embeddings}", "head: {tied: tie_embeddings, softcap: 0}", "  head:", "above 0"),
    "head-softcap-negative": ("head: {tied: tie_embeddings}", "head: {tied: tie_embeddings, softcap: -30}", "  head:", "above 0"),
    "scale-zero": ("out_bias: true}", "out_bias: true, scale: 0}", "attention:", "above 0"),
    "window-zero": ("out_bias: true}", "out_bias: true, window: 0}", "attention:", "positive"),
    "window-negative": ("out_bias: true}", "out_bias: true, window: -4, pattern: [local]}", "attention:", "positive"),
    "window-expression-zero": ("out_bias: true}", "out_bias: true, window: L - 12}", "attention:", "positive integer"),
    "rotary-base-zero": ("position: {kind: learned, length: T}", "position: {kind: rotary, base: 0}", "position:", "above 0"),
    "rotary-base-negative": ("position: {kind: learned, length: T}", "position: {kind: rotary, base: -10000}", "position:", "above 0"),
    "rotary-fraction-above-one": ("position: {kind: learned, length: T}", "position: {kind: rotary, rotary_fraction: 2}", "position:", "at most 1"),
    "rotary-fraction-zero": ("position: {kind: learned, length: T}", "position: {kind: rotary, rotary_fraction: 0}", "position:", "above 0"),
    "clamp-negative": ("activation: gelu_tanh, bias: true}", "activation: swiglu_clamped, bias: true, clamp: -1}", "mlp:", "above 0"),
    "rope-factor-zero": ("position: {kind: learned, length: T}", "position: {kind: rotary, scaling: {type: linear, factor: 0}}", "position:", "above 0"),
    "size-rotary-base-zero": ("H: 12, reported: 124439808}", "H: 12, reported: 124439808, position: {base: 0}}", "small:", "above 0"),
}


@pytest.mark.parametrize("old, new, needle, words", OUT_OF_RANGE.values(), ids=OUT_OF_RANGE.keys())
def test_settings_out_of_range(capsys, spec_path, old, new, needle, words):
    text = edit(old, new)
    message = expect_spec_error(capsys, spec_path, text, line_of(text, needle), "--size", "small")
    assert words in message, message


# -- issue 15: defaults that grow when substituted into each other (bounded before sympy builds them) -

CHAIN_STEPS = {  # a default built from the two before it; each doubles (or more) once written out
    "min": "min({a}, {b}) + min({b}, {a} + 1)",
    "mod": "{a} % ({b} + 7) + {b} % ({a} + 3) + 1",
    "max": "max({a}, {b} + 1)",
    "round": "round_up({a} + {b}, 8) + floor({a} / 3)",
    "sum": "{a} + {b} + 1",
    "product": "{a} * {b} + 1",
}


def chained_defaults(step: str, n: int) -> str:
    """gpt2.yaml with defaults h0 .. hn, each from the two before it, and the MLP width using hn."""
    lines = ["  h0: {default: 3}", "  h1: {default: 5}"]
    lines += [f'  h{i}: {{default: "{step.format(a=f"h{i - 1}", b=f"h{i - 2}")}"}}' for i in range(2, n + 1)]
    text = edit("  L: {doc: blocks}\n", "  L: {doc: blocks}\n" + "\n".join(lines) + "\n")
    return edit("hidden: d_ff,", f"hidden: d_ff + h{n},", text)


@pytest.mark.parametrize("n", [12, 24, 40])
@pytest.mark.parametrize("step", CHAIN_STEPS.values(), ids=CHAIN_STEPS.keys())
def test_chained_defaults_are_refused_where_they_grow_too_large(capsys, spec_path, step, n):
    text = chained_defaults(step, n)
    spec_path.write_text(text, encoding="utf-8")
    err = check_one_line(run_cli(capsys, "count", str(spec_path), "--size", "small"))
    m = re.match(re.escape(str(spec_path)) + r":(\d+):\d+: (.+)$", err)
    assert m, err
    # one of the chained defaults (or the MLP width that uses the last) is named, with the limit it passes
    assert line_of(text, "  h2:") <= int(m[1]) <= line_of(text, "mlp:"), err
    assert "substituted" in m[2] and "at most" in m[2], err


@pytest.mark.parametrize("step", CHAIN_STEPS.values(), ids=CHAIN_STEPS.keys())
def test_short_chained_defaults_still_count(capsys, spec_path, step):
    spec_path.write_text(chained_defaults(step, 4), encoding="utf-8")
    result = run_cli(capsys, "count", str(spec_path), "--size", "small", "--json")
    assert result.status == 0, result.err
    assert json.loads(result.out)["results"][0]["total"] > 124439808


SUM_OF_16 = "(" + " + ".join(f"s{i}" for i in range(16)) + ")"
SIXTEEN = "".join(f"  s{i}: {{default: {i + 2}}}\n" for i in range(16))
EXPANSIONS = {  # (old, new, the line's needle): each would expand to hundreds of thousands of monomials
    "default-power-of-a-sum": ("  L: {doc: blocks}\n", f"  L: {{doc: blocks}}\n{SIXTEEN}  x: {{default: \"{SUM_OF_16}**8\"}}\n", "  x:"),
    "model-power-of-a-sum": ("hidden: d_ff,", f'hidden: "{SUM_OF_16}**8",', "mlp:"),
    "size-power-of-a-sum": ("small:  {L: 12,", f'small:  {{L: "{SUM_OF_16}**2 * 0 + 12", d_ff: "{SUM_OF_16}**8",', "small:"),
}


@pytest.mark.parametrize("old, new, needle", EXPANSIONS.values(), ids=EXPANSIONS.keys())
def test_expressions_that_expand_too_far(capsys, spec_path, old, new, needle):
    text = edit(old, new)
    if "s0" in new and "s0:" not in new:
        text = edit("  L: {doc: blocks}\n", "  L: {doc: blocks}\n" + SIXTEEN, text)
    message = expect_spec_error(capsys, spec_path, text, line_of(text, needle), "--size", "small")
    assert "terms" in message or "degree" in message, message


def test_set_that_expands_too_far(capsys, spec_path):
    spec_path.write_text(edit("  L: {doc: blocks}\n", "  L: {doc: blocks}\n" + SIXTEEN), encoding="utf-8")
    line = check_one_line(run_cli(capsys, "count", str(spec_path), "--size", "small", "--set", f"d_ff={SUM_OF_16}**8"))
    assert "d_ff" in line and "terms" in line


# -- issue 15: an expression YAML's {...} syntax split at its comma -----------------------------------

SPLIT = {
    "default": ("default: 4 * d}", "default: round_up(8 * d / 3, 256)}", "d_ff:"),
    "size": ("small:  {L: 12,", "small:  {L: 12, d_ff: round_up(8 * d / 3, 256),", "small:"),
    "model": ("hidden: d_ff,", "hidden: max(d_ff, 8),", "mlp:"),
}


@pytest.mark.parametrize("old, new, needle", SPLIT.values(), ids=SPLIT.keys())
def test_an_expression_split_at_its_comma_says_to_quote_it(capsys, spec_path, old, new, needle):
    text = edit(old, new)
    message = expect_spec_error(capsys, spec_path, text, line_of(text, needle), "--size", "small")
    assert "split an expression at its comma" in message and "quote" in message, message


def test_the_same_expression_quoted_counts(capsys, spec_path):
    spec_path.write_text(edit("default: 4 * d}", 'default: "round_up(8 * d / 3, 256)"}'), encoding="utf-8")
    result = run_cli(capsys, "count", str(spec_path), "--size", "small")
    assert result.status == 0 and "d_ff" in result.out, result.err
