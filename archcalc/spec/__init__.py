"""The spec language: loading a YAML spec file into a validated, frozen :class:`Spec`.

>>> spec = load_spec("gpt2")
>>> spec.name, spec.model.block.attention.heads.text
('gpt2', 'H')
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

from archcalc.errors import SpecError, UsageError
from archcalc.spec.components import Model
from archcalc.spec.library import bundled_names, bundled_path
from archcalc.spec.loader import spec_from_source
from archcalc.spec.schema import Hyperparameter, Size, Spec
from archcalc.spec.source import load_file, load_text
from archcalc.spec.suggest import did_you_mean

__all__ = ["Hyperparameter", "Model", "Size", "Spec", "load_spec", "load_spec_text", "resolve_spec_path"]


def resolve_spec_path(name_or_path: str) -> tuple[Path, str]:
    """The file for ``name_or_path`` (a path, or a bundled spec's name) and the name to show in errors."""
    path = Path(name_or_path)
    if path.is_file():
        return path, name_or_path
    bundled = bundled_path(name_or_path)
    if bundled is not None:  # shown as the library names it, wherever the command runs (one parse per file)
        return bundled, f"{bundled.parent.name}/{bundled.name}"
    if path.exists():
        raise UsageError(f"{name_or_path}: not a regular file; expected a spec file (.yaml) or a bundled spec name")
    names = bundled_names()
    raise UsageError(
        f"no spec file or bundled spec named {name_or_path!r}{did_you_mean(name_or_path, names)}; "
        f"bundled specs: {', '.join(names) or 'none'}"
    )


def load_spec(name_or_path: str) -> Spec:
    """Load and validate a spec from a path or a bundled spec name; raises SpecError or UsageError. A file read
    before and unchanged since (same size and modification time) gives the same frozen Spec again: the docs build
    reads each bundled spec many times."""
    path, shown = resolve_spec_path(name_or_path)
    try:
        stat = os.stat(path)
    except OSError:
        return spec_from_source(load_file(path, shown))  # load_file says what is wrong with it
    return _loaded(str(path), shown, stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=256)
def _loaded(path: str, shown: str, mtime_ns: int, size: int) -> Spec:
    return spec_from_source(load_file(Path(path), shown))


def load_spec_text(text: str, file: str = "<spec>") -> Spec:
    """Load and validate a spec from YAML text (``file`` names it in error messages)."""
    return spec_from_source(load_text(text, file))


__all__ += ["SpecError"]
