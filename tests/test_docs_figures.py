"""The figures on the generated GPT-3 and conventions pages are the ones archcalc computes (or cites)."""

from __future__ import annotations

import re
from pathlib import Path

from archcalc.backends.count import count_size
from archcalc.backends.flops import flops
from archcalc.backends.memory import memory
from archcalc.spec import load_spec
from archcalc.spec.bind import bind, parse_overrides

DOCS = Path(__file__).resolve().parent.parent / "docs"


def figures(page: str) -> set[int]:
    text = (DOCS / page).read_text(encoding="utf-8")
    return {int(m.replace(",", "")) for m in re.findall(r"\d{1,3}(?:,\d{3}){2,}", text)}


def test_conventions_page_figures():
    gpt2 = load_spec("gpt2")
    f = flops(bind(gpt2, "small"), 1024, 1)
    computed = {f.forward_matmul, f.train_step_matmul, f.approximations["palm"]["train_step"],
                memory(bind(gpt2, "small"), 1024, 1, "float32").weights_bytes}
    # DeepSeek-V3 without and with its MTP module's stored copies (--mtp-copies), and the difference
    from archcalc.backends.count import count
    from archcalc.ir.mtp import with_mtp

    deepseek = load_spec("deepseek_v3")
    without, stored = (count(bind(s, "671b")).total for s in (deepseek, with_mtp(deepseek, "stored")))
    computed |= {without, stored, stored - without}
    assert figures("conventions.md") <= computed, figures("conventions.md") - computed


def test_gpt3_page_figures():
    gpt3 = load_spec("gpt3")
    computed = {count_size(gpt3, size).total for size in gpt3.sizes}
    computed |= {size.reported for size in gpt3.sizes.values() if size.reported}  # cited, labelled as such
    computed |= {count_size(gpt3, "xl", parse_overrides(gpt3, ["H=16"])).total,
                 count_size(gpt3, "13b", parse_overrides(gpt3, ["d=5120"])).total}
    from archcalc.backends.solve import solve

    computed |= {c.total for c in solve(gpt3, 100 * 10**12, {"L": 512}).candidates} | {2457600003476635369}
    for band in ([], ["band=256"]):
        r = flops(bind(gpt3, "175b", parse_overrides(gpt3, band)), 2048, 1)
        computed |= {r.forward_matmul, r.forward_matmul_causal}
    assert figures("gpt3.md") <= computed, figures("gpt3.md") - computed
