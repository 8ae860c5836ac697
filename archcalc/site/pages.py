"""The pages beyond one-per-spec: GPT-3's table, where attention stands among the parameters, one head of
GPT-3 175B, the conventions and the CLI reference. Every figure is computed when the page is built."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from fractions import Fraction

from archcalc.backends.count import count_size, count_spec
from archcalc.backends.flops import flops
from archcalc.backends.memory import memory
from archcalc.backends.solve import solve
from archcalc.site import mathml, svg
from archcalc.site.model_page import collected
from archcalc.spec import load_spec
from archcalc.spec.bind import bind, parse_overrides


def n(x: int) -> str:
    return f"{x:,}"


def pct(x: Fraction | float) -> str:
    return f"{100 * float(x):+.1f}%"


def gpt3_page() -> str:
    spec = load_spec("gpt3")
    rows = count_spec(spec)
    by = {r.size: r for r in rows}
    xl_d1 = count_size(spec, "xl", parse_overrides(spec, ["H=16"]))
    b13_d1 = count_size(spec, "13b", parse_overrides(spec, ["d=5120"]))
    guess = by["100t"]
    solved = solve(spec, 100 * 10**12, {"L": 512})
    best = solved.candidates[0]
    dense = flops(bind(spec, "175b"), 2048, 1)
    banded = flops(bind(spec, "175b", parse_overrides(spec, ["band=256"])), 2048, 1)
    out = ["# GPT-3's Table 2.1, counted as printed", "",
           "`spec/gpt3.yaml` holds the eight rows of Table 2.1 of Brown et al. (2020) as printed — n_layers, d_model, "
           "n_heads, d_head — with n_ctx = 2048, d_ff = 4·d_model, a vocabulary of 50,257 and a head tied to the token "
           "embedding. archcalc counts each row with the attention inner width H·d_head, in the spec's symbols (L = n_layers, "
           "d = d_model, H = n_heads, d_head, T = n_ctx = 2,048 the context, V = 50,257 the vocabulary):", "",
           f'<div class="archcalc-formula" tabindex="0">{mathml.block(collected(rows[0]))}</div>', "", "```text", rows[0].formula_text, "```", "",
           "The rows as printed:", "", "| row | L | d_model | H | d_head |", "|---|---:|---:|---:|---:|"]
    counts = ["", "Counted:", "", "| row | computed | reported (cited) | error |", "|---|---:|---:|---:|"]
    for r in rows:
        v = r.binding.values
        err = pct(r.rel_error) if r.rel_error is not None else "—"
        reported = n(r.reported) if r.reported else "— (not in the paper)"
        out.append(f"| {r.size} | {n(v['L'])} | {n(v['d'])} | {n(v['H'])} | {n(v['d_head'])} |")
        counts.append(f"| {r.size} | {n(r.total)} | {reported} | {err} |")
    out += counts
    xl, b13 = by["xl"], by["13b"]
    out += ["", "## The two inconsistent rows", "",
            f"**XL.** As printed, {xl.binding.values['H']} heads of width {xl.binding.values['d_head']} give an inner width of "
            f"{xl.binding.values['H'] * xl.binding.values['d_head']:,}, but d_model is {xl.binding.values['d']:,}. Counted that way the "
            f"model has {n(xl.total)} parameters, {pct(xl.rel_error)} against the 1.3B (reported, cited) in the table. Table D.1 of "
            f"the same paper lists 1,320M (cited), and that is what an inner width equal to d_model gives: with 16 heads of 128 "
            f"(`archcalc count gpt3 --size xl --set H=16`) the count is {n(xl_d1.total)}, "
            f"{pct(Fraction(xl_d1.total - 1_320_000_000, 1_320_000_000))} from 1,320M.", "",
            f"**13B.** As printed, d_model = {b13.binding.values['d']:,} while {b13.binding.values['H']} heads of "
            f"{b13.binding.values['d_head']} give {b13.binding.values['H'] * b13.binding.values['d_head']:,}. Counted as printed: "
            f"{n(b13.total)}. Table D.1 lists 12,850M (cited), which is what d_model = 5120 gives "
            f"(`archcalc count gpt3 --size 13b --set d=5120`: {n(b13_d1.total)}). 5140 is most likely a typo for 5120.", "",
            "archcalc counts the table as printed and warns on both rows, naming the two widths.", "",
            "## A 100T-parameter GPT-3", "",
            f"A GPT-3-shaped guess keeps 175B's proportions: L = {guess.binding.values['L']}, d = {guess.binding.values['d']:,} "
            f"(the size `100t`). Counted exactly it has {n(guess.total)} parameters, {pct(Fraction(guess.total - 10**14, 10**14))} "
            "against 100T. The solver answers exactly (`archcalc solve gpt3 --target-params 100e12 --fix L=512`): with L fixed the "
            f"count is a quadratic in d whose positive root is `{solved.exact[0]}` ≈ {solved.real_value:,.1f}; the best whole-number "
            f"candidate that keeps 128-wide heads is d = {best.values['d']:,} with {best.values['H']} heads: {n(best.total)} "
            f"parameters ({pct(best.rel_error)}).", "",
            "| candidate | L | d | H | parameters | error |", "|---|---:|---:|---:|---:|---:|"]
    for i, c in enumerate(solved.candidates, 1):
        out.append(f"| {i} | {c.values['L']} | {c.values['d']:,} | {c.values['H']} | {n(c.total)} | {pct(c.rel_error)} |")
    out += [f"| guess | {guess.binding.values['L']} | {guess.binding.values['d']:,} | {guess.binding.values['H']} | {n(guess.total)} | "
            f"{pct(Fraction(guess.total - 10**14, 10**14))} |", "",
            "## Alternating dense and banded attention", "",
            "The paper's \"alternating dense and locally banded sparse attention\" is the layer pattern `[global, local]` with a "
            "band of `band` tokens; the paper does not give the band, so it defaults to T (dense). A band is a mask, not a weight: "
            f"175B has {n(by['175b'].total)} parameters either way. Its FLOPs change: at S = 2048, `forward_matmul_causal` is "
            f"{n(dense.forward_matmul_causal)} with dense layers and {n(banded.forward_matmul_causal)} with `--set band=256`, while "
            f"`forward_matmul` (the full square torch counts) stays {n(dense.forward_matmul)}.", ""]
    return "\n".join(out)


def attention_page() -> str:
    spec = load_spec("gpt3")
    rows = [r for r in count_spec(spec)]
    bars, table = [], ["| size | attention | MLP | embeddings | norms | attention share |", "|---|---:|---:|---:|---:|---:|"]
    for r in rows:
        b = r.by_role
        emb = b.get("token_embedding", 0) + b.get("position_embedding", 0)
        parts = [("attention", b["attention"]), ("MLP", b["mlp"]), ("embeddings", emb), ("norms", b["norm"])]
        bars.append((r.size, parts))
        table.append(f"| {r.size} | {n(b['attention'])} | {n(b['mlp'])} | {n(emb)} | {n(b['norm'])} | {100 * b['attention'] / r.total:.1f}% |")
    return "\n".join(["# Attention is not all the parameters", "",
                      "Across GPT-3's sizes, the MLP holds about two thirds of the parameters and attention one third once the "
                      "embeddings stop mattering: per block, attention has 4·d² weights and the MLP 8·d².", "",
                      svg.stacked_bars(bars, "GPT-3 parameters by role"), "", *table, ""])


def head_page() -> str:
    spec = load_spec("gpt3")
    r = count_size(spec, "175b")
    v = r.binding.values
    d, H, dh, L = v["d"], v["H"], v["d_head"], v["L"]
    per_matrix = d * dh
    per_head = 4 * per_matrix
    block_attention = r.by_path["blocks.attn.qkv.weight"] // L + r.by_path["blocks.attn.out.weight"] // L
    return "\n".join([
        "# One attention head of GPT-3 175B, in numbers", "",
        f"GPT-3 175B has d_model = {d:,}, {H} heads of width {dh} and {L} layers. One head owns four {d:,} × {dh} slices of weights:", "",
        "| matrix | shape | parameters |", "|---|---|---:|",
        f"| W_Q (query) | {d:,} × {dh} | {n(per_matrix)} |", f"| W_K (key) | {d:,} × {dh} | {n(per_matrix)} |",
        f"| W_V (value \"down\" projection) | {d:,} × {dh} | {n(per_matrix)} |",
        f"| W_O slice (value \"up\", the output projection) | {dh} × {d:,} | {n(per_matrix)} |",
        f"| **one head** | | **{n(per_head)}** (about {per_head / 1e6:.1f}M) |", "",
        f"A block has {H} heads: {n(H * per_head)} attention weights (about {H * per_head / 1e6:,.0f}M; the IR's "
        f"`blocks.attn.qkv.weight` and `blocks.attn.out.weight` hold {n(block_attention)} per block). Across {L} layers that is "
        f"{n(L * H * per_head)} (about {L * H * per_head / 1e9:.0f}B) of the model's {n(r.total)} parameters, "
        f"{100 * L * H * per_head / r.total:.1f}%; the biases add {n(r.by_role['attention'] - L * H * per_head)}.", ""])


def spec_language_page(template: str) -> str:
    """The spec language page, with the expression grammar taken from the parser's own docstring and the keys'
    tables from the schema's own descriptions."""
    from archcalc.spec import expr

    grammar = [line.strip() for line in (expr.__doc__ or "").splitlines() if ":=" in line]
    return template.replace("<!-- grammar -->", "\n".join(grammar)).replace("<!-- keys -->", "\n".join(key_tables()))


