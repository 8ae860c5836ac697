"""Families as data: each supported transformers model type is defined by its bundled spec (``spec/<name>.yaml``,
whose ``hf:`` section maps the config class key by key and names its weight-name layout), one row of tiny configs
for the parity tests, plus a named hook where a table cannot say it, and a layout of archcalc/hf/weights.py where no
existing one has its names. Nothing else in the product names a model type, and the tests that cover every family
iterate over the specs.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from archcalc.hf import MODEL_TYPES
from archcalc.hf.build import family_of
from archcalc.hf.hooks import HOOKS
from archcalc.hf.registry import also_types, bundled_spec, closest, model_types
from archcalc.hf.weights import LAYOUTS
from archcalc.spec import load_spec
from archcalc.spec.components import Init, Mixer
from archcalc.spec.library import bundled_names

ROOT = Path(__file__).resolve().parents[2]
# the files every family is defined by: its YAML and its tiny-config row; the layouts where one bears its name
WEIGHT_LAYOUTS, TINY_ROWS = "archcalc/hf/weights.py", "tests/codegen/hf_cases.py"
# the tests that cover every family; none may hold a list of model types
FAMILY_TESTS = ["tests/hf/test_oracle.py", "tests/hf/oracle_configs.py", "tests/hf/test_import_cli.py", "tests/spec/test_library.py",
                "tests/codegen/test_hf_parity.py", "tests/codegen/test_export_parity.py"]


def _string_constants(path: Path) -> list[str]:
    """The string literals of a Python file, docstrings excepted."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body
                  and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}
    return [node.value for node in ast.walk(tree) if isinstance(node, ast.Constant) and isinstance(node.value, str)
            and id(node) not in docstrings]


def _hook_files() -> dict[str, str]:
    """Each named hook -> the file that defines it."""
    return {name: str(Path(hook.__code__.co_filename).resolve().relative_to(ROOT)) for name, hook in HOOKS.items()}


def defining_files() -> dict[str, list[str]]:
    """For every supported model type, the files that define it: its YAML, its tiny row, its hooks' files, and the
    layouts where one bears its name (a model type that reuses another family's layout is not in that file)."""
    hooks = _hook_files()
    return {t: sorted({f"spec/{name}.yaml", TINY_ROWS} | ({WEIGHT_LAYOUTS} if t in LAYOUTS else set())
                      | {hooks[h] for h in family_of(t).origin.hooks})
            for t, name in model_types().items()}


def test_each_model_type_is_its_yaml_and_its_tiny_row(capsys):
    """The table (printed with -s) and its proof: each spec names a layout and the tiny row exists, hooks are named ones,
    and no other file of archcalc/ names a model type (a string equal to one, outside docstrings); the layouts file
    names one only as a layout's name."""
    from tests.codegen.hf_cases import CASES, configs

    pytest.importorskip("torch")
    table = defining_files()
    rows = {configs(case)[0].model_type for case in CASES}
    for model_type, files in table.items():
        assert family_of(model_type).origin.weights in LAYOUTS, f"{model_type}: its spec names no weight layout (hf.weights)"
        assert model_type in rows, f"{model_type}: no tiny-config row in {TINY_ROWS}"
        assert (ROOT / f"spec/{bundled_spec(model_type)}.yaml").is_file()
        assert all((ROOT / f).is_file() for f in files)
    # words of the spec language that are also model types: 't5' names an init scheme, 'mamba' and 'mamba2' mixer kinds
    schemes = set(Init.model_fields["scheme"].annotation.__args__) | set(Mixer.model_fields["kind"].annotation.__args__)
    for path in sorted(ROOT.glob("archcalc/**/*.py")):
        named = {s for s in _string_constants(path) if s in model_types() and s not in schemes}
        where = str(path.relative_to(ROOT))
        if where == WEIGHT_LAYOUTS:  # layouts named after the family they were written for
            assert named <= set(LAYOUTS), f"{where} names model types {sorted(named - set(LAYOUTS))} that are not layouts"
        elif not where.startswith("archcalc/site/"):  # the site's examples name bundled specs
            assert not named, f"{where} names model types {sorted(named)}: a family is its YAML and row only"
    with capsys.disabled():
        print("\nmodel type -> the files that define it")
        for model_type, files in table.items():
            print(f"  {model_type:12} {', '.join(files)}")


