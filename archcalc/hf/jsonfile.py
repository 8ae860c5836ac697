"""Reading an HF ``config.json``: the stdlib ``json`` parser, plus where each key stands in the text.

Config files are untrusted like spec files: the size is bounded, ``NaN``/``Infinity`` are refused
except where transformers itself writes them (:data:`INFINITY_KEYS`, :data:`NAN_KEYS`), duplicate keys
are an error (``json`` would silently keep the last), nesting depth is bounded, and the top level must
be an object. After ``json.loads`` has accepted the text, a small scan over its
tokens records the line and column of every key and value, so an error about a field can say
``config.json:12:3:``.

>>> cf = parse_text('{\\n  "model_type": "llama",\\n  "rope_parameters": {"rope_theta": 1e4}\\n}', "c.json")
>>> str(cf.where(("model_type",))), str(cf.where(("rope_parameters", "rope_theta")))
('c.json:2:3', 'c.json:3:23')
"""

from __future__ import annotations

import json
import re
from bisect import bisect_right
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from archcalc.errors import SpecError, Where
from archcalc.spec.source import read_untrusted

MAX_BYTES = 4 << 20  # real configs are a few KiB; some carry large label maps
MAX_DEPTH = 32

Path_ = tuple[str | int, ...]

_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[{}\[\]:,]|[^\s{}\[\]:,"]+')


@dataclass
class ConfigFile:
    """A parsed config and the place of each key (``keys``) and value (``values``) in its text."""

    file: str
    data: dict[str, Any]
    keys: dict[Path_, Where] = field(default_factory=dict)
    values: dict[Path_, Where] = field(default_factory=dict)

    def where(self, path: Path_, value: bool = False) -> Where:
        """The place of the key at ``path`` (or with ``value``, of its value); the file's start if unknown."""
        path = tuple(path)
        for table in (self.values, self.keys) if value else (self.keys, self.values):  # a list item has no key
            if path in table:
                return table[path]
        return Where(self.file, 1, 1)


def read_file(path: str | Path, display: str | None = None) -> ConfigFile:
    """Read and parse the config file at ``path``; errors name it as ``display`` (default: the path). Only a regular
    file is read (archcalc.spec.source.read_untrusted): a FIFO, a device or a directory is refused unopened."""
    name = display or str(path)
    return parse_text(read_untrusted(path, name, MAX_BYTES, "config file", "a transformers config.json", "utf-8-sig"), name)


# JSON's non-finite numbers, which Python's json (and so transformers) writes and reads. A config may carry one only
# under a key where some transformers config class has a non-finite default, so that a file transformers saved from
# such a config is read, and nowhere else. Measured with transformers 5.x: every class in
# transformers.models.auto.configuration_auto.CONFIG_MAPPING built with its defaults (the few that cannot be are
# skipped), and the key above each float('inf'), float('-inf') or float('nan') in its to_dict(), at any depth, a list
# item counting as under its key. Found: time_step_limit = (0.0, inf) in Mamba2Config, BambaConfig, FalconH1Config,
# GraniteMoeHybridConfig, NemotronHConfig (and the configs that nest them); no NaN anywhere.
# tests/hf/test_jsonfile.py measures again and fails when transformers' defaults move away from these tables.
INFINITY_KEYS = frozenset({"time_step_limit"})  # Infinity or -Infinity is accepted under these keys
NAN_KEYS: frozenset[str] = frozenset()  # NaN is accepted under these keys
_CONSTANTS = ("NaN", "Infinity", "-Infinity")


def parse_text(text: str, file: str = "<config>") -> ConfigFile:
    """Parse JSON ``text`` into a :class:`ConfigFile`; ``file`` names it in error messages."""
    depth = _depth(text)
    if depth > MAX_DEPTH:
        raise SpecError(f"JSON nests more than {MAX_DEPTH} levels deep; expected a transformers config.json", file)
    try:
        data = json.loads(text, parse_constant=float)  # where each NaN/Infinity may stand is checked by _scan
    except json.JSONDecodeError as e:
        raise SpecError(f"malformed JSON: {e.msg}; expected a transformers config.json", file, e.lineno, e.colno) from None
    except (ValueError, RecursionError) as e:  # an integer with thousands of digits
        raise SpecError(f"malformed JSON: {' '.join(str(e).split())[:120]}", file) from None
    if not isinstance(data, dict):
        raise SpecError(f"expected a JSON object (a transformers config) at the top of the file, found a {type(data).__name__}", file)
    cf = ConfigFile(file, data)
    _scan(text, cf)
    return cf


def _depth(text: str) -> int:
    """Deepest nesting of brackets outside strings (checked before ``json`` recurses)."""
    deepest = level = 0
    for m in _TOKEN.finditer(text):
        tok = m.group()
        if tok in "{[":
            level += 1
            deepest = max(deepest, level)
        elif tok in "}]":
            level -= 1
    return deepest


def _scan(text: str, cf: ConfigFile) -> None:
    """Record where each key and value is; report the first duplicate key or misplaced NaN/Infinity (valid JSON is
    assumed)."""
    newlines = [i for i, ch in enumerate(text) if ch == "\n"]

    def place(offset: int) -> Where:
        line = bisect_right(newlines, offset - 1)
        start = newlines[line - 1] + 1 if line else 0
        return Where(cf.file, line + 1, offset - start + 1)

    # Each frame: [path, is_object, next array index or pending key, seen keys]
    stack: list[list[Any]] = []
    expect_key = False
    pending: Path_ | None = ()  # path of the next value
    for m in _TOKEN.finditer(text):
        tok, pos = m.group(), m.start()
        if tok == ":":
            continue
        if tok == ",":
            if stack and not stack[-1][1]:
                stack[-1][2] += 1
                pending = stack[-1][0] + (stack[-1][2],)
            else:
                expect_key = True
            continue
        if tok in "}]":
            stack.pop()
            expect_key = False
            continue
        if expect_key and tok.startswith('"'):
            key = json.loads(tok)
            frame = stack[-1]
            if key in frame[3]:
                raise SpecError.at(place(pos), f"duplicate key {key!r}; each key may appear once")
            frame[3].add(key)
            pending = frame[0] + (key,)
            cf.keys[pending] = place(pos)
            expect_key = False
            continue
        # a value
        assert pending is not None
        cf.values[pending] = place(pos)
        if tok in _CONSTANTS:
            _check_constant(tok, pending, cf)
        elif tok == "{":
            stack.append([pending, True, 0, set()])
            expect_key = True
        elif tok == "[":
            stack.append([pending, False, 0, set()])
            pending = pending + (0,)


def _check_constant(tok: str, path: Path_, cf: ConfigFile) -> None:
    """Refuse ``NaN``/``Infinity``/``-Infinity`` at ``path`` unless its key (the innermost name above it; a list item is
    under its list's key) is one where transformers' configs default to such a number."""
    key = next((part for part in reversed(path) if isinstance(part, str)), None)
    allowed = (["Infinity", "-Infinity"] if key in INFINITY_KEYS else []) + (["NaN"] if key in NAN_KEYS else [])
    if tok in allowed:
        return
    label = "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in path).lstrip(".")
    if allowed:
        expected = f"a finite number, {', '.join(allowed[:-1])} or {allowed[-1]}"
    else:
        where = ", ".join(sorted(INFINITY_KEYS | NAN_KEYS))
        expected = f"a finite number (JSON's NaN and Infinity are accepted only at {where}, where transformers' configs have them)"
    raise SpecError.at(cf.where(path), f"{label}: {tok} is not a finite number; expected {expected}")
