"""One page per spec: what the model is, its architecture, an exact calculator, its formula and sizes,
where the parameters and FLOPs go, memory, and the generated PyTorch source. Every number comes from
the IR when the page is built."""

from __future__ import annotations

from html import escape

import sympy

from archcalc.backends.count import CountResult, count_spec, leading_term, pretty
from archcalc.backends.flops import flops
from archcalc.ir import lower
from archcalc.ir.attrs import MoE
from archcalc.site import mathml
from archcalc.site.calculator import calculator_html
from archcalc.site.charts import context_of_size, memory_chart, scaling_section
from archcalc.site.diagram import architecture_svg
from archcalc.site.model_sections import breakdown_section, flops_section, memory_section, source_section
from archcalc.site.roofline import roofline_section
from archcalc.site.text import cited, md, n
from archcalc.spec import Spec
from archcalc.spec.bind import Binding

DEFAULT_SEQ = 2048  # FLOPs and memory are shown at the model's context, or at this when the spec has none


def context_of(binding: Binding) -> int | None:
    """The context length the spec fixes: the rows of a learned position table (None for rotary, sinusoidal
    and relative positions, which have no table)."""
    table = lower(binding).root.find("embed.position")
    if table is None or not table.tensors:
        return None
    return int(table.tensors[0].shape[0].xreplace(binding.numeric()))


def page_seq(binding: Binding) -> tuple[int, str]:
    """The sequence length S the page's FLOPs and memory use, and how to say where it comes from."""
    context = context_of(binding)
    if context is not None:
        return context, f"S = {context:,} tokens, the context"
    return DEFAULT_SEQ, f"S = {DEFAULT_SEQ:,} tokens (the spec fixes no context: its positions need no table)"


def model_page(spec: Spec, file_label: str, groups: dict[str, str] | None = None) -> str:
    """The page of a bundled spec; ``groups`` (if given) learns its group in the navigation (:func:`model_group`)."""
    results = count_spec(spec)
    first, last = results[0], results[-1]
    if groups is not None:
        groups[spec.name] = model_group(spec, first)
    seq, seq_text = page_seq(first.binding)
    out = [f"# {spec.title or spec.name}", ""]
    if spec.source:
        out += [f"**Source:** {cited(spec.source)}  ", f"**Spec:** `{file_label}` — `archcalc count {spec.name}`", ""]
    # the calculator first: what most readers come for (the architecture, notes and tables follow)
    out += ["## Calculator", "", f"Type any value: the counts follow exactly, as `archcalc count {spec.name} --set NAME=VALUE` "
            "computes them (an empty field takes the size's value or the default shown in grey; the FLOPs are "
            "for a training step of one sequence of S tokens); for a size as published, the memory and the inference "
            "roofline of a run too, as `archcalc memory` and `archcalc infer` print them. Enter or Update recomputes. "
            "It runs in the page: no server, no rounding.", "", calculator_html(spec, seq), ""]
    if spec.notes:
        out += [md(spec.notes.strip()), ""]
    out += _architecture_section(spec, first, seq)
    out += _formula_section(results, last)
    out += _sizes_section(results)
    out += breakdown_section(first)
    figures = [flops(r.binding, seq, 1, counted=r) for r in results]  # the FLOPs table's and the charts'
    out += flops_section(results, seq, seq_text, figures)
    out += scaling_section(results, seq, seq_text, figures)
    out += memory_section(results, seq, seq_text)
    out += memory_chart(first, context_of_size(first.binding, context_of(first.binding), seq))
    out += roofline_section(spec)
    out += source_section(spec, first)
    return "\n".join(out).rstrip() + "\n"


GROUPS = ("Dense decoders", "Mixtures of experts", "Hybrids and state-space models", "Encoders and encoder-decoders")


def model_group(spec: Spec, first: CountResult) -> str:
    """Where the model sits among the models: an encoder (or encoder-decoder); with state-space or linear-attention
    layers; with routed experts; else a dense decoder. (Not "fewer active parameters than in all": a dense model's
    position table is inactive too, which put GPT-2 among the mixtures.)"""
    if spec.model.architecture != "decoder":
        return GROUPS[3]
    if first.by_role.get("mixer", 0):
        return GROUPS[2]
    routed = any(isinstance(node.attrs, MoE) for _, node in lower(first.binding).root.walk())
    return GROUPS[1] if routed else GROUPS[0]


def _architecture_section(spec: Spec, first: CountResult, seq: int) -> list[str]:
    symbols = "".join(f"<dt><code>{name}</code></dt><dd>{escape(hp.doc or ('switch' if hp.type == 'bool' else 'hyperparameter'))}</dd>"
                      for name, hp in spec.hyperparameters.items())
    symbols += "<dt><code>S</code></dt><dd>tokens per sequence (FLOPs, memory)</dd>"
    legend = (f'<div class="archcalc-legend"><p><strong>Symbols</strong> (their values for each size are in '
              f'<a href="#sizes">Sizes</a>):</p><dl>{symbols}</dl></div>')
    return [f"## Architecture — size {first.size}", "",
            "One block of each stack, in the order the residual stream runs through it (each + adds a sublayer's "
            "output back to its input); every box gives the parameters of one copy.", "",
            f'<div class="archcalc-arch">{architecture_svg(lower(first.binding))}{legend}</div>', ""]


