"""Fuzzing the spec loader: spec/gpt2.yaml with one (or a few) of its leaves replaced by something hostile.

``yaml.compose`` finds every scalar leaf of the file (keys and values) with its character span; a
test replaces the exact span of a chosen leaf with a value drawn from a strategy of Python payloads,
YAML tags, anchors and aliases, absurd numbers, empty and structural values, and random printable
text. Whatever comes out, ``archcalc count`` must exit 0 or 2; on 2 it prints exactly one
``FILE:LINE:COL: ...`` line on stderr and nothing on stdout; it never raises, never prints a
traceback, never runs a payload (``MARKER`` never appears). No wall-clock limit: work is bounded by
construction (archcalc.spec.limits) and timed in benchmarks/limits.py.
"""

from __future__ import annotations

import builtins
import contextlib
import io
import json
import os
import re
import string
import subprocess
import traceback
from pathlib import Path
from unittest import mock

import pytest
import yaml
from hypothesis import HealthCheck, given
from hypothesis import strategies as st

from archcalc.cli import main
from tests.helpers import examples

ROOT = Path(__file__).resolve().parents[2]
GPT2 = (ROOT / "spec" / "gpt2.yaml").read_text(encoding="utf-8")
LOCATED = re.compile(r"^\S.*:\d+:\d+: .+$")
SETTINGS = examples(200, suppress_health_check=[HealthCheck.function_scoped_fixture])


def scalar_spans(text: str) -> list[tuple[int, int]]:
    """The (start, end) character span of every scalar in ``text``, keys included."""
    spans: list[tuple[int, int]] = []

    def walk(node: yaml.Node) -> None:
        if isinstance(node, yaml.ScalarNode):
            start, end = node.start_mark.index, node.end_mark.index
            while end > start and text[end - 1] in "\r\n":  # a block scalar's span ends after its newline
                end -= 1
            spans.append((start, end))
        elif isinstance(node, yaml.SequenceNode):
            for item in node.value:
                walk(item)
        elif isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                walk(key)
                walk(value)

    walk(yaml.compose(text))
    return spans


LEAVES = scalar_spans(GPT2)

PYTHON = [
    "__import__('os').system('touch MARKER')",
    "eval('1')",
    "exec('import os; os.system(\"touch MARKER\")')",
    "().__class__",
    "().__class__.__bases__[0].__subclasses__()",
    "lambda: 1",
    "d.__class__",
    "[x for x in ()]",
    "f'{d}'",
    "f\"{__import__('os').system('touch MARKER')}\"",
    "open('/etc/passwd')",
    "os.system('touch MARKER')",
    "exec",
    "__builtins__",
]
YAML_HOSTILE = [
    '!!python/object/apply:os.system ["touch MARKER"]',
    "!!python/object/apply:os.system [touch MARKER]",
    '!!python/object/new:os.system ["touch MARKER"]',
    "!!python/name:os.system",
    "!!python/module:os",
    "!!binary aGVsbG8=",
    "!custom 4",
    "!custom",
    "!!str 768",
    "!!int 768",
    "!!float 768",
    "!!timestamp 2001-12-14",
    "*x",
    "&x 768",
    "&x",
    "<<",
    "? x",
    "- x",
    "|",
    ">",
    "#",
    "%",
    "@",
    "`",
    "'",
    '"',
    "{",
    "}",
    "[",
    "]",
    ",",
    ":",
    "---",
    "...",
    "&a [*a]",
    '"\\0"',
    '"\\x0c"',
    '"\\u2028"',
]
NUMBERS = [
    "0", "-1", "-0", "1e400", "-1e400", ".nan", ".inf", "-.inf", "1e99999", "1e-99999", "0.5", "768.5",
    "0x300", "0o1400", "0b1100000000", "1_000", "12:48", "9" * 40, "9" * 41, "1" * 50, "10 ** 40",
    "d ** d ** d", "10 ** 10 ** 10", "(10**60)**64", "d ** 64", "(d ** 8) ** 9", "*".join(["d**64"] * 24),
    "d / (H - 12)", "d / 0", "round_up(d, 0)", "d % (H - H)", "H / 5", "d - 768", "4 * d / 5", "d_ff", "d_head",
    "qkv_bias", "not qkv_bias", "d > 1", "L", "T", "V",
]
PLAIN = ['""', "''", "null", "~", "[]", "{}", "[[]]", "{a: 1}", "true", "false", "yes", "no", "on", "off", "layernorm",
         "rmsnorm", "learned", "dense", "gelu", "pre-norm", "name", "model", "sizes", "embedding", "block", "doc",
         "default", "type", "bool", "int", "reported", "125M", "1.3B"]

HOSTILE = st.one_of(
    st.sampled_from(PYTHON),
    st.sampled_from(PYTHON).map(json.dumps),  # as a YAML double-quoted string
    st.sampled_from(YAML_HOSTILE),
    st.sampled_from(NUMBERS),
    st.sampled_from(PLAIN),
    st.integers(min_value=-10, max_value=5000).map(str),
    st.integers(min_value=-(10**60), max_value=10**60).map(str),
    st.text(alphabet=string.printable, max_size=40),
    st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), max_size=20),
)


