"""The mkdocs plugin that every ``archcalc docs`` project lists (``plugins: [search, archcalc, ...]``): the HTML the
pages carry ready-made skips the two HTML parsers of a build.

A model page holds about 100 kB of generated HTML (the calculator's form and data, SVG diagrams and charts, MathML
formulas), each element one line of the page's Markdown. Python-Markdown's raw-HTML reader (md_in_html) and
Material's search index parse every tag of it with Python's ``html.parser``: together more than a third of a strict
build (11.4 s against 8.4 s for the 92 pages with it). This plugin takes each such line out of the Markdown before it
is converted, leaving an empty placeholder element in its place, and puts it back after the search plugin has indexed
the page. The pages' HTML is the same but for one thing: a chart that is a bare ``<svg>`` is no longer wrapped in a
``<p>`` of its own, since Markdown never sees it (nor runs its inline patterns over the chart's text). The search
index no longer holds the figures' labels, the formulas' symbols or the calculator: text that read as noise there
(each formula is also given as plain text, which is indexed).

A line is taken only when it is one whole element the pages generate: it starts a block (a blank line or the file's
edge before and after it) outside any fenced code, opens ``<div class="archcalc-...`` or ``<svg class="archcalc-...``
without a ``markdown`` attribute, ends with that element's closing tag and closes as many as it opens.

>>> text, blocks = defer('# T\\n\\n<div class="archcalc-x"><b>1</b></div>\\n\\nmore')
>>> text
'# T\\n\\n<div data-archcalc-block="0"></div>\\n\\nmore'
>>> restore('<h1>T</h1>\\n<div data-archcalc-block="0"></div>', blocks)
'<h1>T</h1>\\n<div class="archcalc-x"><b>1</b></div>'
"""

from __future__ import annotations

import re

from mkdocs.plugins import BasePlugin, event_priority

PLACEHOLDER = '<div data-archcalc-block="{}"></div>'
_PLACEHOLDER = re.compile(r'<div data-archcalc-block="(\d+)"></div>')
_ROOT = re.compile(r'<(div|svg) class="archcalc-[^"]*"[^>]*>')
_FENCE = re.compile(r" {0,3}(`{3,}|~{3,})")


def defer(markdown: str) -> tuple[str, list[str]]:
    """``markdown`` with each generated element's line replaced by a placeholder, and the lines taken out, in order."""
    lines = markdown.split("\n")
    blocks: list[str] = []
    fence = ""
    for i, line in enumerate(lines):
        opened = _FENCE.match(line)
        if fence:
            if opened and opened.group(1)[0] == fence[0] and len(opened.group(1)) >= len(fence) and not line[opened.end():].strip():
                fence = ""
            continue
        if opened:
            fence = opened.group(1)
            continue
        alone = (i == 0 or not lines[i - 1].strip()) and (i == len(lines) - 1 or not lines[i + 1].strip())
        if alone and _whole_element(line):
            lines[i] = PLACEHOLDER.format(len(blocks))
            blocks.append(line)
    return "\n".join(lines), blocks


def _whole_element(line: str) -> bool:
    root = _ROOT.match(line)
    if root is None or " markdown" in root.group(0):
        return False
    tag = root.group(1)
    return line.endswith(f"</{tag}>") and len(re.findall(rf"<{tag}[\s>]", line)) == line.count(f"</{tag}>")


def restore(html: str, blocks: list[str]) -> str:
    """``html`` with each placeholder replaced by the element it stands for."""
    return _PLACEHOLDER.sub(lambda m: blocks[int(m.group(1))], html)


class ArchcalcPlugin(BasePlugin):
    """``defer`` before a page's Markdown is converted; ``restore`` after the search plugin has read the page."""

    def __init__(self):
        self.blocks: dict[str, list[str]] = {}

    def on_page_markdown(self, markdown, *, page, config, files):
        text, self.blocks[page.file.src_uri] = defer(markdown)
        return text

    @event_priority(-100)  # after every plugin at the default priority, the search plugin among them
    def on_page_context(self, context, *, page, config, nav):
        page.content = restore(page.content, self.blocks.pop(page.file.src_uri, []))
        return context
