"""GPT-2 small, where every parameter goes: the token embedding, the positions, one block tensor by tensor, the
blocks, the final norm and the tied head, in each language. The figures are computed once from the IR (the
same count as ``archcalc count gpt2 --size small``) and put into every language's sentences.

>>> page = walkthrough_page("ja")
>>> page.startswith("# GPT-2 small") and "124,439,808" in page
True
"""

from __future__ import annotations

from functools import cache

import sympy

from archcalc.backends.count import CountResult, count_size, pretty
from archcalc.site.i18n import say
from archcalc.site.text import ident, n
from archcalc.site.words_gpt2 import WORDS
from archcalc.spec import load_spec
from archcalc.spec.bind import parse_overrides

PAPER = "117M"  # Radford et al. 2019, Table 2 (reported, cited)
SYMBOLS = ("V", "T", "L", "d", "H", "d_head", "d_ff")


@cache
def _counts() -> tuple[CountResult, CountResult]:
    """GPT-2 small, and the same with an untied head (computed once for the three languages)."""
    spec = load_spec("gpt2")
    return count_size(spec, "small"), count_size(spec, "small", parse_overrides(spec, ["tie_embeddings=false"]))


def _block_leaves(r: CountResult) -> list:
    """The tensors of one block (those repeated L times)."""
    return [leaf for leaf in r.leaves if str(leaf.repeat) == "L"]


def _per_block(r: CountResult, role: str | None = None) -> tuple[str, int]:
    """One block's parameters of ``role`` (all roles: None) as a formula in d (the defaults written out) and a number."""
    expr = sum((leaf.count / leaf.repeat for leaf in _block_leaves(r) if role in (None, leaf.tensor.role)), sympy.Integer(0))
    formula = sympy.expand(expr.xreplace(r.binding.generic_substitutions()))
    return f"`{pretty(formula)}`", int(expr.xreplace(r.binding.numeric()))


@cache
def values() -> dict[str, str]:
    """Every figure the sentences name, formatted once (the same strings in every language)."""
    r, untied = _counts()
    v = r.binding.values
    share = lambda x: f"{100 * x / r.total:.1f}%"  # noqa: E731
    tok, pos = r.by_role["token_embedding"], r.by_role["position_embedding"]
    block_formula, block = _per_block(r)
    out = {k: n(v[k]) for k in SYMBOLS} | {
        "total": n(r.total), "paper": PAPER, "tok": n(tok), "pos": n(pos), "emb": n(tok + pos), "emb_share": share(tok + pos),
        "block": n(block), "block_formula": block_formula, "blocks": n(v["L"] * block), "blocks_share": share(v["L"] * block),
        "final": n(int(sum(leaf.count for leaf in r.leaves if leaf.path.startswith("final_norm.")).xreplace(r.binding.numeric()))),
        "untied": n(untied.total - r.total), "untied_total": n(untied.total)}
    for role, key in (("attention", "attn"), ("mlp", "mlp"), ("norm", "norm")):
        out[f"{key}_formula"], number = _per_block(r, role)
        out[f"{key}_block"] = n(number)
    return out


def walkthrough_page(lang: str = "en") -> str:
    """The walkthrough in ``lang`` (``en``, ``ja`` or ``zh``)."""
    r, _ = _counts()
    values_ = values()

    def t(key: str) -> str:
        return say(WORDS, key, lang, **values_)

    return "\n".join([
        t("title"), "", t("intro"), "", t("hyper_head"), "", t("hyper"), "", *_symbol_table(r, t), "",
        t("emb_head"), "", t("emb"), "", t("block_head"), "", t("block"), "", *_block_table(r, t), "", t("block_parts"), "",
        t("blocks_head"), "", t("blocks"), "", t("end_head"), "", t("end"), "",
        t("total_head"), "", t("total"), "", *_total_table(r, t), "", t("formula"), "",
        "```bash", "archcalc count gpt2 --size small", "```", "", "```text", r.formula_text, "```", "", t("next"), ""])


def _symbol_table(r: CountResult, t) -> list[str]:
    rows = [f"| `{k}` | {t('sym_' + k)} | {n(r.binding.values[k])} |" for k in SYMBOLS]
    return [f"| {t('col_symbol')} | {t('col_meaning')} | {t('col_value')} |", "|---|---|---:|", *rows]


def _block_table(r: CountResult, t) -> list[str]:
    numeric = r.binding.numeric()
    out = [f"| {t('col_tensor')} | {t('col_shape')} | {t('col_formula')} | {t('col_parameters')} |", "|---|---|---|---:|"]
    for leaf in _block_leaves(r):
        shape = " × ".join(f"{int(s.xreplace(numeric)):,}" for s in leaf.tensor.shape)
        one = leaf.count / leaf.repeat
        out.append(f"| {ident(leaf.path)} | {shape} | `{pretty(one)}` | {n(int(one.xreplace(numeric)))} |")
    formula, block = _per_block(r)
    return out + [f"| **{t('one_block')}** | | {formula} | **{n(block)}** |"]


def _total_table(r: CountResult, t) -> list[str]:
    v = r.binding.values

    def share(x: int) -> str:  # the final norm's 1,536 is no 0.00% of the model
        return "—" if not x else f"{100 * x / r.total:.2f}%" if 10_000 * x >= r.total else "< 0.01%"

    _, block = _per_block(r)
    final = sum((leaf.count for leaf in r.leaves if leaf.path.startswith("final_norm.")), sympy.Integer(0))
    rows = [("part_token", "V·d", r.by_role["token_embedding"]), ("part_position", "T·d", r.by_role["position_embedding"]),
            ("part_blocks", f"L·({values()['block_formula'].strip('`')})", v["L"] * block), ("part_final", pretty(final), int(final.xreplace(r.binding.numeric()))),
            ("part_head", "—", r.by_role.get("lm_head", 0))]
    out = [f"| {t('col_part')} | {t('col_formula')} | {t('col_parameters')} | {t('col_share')} |", "|---|---|---:|---:|"]
    out += [f"| {t(key)} | {'—' if formula == '—' else f'`{formula}`'} | {n(x)} | {share(x)} |" for key, formula, x in rows]
    return out + [f"| **{t('part_total')}** | | **{n(r.total)}** | 100% |"]