def _formula_section(results: list[CountResult], last: CountResult) -> list[str]:
    out = ["## Parameters", ""]
    seen: dict[str, list[str]] = {}
    for r in results:
        seen.setdefault(r.formula_text, []).append(r.size)
    for text, sizes in seen.items():
        r = next(x for x in results if x.formula_text == text)
        label = "" if len(seen) == 1 else f" (sizes {', '.join(sizes)})"
        out += [f"The count{label}, in the hyperparameters the sizes give:", "",
                f'<div class="archcalc-formula" tabindex="0">{mathml.block(collected(r))}</div>', "",
                "As text and as TeX:", "", "```text", text, "```", "", "```tex", r.formula_latex, "```", ""]
    out += _leading_term(last)
    return out


def own_leading(result: CountResult) -> tuple[sympy.Expr, int]:
    """The leading term of this size's own formula and its value: the terms worth at least a tenth of the largest at
    this size (count's rule), with only the hyperparameters that follow their default here written as it (d_head =
    d / H). The family's generic leading term assumes every default (KV = H), which a size can leave far behind: then
    its share of the count passes 100%."""
    numeric = result.binding.numeric()
    follows = {k: v for k, v in result.binding.generic_substitutions().items()
               if k in numeric and v.xreplace(numeric) == numeric[k]}
    formula = result.formula.xreplace(follows)
    leading = leading_term(formula, at=numeric)
    # a term the formula subtracts from a leading one (3·E·L_dense·d·d_expert from 3·E·L·d·d_expert: the dense layers
    # have no experts) belongs with it, or the share passes 100%
    kept = sympy.Add.make_args(leading)
    leading += sympy.Add(*(t for t in sympy.Add.make_args(sympy.expand(formula)) if t not in kept and t.could_extract_minus_sign()
                           and any(_same_degree(t / k) for k in kept)))
    return leading, int(sympy.floor(leading.xreplace(numeric)))


def _same_degree(ratio: sympy.Expr) -> bool:
    """A ratio of monomials of the same degree in one symbol each (L_dense / L)."""
    powers = {b: e for b, e in ratio.as_powers_dict().items() if isinstance(b, sympy.Symbol)}
    return len(powers) == 2 and sum(powers.values()) == 0


def _leading_term(last: CountResult) -> list[str]:
    leading, value = own_leading(last)
    share = 100 * value / last.total if last.total else 0
    text = f"Leading term for large sizes: `{pretty(leading)}`, {share:.1f}% of the count of size {last.size}."
    numeric = last.binding.numeric()
    terms = [(t, int(sympy.floor(t.xreplace(numeric)))) for t in sympy.Add.make_args(sympy.expand(last.formula))]
    negative = sorted((tv for tv in terms if tv[1] < 0), key=lambda tv: tv[1])
    if share > 100 and negative:
        term, value = negative[0]
        docs = last.binding.spec.hyperparameters
        new = sorted(str(s) for s in term.free_symbols - leading.free_symbols if str(s) in docs)
        why = "; ".join(f"{s}: {docs[s].doc}" for s in new if docs[s].doc)
        text += (f" It is more than the count because the formula also subtracts terms too small to list beside it, the "
                 f"largest `{pretty(-term)}` = {n(-value)} ({100 * -value / last.total:.1f}% of the count"
                 + (f"; {md(why)}" if why else "") + ").")
    elif share < 100:
        text += " The rest is lower-order terms: embeddings, biases, norms and the like."
    # the term as a formula block (its own scroll on a phone: a long leading term is wider than the column)
    return [text, "", f'<div class="archcalc-formula" tabindex="0">{mathml.block(leading)}</div>', ""]


def collected(r: CountResult) -> sympy.Expr:
    """The formula expanded and collected by the block counts (L), as the command line prints it."""
    from archcalc.backends.count import _repeat_symbols, collected_formula

    return collected_formula(r.formula, _repeat_symbols(r.leaves))


def _sizes_section(results: list[CountResult]) -> list[str]:
    spec = results[0].binding.spec
    shown: list[str] = []
    for r in results:
        for name in spec.sizes[r.size].values if r.size in spec.sizes else {}:
            if name not in shown:
                shown.append(name)
    out = ["## Sizes", "", "The hyperparameters each size sets (the others take their defaults):", "",
           "| size | " + " | ".join(f"`{k}`" for k in shown) + " |", "|---|" + "---:|" * len(shown)]
    for r in results:
        values = r.binding.values
        out.append(f"| {r.size} | " + " | ".join(str(values[k]).lower() if isinstance(values[k], bool) else n(values[k]) for k in shown) + " |")
    out += ["", "What they count:", "", "| size | parameters (computed) | active | reported (cited) | error |", "|---|---:|---:|---:|---:|"]
    for r in results:
        err = f"{100 * float(r.rel_error):+.2f}%" if r.rel_error is not None else "—"
        out.append(f"| {r.size} | {n(r.total)} | {n(r.active)} | {n(r.reported)} | {err} |")
    out += ["", "*Reported* figures are cited from the source as published (often rounded); every other number on "
            "this page is computed from the spec when the page is built. *Active*: parameters one token uses "
            "(routed experts scaled by top-k / experts, embedding lookups excluded, head included).", ""]
    warnings = [(r.size, w) for r in results for w in r.warnings]
    if warnings:
        out += ['!!! warning "The spec disagrees with itself"', ""]
        out += [f"    - **{size}**: {w}" for size, w in warnings]
        out.append("")
    return out