def key_tables() -> list[str]:
    """A table of the keys of each part of a spec file (the file, a hyperparameter, a size, the model): required or
    its default, and what it is, from the pydantic schema's field descriptions."""
    from archcalc.spec.components import Model
    from archcalc.spec.schema import Hyperparameter, Size, Spec

    out = ["The keys at a glance (the sections below say more):", ""]
    parts = [("the file", Spec), ("a hyperparameter", Hyperparameter), ("a size", Size), ("`model:`", Model)]
    for what, schema in parts:
        out += [f"| keys of {what} | default | what it is |", "|---|---|---|"]
        for name, field in schema.model_fields.items():
            key = "*a hyperparameter's name*" if schema is Size and name == "values" else f"`{name}`"
            default = field.get_default(call_default_factory=True)
            shown = "required" if field.is_required() else "—" if default in (None, {}, [], "") else \
                f"`{str(default).lower() if isinstance(default, bool) else default}`"
            out.append(f"| {key} | {shown if len(shown) < 30 else 'see below'} | {field.description or ''} |")
        out.append("")
    return out


def models_index(specs: list) -> str:
    """Every bundled model and size: parameters, active parameters, context, KV cache a token, year, and a link to its
    page; a table the reader sorts by any column."""
    from html import escape

    from archcalc.site.model_page import context_of

    out = ["# Models", "", "One page per bundled spec, generated from `spec/` by `archcalc docs`: the architecture, an exact "
           "calculator, the formula, every size against its published figure, FLOPs, memory and the generated PyTorch "
           "module. *Active*: parameters one token uses (routed experts scaled by top-k / experts, embedding lookups "
           "excluded). *Context*: the length of the learned position table, where the spec has one (rotary, "
           "sinusoidal and relative positions fix no length). *KV a token*: the bytes of keys and values one more token "
           "adds to the cache in bfloat16, over all layers (state-space layers keep a fixed state instead: on each "
           "page). *Year*: of the source the spec cites. Press a column's header to sort by it.", "",
           '<div class="archcalc-sortable"><table><thead><tr><th>model</th><th>size</th><th>parameters</th><th>active</th>'
           "<th>context</th><th>KV a token</th><th>year</th></tr></thead><tbody>"]
    for spec in specs:
        year = source_year(spec.source)
        for r in count_spec(spec):
            context = context_of(r.binding)
            kv = memory(r.binding, 1, 1).kv_cache_bytes
            title = escape(spec.title or spec.name)
            cells = [(f'<a href="{spec.name}.html">{title}</a>', title.lower()), (escape(r.size), None),
                     (n(r.total), r.total), (n(r.active), r.active), (n(context) if context else "—", context),
                     (f"{kv:,} B" if kv else "—", kv or None), (str(year) if year else "—", year)]
            out.append("<tr>" + "".join(f"<td{'' if key is None else f' data-sort={chr(34)}{key}{chr(34)}'}>{text}</td>"
                                        for text, key in cells) + "</tr>")
    return "\n".join([*out, "</tbody></table></div>", ""])


