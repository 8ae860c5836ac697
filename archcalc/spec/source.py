"""Reading a spec file: safe YAML with the line and column of every key and value kept.

Spec files are untrusted. They are parsed with PyYAML's safe loader, and on top of it: only plain
YAML types (mappings, lists, strings, integers, floats, booleans, null) are accepted; any explicit
tag (``!!python/object``, ``!custom``) is an error; anchors and aliases are refused outright (so an
alias bomb costs nothing); merge keys and duplicate keys are errors; size, nesting depth and node
count are bounded. The result is plain Python data plus a map from each path, such as
``("model", "block", "attention", "heads")``, to its place in the file.

>>> src = load_text("name: x\\nsizes:\\n  small: {d: 768}\\n", "demo.yaml")
>>> src.data["sizes"]["small"]["d"], str(src.where(("sizes", "small", "d")))
(768, 'demo.yaml:3:14')
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from archcalc.errors import SpecError, Where

MAX_BYTES = 256 << 10  # PyYAML reads about a megabyte a second: keep errors in big files fast
MAX_DEPTH = 32
MAX_NODES = 10_000
MAX_SCALAR = 20_000
_PLAIN_TAGS = {
    "tag:yaml.org,2002:" + t for t in ("str", "int", "float", "bool", "null", "map", "seq")
}

Path_ = tuple[str | int, ...]

# YAML 1.1 also reads 0xC (hex), 010 (octal), 0b11, 1:30 (base 60, = 90) and 1__2 as integers: a typo or a
# time would become a silent wrong number, so plain numbers are decimal, '_' only between digits.
_DIGITS = r"[0-9]+(?:_[0-9]+)*"
_NUMBER_FORMS = {
    "tag:yaml.org,2002:int": re.compile(r"[-+]?(?:0|[1-9][0-9]*(?:_[0-9]+)*)", re.ASCII),
    "tag:yaml.org,2002:float": re.compile(
        rf"[-+]?(?:{_DIGITS}(?:\.(?:{_DIGITS})?)?|\.{_DIGITS})(?:[eE][-+]?[0-9]+)?|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN)",
        re.ASCII),
}


def _odd_number(text: str, value: Any) -> str:
    """Why a YAML number written as ``text`` is refused, and what to write instead."""
    if ":" in text:
        why = f"YAML reads {text!r} as a base-60 (sexagesimal) number, {value}"
    elif text.lstrip("+-")[:2].lower() in ("0x", "0o", "0b") or text.lstrip("+-").startswith("0"):
        why = f"YAML reads {text!r} as {'hexadecimal' if 'x' in text.lower() else 'octal' if 'b' not in text.lower() else 'binary'}, {value}"
    else:
        why = f"{text!r} is not a plain decimal number ('_' may only separate digits, as in 1_000)"
    return f"{why}; expected a decimal number such as {value} (quote the value if it is meant as text)"
_OTHER_BREAKS = ("\r", "\x85", "\u2028", "\u2029")


@dataclass
class Source:
    """Plain data read from a spec file, and where each part of it is."""

    file: str
    data: Any
    values: dict[Path_, Where] = field(default_factory=dict)
    keys: dict[Path_, Where] = field(default_factory=dict)

    def where(self, loc: Path_, key: bool = False) -> Where:
        """The place of the value (or with ``key``, of the key) at ``loc``, or of its nearest parent."""
        loc = tuple(loc)
        if key and loc in self.keys:
            return self.keys[loc]
        while loc:
            if loc in self.values:
                return self.values[loc]
            loc = loc[:-1]
        return self.values.get((), Where(self.file, 1, 1))


def load_file(path: str | Path, display: str | None = None) -> Source:
    """Read and parse the spec file at ``path``; errors name it as ``display`` (default: the path)."""
    name = display or str(path)
    return load_text(read_untrusted(path, name, MAX_BYTES, "spec file", "a small YAML file"), name)


def read_untrusted(path: str | Path, name: str, max_bytes: int, what: str, expected: str, encoding: str = "utf-8") -> str:
    """The text of an untrusted file: only a regular file is read (a FIFO waits for a writer forever, a device such
    as /dev/zero never ends), at most ``max_bytes`` of it, and a bad byte is reported at its line and column."""
    try:
        with open(_open_regular(path, name, what, expected), "rb") as f:
            raw = f.read(max_bytes + 1)
    except OSError as e:
        raise SpecError(f"cannot read the {what}: {e.strerror or e}", name) from None
    if len(raw) > max_bytes:
        limit = f"{max_bytes >> 20} MiB" if max_bytes >= 1 << 20 else f"{max_bytes >> 10} KiB"
        raise SpecError(f"{what} is larger than {limit}; expected {expected}", name)
    try:
        return raw.decode(encoding)
    except UnicodeDecodeError as e:
        line, col = raw.count(b"\n", 0, e.start) + 1, e.start - raw.rfind(b"\n", 0, e.start)
        raise SpecError(f"{what} is not UTF-8 text (byte {e.start}); expected {expected}", name, line, col) from None


_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def _open_regular(path: str | Path, name: str, what: str, expected: str) -> int:
    """A descriptor open for reading on the regular file at ``path`` (symbolic links followed): its kind is checked
    before it is opened, and again on what was opened (non-blocking, in case it was swapped for a FIFO meanwhile)."""
    def refuse(mode: int) -> SpecError:
        kind = next((kind for test, kind in _KINDS if test(mode)), "not a regular file")
        return SpecError(f"the {what} is {kind}, not a regular file; expected {expected}", name)

    try:
        info = os.stat(path)
        if not stat.S_ISREG(info.st_mode):
            raise refuse(info.st_mode)
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError as e:
        raise SpecError(f"cannot read the {what}: {e.strerror or e}", name) from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise refuse(mode)
    return fd


def load_text(text: str, file: str = "<spec>") -> Source:
    """Parse YAML ``text`` into a :class:`Source`; ``file`` is the name used in error messages."""
    text = text.replace("\r\n", "\n")  # Windows line endings are fine; lines are counted by \n from here on
    odd = [i for i in (text.find(ch) for ch in _OTHER_BREAKS) if i >= 0]
    if odd:  # YAML would count these as line breaks and every later line number would disagree with editors
        i = min(odd)
        line, col = text.count("\n", 0, i) + 1, i - text.rfind("\n", 0, i)
        raise SpecError(f"line break character {text[i]!r} is not allowed; expected \\n line endings", file, line, col)
    loader = None
    try:
        node, loader = _fast_node(text, file)
        if loader is None:  # PyYAML's own parser: its reader checks the characters, its errors are the ones we quote
            loader = _Loader(text, file)
            node = loader.get_single_node()
    except yaml.reader.ReaderError as e:
        line, col = text.count("\n", 0, e.position) + 1, e.position - text.rfind("\n", 0, e.position)
        char = chr(e.character) if isinstance(e.character, int) else e.character
        raise SpecError(f"character {char!r} is not allowed in a YAML file; expected printable text", file, line, col) from None
    except yaml.MarkedYAMLError as e:
        mark, problem = e.problem_mark or e.context_mark, e.problem or e.context or "malformed YAML"
        if e.context_mark and e.context and (mark is None or mark.index >= len(text)):
            # Found at the end of the file (an unclosed quote or bracket): point at where it was opened.
            mark, problem = e.context_mark, f"{e.context}, {problem}"
        line, col = (mark.line + 1, mark.column + 1) if mark else (1, 1)
        raise SpecError(f"malformed YAML: {problem}; expected a YAML mapping of spec keys", file, line, col) from None
    except yaml.YAMLError as e:
        raise SpecError(f"malformed YAML: {' '.join(str(e).split())}", file) from None
    except RecursionError:
        raise SpecError(f"YAML nests too deeply; at most {MAX_DEPTH} levels are allowed", file) from None
    finally:
        if loader is not None:
            loader.dispose()
    source = Source(file, None)
    if node is None:
        raise SpecError("the spec file is empty; expected a YAML mapping with keys name, hyperparameters, model, sizes", file)
    if not isinstance(node, yaml.MappingNode):
        found = "a list" if isinstance(node, yaml.SequenceNode) else "a single value"
        raise SpecError(
            f"expected a YAML mapping (keys name, hyperparameters, model, sizes) at the top of the file, found {found}",
            file, node.start_mark.line + 1, node.start_mark.column + 1,
        )
    source.data = _Converter(source, loader).convert(node, ())
    return source


def _fast_node(text: str, file: str) -> tuple[Any, Any]:
    """The document's node and its loader, parsed by libyaml where PyYAML has it (ten times faster: a docs build
    reads every bundled spec); (None, None) where it has not, where the text has a character PyYAML's reader refuses,
    or where the YAML is malformed: then PyYAML's own parser reads it again, for its checks and its error messages."""
    if _FastLoader is None or yaml.reader.Reader.NON_PRINTABLE.search(text):
        return None, None
    loader = _FastLoader(text, file)
    try:
        return loader.get_single_node(), loader
    except yaml.YAMLError:
        loader.dispose()
        return None, None


