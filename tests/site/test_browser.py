"""The built site in headless Chromium (the system browser, driven by playwright): every page at 1280 px and on a
390 px phone, with no console error, no request off the machine, no sideways page scroll, no table, formula or
code block whose hidden part has no scrollbar, and no identifier broken inside a word; the calculator agrees
with 'archcalc count/flops/memory --set' for random values; the site also works opened from disk.

One browser per test process visits the pages; the two page-by-page tests run as SHARDS cases, in parallel.
With $ARCHCALC_SCREENSHOTS set, a screenshot of every page at each width goes to that folder (to look at them)."""

from __future__ import annotations

import contextlib
import http.server
import io
import json
import os
import random
import threading
from fractions import Fraction
from functools import partial
from pathlib import Path

import pytest

from archcalc.cli import main

WIDTHS = (1280, 390)
SHARDS = 2  # the page-by-page tests split in this many cases

# Problems on the current page, found in the page: sideways scroll, clipped content without a scrollbar,
# identifiers that wrap inside a word.
LAYOUT_CHECK = r"""() => {
  const problems = [];
  const doc = document.documentElement;
  if (doc.scrollWidth > doc.clientWidth + 1) problems.push(`the page scrolls sideways: ${doc.scrollWidth} > ${doc.clientWidth} px`);
  const article = document.querySelector("article");
  const right = article.getBoundingClientRect().right;
  const clipper = (el) => {  // the nearest box, el or above (within the article), that clips el horizontally
    for (let x = el; x && x !== article; x = x.parentElement) {
      if (x.tagName !== "TABLE" && getComputedStyle(x).overflowX !== "visible") return x;
    }
    return null;
  };
  const what = (el) => `${el.tagName.toLowerCase()} "${(el.textContent || "").trim().slice(0, 40)}"`;
  for (const el of article.querySelectorAll("table, .archcalc-formula, pre > code, svg, math, .archcalc-calc")) {
    const box = clipper(el);
    if (!box) {
      if (el.getBoundingClientRect().right > right + 1) problems.push(`${what(el)} runs out of the column`);
      continue;
    }
    if (box.scrollWidth <= box.clientWidth + 1) continue;
    const style = getComputedStyle(box);
    const bar = box.offsetHeight - box.clientHeight - parseFloat(style.borderTopWidth) - parseFloat(style.borderBottomWidth);
    if (!["auto", "scroll"].includes(style.overflowX) || bar <= 0)
      problems.push(`${what(el)}: ${box.scrollWidth - box.clientWidth} px hidden with no scrollbar`);
  }
  for (const code of article.querySelectorAll("code")) {  // every word of inline code stays on one line
    if (code.closest("pre")) continue;
    const walker = document.createTreeWalker(code, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      for (const m of node.textContent.matchAll(/\S+/g)) {
        const range = document.createRange();
        range.setStart(node, m.index);
        range.setEnd(node, m.index + m[0].length);
        const lines = new Set([...range.getClientRects()].filter((r) => r.width > 0).map((r) => Math.round(r.top)));
        if (lines.size > 1) problems.push(`code ${code.textContent.slice(0, 40)} breaks inside "${m[0]}"`);
      }
    }
  }
  return problems;
}"""


@pytest.fixture(scope="module")
def server(built_site):
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args) -> None:
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), partial(Quiet, directory=str(built_site)))
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_port}"
    httpd.shutdown()


def _pages(site: Path) -> list[str]:
    return sorted(str(p.relative_to(site)) for p in site.rglob("*.html") if p.name != "404.html" and "assets" not in p.parts)


def _watched_page(browser, width: int, base: str):
    page = browser.new_page(viewport={"width": width, "height": 900})
    trouble: list[str] = []
    page.on("console", lambda m: trouble.append(f"console {m.type}: {m.text}") if m.type == "error" else None)
    page.on("pageerror", lambda e: trouble.append(f"script error: {e}"))
    page.on("request", lambda r: trouble.append(f"asked the network for {r.url}") if not r.url.startswith(base) else None)
    return page, trouble


def _shard(pages: list[str], shard: int) -> list[str]:
    """Every SHARDS-th page from the shard-th: the two longest tests split into SHARDS cases, which run in parallel."""
    return pages[shard::SHARDS]


@pytest.mark.parametrize("shard", range(SHARDS))
def test_every_page_reads_at_1280_and_390_px(browser, server, built_site, shard):
    shots = Path(os.environ["ARCHCALC_SCREENSHOTS"]) if os.environ.get("ARCHCALC_SCREENSHOTS") else None
    if shots:
        shots.mkdir(parents=True, exist_ok=True)
    assert len(_pages(built_site)) >= 30, _pages(built_site)
    pages = _shard(_pages(built_site), shard)
    problems = []
    for width in WIDTHS:
        page, trouble = _watched_page(browser, width, server)
        for path in pages:
            trouble.clear()
            page.goto(f"{server}/{path}", wait_until="load")
            found = trouble + page.evaluate(LAYOUT_CHECK)
            problems += [f"{path} at {width} px: {p}" for p in found]
            if shots:  # for a person to look at: encoding every page as PNG is most of this test's time otherwise
                page.screenshot(path=str(shots / f"{path.replace('/', '_').removesuffix('.html')}-{width}.png"))
        page.close()
    assert not problems, "\n".join(problems[:40])


