"""What the model pages say, checked for every bundled spec without building the site: no leading-term share above
100%, no word twice in a row in a diagram label, no absolute path in the committed docs."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from archcalc.backends.count import count
from archcalc.site.diagram import architecture_svg
from archcalc.site.model_page import own_leading
from archcalc.spec import load_spec
from archcalc.spec.library import bundled_names
from tests.helpers import bound, lowered

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("name", bundled_names())
def test_the_leading_term_is_at_most_the_count(name):
    """The leading term is taken of each size's own formula (Llama 3's KV = 8, not the family default KV = H), with
    the terms it subtracts (DeepSeek's dense layers have no experts): its share is at most 100%, and more than half."""
    for size in load_spec(name).sizes:
        result = count(bound(name, size))
        _, value = own_leading(result)
        assert result.total // 2 < value <= result.total, (size, value, result.total)


@pytest.mark.parametrize("name", bundled_names())
def test_no_word_twice_in_a_diagram_label(name):
    spec = load_spec(name)
    svg = architecture_svg(lowered(name, list(spec.sizes)[-1]))
    for label in re.findall(r">([^<>]+)</text>", svg):
        words = label.split()  # "blocks, blocks" (a list of stacks) is no repetition: the comma stays with its word
        assert not any(a == b and a.isalpha() for a, b in zip(words, words[1:], strict=False)), label


def test_the_committed_docs_hold_no_absolute_path():
    """Built anywhere, the pages say the same: no path of the machine that built them (the repository's, or any
    home or temporary folder)."""
    found = {}
    for page in (ROOT / "docs").rglob("*.md"):
        text = page.read_text(encoding="utf-8")
        hits = [p for p in (str(ROOT), "/home/", "/root/", "/tmp/", "/Users/") if p in text]
        if hits:
            found[page.relative_to(ROOT).as_posix()] = hits
    assert not found, found
