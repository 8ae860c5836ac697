"""A generated file loads however Python code is loaded, and what it builds pickles.

- ``import model`` (the file on sys.path), ``importlib`` without registering the module in ``sys.modules``,
  ``runpy.run_path``: each gives a module whose ``build()`` works (the file has no ``from __future__ import
  annotations``, which made dataclasses look the module up in ``sys.modules``).
- ``Config`` and a model pickle (``pickle``, ``torch.save``) when the file was imported normally, and when
  ``archcalc.codegen.load.load_source`` imported it.
- ``archcalc.codegen.load`` writes nothing: no folder is left in the temporary directory, also by ``archcalc verify``.
"""

from __future__ import annotations

import importlib.util
import os
import pickle
import runpy
import sys
import tempfile

import torch

from archcalc.codegen.emit import emit
from archcalc.codegen.load import load_source
from tests.helpers import TINY, lowered

SOURCE = emit(lowered("gpt2", "small", **TINY), "archcalc generate gpt2 --size small -o model.py")


def test_no_future_import_in_generated_files():
    assert "from __future__" not in SOURCE


def test_importlib_without_sys_modules(tmp_path):
    path = tmp_path / "model.py"
    path.write_text(SOURCE, encoding="utf-8")
    spec = importlib.util.spec_from_file_location("not_registered_model", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)  # not in sys.modules: dataclasses must not need it
    assert "not_registered_model" not in sys.modules
    assert mod.build(device="meta").cfg == mod.Config()


def test_runpy(tmp_path):
    path = tmp_path / "model.py"
    path.write_text(SOURCE, encoding="utf-8")
    namespace = runpy.run_path(str(path))
    model = namespace["build"]()
    assert model(torch.zeros(1, 4, dtype=torch.long)).shape == (1, 4, TINY["V"])


def test_a_normally_imported_file_pickles(process, tmp_path):
    """In a fresh interpreter: import the file, pickle the Config and the model, torch.save the model, load both back."""
    (tmp_path / "model.py").write_text(SOURCE, encoding="utf-8")
    script = (
        "import pickle, torch, model\n"
        "m = model.build()\n"
        "assert pickle.loads(pickle.dumps(model.Config())) == model.Config()\n"
        "m2 = pickle.loads(pickle.dumps(m))\n"
        "torch.save(m, 'm.pt')\n"
        "m3 = torch.load('m.pt', weights_only=False)\n"
        "x = torch.zeros(1, 3, dtype=torch.long)\n"
        "assert torch.equal(m(x), m2(x)) and torch.equal(m(x), m3(x))\n"
        "print('ok')\n"
    )
    proc = process.run(["-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr


def test_load_source_writes_nothing_and_its_models_pickle():
    before = set(os.listdir(tempfile.gettempdir()))
    mod = load_source(SOURCE)
    model = mod.build()
    copy = pickle.loads(pickle.dumps(model))
    x = torch.zeros(1, 3, dtype=torch.long)
    assert torch.equal(model(x), copy(x))
    assert {n for n in set(os.listdir(tempfile.gettempdir())) - before if n.startswith("archcalc")} == set()


def test_verify_leaves_no_temporary_folders(process, tmp_path):
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    proc = process.run(["-m", "archcalc", "verify", "gpt2"], env=env, capture_output=True, text=True,
                       timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert list(tmp_path.iterdir()) == []


def test_tracebacks_show_the_generated_lines():
    mod = load_source(SOURCE)
    model = mod.build()
    try:
        model(torch.zeros(1, 3))  # float ids: forward's own check refuses them
    except ValueError as e:
        import traceback

        text = "".join(traceback.format_exception(e))
        assert "check_tokens(input_ids, targets)" in text and "raise ValueError(" in text  # the generated lines
    else:
        raise AssertionError("a float input should fail")
