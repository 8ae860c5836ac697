"""The bundled spec library: ``archcalc count gpt3`` finds ``spec/gpt3.yaml`` by name.

In a wheel the specs ship as package data under ``archcalc/_spec``; in a source checkout (and an
editable install) they are read from the repository's ``spec/`` folder.

>>> "gpt2" in bundled_names()
True
"""

from __future__ import annotations

import difflib
from itertools import islice
from pathlib import Path

from archcalc.errors import UsageError

_PACKAGE = Path(__file__).resolve().parent.parent


def library_dir() -> Path:
    """The folder that holds the bundled ``*.yaml`` specs."""
    shipped = _PACKAGE / "_spec"
    if shipped.is_dir():
        return shipped
    return _PACKAGE.parent / "spec"


def bundled_names() -> list[str]:
    """Names of the bundled specs, sorted."""
    folder = library_dir()
    return sorted(p.stem for p in folder.glob("*.yaml")) if folder.is_dir() else []


def bundled_path(name: str) -> Path | None:
    """The file of the bundled spec ``name``, or None. A name that is neither (no such file, no such bundled spec)
    but is close to a spec file beside it (``my1b.yml`` where ``my1b.yaml`` is) is refused here, naming that file:
    every command that takes a SPEC looks it up through here."""
    if name not in bundled_names():
        near = near_spec_files(name)
        if near:
            raise UsageError(f"no spec file or bundled spec named {name!r} (did you mean {near[0]!r}?)")
        return None
    return library_dir() / f"{name}.yaml"


SPEC_SUFFIXES = (".yaml", ".yml", ".json")
_LISTED = 10_000  # entries of a folder looked at for a hint, at most


def near_spec_files(name_or_path: str) -> list[str]:
    """Spec files beside a path that does not exist that it may have meant, nearest first, as the user would type
    them: the same name with another suffix (``my1b.yml``, ``my1b``: ``my1b.yaml``), else a close name.

    >>> near_spec_files("spec/gpt3.yml"), near_spec_files("spec/lama.yaml"), near_spec_files("spec/zzz.yaml")
    (['spec/gpt3.yaml'], ['spec/llama.yaml'], [])
    """
    path = Path(name_or_path)
    try:
        if not path.name or path.exists() or not path.parent.is_dir():
            return []
        files = [e.name for e in islice(path.parent.iterdir(), _LISTED)
                 if e.suffix.lower() in SPEC_SUFFIXES and e.is_file()]
    except (OSError, ValueError):  # unreadable folder, a name the OS refuses
        return []
    stem = path.name[: -len(path.suffix)] if path.suffix.lower() in SPEC_SUFFIXES else path.name
    same = sorted(f for f in files if Path(f).stem == stem)
    close = same or difflib.get_close_matches(path.name, files, n=1, cutoff=0.75)
    return [str(path.parent / f) if str(path.parent) != "." else f for f in close]
