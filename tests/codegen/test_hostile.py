"""Hostile specs never produce a generated file that executes anything on import: spec text reaches the
source only as validated identifiers, numbers and repr() strings."""

from __future__ import annotations

import ast

import yaml
from hypothesis import HealthCheck, given
from hypothesis import strategies as st

from archcalc.codegen.emit import emit
from archcalc.errors import SpecError
from archcalc.ir import lower
from archcalc.spec import load_spec_text
from archcalc.spec.bind import bind
from tests.helpers import examples

BASE = yaml.safe_load(open("spec/gpt2.yaml", encoding="utf-8"))

PAYLOADS = [
    "'''\nimport os; os.system('touch {marker}')\n'''",
    '"""\nimport os; os.system("touch {marker}")\n"""',
    "\\\nimport os; os.system('touch {marker}')  # ",
    "x\rimport os; os.system('touch {marker}')",
    "x\u2028import os; os.system('touch {marker}')",
    "#\n__import__('os').system('touch {marker}')",
    "{{0}}'.format(__import__('os').system('touch {marker}'))",
]


def load(title: str, source: str, notes: str = ""):
    data = dict(BASE, title=title, source=source, notes=notes)
    return load_spec_text(yaml.safe_dump(data, allow_unicode=True), "hostile.yaml")


def source_for(title: str, source: str, notes: str = "") -> str:
    return emit(lower(bind(load(title, source, notes), "small")), "archcalc generate gpt2 --size small -o FILE.py")


def top_level_shape(text: str) -> list[str]:
    """The module's top-level statements, by kind and target: what an injection would change."""
    shape = []
    for node in ast.parse(text).body:
        names = [getattr(t, "id", "?") for t in getattr(node, "targets", [])] or [getattr(node, "name", "")]
        shape.append(f"{type(node).__name__}:{','.join(names)}")
    return shape


def test_payloads_in_title_and_source_stay_strings(process, tmp_path):
    marker = tmp_path / "MARKER"
    benign = top_level_shape(source_for("GPT-2", "a paper"))
    for payload in PAYLOADS:
        text = payload.format(marker=marker)
        try:
            generated = source_for(text, text)
        except SpecError as e:  # refused at load time (a stray line-break character): nothing is generated
            assert str(e).startswith("hostile.yaml:")
            continue
        assert top_level_shape(generated) == benign
        path = tmp_path / "hostile_model.py"
        path.write_text(generated, encoding="utf-8")
        proc = process.run(
            ["-c", "import sys, importlib.util as u; s = u.spec_from_file_location('m', sys.argv[1]); "
             "m = u.module_from_spec(s); sys.modules['m'] = m; s.loader.exec_module(m); print(repr(m.SPEC_TITLE))", str(path)],
            timeout=120,
        )
        assert proc.returncode == 0, proc.stderr[-1000:]
        assert proc.stdout.strip() == repr(text)
        assert not marker.exists(), payload


@examples(80, suppress_health_check=[HealthCheck.too_slow])
@given(title=st.text(max_size=60), source=st.text(max_size=60))
def test_any_title_and_source_leave_the_module_shape_unchanged(title, source):
    try:
        spec = load(title, source)  # YAML itself may normalise some characters (NEL becomes a space)
    except SpecError as e:  # refused at load time (a stray line-break character): nothing is generated
        assert str(e).startswith("hostile.yaml:")
        return
    generated = source_for(title, source)
    tree = ast.parse(generated)
    assigned = {t.id: node.value for node in tree.body if isinstance(node, ast.Assign) for t in node.targets}
    assert ast.literal_eval(assigned["SPEC_TITLE"]) == spec.title
    assert ast.literal_eval(assigned["SPEC_SOURCE"]) == spec.source
    assert top_level_shape(generated) == top_level_shape(source_for("t", "s"))