class _Checks:
    """The composer's checks: anchors/aliases refused, depth and node count bounded."""

    file: str
    depth: int
    count: int

    def _fail(self, message: str, mark) -> SpecError:
        return SpecError(message, self.file, mark.line + 1, mark.column + 1)

    def compose_node(self, parent, index):  # noqa: D401 (PyYAML's hook)
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None):
            raise self._fail("YAML anchors and aliases (&name, *name) are not allowed in spec files; write values out", event.start_mark)
        self.count += 1
        if self.count > MAX_NODES:
            raise self._fail(f"spec file has more than {MAX_NODES} YAML nodes; expected a small spec", event.start_mark)
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise self._fail(f"YAML nests more than {MAX_DEPTH} levels deep", event.start_mark)
        try:
            return super().compose_node(parent, index)  # type: ignore[misc]
        finally:
            self.depth -= 1


class _Loader(_Checks, yaml.SafeLoader):
    """PyYAML's safe loader, refusing anchors/aliases and bounding depth and node count."""

    def __init__(self, text: str, file: str):
        super().__init__(text)
        self.file, self.depth, self.count = file, 0, 0


try:
    from yaml._yaml import CParser
except ImportError:  # PyYAML built without libyaml
    _FastLoader = None
else:
    class _FastLoader(_Checks, yaml.composer.Composer, CParser, yaml.constructor.SafeConstructor, yaml.resolver.Resolver):
        """libyaml's parser (events), PyYAML's composer with the same checks (nodes), PyYAML's safe constructor."""

        def __init__(self, text: str, file: str):
            CParser.__init__(self, text)
            yaml.composer.Composer.__init__(self)
            yaml.constructor.SafeConstructor.__init__(self)
            yaml.resolver.Resolver.__init__(self)
            self.file, self.depth, self.count = file, 0, 0


