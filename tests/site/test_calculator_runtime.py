"""The calculator's memory and inference figures equal `archcalc memory` and `archcalc infer`, exactly.

Two checks: the page's exported data, composed in Python the way archcalc.js composes it, equals the backends for
seeded random runs (a dense model, two mixtures of experts, a hybrid, sliding windows); and, in Chromium, the page shows
what the command line prints for random runs (its bytes from --json, its seconds and tokens/s as printed), or its
refusal word for word. Browser waits are on conditions (the calculator's data-state, a text), never on time.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import random
import re
from fractions import Fraction
from pathlib import Path

import pytest

from archcalc.cli import main
from archcalc.site.calculator import calculator_data, calculator_html
from archcalc.spec import load_spec

SCRIPT = Path(__file__).resolve().parents[2] / "archcalc" / "site" / "assets" / "archcalc.js"
BOUND_MS = 60_000  # far above any wait's work here
MODELS = ("gpt2", "deepseek_v3", "qwen3_next", "gemma3_text", "mixtral")  # dense, MoE (MLA), hybrid, windows, MoE


def _cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            status = main(list(argv))
        except SystemExit as e:
            status = e.code
    return status, out.getvalue(), err.getvalue().strip()


# ---- the page's composition, in Python (archcalc.js's memoryFigures and inferFigures, line for line) ----

def _q(pair) -> Fraction:
    return Fraction(int(pair[0]), int(pair[1]))


RELATIONS = {"==": lambda a, b: a == b, "!=": lambda a, b: a != b, "<": lambda a, b: a < b, "<=": lambda a, b: a <= b,
             ">": lambda a, b: a > b, ">=": lambda a, b: a >= b, "and": lambda a, b: a and b, "or": lambda a, b: a or b}


def _evaluate(tree, name):
    """archcalc.js's evaluate() for the operations a prefill formula uses."""
    op, args = tree[0], tree[1:]
    if op == "num":
        return Fraction(int(args[0]), int(args[1]))
    if op == "name":
        return name(args[0])
    if op == "bool":
        return args[0]
    if op == "pw":
        return next(_evaluate(value, name) for value, cond in args if _evaluate(cond, name))
    values = [_evaluate(a, name) for a in args[1:]] if op == "fn" else [_evaluate(a, name) for a in args]
    if op == "+":
        return sum(values, Fraction(0))
    if op == "*":
        return math.prod(values, start=Fraction(1))
    if op in RELATIONS:
        return RELATIONS[op](*values)
    if op == "**":
        return values[0] ** int(values[1])
    if op == "fn" and args[0] in ("min", "max"):
        return (min if args[0] == "min" else max)(values)
    if op == "fn" and args[0] in ("floor", "ceil"):
        return Fraction((math.floor if args[0] == "floor" else math.ceil)(values[0]))
    raise AssertionError(f"the test's evaluator lacks {op} {args[:1]}")


