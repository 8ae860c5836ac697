"""Code templates: the generated file's code, written as real Python modules in ``archcalc/codegen/templates/``.

A template module is valid Python that ruff checks (and formats, at line length 100) like any other module: it
imports torch and takes the generated file's other names (``Config``, ``KVCache``, ...) from ``templates/names.py``
so that every name is defined. The emitter reads it as text and never imports it (emission does not import torch):

- ``unit(module, name, flags, names)`` takes one top-level ``def``, ``class`` or assignment of the module (with its
  decorators), keeps or drops its optional regions and substitutes its placeholders;
- an optional region is the lines between ``# region: NAME`` and ``# endregion`` (nested regions allowed; the
  marker lines never reach the output); it is kept when ``flags[NAME]`` is true (``# region: !NAME``: when false);
  every region name must be in ``flags``, so a misspelt name is an error, not a silently dropped region;
- a placeholder is an identifier (``Attention``), a dotted name (``cfg.heads``) or a string whose text is an upper-case
  placeholder (a docstring ``DOC``), replaced by Python source as whole tokens (``tokenize``), never as substrings:
  ``cfg.heads`` does not touch ``cfg.kv_heads``, nor a comment or a string that mentions it;
- ``drop`` names arguments to leave out of calls, with their commas: ``"scale="`` a keyword argument, ``"bias"`` a
  positional one (``f(x, bias, cache)``);
- an ``# insert: NAME`` line, or a statement that ends with that comment (it stands for the insert, for the linter),
  is replaced by rendered lines (a stack's modules, a method, or a ``fragment``: the body of a template function,
  which keeps long functions short in the templates too);
- then each bracket that fits on one line again is joined, as ruff format would write it, so that the output passes
  ``ruff format --check`` at line length 100 (tests/codegen/test_emit_format.py).
"""

from __future__ import annotations

import ast
import io
import tokenize
from functools import cache, lru_cache
from pathlib import Path

TEMPLATES = Path(__file__).resolve().parent / "templates"


@cache
def _source(module: str) -> str:
    return (TEMPLATES / f"{module}.py").read_text(encoding="utf-8")


@cache
def _units(module: str) -> dict[str, str]:
    """The module's top-level definitions and assignments by name, as source text."""
    text = _source(module)
    lines = text.splitlines()
    out = {}
    nodes = [(node, "") for node in ast.parse(text).body]
    nodes += [(method, f"{node.name}.") for node, _ in nodes if isinstance(node, ast.ClassDef) for method in node.body]
    for node, owner in nodes:  # a method is the unit "Class.method", indented as in its class
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            name, first = node.name, min([node.lineno, *(d.lineno for d in node.decorator_list)])
        elif isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            name, first = node.targets[0].id, node.lineno
        else:
            continue
        end = node.end_lineno
        assert end is not None
        while end < len(lines) and lines[end].strip() == "# endregion":  # closes a region around the last lines
            end += 1
        out[owner + name] = "\n".join(lines[first - 1 : end])
    return out


def unit(module: str, name: str, flags: dict[str, bool] | None = None, names: dict[str, str] | None = None,
         drop: frozenset[str] | set[str] = frozenset(), inserts: dict[str, str] | None = None) -> str:
    """The source of ``name`` in ``templates/<module>.py``, its regions kept or dropped by ``flags``, its
    placeholders replaced by ``names``, the arguments named in ``drop`` left out of every call and each
    ``# insert: NAME`` line replaced by the lines ``inserts[NAME]`` (source rendered already, indented as it is to
    stand); then each bracket that now fits on one line is put on one line, as ruff format would have written it."""
    text = substitute(regions(_units(module)[name], flags or {}), names or {}, drop)
    return joined(_inserted(text, inserts or {}))


def fragment(module: str, name: str, indent: int, flags: dict[str, bool] | None = None,
             names: dict[str, str] | None = None, drop: frozenset[str] | set[str] = frozenset()) -> str:
    """The body of the function ``name`` in ``templates/<module>.py`` as statements at ``indent`` spaces, for an
    ``# insert:`` line of another template: without its one-line ``def`` (whose parameters are the names the body reads
    where it goes in) and without its last line, a ``return`` that names what it leaves for the code after it."""
    lines = _units(module)[name].splitlines()
    assert lines[0].startswith("def ") and lines[-1].strip().startswith("return "), name
    body = "\n".join(" " * indent + line[4:] if line.strip() else "" for line in lines[1:-1])
    return substitute(regions(body, flags or {}), names or {}, drop)


def _inserted(text: str, inserts: dict[str, str]) -> str:
    """``text`` with its ``# insert:`` lines replaced, and without the template's ``# noqa`` comments (a name that
    only a placeholder uses is unused in the template)."""
    out: list[str] = []
    skip = False  # the blank line after an empty insert goes with it
    for line in text.split("\n"):
        line = line.split("  # noqa: ")[0]
        marker = line.strip()
        stand_in, _, key = line.partition("  # insert: ")  # a statement that stands for the insert in the template
        if marker.startswith("# insert: ") or key:
            inserted = inserts[key or marker.removeprefix("# insert: ")]
            out += [inserted] if inserted else []
            skip = not inserted
        elif not (skip and not marker):
            out.append(line)
            skip = False
    return "\n".join(out)


COLLAPSE = "  # <collapse>"  # marks, between regions() and joined(), a bracket that held regions
WIDTH = 100  # the generated file's line length


