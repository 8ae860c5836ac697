"""Small text helpers shared by the generated pages: numbers, escaping, identifiers that break only at dots.

>>> n(1234567), md("a*b `c`"), ident("blocks.attn.qkv.weight")
('1,234,567', 'a\\\\*b <code>c</code>', '<code class="archcalc-id">blocks.<wbr>attn.<wbr>qkv.<wbr>weight</code>')
"""

from __future__ import annotations

from html import escape

ROLE_NAMES = {"token_embedding": "token embedding", "position_embedding": "position embedding", "attention": "attention",
              "mixer": "state mixers (state-space, linear attention, short conv)", "mlp": "MLP (feed-forward)",
              "norm": "norms", "lm_head": "LM head", "other": "other"}


def n(x: int | None) -> str:
    """An exact integer with thousands separators (— for none)."""
    return "—" if x is None else f"{x:,}"


def md(text: str) -> str:
    """Text from a spec (notes, sources) as Markdown: characters Markdown or HTML would read are escaped,
    except `code spans`, which the spec author wrote as code and which become <code> elements."""
    parts = text.split("`")
    if len(parts) % 2 == 0:  # an unpaired backtick: show every backtick as written
        return " ".join(_plain(text).split())
    out = []
    for i, part in enumerate(parts):
        out.append(f"<code>{escape(part)}</code>" if i % 2 else _plain(part))
    return " ".join("".join(out).split())


def cited(text: str) -> str:
    """A spec's source as Markdown (:func:`md`), each arXiv identifier a link to its paper.

    >>> cited("Vaswani et al. 2017 (arXiv:1706.03762)")
    'Vaswani et al. 2017 ([arXiv:1706.03762](https://arxiv.org/abs/1706.03762))'
    """
    import re

    return re.sub(r"arXiv:(\d{4}\.\d{4,5})(v\d+)?", r"[arXiv:\1\2](https://arxiv.org/abs/\1\2)", md(text))


def _plain(text: str) -> str:
    for ch in "\\`*_{}[]<>#|":
        text = text.replace(ch, "\\" + ch)
    return text


def ident(name: str) -> str:
    """An identifier as inline code that may wrap after a dot but never inside a word (HTML, for tables)."""
    return '<code class="archcalc-id">' + ".<wbr>".join(escape(part) for part in name.split(".")) + "</code>"
