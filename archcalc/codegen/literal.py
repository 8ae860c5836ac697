"""Data in the generated file (weight maps, plans) as Python literals laid out as ruff format lays them out at the
file's line length: double quotes, a bracket split over lines only where its line is too long (then one item a
line, with a trailing comma)."""

from __future__ import annotations

import re

WIDTH = 100


def flat(value: object) -> str:
    """``value`` on one line: strings in double quotes where they have none."""
    if isinstance(value, str):
        text = repr(value)
        return f'"{text[1:-1]}"' if text[0] == "'" and '"' not in value else text
    if isinstance(value, tuple):
        items = [flat(v) for v in value]
        return f"({items[0]},)" if len(items) == 1 else f"({', '.join(items)})"
    if isinstance(value, list):
        return f"[{', '.join(flat(v) for v in value)}]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{flat(k)}: {flat(v)}" for k, v in value.items()) + "}"
    return repr(value)


def assign(name: str, value: object, comment: str = "") -> str:
    """``name = value`` (a dict always one entry a line), with ``comment`` after it."""
    tail = f"  # {comment}" if comment else ""
    if isinstance(value, dict) and value:
        entries = [_laid(f"    {flat(k)}: ", v, ",", 4) for k, v in value.items()]
        return "\n".join([f"{name} = {{{tail}", *entries, "}"])
    one = _laid(f"{name} = ", value, tail, 0)
    if isinstance(value, str) and len(one) > WIDTH:  # split at spaces into adjacent strings, in brackets
        return "\n".join([f"{name} = (", *(f"    {flat(chunk)}" for chunk in _chunks(value, WIDTH - 6)), ")" + tail])
    return one


def _chunks(text: str, width: int) -> list[str]:
    chunks = [""]
    for word in text.split(" "):
        if chunks[-1] and len(chunks[-1]) + len(word) + 1 > width:
            chunks.append("")
        chunks[-1] += word + " "
    chunks[-1] = chunks[-1][:-1]
    return chunks


def _laid(prefix: str, value: object, suffix: str, indent: int) -> str:
    one = prefix + flat(value) + suffix
    if len(one) <= WIDTH or not isinstance(value, (tuple, list, dict)) or not value:
        return one
    opening, closing = ("(", ")") if isinstance(value, tuple) else ("[", "]") if isinstance(value, list) else ("{", "}")
    pad = " " * (indent + 4)
    items = value.items() if isinstance(value, dict) else [(None, v) for v in value]
    lines = [_laid(pad + (f"{flat(k)}: " if k is not None else ""), v, ",", indent + 4) for k, v in items]
    return "\n".join([prefix + opening, *lines, " " * indent + closing + suffix])


def fitted(expr: str, before: int, indent: int) -> str:
    """A call expression ``expr`` that follows ``before`` characters on a line at ``indent`` spaces: as it is where it
    fits, else as ruff format splits it (its arguments on a line of their own)."""
    if before + len(expr) <= WIDTH or not expr.endswith(")") or "(" not in expr:
        return expr
    head, args = expr.split("(", 1)
    return f"{head}(\n{' ' * (indent + 4)}{args[:-1]}\n{' ' * indent})"


NAMES = re.compile(r'\((?:"\w+", )*"\w+",?\)', re.ASCII)  # ("mamba_blocks", "blocks", ...)
CLASSES = re.compile(r"\((?:\w+, )*\w+,?\)", re.ASCII)  # (LocalBlocksAttention, BlocksAttention, ...)
NAME = re.compile(r"[A-Za-z_][\w.]*", re.ASCII)  # cfg.sharedlocal_blocks_attn_scale


def fit_long_lines(code: str) -> str:
    """``code`` with each assignment line longer than :data:`WIDTH` split as ruff format splits it: a tuple of values
    one a line in brackets, a list comprehension its element and its ``for`` on lines of their own (stack-prefixed
    config names in a model of several stacks make such lines long), a long name with its comment in brackets, a
    ``range`` of a sum one term a line. Other lines are left as they are."""
    out = []
    for line in code.split("\n"):
        out += _fit(line) if len(line) > WIDTH else [line]
    return "\n".join(out)


def _fit(line: str) -> list[str]:
    indent = line[: len(line) - len(line.lstrip())]
    target, eq, value = line.strip().partition(" = ")
    pad = indent + "    "
    if eq and (NAMES.fullmatch(value) or CLASSES.fullmatch(value)):  # a tuple of names (a hybrid's layer order)
        return [f"{indent}{target} = (", *(f"{pad}{item}," for item in value[1:-1].rstrip(",").split(", ")), f"{indent})"]
    stripped = line.strip()
    if stripped.startswith("for ") and stripped.endswith(")") and "range(" in stripped:  # a sum of many stacks' lengths
        head, _, args = stripped[:-1].partition("range(")
        terms = _top_level(args, " + ")
        if len(terms) > 1:
            return [f"{indent}{head}range(", f"{pad}{terms[0]}", *(f"{pad}+ {t}" for t in terms[1:]), f"{indent})"]
    value, _, comment = value.partition("  # ")
    if eq and comment and NAME.fullmatch(value):  # a long name and its comment: the name in brackets
        return [f"{indent}{target} = (", f"{pad}{value}", f"{indent})  # {comment}"]
    if not eq or "#" in line or '"' in line or "'" in line:
        return [line]
    items = _top_level(value, ", ")
    if len(items) > 1:  # a tuple: one item a line, with a trailing comma
        return [f"{indent}{target} = (", *(f"{pad}{item}," for item in items), f"{indent})"]
    if value.startswith("[") and value.endswith("]"):  # a list comprehension
        parts = _top_level(value[1:-1], " for ")
        if len(parts) == 2:
            loop = f"{pad}for {parts[1]}"
            return [f"{indent}{target} = [", f"{pad}{parts[0]}", *(_fit(loop) if len(loop) > WIDTH else [loop]), f"{indent}]"]
    head, bracket, args = value.partition("(")
    if bracket and head.replace(".", "").isidentifier() and _closes_at_end(args):  # one call
        if len(pad) + len(args) - 1 <= WIDTH:  # its arguments on a line of their own
            return [f"{indent}{target} = {head}(", f"{pad}{args[:-1]}", f"{indent})"]
    return [line]


def _top_level(text: str, separator: str) -> list[str]:
    """``text`` split at ``separator`` outside brackets."""
    parts, depth, start, i = [], 0, 0, 0
    while i < len(text):
        if text[i] in "([{":
            depth += 1
        elif text[i] in ")]}":
            depth -= 1
        elif depth == 0 and text.startswith(separator, i):
            parts.append(text[start:i])
            start = i = i + len(separator)
            continue
        i += 1
    return [*parts, text[start:]]


def _closes_at_end(text: str) -> bool:
    """Does the bracket open before ``text`` close at its last character, and not before?"""
    depth = 0
    for i, c in enumerate(text):
        depth += (c in "([{") - (c in ")]}")
        if depth < 0:
            return i == len(text) - 1
    return False
