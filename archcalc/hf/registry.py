"""Which transformers model types archcalc reads: one per bundled spec with an ``hf:`` section.

The bundled specs are the registry: ``spec/<name>.yaml`` whose ``hf.model_type`` is ``llama`` makes ``llama``
importable, with that spec's ``model:`` and ``hf.keys`` (see :mod:`archcalc.hf.family`). Listing the model types
scans the files' text (the command-line help lists them, so it must not load every spec); importing one loads its
spec once per process.

>>> MODEL_TYPES[0], bundled_spec("qwen2"), bundled_spec("no-such-type")
('bert', 'qwen2_5', None)
>>> closest("gemma9")[0].startswith("gemma")
True
"""

from __future__ import annotations

import difflib
import re
from functools import cache

from archcalc.spec.library import bundled_names, library_dir

# the model_type of a top-level hf: section, block style (hf:\n  model_type: x) or flow style (hf: {model_type: x})
_MODEL_TYPE = re.compile(r"^hf:[ \t]*(?:#.*)?\n(?:(?:[ \t].*)?\n)*?[ \t]+model_type:[ \t]*([a-z][a-z0-9_-]*)"
                         r"|^hf:[ \t]*\{[^}]*?\bmodel_type:[ \t]*([a-z][a-z0-9_-]*)", re.MULTILINE)


@cache
def model_types() -> dict[str, str]:
    """model_type -> the bundled spec that describes it, sorted by model type."""
    found: dict[str, str] = {}
    for name in bundled_names():
        m = _MODEL_TYPE.search((library_dir() / f"{name}.yaml").read_text(encoding="utf-8"))
        if m:
            found.setdefault(m.group(1) or m.group(2), name)
    return dict(sorted(found.items()))


MODEL_TYPES: tuple[str, ...] = tuple(model_types())


def bundled_spec(model_type: str) -> str | None:
    """The name of the bundled spec for ``model_type`` (None: not supported)."""
    return model_types().get(model_type)


def closest(model_type: str, n: int = 3) -> list[str]:
    """The supported model types nearest to ``model_type`` in spelling, nearest first."""
    return difflib.get_close_matches(model_type, list(model_types()), n=n, cutoff=0.0)
