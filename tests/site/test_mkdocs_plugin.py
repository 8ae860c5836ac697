"""The mkdocs plugin of the docs projects: generated elements skip Markdown and the search index, and the pages come
out as they would without it."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

plugin = pytest.importorskip("archcalc.site.mkdocs_plugin", exc_type=ImportError)
ROOT = Path(__file__).resolve().parents[2]

CALC = '<div class="archcalc-calc"><form><label>d <input name="d"></label></form><div>x</div></div>'
CHART = '<svg class="archcalc-chart" role="img"><title>Loss *by* role</title><text>mlp_head</text></svg>'


def test_each_generated_element_alone_on_its_line_is_taken_and_put_back():
    text = f"# Title\n\n{CALC}\n\nProse.\n\n{CHART}\n"
    deferred, blocks = plugin.defer(text)
    assert blocks == [CALC, CHART]
    assert deferred == '# Title\n\n<div data-archcalc-block="0"></div>\n\nProse.\n\n<div data-archcalc-block="1"></div>\n'
    assert plugin.restore(deferred, blocks) == text


@pytest.mark.parametrize("text", [
    f"```html\n{CALC}\n```",  # shown as code
    f"~~~~\n\n{CALC}\n\n~~~~",  # in a fence of tildes, with blank lines around it
    f"Prose.\n{CALC}",  # continues a paragraph
    f"{CALC}\nProse.",  # continued by one
    '<div class="archcalc-calc" markdown="1">**bold**</div>',  # Markdown inside: Markdown must read it
    '<div class="archcalc-calc"><div>one</div>',  # does not close what it opens
    '<div class="archcalc-calc"></div><p>and more</p>',  # ends with another element
    '<div class="admonition"><p>x</p></div>',  # not one of ours
    '    <div class="archcalc-calc"></div>',  # indented: code, or inside a list
])
def test_anything_else_is_left_to_markdown(text):
    assert plugin.defer(text) == (text, [])


def test_a_line_after_a_closed_fence_is_taken_again():
    text = f"```\ncode\n```\n\n{CALC}"
    assert plugin.defer(text)[1] == [CALC]


def _build(tmp_path: Path, page: str, plugins: list[str]) -> tuple[Path, dict]:
    from mkdocs.commands.build import build
    from mkdocs.config import load_config

    project = tmp_path / "-".join(plugins)
    (project / "docs").mkdir(parents=True)
    (project / "docs" / "index.md").write_text(page, encoding="utf-8")
    config = {"site_name": "t", "docs_dir": "docs", "use_directory_urls": False,
              "theme": {"name": "material", "font": False}, "plugins": plugins,
              "markdown_extensions": ["attr_list", "md_in_html", "tables", "toc", "pymdownx.details", "pymdownx.superfences"]}
    (project / "mkdocs.yml").write_text(json.dumps(config), encoding="utf-8")  # JSON is YAML
    build(load_config(str(project / "mkdocs.yml"), site_dir=str(project / "site")))  # not strict: the page links the site's other pages
    index = json.loads((project / "site" / "search" / "search_index.json").read_text(encoding="utf-8"))
    return project / "site" / "index.html", index


def test_a_model_page_builds_the_same_without_its_elements_in_the_search_index(tmp_path):
    pytest.importorskip("material")
    page = (ROOT / "docs" / "models" / "gpt2.md").read_text(encoding="utf-8")
    page += f"\n\n```text\n{CALC}\n```\n\n{CHART}\n"
    plain, plain_index = _build(tmp_path, page, ["search"])
    deferred, deferred_index = _build(tmp_path, page, ["search", "archcalc"])

    def same(html: str) -> str:  # Markdown puts a bare <svg> in a paragraph of its own; spaces between tags
        return re.sub(r">\s+<", "><", re.sub(r"<p>(<svg class=\"archcalc-chart\".*?</svg>)</p>", r"\1", html, flags=re.S))

    html = deferred.read_text(encoding="utf-8")
    assert "data-archcalc-block" not in html and html.count('<div class="archcalc-calc"') == 1
    assert "&lt;div class=&quot;archcalc-calc&quot;" in html  # the fenced copy stays code
    assert "<title>Loss *by* role</title>" in html  # not read as Markdown emphasis
    assert same(html) == same(plain.read_text(encoding="utf-8").replace("Loss <em>by</em> role", "Loss *by* role"))

    def text(index: dict) -> str:
        return " ".join(doc["text"] for doc in index["docs"])

    assert "mlp_head" in text(plain_index) and "mlp_head" not in text(deferred_index)  # a chart's label
    assert "<mi>" not in text(deferred_index)
    titles = [doc["title"] for doc in deferred_index["docs"]]
    assert titles == [doc["title"] for doc in plain_index["docs"]]  # every section is still found
    assert "Radford et al. 2019" in text(deferred_index)  # the prose is