def _refuse(*args, **kwargs):
    raise AssertionError(f"archcalc tried to run code: {args!r:.100}")


def check(path: Path, text: str) -> None:
    """Run ``archcalc count`` on ``text`` and check everything the module docstring promises."""
    path.write_text(text, encoding="utf-8")
    out, err = io.StringIO(), io.StringIO()
    try:
        with contextlib.ExitStack() as stack:
            for target, name in ((builtins, "eval"), (os, "system"), (os, "popen"), (subprocess, "Popen")):
                stack.enter_context(mock.patch.object(target, name, _refuse))
            stack.enter_context(contextlib.redirect_stdout(out))
            stack.enter_context(contextlib.redirect_stderr(err))
            status = main(["count", str(path)])
    except BaseException:  # noqa: BLE001 - anything escaping main is the failure being looked for
        raise AssertionError(f"an exception escaped main:\n{traceback.format_exc()}") from None
    out_text, err_text = out.getvalue(), err.getvalue()
    assert not (path.parent / "MARKER").exists(), "a payload in the spec ran"
    assert "Traceback" not in out_text + err_text
    assert status in (0, 2), (status, err_text)
    if status == 0:
        assert err_text == "" and out_text
        return
    assert out_text == ""
    lines = err_text.splitlines()
    assert len(lines) == 1, err_text
    assert LOCATED.match(lines[0]), lines[0]
    m = re.match(re.escape(str(path)) + r":(\d+):(\d+): .+$", lines[0])
    assert m, f"does not start with the file path: {lines[0]}"
    assert 1 <= int(m[1]) <= text.count("\n") + 1, f"line {m[1]} is outside the file: {lines[0]}"
    assert "value error" not in lines[0].lower(), f"an unexpected exception, wrapped by pydantic: {lines[0]}"


@pytest.fixture(scope="module", autouse=True)
def _warm():
    """Import everything once (sympy, pydantic) and check the unchanged spec counts."""
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(["count", str(ROOT / "spec" / "gpt2.yaml")]) == 0


@SETTINGS
@given(leaf=st.sampled_from(LEAVES), value=HOSTILE)
def test_one_hostile_leaf(tmp_path, monkeypatch, leaf, value):
    monkeypatch.chdir(tmp_path)
    start, end = leaf
    check(tmp_path / "fuzz.yaml", GPT2[:start] + value + GPT2[end:])


@SETTINGS
@given(data=st.data())
def test_several_hostile_leaves(tmp_path, monkeypatch, data):
    monkeypatch.chdir(tmp_path)
    chosen = data.draw(st.lists(st.sampled_from(LEAVES), min_size=2, max_size=4, unique=True))
    text = GPT2
    for start, end in sorted(chosen, reverse=True):  # from the end, so earlier spans stay valid
        text = text[:start] + data.draw(HOSTILE) + text[end:]
    check(tmp_path / "fuzz.yaml", text)


def test_the_leaves_cover_keys_and_values():
    texts = [GPT2[s:e] for s, e in LEAVES]
    for expected in ("name", "gpt2", "qkv_bias", "d / H", "4 * d", "pre-norm", "reported", "124439808", "small"):
        assert expected in texts
    assert len(LEAVES) > 100


# -- chained defaults (issue 15): each default built from earlier ones; bounded before sympy sees them ---

OPERATIONS = ["{a} + {b}", "{a} - {b} + 100", "{a} * {b}", "{a} * 3 + 1", "{a} / 2", "{a} // ({b} + 1)", "{a} % ({b} + 2)",
              "min({a}, {b})", "max({a}, {b} + 1)", "round_up({a}, 8)", "round_down({a} + 9, 4)", "floor({a} / 3)",
              "ceil({a} / 7)", "({a} + {b}) ** 2", "{a} ** 2 + {b}", "min({a}, {b}) + min({b}, {a} + 1)"]


@st.composite
def chained_defaults(draw) -> str:
    """gpt2.yaml with 2 to 40 extra defaults, each an operation on two earlier ones (or constants), the MLP using the last."""
    n = draw(st.integers(min_value=2, max_value=40))
    lines = ["  h0: {default: 3}", "  h1: {default: 5}"]
    for i in range(2, n):
        a, b = draw(st.integers(0, i - 1)), draw(st.integers(0, i - 1))
        step = draw(st.sampled_from(OPERATIONS)).format(a=f"h{a}", b=f"h{b}")
        lines.append(f'  h{i}: {{default: "{step}"}}')
    text = GPT2.replace("  L: {doc: blocks}\n", "  L: {doc: blocks}\n" + "\n".join(lines) + "\n", 1)
    return text.replace("hidden: d_ff,", f"hidden: d_ff + h{n - 1},", 1)


@examples(60, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=chained_defaults())
def test_chained_defaults(tmp_path, monkeypatch, text):
    monkeypatch.chdir(tmp_path)
    check(tmp_path / "chain.yaml", text)
