"""A Markdown extension for the API page: docstrings are written for Sphinx and doctest, not Markdown.

- A doctest example (``>>>`` lines and their output) becomes a fenced ``pycon`` block; left alone,
  Markdown reads each ``>`` as a nested quote and runs the example into one line.
- Sphinx roles (``:class:`Spec```, ``:func:`~archcalc.spec.load_spec```) become inline code.

Fenced code blocks pass through untouched. Named in mkdocs.yml as ``archcalc.site.mdext``.

>>> convert(["Counts:", ">>> 1 + 1", "2", "", "See :class:`Spec`."])
['Counts:', '', '```pycon', '>>> 1 + 1', '2', '```', '', '', 'See `Spec`.']
"""

from __future__ import annotations

import re

from markdown import Extension
from markdown.preprocessors import Preprocessor

ROLE = re.compile(r":(?:py:)?(?:class|func|meth|mod|attr|data|obj|exc|const):`(~?)([^`]+)`")
FENCE = re.compile(r"^\s*(```|~~~)")


def convert(lines: list[str]) -> list[str]:
    out: list[str] = []
    fence: str | None = None
    i = 0
    while i < len(lines):
        line = lines[i]
        opener = FENCE.match(line)
        if fence is not None:
            out.append(line)
            if opener and opener.group(1) == fence:
                fence = None
            i += 1
            continue
        if opener:
            fence = opener.group(1)
            out.append(line)
            i += 1
            continue
        stripped = line.lstrip()
        if stripped.startswith(">>>"):
            indent = line[: len(line) - len(stripped)]
            block = []
            while i < len(lines) and lines[i].strip():  # the example and its output run to the next blank line
                block.append(lines[i][len(indent):] if lines[i].startswith(indent) else lines[i].lstrip())
                i += 1
            out += ["", f"{indent}```pycon", *(indent + b for b in block), f"{indent}```", ""]
            continue
        out.append(ROLE.sub(_role, line))
        i += 1
    return out


def _role(m: re.Match) -> str:
    """Sphinx's ``~`` shows only the last part of a dotted name."""
    name = m.group(2).rsplit(".", 1)[-1] if m.group(1) else m.group(2)
    return f"`{name}`"


class _Doctests(Preprocessor):
    def run(self, lines: list[str]) -> list[str]:
        return convert(lines)


class DocstringExtension(Extension):
    def extendMarkdown(self, md) -> None:  # noqa: N802 (Markdown's API)
        md.preprocessors.register(_Doctests(md), "archcalc_doctests", 28)  # before fenced code (25) reads the fences


def makeExtension(**kwargs) -> DocstringExtension:  # noqa: N802 (Markdown's API)
    return DocstringExtension(**kwargs)