def regions(text: str, flags: dict[str, bool]) -> str:
    """``text`` without the marker lines, and without the regions whose flag says drop."""
    out: list[str] = []
    kept: list[bool] = []  # one entry per open region: is it kept (and all regions around it)?
    for line in text.splitlines():
        marker = line.strip()
        if marker.startswith("# region: "):
            flag = marker.removeprefix("# region: ")
            value = not flags[flag[1:]] if flag.startswith("!") else flags[flag]
            kept.append(value and (not kept or kept[-1]))
            _mark_opener(out, _indent(line))
        elif marker == "# endregion":
            kept.pop()
        elif not kept or kept[-1]:
            out.append(line)
    assert not kept, "a region without # endregion"
    return "\n".join(out)


def joined(text: str) -> str:
    """``text`` with each bracket split over lines put on one line where it fits in :data:`WIDTH` characters: one
    item between its lines (what ruff format splits when a line is too long), or items one a line in a bracket that
    held regions (``def forward(`` with optional parameters: the trailing comma of the template goes)."""
    lines = text.split("\n")
    for j in reversed(range(len(lines))):
        opener = lines[j]
        collapse = opener.endswith(COLLAPSE)
        opener = lines[j] = opener.removesuffix(COLLAPSE)
        if not opener.endswith(("(", "[", "{")):
            continue
        k = j + 1
        while k < len(lines) and (_indent(lines[k]) > _indent(opener) or not lines[k].strip()):
            k += 1
        items = [line.strip() for line in lines[j + 1 : k]]
        if k == len(lines) or not items or any("#" in item for item in items):
            continue
        if len(items) == 1 and not items[0].endswith(","):
            one = opener + items[0] + lines[k].strip()
        elif collapse and all(item.endswith(",") for item in items):
            one = opener + ", ".join(item[:-1] for item in items) + lines[k].strip()
        else:
            continue
        if len(one) <= WIDTH:
            lines[j : k + 1] = [one]
    return "\n".join(lines)


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _mark_opener(out: list[str], indent: int) -> None:
    """Mark the line that opens the bracket around a region marker at ``indent``, if the marker is inside one."""
    j = len(out) - 1
    while j >= 0 and (not out[j].strip() or _indent(out[j]) >= indent):
        j -= 1
    if j >= 0 and out[j].endswith(("(", "[")):
        out[j] += COLLAPSE


def substitute(text: str, names: dict[str, str], drop: frozenset[str] | set[str] = frozenset()) -> str:
    """``text`` with each placeholder of ``names`` replaced where it is a whole token (or dotted run of tokens), and
    each keyword argument ``, name=value`` whose name is in ``drop`` removed (its value ends at the next comma or
    closing bracket outside brackets)."""
    if not names and not drop:
        return text
    return _substituted(text, tuple(names.items()), frozenset(drop))


@lru_cache(maxsize=4096)
def _substituted(text: str, pairs: tuple[tuple[str, str], ...], drop: frozenset[str]) -> str:
    """:func:`substitute`, once for each text and names: the models of a docs build share most of their units."""
    names = dict(pairs)
    tokens, starts = _tokens(text)
    offset = lambda position: starts[position[0] - 1] + position[1]  # noqa: E731
    edits = []
    i = 0
    while i < len(tokens):
        after = tokens[i + 1].string if i + 1 < len(tokens) else ""
        keyword = after == "=" and f"{tokens[i].string}=" in drop
        if i and tokens[i - 1].string == "," and (keyword or (after in (",", ")") and tokens[i].string in drop)):
            end = _argument_end(tokens, i + 2) if keyword else i
            edits.append((offset(tokens[i - 1].start), offset(tokens[end].end), ""))
            i = end + 1
            continue
        match = _match(tokens, i, names)
        if match is not None:
            end, replacement = match
            edits.append((offset(tokens[i].start), offset(tokens[end].end), replacement))
            i = end + 1
        else:
            i += 1
    for start, end, replacement in reversed(edits):
        text = text[:start] + replacement + text[end:]
    return text


@lru_cache(maxsize=1024)
def _tokens(text: str) -> tuple[list[tokenize.TokenInfo], list[int]]:
    """The names, operators and strings of ``text``, and the offset of each of its lines: once for each text, which
    the models substitute different names into (tokenizing is most of a substitution)."""
    tokens = [t for t in tokenize.generate_tokens(io.StringIO(text).readline) if t.type in (tokenize.NAME, tokenize.OP,
                                                                                              tokenize.STRING)]
    starts = [0]
    for line in text.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))
    return tokens, starts


def _match(tokens: list[tokenize.TokenInfo], i: int, names: dict[str, str]) -> tuple[int, str] | None:
    """The last token and the replacement of the placeholder that starts at ``tokens[i]``, or None."""
    token = tokens[i]
    if token.type == tokenize.STRING:
        try:
            value = ast.literal_eval(token.string)
        except ValueError:  # an f-string
            return None
        placeholder = isinstance(value, str) and value.isidentifier() and value.isupper()  # "DOC", not "heads"
        return (i, names[value]) if placeholder and value in names else None
    if token.type != tokenize.NAME or (i and tokens[i - 1].string == "."):  # an attribute: only a dotted placeholder
        return None
    dotted, end = token.string, i
    best = (i, names[dotted]) if dotted in names else None
    while end + 2 < len(tokens) and tokens[end + 1].string == "." and tokens[end + 2].type == tokenize.NAME:
        dotted, end = f"{dotted}.{tokens[end + 2].string}", end + 2
        if dotted in names:
            best = (end, names[dotted])
    return best


def _argument_end(tokens: list[tokenize.TokenInfo], i: int) -> int:
    """The last token of the argument value that starts at ``tokens[i]``."""
    depth = 0
    while True:
        string = tokens[i + 1].string
        depth += string in "([{" and tokens[i + 1].type == tokenize.OP
        if depth == 0 and string in (",", ")", "]", "}"):
            return i
        depth -= string in ")]}" and tokens[i + 1].type == tokenize.OP
        i += 1
