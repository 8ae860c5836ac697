"""Writing files from the command line: atomically, never over a file archcalc did not write; argument types."""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

from archcalc.errors import UsageError


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


def write_output(target: Path, text: str, marker: str, force: bool, what: str) -> None:
    """Write ``text`` atomically, refusing to replace a file whose first lines lack ``marker`` unless ``force``."""
    if target.exists() and not force:
        if not target.is_file():
            raise UsageError(f"{target}: exists and is not a regular file")
        head = target.read_text(encoding="utf-8", errors="replace")[:4000]
        if marker not in head:
            raise UsageError(f"{target}: exists and was not {what}; pass --force to overwrite it")
    write_atomically(target, text)


def write_atomically(target: Path, text: str) -> None:
    """Write ``text`` to a temporary file beside ``target``, then rename it over ``target``."""
    folder = target.parent if str(target.parent) else Path(".")
    if not folder.is_dir():
        raise UsageError(f"{target}: folder {folder} does not exist")
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
