"""Collection of the packages' doctests (pytest runs archcalc/ with --doctest-modules): a module that
imports an optional extra at its top (torch, the docs extra's markdown) is left out where that extra is not
installed, as the README says the tests of a missing extra are skipped. Read from the source, not listed by hand."""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parent
OPTIONAL = ("torch", "transformers", "markdown", "mkdocs", "playwright")  # the extras' modules, never the core's


def _top_level_imports(path: Path) -> set[str]:
    """The root names of the modules ``path`` imports at module level."""
    names = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def _missing(module: str) -> bool:
    return importlib.util.find_spec(module) is None


MISSING = {name for name in OPTIONAL if _missing(name)}
collect_ignore = sorted(str(path.relative_to(ROOT)) for path in (ROOT / "archcalc").rglob("*.py") if _top_level_imports(path) & MISSING)
# the code generator's templates are source text the emitter reads, never modules to import (nor doctests to run)
collect_ignore.append("archcalc/codegen/templates")
