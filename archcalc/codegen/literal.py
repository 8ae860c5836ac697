"""Data in the generated file (weight maps, plans) as Python literals laid out as ruff format lays them out at the
file's line length: double quotes, a bracket split over lines only where its line is too long (then one item a
line, with a trailing comma)."""

from __future__ import annotations

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
