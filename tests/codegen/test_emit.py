"""The emitted source: byte-identical to the golden file, deterministic, lint-clean, torch-free to emit."""

from __future__ import annotations

from pathlib import Path

import pytest

from archcalc.cli.output import stamp
from archcalc.codegen.emit import MARKER, emit
from tests.helpers import assert_ruff_clean, lowered

GOLDEN = Path(__file__).resolve().parent.parent / "golden"
# GPT-2 (learned positions, fused qkv, tied head, scaled init), a Llama-style model (GQA, SwiGLU, rotary) and a
# mixture of experts: a change to the emitter shows up as a readable diff of these files.
GOLDENS = {"gpt2_small.py": ("gpt2", "small"), "llama_3_8b.py": ("llama", "3-8b"), "mixtral_8x7b.py": ("mixtral", "8x7b")}


@pytest.mark.parametrize("file", list(GOLDENS))
def test_generated_files_match_the_golden_files_byte_for_byte(file):
    """Regenerate with: archcalc generate SPEC --size SIZE -o tests/golden/FILE --force (then read the diff)."""
    spec, size = GOLDENS[file]
    source = emit(lowered(spec, size), f"archcalc generate {spec} --size {size} -o FILE.py")
    assert stamp(source, MARKER) == (GOLDEN / file).read_text(encoding="utf-8")  # as -o writes it: with its content hash


def test_emission_is_deterministic_across_processes(process):
    script = ("from archcalc.codegen.emit import emit; from tests.helpers import lowered; "
              "import sys; sys.stdout.write(emit(lowered('gpt3', '13b'), 'x'))")
    runs = {process.run(["-c", script], capture_output=True, text=True, check=True,
                        env={"PYTHONHASHSEED": seed, "PATH": ""}, cwd=Path(__file__).parents[2]).stdout
            for seed in ("1", "2")}
    assert len(runs) == 1


@pytest.mark.parametrize("spec,size,values", [
    ("gpt2", "small", {}), ("gpt3", "xl", {}), ("gpt2", "small", {"qkv_bias": False, "tie_embeddings": False}),
    ("llama", "3-8b", {}), ("mixtral", "8x7b", {}), ("deepseek_v3", "671b", {}), ("gpt_oss", "20b", {}), ("t5", "small", {}),
])
def test_generated_files_pass_ruff(tmp_path, spec, size, values):
    assert_ruff_clean(emit(lowered(spec, size, **values), "test"), tmp_path)


def test_generate_does_not_import_torch(process, tmp_path):
    script = ("import sys; from archcalc.cli import main; "
              f"status = main(['generate', 'gpt2', '--size', 'small', '-o', {str(tmp_path / 'm.py')!r}]); "
              "print(status, 'torch' in sys.modules)")
    out = process.run(["-c", script], capture_output=True, text=True, check=True).stdout
    assert out.strip().endswith("0 False")
