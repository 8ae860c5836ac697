"""The pages in Japanese and Chinese (the home page, the tutorial, the GPT-2 walkthrough): every sentence has a
text in every language, the translated pages show the very numbers and code blocks of the English page, no
English prose is left in them, and the site links them (the navigation, and each page to its other languages).

The committed pages are read (test_site checks that they are what 'archcalc docs' writes now)."""

from __future__ import annotations

import re
from collections import Counter

import pytest

from archcalc.site import machine_independent, words_gpt2, words_home, words_nav, words_tutorial
from archcalc.site.i18n import LANGUAGES, TRANSLATED, missing, page_path, switcher

from .conftest import ROOT

DOCS = ROOT / "docs"
OTHERS = [lang for lang in LANGUAGES if lang != "en"]
FENCE = re.compile(r"^```[^\n]*\n(.*?)^```$", re.M | re.S)
NUMBER = re.compile(r"(?<![A-Za-z_0-9.,])[0-9](?:[0-9,.]*[0-9])?")  # not the digits of a name (Mamba2, float32)
CJK = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uff01-\uff5e]")


def _page(name: str, lang: str) -> str:
    """The page as written, its machine-dependent output masked (timings: each language's page keeps its own run's
    figures, a run rewriting only the pages whose words changed)."""
    text = (DOCS / page_path(name, lang)).read_text(encoding="utf-8")
    return machine_independent(text.split("\n", 1)[1])  # the marker line names a content hash, different in each language


def _prose(page: str) -> str:
    """The page without its code blocks, heading anchors, HTML tags and link targets."""
    text = re.sub(r"\{ #[^}]*\}|<[a-z/!][^>]*>", "", FENCE.sub("", page))
    return re.sub(r"\]\([^)]*\)", "]", text)


@pytest.mark.parametrize("table", [words_home.WORDS, words_tutorial.WORDS, words_gpt2.WORDS, words_nav.TITLES])
def test_every_message_has_every_language_with_the_same_placeholders(table):
    assert not missing(table)


@pytest.mark.parametrize("lang", OTHERS)
@pytest.mark.parametrize("name", TRANSLATED)
def test_a_translation_has_the_english_pages_code_blocks_and_numbers(name, lang):
    english, translated = _page(name, "en"), _page(name, lang)
    assert FENCE.findall(translated) == FENCE.findall(english)
    ours, theirs = Counter(NUMBER.findall(_prose(translated))), Counter(NUMBER.findall(_prose(english)))
    assert ours == theirs, f"only in {lang}: {ours - theirs}; only in English: {theirs - ours}"


@pytest.mark.parametrize("lang", OTHERS)
@pytest.mark.parametrize("name", TRANSLATED)
def test_no_english_sentence_is_left_in_a_translation(name, lang):
    """A line of prose with three English words in a row and no Japanese or Chinese is a sentence left untranslated
    (code, HTML tags, identifiers and link targets aside)."""
    left = []
    for line in _prose(_page(name, lang)).splitlines():
        words = re.sub(r"`[^`]*`", " ", line)
        if re.search(r"[A-Za-z]{2,}[ ,]+[A-Za-z]{2,}[ ,]+[A-Za-z]{2,}", words) and not CJK.search(words):
            left.append(line)
    assert not left, left[:5]


@pytest.mark.parametrize("lang", OTHERS)
def test_a_translation_says_its_language_and_keeps_the_english_anchors(lang):
    page = _page("tutorial.md", lang)
    assert page.startswith(f'<div lang="{lang}" markdown="1">')
    assert "{ #1-an-empty-file }" in page and "{ #7-a-hybrid-mamba2-layers-and-attention }" in page
    assert "](../conventions.md)" in page and "](../models/index.md)" in page  # English-only pages, one folder up


def test_the_site_links_every_translation():
    """Each page leads to its other languages, and the navigation has a section per language."""
    config = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    for lang, name in LANGUAGES.items():
        for page in TRANSLATED:
            assert f": {page_path(page, lang)}\n" in config, (lang, page)
            assert f"\n{switcher(page, lang)}\n" in _page(page, lang), (lang, page)
        assert lang == "en" or f'- "{name}":' in config