def test_model_pages_are_in_the_navigation_with_previous_and_next(browser, server):
    page, _ = _watched_page(browser, 1280, server)
    page.goto(f"{server}/models/mixtral.html", wait_until="load")
    assert page.locator(".md-nav__link--active", has_text="Mixtral").count() >= 1
    assert page.locator("a.md-footer__link--prev").count() == 1 and page.locator("a.md-footer__link--next").count() == 1
    page.close()


def _cli(*argv: str) -> tuple[int, dict]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        status = main(list(argv))
    return status, json.loads(out.getvalue()) if status == 0 else {}


def _show(value: Fraction) -> str:
    return f"{value.numerator:,}" if value.denominator == 1 else f"{value.numerator:,}/{value.denominator:,}"


def _trial_values(data: dict, size: str, rng: random.Random, wild: bool) -> dict[str, int]:
    """Values for the integers the size gives: all scaled by one factor (shapes stay consistent, numbers grow past
    2^53), or, ``wild``, anything at all (often refused: then both must refuse)."""
    given = {k: int(v[1]) for k, v in data["sizes"][size].items() if v[0] == "num" and v[2] == "1"}
    ints = {h["name"] for h in data["hyperparameters"] if h["type"] == "int"}
    given = {k: v for k, v in given.items() if k in ints}
    if wild:
        return {k: rng.randint(1, 5000) for k in given}
    factor = rng.choice([1, 2, 3, rng.randint(1, 1000), rng.randint(1, 10**6)])
    return {k: v * factor for k, v in given.items()}


@pytest.mark.parametrize("shard", range(SHARDS))
def test_calculator_agrees_with_the_command_line(browser, server, built_site, shard):
    seed = int(os.environ.get("ARCHCALC_SEED", random.randrange(10**6)))
    rng = random.Random(seed)
    page, trouble = _watched_page(browser, 1280, server)
    disagreements, compared = [], 0
    models = sorted(p for p in _pages(built_site) if p.startswith("models/") and p != "models/index.html")
    for path in _shard(models, shard):
        page.goto(f"{server}/{path}", wait_until="load")
        calc = page.locator(".archcalc-calc")
        assert calc.get_attribute("data-ready") == "true", path
        data = json.loads(page.locator("script.archcalc-calc__data").text_content())
        for wild in (False, False, True):
            size = rng.choice(list(data["sizes"]))
            page.select_option("select[name=size]", size)
            values = _trial_values(data, size, rng, wild)
            seq = rng.randint(1, 100_000)
            for name, value in values.items():
                page.fill(f"input[name='{name}']", str(value))
            page.fill("input[data-archcalc-seq]", str(seq))
            switches = {h["name"]: rng.random() < 0.5 for h in data["hyperparameters"] if h["type"] == "bool"}
            for name, on in switches.items():  # booleans change which tensors exist: each has its own formulas
                page.set_checked(f"input[name='{name}']", on)
            sets = [x for k, v in {**values, **switches}.items() for x in ("--set", f"{k}={str(v).lower()}")]
            status, counted = _cli("count", data["spec"], "--size", size, *sets, "--json")
            label = f"{path} size {size} {values} {switches} S={seq} (seed {seed})"
            state = calc.get_attribute("data-state")
            if status != 0:
                if state != "error":
                    disagreements.append(f"{label}: the CLI refuses, the calculator shows numbers")
                continue
            if state != "ok":
                disagreements.append(f"{label}: the calculator refuses ({page.locator('[data-archcalc=error]').text_content()})")
                continue
            compared += 1
            r = counted["results"][0]
            _, f = _cli("flops", data["spec"], "--size", size, *sets, "--seq-len", str(seq), "--json")
            _, m = _cli("memory", data["spec"], "--size", size, *sets, "--seq-len", str(seq), "--batch", "1",
                        "--dtype", "bfloat16", "--json")
            expected = {"total": f"{r['total']:,}", "active": f"{r['active']:,}",
                        "train_flops_per_token": _show(Fraction(f["results"][0]["train_step_matmul"], seq)),
                        "bf16_bytes": f"{m['results'][0]['weights_bytes']:,}",
                        **{f"role:{k}": f"{v:,}" for k, v in r["by_role"].items() if v}}
            for key, want in expected.items():
                shown = page.locator(f'dd[data-archcalc="{key}"]')
                got = shown.text_content() if shown.count() == 1 else "nothing"
                if got != want:
                    disagreements.append(f"{label}: {key} {got} in the page, {want} from the CLI")
    assert not trouble, trouble[:5]
    assert compared >= 30 // SHARDS, f"only {compared} trials gave numbers to compare (seed {seed})"  # two scaled trials a page
    assert not disagreements, "\n".join(disagreements[:20])
    page.close()


