"""The pages in Japanese and Chinese as well as English: the home page, the tutorial and the GPT-2 walkthrough.

A page's sentences live in a message table (key -> one text per language, with ``{placeholders}``); its numbers,
formulas, code blocks and command outputs are computed once by the page's code and put into each language's
sentences, so the three pages can differ only in their words. A translated page sits under ``docs/ja/`` or
``docs/zh/``: its links to pages that exist only in English get a ``../``, and its content is wrapped in an
element carrying its language (``lang``, for fonts, line breaking and screen readers: mkdocs-material gives
the whole site one ``<html lang>``). Each of the three pages links to its other languages under its title
(:func:`switcher`), and the navigation has a section per language.

>>> table = {"hi": {"en": "See [the CLI](cli.md), [the tutorial](tutorial.md).", "ja": "[CLI](cli.md) と [チュートリアル](tutorial.md)。",
...                 "zh": "见 [CLI](cli.md) 与 [教程](tutorial.md)。"}}
>>> say(table, "hi", "ja")
'[CLI](../cli.md) と [チュートリアル](tutorial.md)。'
>>> say({"n": {"en": "{x} parameters", "ja": "{x} 個のパラメータ", "zh": "{x} 个参数"}}, "n", "zh", x="124,439,808")
'124,439,808 个参数'
"""

from __future__ import annotations

import re

LANGUAGES = {"en": "English", "ja": "日本語", "zh": "中文"}  # code -> its own name, as the selector shows it
TRANSLATED = ("index.md", "tutorial.md", "gpt2-parameters.md")  # pages written in every language
Messages = dict[str, dict[str, str]]

# a Markdown link to a page of the site (not an absolute address, not an anchor on the same page)
_LINK = re.compile(r"\]\((?![a-z]+:|#|\.\./)([^)#\s]+\.md)(#[^)\s]*)?\)")


def say(table: Messages, key: str, lang: str, **values: str) -> str:
    """Message ``key`` of ``table`` in ``lang``, its placeholders filled with ``values`` (already formatted: the
    same strings in every language), its links made right for the page's folder."""
    text = relink(table[key][lang].format(**values) if values else table[key][lang], lang)
    if lang != "en" and text.startswith("#"):  # a heading keeps the English page's anchor: links work in every language
        text += f" {{ #{slug(table[key]['en'].format(**values))} }}"
    return text


def slug(heading: str) -> str:
    """The anchor Python-Markdown's toc gives an English heading (its default slugify).

    >>> slug("## 7. A hybrid: Mamba2 layers and attention")
    '7-a-hybrid-mamba2-layers-and-attention'
    """
    text = re.sub(r"[^\w\s-]", "", heading.lstrip("#").encode("ascii", "ignore").decode()).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def relink(text: str, lang: str) -> str:
    """Links from a page under ``docs/LANG/``: to the same page in LANG when it is translated, else to English."""
    if lang == "en":
        return text
    return _LINK.sub(lambda m: f"]({m.group(1) if m.group(1) in TRANSLATED else '../' + m.group(1)}{m.group(2) or ''})", text)


def page_path(name: str, lang: str) -> str:
    """Where page ``name`` of language ``lang`` goes under ``docs/``.

    >>> page_path("tutorial.md", "en"), page_path("tutorial.md", "zh")
    ('tutorial.md', 'zh/tutorial.md')
    """
    return name if lang == "en" else f"{lang}/{name}"


def in_language(page: str, lang: str, name: str) -> str:
    """Page ``name`` in ``lang`` as written: the line that leads to its other languages under its title, and, translated,
    inside an element that says its language (md_in_html keeps it Markdown)."""
    title, rest = page.split("\n", 1)
    page = f"{title}\n\n{switcher(name, lang)}\n{rest}"
    if lang == "en":
        return page
    return f'<div lang="{lang}" markdown="1">\n\n{page.rstrip()}\n\n</div>\n'


def switcher(name: str, lang: str) -> str:
    """Links to page ``name`` in the other languages, from its page in ``lang`` (in the page, not mkdocs-material's
    ``extra.alternate`` selector: that fetches each language's ``sitemap.xml`` on every page, which a single site
    does not have and which a site opened from disk may not fetch).

    >>> switcher("tutorial.md", "ja")
    '[English](../tutorial.md) · **日本語** · [中文](../zh/tutorial.md)'
    """
    up = "" if lang == "en" else "../"
    return " · ".join(f"**{own}**" if other == lang else f"[{own}]({up}{page_path(name, other)})"
                      for other, own in LANGUAGES.items())


def missing(table: Messages) -> list[str]:
    """Keys of ``table`` without a text in every language, or whose texts name other placeholders than English.

    >>> missing({"a": {"en": "{x} b", "ja": "{x} ビ", "zh": "{y} 比"}, "c": {"en": "d"}})
    ['a: zh', 'c: ja', 'c: zh']
    """
    out = []
    for key, texts in table.items():
        names = set(re.findall(r"\{(\w+)\}", texts.get("en", "")))
        out += [f"{key}: {lang}" for lang in LANGUAGES
                if lang not in texts or set(re.findall(r"\{(\w+)\}", texts[lang])) != names]
    return out