def _cached(terms, tokens: int, part=lambda t: 1) -> int:
    return sum(int(t[0]) // part(t) * (tokens if t[1] is None else min(tokens, int(t[1]))) for t in terms)


def page_memory(data: dict, size: str, run: dict) -> dict[str, int] | str:
    rt, width = data["runtime"]["sizes"][size], _q(data["runtime"]["dtypes"][run["dtype"]])
    for what, v in rt["tp"]:
        if int(v) % run["tp"]:
            return f"does not divide {what} = {int(v):,}"
    b, s, tp, dp, zero = run["batch"], run["seq"], run["tp"], run["dp"], run["zero"]
    whole = lambda elements: math.ceil(elements * width)  # noqa: E731
    totals = [0, 0, 0]
    for shape, copies, dim, vocab in rt["leaves"]:
        full = [int(n) for n in shape]
        local = list(full)
        if tp > 1 and dim >= 0:
            local[dim] = -(-local[dim] // tp)
        grad = full if tp > 1 and vocab and not (zero >= 2 and dp > 1) else local
        for j, (held, stage) in enumerate(((local, 3), (grad, 2), (local, 1))):
            rows = held[0] if held else 1
            if dp > 1 and zero >= stage and held:
                rows = -(-rows // dp)
            totals[j] += int(copies) * rows * math.prod(held[1:]) * (2, 2, 12)[j]
    return {"weights_bytes": whole(int(rt["params"])), "kv_cache_bytes": whole(_cached(rt["kv"], s) * b),
            "recurrent_state_bytes": whole(int(rt["state"]) * b),
            "gpu_kv": whole(_cached(rt["kv"], s, lambda t: tp if t[2] else 1) * b),
            "gpu_weights": totals[0], "gpu_gradients": totals[1], "gpu_optimizer": totals[2]}


def page_infer(data: dict, size: str, run: dict) -> dict[str, Fraction] | str:
    """TTFT and the decode's seconds as exact fractions (the page rounds them as the CLI does)."""
    rt = data["runtime"]["sizes"][size]
    c, b, p, n, tp = rt["infer"], run["batch"], run["prompt"], run["new_tokens"], run["tp"]
    hw = next(h for h in data["runtime"]["hardware"] if h[0] == run["hardware"])
    act, dtype = _q(data["runtime"]["dtypes"][run["dtype"]]), data["runtime"]["aliases"].get(run["dtype"], run["dtype"])
    if dtype not in hw[4]:
        return f"has no published dense {dtype} peak"
    peak, bandwidth, capacity = int(hw[4][dtype]), int(hw[3]), int(hw[2])
    for what, v in c["heads"]:
        if int(v) % tp:
            return f"--tp {tp} does not divide the {v} {what}"
    total, embeddings, row, experts = (_q(x) * act for x in c["w"][:4])
    share, tied = _q(c["w"][4]), c["w"][5]

    def read(tokens: int) -> Fraction:
        reached = experts * min(Fraction(1), tokens * share) if experts else 0
        return total - experts - embeddings + reached + (embeddings if tied else min(embeddings, tokens * row))

    kv = lambda tokens, seqs=b: seqs * _cached(rt["kv"], tokens) * act  # noqa: E731
    state = b * int(rt["state"]) * act
    needed = (total + kv(p + n) + state) / tp
    if needed > capacity:
        return "weights + KV cache"
    body, head = (int(x) for x in c["io"])
    prefill_flops = _evaluate(c["prefill"], lambda v: {"B": b, "P": p}[v]) / tp
    prefill_bytes = (read(b * p) + kv(p) + state + b * (p * body + head) * act) / tp
    out = {"ttft": max(prefill_flops / peak, prefill_bytes / bandwidth)}
    # the decode steps one by one (the page sums them in closed form; a short run checks the closed form too)
    compute = memory = Fraction(0)
    for x in range(p + 1, p + n):
        f = b * int(c["step"][0]) + sum(b * int(k) * (x if w is None else min(x, int(w))) for k, w in c["step"][1])
        by = read(b) + b * (body + head) * act + 2 * state + kv(x)
        if f * bandwidth >= by * peak:
            compute += f
        else:
            memory += by
    out["decode"] = (compute / peak + memory / bandwidth) / tp
    return out


def _runs(data: dict, size: str, rng: random.Random, count: int) -> list[dict]:
    """Random runs, most of them ones the command line accepts (a tp that divides the heads and widths, a GPU that
    holds the weights), some not (refused: the page must refuse them in the same words)."""
    rt = data["runtime"]["sizes"][size]
    widths = [int(v) for _, v in rt["tp"] + rt.get("infer", {}).get("heads", [])]
    runs = []
    for _ in range(count):
        dtype = rng.choice(["bfloat16", "bfloat16", "bf16", "float32", "int4"])
        tp = rng.choice([t for t in (1, 2, 4, 8) if all(w % t == 0 for w in widths)] + ([3] if rng.random() < 0.2 else []))
        need = int(rt["params"]) * _q(data["runtime"]["dtypes"][dtype]) / tp
        hardware = [h[0] for h in data["runtime"]["hardware"] if "bfloat16" in h[4] and int(h[2]) > need] or ["b200"]
        runs.append({"batch": rng.choice([1, 2, 3, 8, 17, 64]), "seq": rng.choice([1, 7, 128, 1000, 4096, 131_073]),
                     "dtype": dtype, "dp": rng.choice([1, 2, 3, 8, 64]), "zero": rng.randrange(4), "tp": tp,
                     "hardware": rng.choice(hardware), "prompt": rng.choice([1, 5, 300, 2048, 5000]),
                     "new_tokens": rng.choice([1, 2, 9, 40])})
    return runs


def _cli_memory(spec: str, size: str, run: dict) -> tuple[dict | None, str]:
    status, out, err = _cli("memory", spec, "--size", size, "--seq-len", str(run["seq"]), "--batch", str(run["batch"]),
                            "--dtype", run["dtype"], "--dp", str(run["dp"]), "--zero", str(run["zero"]),
                            "--tp", str(run["tp"]), "--json")
    return (json.loads(out)["results"][0] if status == 0 else None), err


def _cli_infer(spec: str, size: str, run: dict, *extra: str) -> tuple[int, str, str]:
    return _cli("infer", spec, "--size", size, "--hardware", run["hardware"], "--batch", str(run["batch"]),
                "--prompt", str(run["prompt"]), "--new-tokens", str(run["new_tokens"]), "--dtype", run["dtype"],
                "--tp", str(run["tp"]), *extra)


@pytest.mark.parametrize("spec", MODELS)
def test_the_exported_data_composes_to_the_command_lines_figures(spec):
    data = calculator_data(load_spec(spec), 1024)
    size = next(iter(data["runtime"]["sizes"]))
    for run in _runs(data, size, random.Random(f"{spec}-32"), 10):
        cli, err = _cli_memory(spec, size, run)
        page = page_memory(data, size, run)
        if cli is None:
            assert isinstance(page, str) and page in err, (run, err, page)
        else:
            gpu = cli["parallel"]["per_gpu"]
            assert page == {"weights_bytes": cli["weights_bytes"], "kv_cache_bytes": cli["kv_cache_bytes"],
                            "recurrent_state_bytes": cli.get("recurrent_state_bytes", 0), "gpu_kv": gpu["kv_cache_bytes"],
                            "gpu_weights": gpu["weights_bytes"], "gpu_gradients": gpu["gradients_bytes"],
                            "gpu_optimizer": gpu["optimizer_bytes"]}, run
        status, out, err = _cli_infer(spec, size, run, "--json")
        page = page_infer(data, size, run)
        if status:
            assert isinstance(page, str) and page in err, (run, err, page)
            continue
        roofline = json.loads(out)["results"][0]["roofline"]
        assert float(page["ttft"]) == roofline["time_to_first_token_seconds"], run
        assert float(page["decode"]) == roofline["decode_seconds"], run


# ---- in the browser ----

def _open(browser, spec: str):
    body = calculator_html(load_spec(spec), 1024)
    page = browser.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    style = (SCRIPT.parent / "archcalc.css").read_text(encoding="utf-8")
    page.set_content(f"<!doctype html><html><head><style>{style}</style></head><body><article>{body}</article><script>"
                     f"{SCRIPT.read_text(encoding='utf-8')}</script></body></html>", wait_until="load")
    page.wait_for_selector(".archcalc-calc[data-ready=true]", timeout=BOUND_MS)
    return page, errors


def _enter(page, run: dict) -> None:
    """Type the run, then Enter: the result is the page's answer to all of it (data-state says it is done)."""
    page.evaluate("() => { document.querySelector('.archcalc-calc').dataset.state = 'typing'; }")
    for name in ("batch", "dp", "tp", "prompt", "new_tokens"):
        page.fill(f"input[name='run-{name}']", str(run[name]))
    page.fill("input[name='S']", str(run["seq"]))
    for name in ("dtype", "zero", "hardware"):
        page.select_option(f"select[name='run-{name}']", str(run[name]))
    page.evaluate("() => { document.querySelector('.archcalc-calc').dataset.state = 'typing'; }")
    page.press("input[name='run-batch']", "Enter")  # Enter updates (the form's submit)
    page.wait_for_selector(".archcalc-calc[data-state=ok]", timeout=BOUND_MS)


def _text(page, key: str) -> str:
    return page.locator(f'dd[data-archcalc="{key}"]').text_content()


def _printed(out: str) -> dict[str, str]:
    """What `archcalc infer` prints: time to first token, the decode's tokens/s and one step's time, with bounds."""
    ttft = re.search(r"time to first token\s+(\S+ m?s)\s+(\w+)-bound", out)
    decode = re.search(r"decode\s+\S+ m?s\s+(\w+)-bound\s+(\S+) tokens/s \((\S+ m?s) a step\)", out)
    fits = re.search(r"memory per GPU: (\S+ GB) of (\S+ GB) .*largest batch (\S+)", out)
    shown = {"inf:ttft": f"{ttft[1]}   {ttft[2]}-bound", "inf:fits": f"{fits[1]} of {fits[2]}; largest batch {fits[3]}"}
    if decode:
        shown |= {"inf:tps": f"{decode[2]} tokens/s   {decode[1]}-bound", "inf:step": decode[3]}
    return shown


@pytest.mark.parametrize("spec", ["gpt2", "deepseek_v3", "qwen3_next"])
def test_the_page_shows_what_the_command_line_prints(browser, spec):
    page, errors = _open(browser, spec)
    data = calculator_data(load_spec(spec), 1024)
    size = next(iter(data["runtime"]["sizes"]))
    for run in _runs(data, size, random.Random(f"browser-{spec}"), 4):
        _enter(page, run)
        cli, err = _cli_memory(spec, size, run)
        note = page.locator('[data-archcalc-note="memory"]')
        if cli is None:
            assert note.text_content() == err, run
        else:
            gpu = cli["parallel"]["per_gpu"]
            for key, value in (("mem:weights", cli["weights_bytes"]), ("mem:kv", cli["kv_cache_bytes"]),
                               ("mem:gpu_weights", gpu["weights_bytes"]), ("mem:gpu_kv", gpu["kv_cache_bytes"]),
                               ("mem:gpu_train", gpu["weights_bytes"] + gpu["gradients_bytes"] + gpu["optimizer_bytes"])):
                assert _text(page, key) == f"{value:,}", (run, key)
        status, out, err = _cli_infer(spec, size, run)
        if status:
            assert page.locator('[data-archcalc-note="inference"]').text_content() == err, run
        else:
            for key, shown in _printed(out).items():
                assert _text(page, key) == shown, (run, key)
    assert not errors, errors[:3]
    page.close()


def test_typing_away_from_a_size_says_which_command_to_run(browser):
    page, errors = _open(browser, "gpt2")
    page.fill("input[name='L']", "13")
    page.wait_for_function("() => !document.querySelector('[data-archcalc-note=memory]').hidden", timeout=BOUND_MS)
    assert "archcalc memory gpt2 --size small --set NAME=VALUE" in page.locator('[data-archcalc-note="memory"]').text_content()
    assert _text(page, "mem:weights") == "—"
    page.fill("input[name='L']", "12")
    page.wait_for_function("() => document.querySelector('[data-archcalc-note=memory]').hidden", timeout=BOUND_MS)
    assert _text(page, "mem:weights") == "248,879,616"
    assert not errors, errors[:3]
    page.close()


@pytest.mark.parametrize("field,option", [("batch", "--batch"), ("tp", "--tp"), ("new_tokens", "--new-tokens")])
def test_a_pasted_100000_digit_number_is_refused_in_the_clis_words(browser, field, option):
    """The run's fields keep the command line's bounds; a 100,000-digit paste is refused, not parsed (the page does
    not freeze: the refusal appears, and the calculator recovers)."""
    page, errors = _open(browser, "gpt2")
    status, _, err = _cli("infer", "gpt2", "--size", "small", "--hardware", "h100", "--batch", "1", "--prompt", "1",
                          "--new-tokens", "1", option, "7" * 100_000)
    reason = err.split(f"argument {option}: ", 1)[1].removesuffix(" (see archcalc infer --help)")
    assert status == 2 and reason == "expected a positive integer of at most 10^18, got a number of 100,000 digits", err
    page.fill(f"input[name='run-{field}']", "7" * 100_000)
    page.wait_for_selector(".archcalc-calc[data-state=error]", timeout=BOUND_MS)
    assert page.locator("[data-archcalc=error]").text_content() == f"{option}: {reason}"
    page.fill(f"input[name='run-{field}']", "1")
    page.wait_for_selector(".archcalc-calc[data-state=ok]", timeout=BOUND_MS)
    assert not errors, errors[:3]
    page.close()


def test_python_float_formatting_is_reproduced(browser):
    """The script's toDouble/pyFixed/pyG3 write what Python's float() and format() write, ties and all."""
    page, errors = _open(browser, "gpt2")
    rng = random.Random(7)
    cases = [Fraction(1, 8), Fraction(1125, 1000), Fraction(5, 2), Fraction(2**60 + 1, 3), Fraction(999_5, 10_000),
             Fraction(12345, 1), Fraction(1, 10**6)] + [Fraction(rng.randrange(1, 10**30), rng.randrange(1, 10**25))
                                                        for _ in range(300)]
    got = page.evaluate("""(xs) => xs.map(([p, q]) => { const x = window.__archcalc.toDouble([BigInt(p), BigInt(q)]);
        return [window.__archcalc.pyFixed(x, 1), window.__archcalc.pyFixed(x, 2), window.__archcalc.pyG3(x)]; })""",
                        [[str(f.numerator), str(f.denominator)] for f in cases])
    assert got == [[f"{float(f):,.1f}", f"{float(f):,.2f}", f"{float(f):,.3g}"] for f in cases]
    assert not errors, errors[:3]
    page.close()


def test_the_keyboard_reaches_every_field_with_visible_focus_and_enter_updates(browser):
    """Tab walks the run's fields (focus drawn), Enter recomputes, and the results and notes are announced."""
    page, errors = _open(browser, "gpt2")
    page.focus("input[name='run-batch']")
    for name in ("run-dtype", "run-dp", "run-zero", "run-tp", "run-hardware", "run-prompt", "run-new_tokens"):
        page.keyboard.press("Tab")
        focused = page.evaluate("() => [document.activeElement.name, getComputedStyle(document.activeElement).outlineStyle]")
        assert focused == [name, "solid"], focused
    page.keyboard.press("Tab")
    assert page.evaluate("() => document.activeElement.type") == "submit"
    page.fill("input[name='run-new_tokens']", "2")
    page.evaluate("() => { document.querySelector('.archcalc-calc').dataset.state = 'typing'; }")
    page.press("input[name='run-new_tokens']", "Enter")
    page.wait_for_selector(".archcalc-calc[data-state=ok]", timeout=BOUND_MS)
    status, out, _ = _cli("infer", "gpt2", "--size", "small", "--hardware", "h100", "--batch", "1", "--prompt", "512",
                          "--new-tokens", "2")
    assert status == 0 and _text(page, "inf:tps") == _printed(out)["inf:tps"]
    assert all(dl.get_attribute("aria-live") == "polite" for dl in page.locator(".archcalc-calc__out").all())
    assert all(p.get_attribute("role") == "status" for p in page.locator("[data-archcalc-note]").all())
    assert not errors, errors[:3]
    page.close()