def test_the_100t_gpt3_shows_every_digit(browser, server):
    page, _ = _watched_page(browser, 390, server)
    page.goto(f"{server}/models/gpt3.html", wait_until="load")
    page.select_option("select[name=size]", "100t")
    assert page.locator('[data-archcalc="total"]').text_content() == "105,560,844,664,832"
    page.close()


def test_the_site_works_opened_from_disk(browser, built_site):
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.goto((built_site / "index.html").as_uri(), wait_until="load")
    with page.expect_navigation(wait_until="load"):  # the next page, loaded: not a race with the click
        page.click('article a[href="models/index.html"]')
    assert page.url.endswith("/models/index.html") and page.locator("h1", has_text="Models").count() == 1
    page.click("input.md-search__input")
    # the search index loads in the background: its status line leaves "Initializing search" once it is ready
    page.wait_for_function("() => !/Initializing/i.test(document.querySelector('.md-search-result__meta')?.textContent"
                           " ?? 'Initializing')", timeout=60_000)
    page.keyboard.type("mixtral")
    page.wait_for_selector(".md-search-result__item", timeout=60_000)
    assert not errors, errors[:5]
    page.close()


def test_the_models_index_sorts_from_the_keyboard_and_the_palette_toggles(browser, server):
    """The models index: Tab to a column's header, Enter sorts by it, largest first; Enter again, smallest first. The
    header's palette toggle switches the site to dark mode (Material's slate scheme)."""
    page, trouble = _watched_page(browser, 1280, server)
    page.goto(f"{server}/models/index.html", wait_until="load")
    column = ".archcalc-sortable tbody td:nth-child(3)"
    values = lambda: [int(v) for v in page.eval_on_selector_all(column, "cells => cells.map(c => c.dataset.sort)")]  # noqa: E731
    page.locator(".archcalc-sortable th button", has_text="parameters").focus()
    page.keyboard.press("Enter")
    assert values() == sorted(values(), reverse=True) and len(values()) > 100
    page.keyboard.press("Enter")
    assert values() == sorted(values())
    assert page.locator("th[aria-sort=ascending]").text_content() == "parameters"
    page.locator("label.md-header__button[for^=__palette]:visible").click()
    page.wait_for_function("() => document.body.dataset.mdColorScheme === 'slate'")
    assert not trouble, trouble[:5]
    page.close()


def test_the_calculator_puts_its_state_in_the_address_and_announces_results(browser, server):
    """Typed values go into the page's address (?size=...&L=...); the address opened again gives the same result; the
    results region is announced (aria-live) and errors are alerts; the readable figure beside the digits is the one
    the page's Python wrote for the same number (the two implementations agree)."""
    from archcalc.backends.count import count
    from archcalc.site.calculator import readable
    from tests.helpers import bound

    page, trouble = _watched_page(browser, 1280, server)
    page.goto(f"{server}/models/llama.html", wait_until="load")
    page.select_option("select[name=size]", "2-7b")
    page.locator("input[name=L]").fill("40")
    page.keyboard.press("Enter")
    total = count(bound("llama", "2-7b", L=40)).total
    page.wait_for_function(f"() => document.querySelector('[data-archcalc=total]').textContent === '{total:,}'")
    assert "size=2-7b" in page.url and "L=40" in page.url
    assert page.locator('[data-approx="total"]').text_content() == readable("total", total)
    assert all(dl.get_attribute("aria-live") == "polite" for dl in page.locator(".archcalc-calc__out").all())  # counts, memory, inference
    assert page.locator("[data-archcalc=error]").get_attribute("role") == "alert"
    again, more = _watched_page(browser, 390, server)
    again.goto(page.url, wait_until="load")
    assert again.locator('[data-archcalc="total"]').text_content() == f"{total:,}"
    assert again.locator("input[name=L]").input_value() == "40"
    assert not trouble and not more, (trouble + more)[:5]
    page.close()
    again.close()


def test_the_home_page_links_to_a_calculator_that_opens_its_model_page(browser, server):
    """The home page's Calculator link lands on a model page whose first section is the calculator, working (its
    memory figure is archcalc memory's for the run it opens with)."""
    from archcalc.backends.memory import memory
    from archcalc.backends.parallel_plan import Plan
    from tests.helpers import bound

    page, trouble = _watched_page(browser, 1280, server)
    page.goto(f"{server}/index.html", wait_until="load")
    page.locator("article a", has_text="Calculator").first.click()
    page.wait_for_selector(".archcalc-calc[data-ready=true]")
    assert "/models/llama.html" in page.url and page.url.endswith("#calculator"), page.url  # (?size=...: the shared state)
    assert page.evaluate("() => document.querySelector('article h2').id") == "calculator"
    size, seq, tp = (page.locator(n).input_value() for n in ("[name=size]", "[data-archcalc-seq]", "[name=run-tp]"))
    expected = memory(bound("llama", size), int(seq), 1, plan=Plan(tp=int(tp))).weights_bytes
    page.wait_for_function(f"() => document.querySelector('[data-archcalc=\"mem:weights\"]').textContent === '{expected:,}'")
    assert not trouble, trouble[:5]
    page.close()
