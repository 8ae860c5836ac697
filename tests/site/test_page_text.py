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


def test_only_an_encoder_decoder_draws_the_edge_into_cross_attention():
    """T5's decoder reads the encoder's output in its cross-attention: one edge from the encoder's last box into it;
    the decoder's input is its own tokens', so no line joins the two towers. A decoder-only model has no such edge."""
    t5 = architecture_svg(lowered("t5", "small"))
    assert t5.count('class="a-cross"') == 1 and t5.count('class="a-arrow"') == 1
    assert 'class="a-cross"' not in architecture_svg(lowered("gpt2", "small"))
    frames = [(float(y), float(y) + float(h)) for y, h in re.findall(r'y="([\d.]+)" width="[\d.]+" height="([\d.]+)" '
                                                                      r'rx="7" class="a-frame"', t5)]
    into = float(re.search(r'<path d="M[\d.]+,([\d.]+) l7', t5).group(1))
    assert len(frames) == 2 and frames[1][0] < into < frames[1][1]  # inside the decoder's frame of blocks


def test_the_models_index_sorts_by_numbers_and_links_each_page():
    """Every size a row of a sortable table whose cells carry the exact number to sort by (parameters, active, KV a
    token) and the cited source's year; each row links its model's page."""
    from archcalc.site.pages import models_index, source_year

    page = models_index([load_spec("llama"), load_spec("mamba")])
    rows = re.findall(r"<tr>(.*?)</tr>", page)[1:]
    assert len(rows) == len(load_spec("llama").sizes) + len(load_spec("mamba").sizes)
    first = re.findall(r"<td(?: data-sort=\"([^\"]*)\")?>(.*?)</td>", rows[0])
    total = count(bound("llama", "2-7b")).total
    assert first[0][1].startswith('<a href="llama.html">') and first[2] == (str(total), f"{total:,}")
    kv = 32 * 2 * 32 * 128 * 2  # Llama 2 7B: 32 layers, K and V, 32 heads of 128, bfloat16
    assert first[5] == (str(kv), f"{kv:,} B")
    assert first[6][0] == str(source_year(load_spec("llama").source))
    mamba = re.findall(r"<td(?: data-sort=\"([^\"]*)\")?>(.*?)</td>", rows[-1])
    assert mamba[5] == ("", "—")  # no attention: a fixed state, no cache that grows by the token


def test_a_model_page_links_the_papers_it_cites():
    from archcalc.site.text import cited

    assert cited("Gu & Dao 2023, Mamba (arXiv:2312.00752); HF MambaForCausalLM") == \
        "Gu & Dao 2023, Mamba ([arXiv:2312.00752](https://arxiv.org/abs/2312.00752)); HF MambaForCausalLM"
    assert cited("a model card, no paper") == "a model card, no paper"


def test_the_site_follows_the_readers_light_or_dark_setting_with_a_toggle():
    from archcalc.site.project import CONFIG

    assert "scheme: slate" in CONFIG and CONFIG.count("toggle:") == 2 and "prefers-color-scheme: dark" in CONFIG


def test_the_spec_language_page_has_every_key_with_what_it_is():
    """The key tables come from the schema: every field of the file, a hyperparameter, a size and model: is a row
    with its description (a field added without one fails here)."""
    from archcalc.site.pages import key_tables
    from archcalc.spec.components import Model
    from archcalc.spec.schema import Hyperparameter, Size, Spec

    text = "\n".join(key_tables())
    for schema in (Spec, Hyperparameter, Size, Model):
        for name, field in schema.model_fields.items():
            assert field.description, (schema.__name__, name)
            assert f"| {field.description} |" in text
    assert "| `name` | required |" in text and "| `type` | `int` |" in text


def test_the_navigation_groups_a_model_by_its_layers():
    """A model is among the mixtures of experts for its routed experts, not for having fewer active parameters than
    all: GPT-2's position table is inactive too (GPT-2 was once listed among the mixtures)."""
    from archcalc.backends.count import count_spec
    from archcalc.site.model_page import GROUPS, model_group

    def group(name):
        spec = load_spec(name)
        return model_group(spec, count_spec(spec)[0])

    assert [group(name) for name in ("gpt2", "mixtral", "jamba", "t5")] == list(GROUPS)