@pytest.mark.parametrize("path", FAMILY_TESTS)
def test_the_tests_of_every_family_hold_no_list_of_model_types(path):
    """A collection literal naming two or more model types is a list to keep up: these tests derive it from the specs."""
    tree = ast.parse((ROOT / path).read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        items = node.elts if isinstance(node, (ast.List, ast.Tuple, ast.Set)) else node.keys if isinstance(node, ast.Dict) else []
        named = {i.value for i in items if isinstance(i, ast.Constant) and i.value in model_types()}
        assert len(named) < 2, f"{path}:{node.lineno}: names {sorted(named)}"


# layouts whose model type has no bundled spec yet, and why (each must still be used: by a test's spec)
PENDING_LAYOUTS: dict[str, str] = {}


def test_every_layout_is_a_bundled_spec_s():
    """No layout goes unused: each is named by a bundled spec's hf.weights (and a model type that reuses one is defined
    by its YAML and tiny row alone)."""
    named = {family_of(t).origin.weights for t in MODEL_TYPES}
    assert named | set(PENDING_LAYOUTS) == set(LAYOUTS) and not named & set(PENDING_LAYOUTS)
    reusing = [t for t in MODEL_TYPES if family_of(t).origin.weights != t]
    assert reusing and all(WEIGHT_LAYOUTS not in defining_files()[t] for t in reusing)


def test_the_registry_is_the_specs():
    """The model types the text scan finds are exactly the specs' hf.model_type; each has one spec and a key table."""
    declared = {load_spec(n).hf.model_type: n for n in bundled_names() if load_spec(n).hf is not None}
    assert model_types() == dict(sorted(declared.items())) and list(MODEL_TYPES) == sorted(declared)
    for model_type in MODEL_TYPES:
        origin = family_of(model_type).origin
        assert origin.keys and origin.architectures, model_type
        assert set(origin.hooks) <= set(HOOKS), model_type


def test_list_prints_every_model_type_with_its_spec(cli):
    run = cli("import-hf", "--list")
    assert run.status == 0 and run.err == ""
    rows = [line.split() for line in run.out.splitlines()[1:-1]]
    assert [(r[0], r[1]) for r in rows] == list(model_types().items()) + list(also_types().items())
    assert ("qwen2", "qwen2_5", "Qwen2ForCausalLM") in [tuple(r) for r in rows]
    # a type read as another's says which (Kimi K2's kimi_k2 as deepseek_v3)
    assert all(f"(read as {family_of(r[0]).model_type})" in " ".join(r) for r in rows if r[0] in also_types())
    assert f"{len(MODEL_TYPES) + len(also_types())} model types" in run.out.splitlines()[-1]
    assert cli("import-hf", "--list", "x.json").status == 2 and cli("import-hf").status == 2


def test_help_and_readme_list_the_supported_model_types(capsys):
    """Generated from the specs: import-hf --help, and the overview guide's pointer to it (it holds no list to go stale)."""
    from archcalc.cli import main

    with pytest.raises(SystemExit):
        main(["import-hf", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert f"model types: {', '.join(MODEL_TYPES)};" in help_text
    overview = " ".join((ROOT / "docs" / "overview.md").read_text(encoding="utf-8").split())
    section = overview[overview.index("`archcalc import-hf CONFIG.json"):overview.index("`archcalc export-hf SPEC")]
    assert "`archcalc import-hf --list`" in section  # the guide points at the generated list, and holds none itself
    assert len([t for t in MODEL_TYPES if re.search(rf"\b{t}\b", section)]) < 3, "overview: a list of model types goes stale"


@pytest.mark.parametrize("asked,nearest", [("gemma3n_text", "gemma3_text"), ("lama", "llama"), ("llama4", "llama4_text")])
def test_an_unsupported_type_names_the_closest(cli, tmp_path, asked, nearest):
    path = tmp_path / "config.json"
    path.write_text(f'{{"model_type": "{asked}"}}')
    run = cli("count", "--hf", str(path))
    assert run.status == 2 and f"'{asked}' is not supported; the closest supported: {nearest}" in run.err, run.err
    assert nearest == closest(asked)[0] and "import-hf --list" in run.err