def source_year(source: str | None) -> int | None:
    """The first year a spec's source names (its paper or model card), or None.

    >>> source_year("Zyphra 2024, The Zamba2 Suite (arXiv:2411.15242)")
    2024
    """
    import re

    found = re.search(r"(?<!\d)(19[5-9]\d|20\d\d)(?!\d)", source or "")
    return int(found.group(1)) if found else None


def conventions_page(template: str) -> str:
    """Fill the conventions template's {placeholders} with figures computed now."""
    gpt2 = load_spec("gpt2")
    f = flops(bind(gpt2, "small"), 1024, 1)
    f175 = flops(bind(load_spec("gpt3"), "175b"), 2048, 1)
    values = {
        "gpt2_forward": n(f.forward_matmul), "gpt2_train": n(f.train_step_matmul),
        "gpt2_palm": n(f.approximations["palm"]["train_step"]),
        "gpt2_fp32_weights": n(memory(bind(gpt2, "small"), 1024, 1, "float32").weights_bytes),
        "gpt2_nonmatmul_share": f"{100 * f.non_matmul_forward / f.forward_matmul:.2f}%",
        "gpt3_175b_6n_ratio": f"{f175.approximations['6N']['ratio']:.3f}",
        "gpt2_kaplan_ratio": f"{f.approximations['kaplan']['ratio']:.3f}",
        "gpt2_chinchilla_ratio": f"{f.approximations['chinchilla']['ratio']:.3f}",
        "gpt2_palm_error": f"{100 * abs(f.approximations['palm']['ratio'] - 1):.1f}%",
        "gpt2_head_share": f"{100 * f.by_role['lm_head'] / f.forward_matmul:.0f}%",
    }
    return template.format(**values)


def cli_page(build_parser: Callable[[], argparse.ArgumentParser]) -> str:
    """The command-line reference: the help of ``build_parser()`` and of each of its commands."""
    os.environ["COLUMNS"] = "100"  # argparse wraps help to the terminal: fix it so the page is the same everywhere
    parser = build_parser()
    action = next(a for a in parser._actions if a.dest == "command")
    out = ["# Command-line reference", "", "Generated from `archcalc --help` and each command's `--help`.", "",
           "```text", parser.format_help().rstrip(), "```", ""]
    for name, sub in action.choices.items():
        out += [f"## archcalc {name}", "", "```text", sub.format_help().rstrip(), "```", ""]
    return "\n".join(out)
