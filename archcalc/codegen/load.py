"""Import a generated module from its source text, in memory: no file is written anywhere.

The module is registered in ``sys.modules`` under its (unique) name and stays there, so that its
classes can be found again by name: ``pickle`` and ``torch.save(model)`` of a model it built work, as
they do for a file imported normally. Tracebacks show the generated lines (they are put in
``linecache`` under the module's pseudo-file name).

>>> from archcalc.spec import load_spec
>>> from archcalc.spec.bind import bind
>>> from archcalc.ir import lower
>>> from archcalc.codegen.emit import emit
>>> module = load_source(emit(lower(bind(load_spec("gpt2"), "small")), "doctest"))
>>> sum(p.numel() for p in module.build(device="meta").parameters())
124439808
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import itertools
import linecache
import sys
from pathlib import Path
from types import ModuleType

_counter = itertools.count()


class _SourceLoader(importlib.abc.SourceLoader):
    """A loader whose source is a string (compiled like any module, with a pseudo file name)."""

    def __init__(self, source: str, filename: str):
        self.source, self.filename = source, filename

    def get_filename(self, fullname: str) -> str:
        return self.filename

    def get_data(self, path: str) -> bytes:
        return self.source.encode("utf-8")

    def path_stats(self, path: str):  # no file: never look for or write bytecode
        raise OSError(path)


def load_source(source: str, name: str | None = None) -> ModuleType:
    """Import ``source`` as a fresh module named ``name`` (default: a new ``archcalc_generated_N``)."""
    name = name or f"archcalc_generated_{next(_counter)}"
    filename = f"<archcalc-generated {name}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(keepends=True), filename)
    return _import(name, _SourceLoader(source, filename))


def load_file(path: str | Path, name: str | None = None) -> ModuleType:
    """Import the generated file at ``path`` (as ``importlib`` would, registered under ``name``)."""
    name = name or f"archcalc_generated_{next(_counter)}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    return _import(name, spec.loader, spec)


def _import(name: str, loader, spec=None) -> ModuleType:
    spec = spec or importlib.util.spec_from_loader(name, loader)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module
