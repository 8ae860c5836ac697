"""The model pages' charts (archcalc/site/charts.py): the figures they plot are the backends' exactly, as the
command line computes them (``--set``, ``archcalc memory``, ``archcalc infer``, the hardware table); their ticks
are labelled and in order; every SVG of a model page is labelled for a screen reader."""

from __future__ import annotations

import json
import re
from fractions import Fraction
from html import unescape
from pathlib import Path

import pytest

from archcalc.backends.count import count, count_spec
from archcalc.backends.flops import flops
from archcalc.backends.infer import infer
from archcalc.backends.infer.hardware import table
from archcalc.backends.memory import memory
from archcalc.site import charts
from archcalc.site.model_page import context_of, model_page, page_seq
from archcalc.spec import load_spec
from archcalc.spec.bind import bind, parse_overrides

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(("name", "swept"), [("gpt2", "L"), ("gpt2", "d"), ("llama", "d"), ("jamba", "L")])
def test_scaling_points_are_count_and_flops_with_set(name, swept):
    spec = load_spec(name)
    results = count_spec(spec)
    seq, _ = page_seq(results[0].binding)
    data = charts.scaling_data(results, seq, swept)
    assert len(data["line"]) >= 5
    for value, params, train in data["line"][::2]:  # every other point: each is a fresh count
        binding = bind(spec, data["held"], parse_overrides(spec, [f"{swept}={value}"]))
        assert params == count(binding).total
        assert train == Fraction(flops(binding, seq, 1).train_step_matmul, seq)
    for size, value, params, train in data["sizes"]:
        r = count(bind(spec, size))
        assert (value, params) == (r.binding.values[swept], r.total)
        assert train == Fraction(flops(r.binding, seq, 1).train_step_matmul, seq)


@pytest.mark.parametrize("name", ["llama", "jamba"])
def test_memory_points_are_archcalc_memory(name):
    r = count_spec(load_spec(name))[0]
    context = charts.context_of_size(r.binding, context_of(r.binding), 2048)
    for batch in charts.MEMORY_BATCHES:
        points = charts.memory_points(r.binding, r.total, context, batch)
        assert points[0][0] == 512 and points[-1][0] == context
        for seq, value in points:
            m = memory(r.binding, seq, batch, "bfloat16")
            assert value == m.weights_bytes + m.kv_cache_bytes + m.state_bytes


@pytest.mark.parametrize(("name", "size", "tp"), [("llama", "3-8b", 1), ("deepseek_v3", "671b", 8)])
def test_roofline_data_is_archcalc_infer_and_the_hardware_table(name, size, tp):
    """One GPU's figures, also from the page's runs split over tp GPUs (the inference table's, reused)."""
    binding = bind(load_spec(name), size)
    known = {1: infer(binding, "h100-sxm", 1, 512, 128, tp=tp)}
    data = charts.roofline_data(binding, 512, 128, "h100-sxm", known)
    assert list(data["batches"]) == [str(b) for b in charts.BATCHES]
    for batch, figures in data["batches"].items():
        r = infer(binding, "h100-sxm", int(batch), 512, 128)
        assert figures == {"prefill": [r.prefill.flops, charts.exact(r.prefill.bytes)],
                           "decode": [r.decode.flops, charts.exact(r.decode.bytes)]}
    assert {"h100-sxm", "b200", "mi300x"} <= set(data["hardware"])
    for key, hw in data["hardware"].items():
        assert (hw["peak"], hw["bandwidth"]) == (table()[key].peaks["bfloat16"], table()[key].bandwidth)


def _value(label: str) -> Fraction:
    """A tick label back to its number (1K, 2.5B, 10 GB, 0.1)."""
    units = {"K": 10**3, "M": 10**6, "B": 10**9, "T": 10**12, "P": 10**15, " MB": 10**6, " GB": 10**9, " TB": 10**12, " B": 1}
    for unit, scale in sorted(units.items(), key=lambda u: -len(u[0])):
        if label.endswith(unit):
            return Fraction(label[: -len(unit)].replace(",", "")) * scale
    return Fraction(label.replace(",", ""))


@pytest.fixture(scope="module")
def llama_page() -> str:
    return model_page(load_spec("llama"), "spec/llama.yaml")


def test_every_chart_has_ticks_in_order_and_axis_titles(llama_page):
    svgs = re.findall(r"<svg[^>]*>.*?</svg>", llama_page)
    plots = [s for s in svgs if "archcalc-tick-x" in s]
    assert len(plots) == 4  # parameters and FLOPs against L and d, memory, roofline
    for svg in plots:
        for axis, coord, sign in (("x", "x", 1), ("y", "y", -1)):
            ticks = re.findall(rf'<text class="archcalc-tick-{axis}" x="([\d.]+)" y="([\d.]+)"[^>]*>([^<]+)</text>', svg)
            assert len(ticks) >= 2, svg[:200]
            values = [_value(t[2]) for t in ticks]
            where = [float(t[0 if coord == "x" else 1]) for t in ticks]
            assert values == sorted(values) and len(set(values)) == len(values)
            assert all(sign * (b - a) > 0 for a, b in zip(where, where[1:]))  # up the axis as the values grow
    roof = plots[-1]
    assert "arithmetic intensity (FLOP/byte)" in roof and ">TFLOP/s<" in roof


def test_every_svg_of_the_model_pages_is_labelled():
    pages = sorted((ROOT / "docs" / "models").glob("*.md"))
    assert len(pages) >= 30
    for page in pages:
        for tag in re.findall(r"<svg\b[^>]*>", page.read_text(encoding="utf-8")):
            assert 'role="img"' in tag and re.search(r'aria-label="[^"]+"', tag), (page.name, tag)


def test_the_roofline_draws_the_default_without_scripts(llama_page):
    box = re.search(r'<div class="archcalc-plot" data-roofline="([^"]+)">(.*?)</p></div>', llama_page)
    data = json.loads(unescape(box.group(1)))
    assert data["default"] == ["h100-sxm", "1"]
    assert 'data-roof ' in box.group(2) and box.group(2).count("data-point=") == 2
    assert "controls\" hidden" in box.group(2)  # the selectors wait for the script
    assert "NVIDIA H100 SXM5 80GB (989.4 TFLOP/s bf16, 3.35 TB/s), batch 1: prefill" in llama_page


def test_labels_never_overlap():
    placed = charts.place([(100.0, 100.0, "prefill"), (104.0, 101.0, "decode"), (390.0, 50.0, "a long label")], 386)
    assert placed[1][1] - placed[0][1] >= 12  # moved below the first
    assert placed[2][2] == "end"  # no room on the right: left of its point
