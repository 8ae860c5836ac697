"""The model pages' calculator keeps the command line's bounds (issue 26): a hyperparameter of more than 30 digits or
above 10^18 and a tokens field above 10^18 are refused at once, in the CLI's words, before the text is read as a
number; its digit grouping is one pass over the text (a lookahead regular expression took 15-30 s on a pasted
100,000-digit number).

The calculator runs in headless Chromium on a page made of calculator_html() and the script alone (no mkdocs
build). Waits are on conditions (the calculator's data-state), each bounded far above what the work needs: a
refusal is a few string operations, grouping a million digits a few milliseconds; the quadratic grouping would
take about an hour on those million digits."""

from __future__ import annotations

import contextlib
import io
import random
import re
from pathlib import Path

import pytest

from archcalc.cli import main
from archcalc.cli.output import MAX_CLI_INT
from archcalc.site.calculator import calculator_data, calculator_html
from archcalc.spec import load_spec
from archcalc.spec.expr import MAX_DIGITS
from archcalc.spec.schema import MAX_VALUE

SCRIPT = Path(__file__).resolve().parents[2] / "archcalc" / "site" / "assets" / "archcalc.js"
BOUND_MS = 60_000  # far above any of these waits' work, far below the quadratic formatter's


def test_the_page_data_carries_the_command_lines_bounds():
    data = calculator_data(load_spec("gpt2"), 1024)
    assert (data["max_digits"], data["max_value"], data["max_int"]) == (MAX_DIGITS, str(MAX_VALUE), str(MAX_CLI_INT))


def _cli_error(*argv: str) -> str:
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        try:
            status = main(list(argv))
        except SystemExit as e:  # argparse's refusals
            status = e.code
    assert status == 2, (argv[:4], err.getvalue())
    return err.getvalue().strip()


@pytest.fixture(scope="module")
def html():
    body = calculator_html(load_spec("gpt2"), 1024)
    return f"<!doctype html><html><body><article>{body}</article><script>{SCRIPT.read_text(encoding='utf-8')}</script></body></html>"


@pytest.fixture
def calculator(browser, html):
    page = browser.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.set_content(html, wait_until="load")
    page.wait_for_selector(".archcalc-calc[data-ready=true]", timeout=BOUND_MS)
    yield page
    assert not errors, errors[:3]
    page.close()


def _refusal(page, field: str, text: str) -> str:
    """Type ``text`` into ``field`` and wait for the calculator's error state; the message."""
    page.fill(f"input[name='{field}']", text)
    page.wait_for_selector(".archcalc-calc[data-state=error]", timeout=BOUND_MS)
    message = page.locator("[data-archcalc=error]").text_content()
    assert page.locator('dd[data-archcalc="total"]').text_content() == "—"
    return message


def _recovers(page) -> None:
    page.fill("input[name='L']", "12")
    page.fill("input[name='S']", "1024")
    page.wait_for_selector(".archcalc-calc[data-state=ok]", timeout=BOUND_MS)
    assert page.locator('dd[data-archcalc="total"]').text_content() == "124,439,808"


@pytest.mark.parametrize("digits", [MAX_DIGITS + 1, 100_000, 1_000_000])
def test_a_hyperparameter_with_too_many_digits_is_refused_in_the_clis_words(calculator, digits):
    cli = _cli_error("count", "gpt2", "--size", "small", "--set", f"L={'1' * (MAX_DIGITS + 1)}")
    reason = f"has more than {MAX_DIGITS} digits"
    assert reason in cli, cli
    message = _refusal(calculator, "L", "7" * digits)
    shown = "7" * digits if digits <= 24 else f"a number of {digits:,} digits"
    assert message == f"L = {shown}: number {reason}; expected at most 1e+18", message
    _recovers(calculator)


@pytest.mark.parametrize("value", [MAX_VALUE + 1, 10**MAX_DIGITS - 1])
def test_a_hyperparameter_above_10_18_is_refused_in_the_clis_words(calculator, value):
    cli = _cli_error("count", "gpt2", "--size", "small", "--set", f"L={value}")
    reason = "is absurdly large; expected at most 1e+18"
    assert cli.endswith(reason), cli
    assert _refusal(calculator, "L", str(value)) == f"L = {value:,} {reason}"
    _recovers(calculator)


@pytest.mark.parametrize("text", ["0", str(MAX_CLI_INT + 1), "9" * 20, "1" * 60_000, "0" * 100_000 + "1" * 25])
def test_the_tokens_field_keeps_seq_lens_bounds(calculator, text):
    cli = _cli_error("flops", "gpt2", "--size", "small", "--seq-len", text)
    reason = cli.split("--seq-len: ", 1)[1].removesuffix(" (see archcalc flops --help)")
    assert reason.startswith("expected a positive integer of at most 10^18, got "), cli
    assert _refusal(calculator, "S", text) == f"S: {reason}"
    _recovers(calculator)


def test_a_long_text_is_echoed_in_forty_characters(calculator):
    message = _refusal(calculator, "L", "x" * 100_000)
    assert message == f"L = {'x' * 39}…: expected a whole number"
    _recovers(calculator)


def test_the_largest_values_the_cli_takes_are_counted(calculator):
    """10^18 is the bound, not past it: the page counts it as the CLI does (no false refusal)."""
    calculator.fill("input[name='S']", str(MAX_CLI_INT))
    calculator.fill("input[name='L']", str(MAX_VALUE))
    calculator.wait_for_selector(".archcalc-calc[data-state=ok]", timeout=BOUND_MS)
    err = io.StringIO()
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        assert main(["count", "gpt2", "--size", "small", "--set", f"L={MAX_VALUE}", "--json"]) == 0, err.getvalue()
    import json

    total = json.loads(out.getvalue())["results"][0]["total"]
    assert calculator.locator('dd[data-archcalc="total"]').text_content() == f"{total:,}"


def _formatter_source() -> str:
    """The script's digit-grouping function, as written there."""
    m = re.search(r"^  function digits\(s\) \{\n.*?^  \}\n", SCRIPT.read_text(encoding="utf-8"), re.M | re.S)
    assert m, "archcalc.js has no 'function digits(s)': update this test with the formatter's new name"
    return m.group(0)


def test_digit_grouping_agrees_with_python(calculator):
    rng = random.Random(26)
    numbers = [0, 1, -1, 12, 123, 1234, -1234, 999_999, 10**18, -(10**30)] + [rng.randrange(-10**60, 10**60) for _ in range(200)]
    got = calculator.evaluate(f"(xs) => {{ {_formatter_source()}; return xs.map(digits); }}", [str(x) for x in numbers])
    assert got == [f"{x:,}" for x in numbers]


def test_digit_grouping_is_one_pass(calculator):
    """A million digits, grouped in a worker (the page stays responsive, so the wait can end): done well inside
    the bound. The lookahead regular expression it replaces is quadratic: about an hour here."""
    calculator.evaluate("""(src) => {
        const blob = new Blob([src + "; onmessage = (e) => postMessage(digits(e.data).length);"], {type: "text/javascript"});
        const worker = new Worker(URL.createObjectURL(blob));
        worker.onmessage = (e) => { window.__grouped = e.data; };
        worker.postMessage("9".repeat(1000000));
    }""", _formatter_source())
    calculator.wait_for_function("() => window.__grouped !== undefined", timeout=BOUND_MS)
    assert calculator.evaluate("() => window.__grouped") == 1_000_000 + (1_000_000 - 1) // 3