class _Converter:
    def __init__(self, source: Source, loader: _Loader):
        self.source, self.loader = source, loader

    def where(self, node, offset: int = 0) -> Where:
        return Where(self.source.file, node.start_mark.line + 1, node.start_mark.column + 1 + offset)

    def check_tag(self, node) -> None:
        if node.tag not in _PLAIN_TAGS:
            raise SpecError.at(
                self.where(node),
                f"YAML tag {node.tag.replace('tag:yaml.org,2002:', '!!')!r} is not allowed; "
                "expected a plain value (number, string, true/false, mapping or list)",
            )

    def convert(self, node, path: Path_) -> Any:
        self.check_tag(node)
        quoted = isinstance(node, yaml.ScalarNode) and node.style in ("'", '"')
        self.source.values[path] = self.where(node, 1 if quoted else 0)
        if isinstance(node, yaml.MappingNode):
            result: dict[str, Any] = {}
            for key_node, value_node in node.value:
                if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == "tag:yaml.org,2002:merge":
                    raise SpecError.at(self.where(key_node), "expected a plain key (a name); merge keys (<<) and complex keys are not allowed")
                self.check_tag(key_node)
                key = key_node.value
                if key in result:
                    raise SpecError.at(self.where(key_node), f"duplicate key {key!r}; each key may appear once")
                self.source.keys[path + (key,)] = self.where(key_node)
                result[key] = self.convert(value_node, path + (key,))
            return result
        if isinstance(node, yaml.SequenceNode):
            return [self.convert(item, path + (i,)) for i, item in enumerate(node.value)]
        if len(node.value) > MAX_SCALAR:
            raise SpecError.at(self.where(node), f"value is longer than {MAX_SCALAR} characters")
        if node.tag == "tag:yaml.org,2002:int" and len(node.value) > 40:
            raise SpecError.at(self.where(node), "integer has more than 40 digits; expected a model size")
        if node.tag in _NUMBER_FORMS and not node.style and not _NUMBER_FORMS[node.tag].fullmatch(node.value):
            try:
                value = self.loader.construct_object(node, deep=True)
            except (yaml.YAMLError, ValueError, OverflowError):
                value = "?"
            raise SpecError.at(self.where(node), _odd_number(node.value, value))
        try:
            return self.loader.construct_object(node, deep=True)
        except (yaml.YAMLError, ValueError, OverflowError) as e:
            raise SpecError.at(self.where(node), f"malformed value: {' '.join(str(e).split())}") from None
