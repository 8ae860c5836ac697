"""The model pages' charts in headless Chromium: the roofline's selectors redraw it (another accelerator, another
batch: the roof, the points and the caption move), every SVG of the article is labelled for a screen reader, and
the charts fit a 390 px phone without sideways scroll. Waits on conditions, never on time."""

from __future__ import annotations

from fractions import Fraction

from archcalc.backends.infer import infer
from archcalc.backends.infer.hardware import hardware
from archcalc.spec import load_spec
from archcalc.spec.bind import bind
from tests.site.test_browser import _watched_page, server  # noqa: F401 (a fixture)

UNLABELLED = """() => [...document.querySelectorAll("article svg")]
  .filter((s) => !s.closest(".md-content__button, .md-clipboard, .md-annotation, a.headerlink"))
  .filter((s) => s.getAttribute("role") !== "img" || !(s.getAttribute("aria-label") || "").trim())
  .map((s) => s.outerHTML.slice(0, 120))"""


def test_the_roofline_selectors_redraw_it(browser, server):  # noqa: F811
    page, trouble = _watched_page(browser, 390, server)
    page.goto(f"{server}/models/llama.html", wait_until="load")
    box = page.locator(".archcalc-plot[data-roofline]")
    caption = box.locator(".archcalc-plot__caption")
    assert caption.text_content().startswith("NVIDIA H100 SXM5 80GB (989.4 TFLOP/s bf16, 3.35 TB/s), batch 1:")
    roof, dot = box.locator("[data-roof]").get_attribute("points"), box.locator('[data-point="decode"]').get_attribute("cy")
    assert box.locator(".archcalc-plot__controls").is_visible()  # the script shows the selectors
    box.locator('[data-select="hardware"]').select_option("b200")
    page.wait_for_function("() => document.querySelector('[data-roofline] .archcalc-plot__caption').textContent"
                           ".includes('B200')")
    assert box.locator("[data-roof]").get_attribute("points") != roof
    box.locator('[data-select="batch"]').select_option("32")
    page.wait_for_function("() => document.querySelector('[data-roofline] .archcalc-plot__caption').textContent"
                           ".includes('batch 32:')")
    assert box.locator('[data-point="decode"]').get_attribute("cy") != dot
    # the caption's figures are infer's: decode intensity of batch 32, to one decimal
    r = infer(bind(load_spec("llama"), "2-7b"), "b200", 32, 512, 128)
    b200 = hardware("b200")
    intensity = Fraction(r.decode.flops) / r.decode.bytes
    assert f"decode {float(intensity):,.1f} FLOP/byte" in caption.text_content()
    assert f"{float(min(b200.peak('bfloat16'), b200.bandwidth * intensity)) / 1e12:,.1f} TFLOP/s" in caption.text_content()
    assert not trouble, trouble[:5]
    page.close()


def test_charts_are_labelled_and_fit_a_phone(browser, server):  # noqa: F811
    page, trouble = _watched_page(browser, 390, server)
    for model in ("llama", "jamba", "gpt2", "deepseek_v3"):
        page.goto(f"{server}/models/{model}.html", wait_until="load")
        assert page.locator("svg.archcalc-chart").count() >= 5, model
        assert page.evaluate(UNLABELLED) == [], model
        assert page.evaluate("() => document.documentElement.scrollWidth <= document.documentElement.clientWidth + 1"), model
        for svg in page.locator("article svg.archcalc-chart").all():
            assert svg.bounding_box()["width"] <= 390, model
    assert not trouble, trouble[:5]
    page.close()
