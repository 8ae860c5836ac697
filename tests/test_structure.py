"""The shape of the code: no import cycles among archcalc's modules, each module imports alone, and no module
outside archcalc/hf reads the IR's settings by string key. (The size of a function, not of a file, is limited: ruff's
C901, PLR0912 and PLR0915, configured in pyproject.toml and run by .ci/run.)

The import graph is read from the source (ast): every ``import`` and ``from ... import`` of a project module,
at module level or inside a function (a lazy import that closes a loop is still a loop), except those under
``if TYPE_CHECKING:`` (never run). ``from package import name`` is an edge to ``package.name`` where that is a
module, else to the package.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("archcalc",)


def _modules() -> dict[str, Path]:
    out = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


MODULES = _modules()


def _type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _targets(node: ast.Import | ast.ImportFrom, package: str) -> list[str]:
    """The modules one import statement names (``from package import name``: ``package.name`` where that is a module)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = node.module or ""
    if node.level:
        anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
        base = ".".join(anchor + ([base] if base else []))
    return [f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base for alias in node.names]


def imports_of(name: str, path: Path) -> dict[str, int]:
    """The project modules that ``name`` imports, each with the line of its first import."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: dict[str, int] = {}

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _type_checking(node):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            for target in _targets(node, package):
                if target in MODULES:
                    found.setdefault(target, node.lineno)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text(encoding="utf-8"), str(path)))
    return found


def import_cycles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """The strongly connected components of more than one module, and modules that import themselves (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1 or v in graph[v]:
                cycles.append(sorted(component))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10 * len(graph)))
    for v in graph:
        if v not in index:
            connect(v)
    return cycles


def test_the_cycle_check_finds_a_cycle():
    graph = {"a": {"b": 1}, "b": {"c": 1}, "c": {"a": 1}, "d": {"a": 1}, "e": {"e": 1}}
    assert sorted(import_cycles(graph)) == [["a", "b", "c"], ["e"]]


def test_no_import_cycles():
    graph = {name: imports_of(name, path) for name, path in MODULES.items()}
    assert len(graph) > 100 and sum(map(len, graph.values())) > 300  # the walk found the imports
    cycles = import_cycles(graph)
    described = ["\n".join(f"  {a} -> {b} (line {graph[a][b]})" for a in cycle for b in graph[a] if b in cycle)
                 for cycle in cycles]
    assert not cycles, "import cycles:\n" + "\n\n".join(described)


ALONE = """
import importlib, sys, traceback
failed = []
for name in sys.argv[1:]:
    for loaded in [m for m in sys.modules if m.split(".")[0] == "archcalc"]:
        del sys.modules[loaded]  # nothing of the project loaded before it: the module is imported alone
    try:
        importlib.import_module(name)
    except Exception:
        failed.append(name + ": " + traceback.format_exc().strip().splitlines()[-1])
print("\\n".join(failed))
"""


def test_every_module_imports_alone(process):
    """Each module imported first, with no other project module loaded (in one interpreter, which keeps the third-party
    imports such as sympy and torch between modules); ``__main__`` modules run a command when imported: left out."""
    pytest.importorskip("torch")
    names = [name for name in MODULES if not name.endswith("__main__")]
    proc = process.run(["-c", ALONE, *names], capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip() == "", "modules that do not import alone:\n" + proc.stdout


def _string_keyed_settings(path: Path) -> list[int]:
    """Lines that read a component's settings by string key: ``x.attrs[...]``, ``x.attrs.get(...)``, ``.items()``..."""
    lines = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute) and node.value.attr == "attrs":
            lines.append(node.lineno)
        elif (isinstance(node, ast.Attribute) and node.attr in ("get", "items", "keys", "values")
              and isinstance(node.value, ast.Attribute) and node.value.attr == "attrs"):
            lines.append(node.lineno)
    return lines


def test_the_ir_settings_are_read_by_field():
    """Every module reads a component's settings by field (archcalc.ir.attrs has no string-keyed reading left)."""
    offenders = {str(path.relative_to(ROOT)): lines for path in MODULES.values() if (lines := _string_keyed_settings(path))}
    assert not offenders, f"settings read by string key (read the fields of archcalc.ir.attrs): {offenders}"


PROCESS_CALLS = {("subprocess", "run"), ("subprocess", "Popen"), ("subprocess", "call"), ("subprocess", "check_call"),
                 ("subprocess", "check_output"), ("os", "system"), ("os", "popen")}
PROCESS_HOMES = {"tests/conftest.py", "tests/helpers.py", "tests/site/conftest.py",  # the fixtures and the ruff helper
                 "tests/test_packaging.py"}  # runs the installed wheel's own interpreter and script (slow by module)


def _process_calls(path: Path) -> list[int]:
    """Lines of ``path`` that call subprocess.run, os.system and the like (read from the syntax tree: a payload
    string that spells such a call is not one)."""
    return [node.lineno for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name)
            and (node.func.value.id, node.func.attr) in PROCESS_CALLS]


def test_tests_start_child_processes_through_the_process_fixture():
    """A test that needs a child process asks for the ``process`` fixture, which makes it ``slow`` (tests/conftest.py):
    no test file starts one itself, so the fast tier cannot pick up a process test by mistake."""
    offenders = {}
    for path in sorted((ROOT / "tests").rglob("*.py")):
        relative = path.relative_to(ROOT).as_posix()
        if relative in PROCESS_HOMES or relative.startswith(("tests/golden/", "tests/data/")):
            continue
        if lines := _process_calls(path):
            offenders[relative] = lines
    assert not offenders, f"child processes started outside the process fixture: {offenders}"
