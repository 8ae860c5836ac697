"""The generated Mamba2/attention hybrid (issue 28), beyond what tests/codegen/test_hybrids.py checks of every hybrid
(parity with transformers, counts, cache, FLOPs): its layers interleave as Bamba's, its file passes ruff, and Mamba's
(the first) layers beside attention are generated too (Jamba's)."""

from __future__ import annotations

import pytest

from archcalc.codegen.emit import emit
from archcalc.ir import lower
from archcalc.spec import load_spec_text
from archcalc.spec.bind import bind
from tests.codegen.test_hybrids import BAMBA as SPEC
from tests.helpers import assert_ruff_clean, loaded

torch = pytest.importorskip("torch")
D = 32


def _lowered():
    return lower(bind(load_spec_text(SPEC, "tiny_bamba.yaml"), "x"))


def _source() -> str:
    return emit(_lowered(), "test")


def test_the_layers_interleave_as_bambas():
    module = loaded(_source())
    model = module.build(device="meta")
    kinds = ["mixer" if hasattr(block, "mixer") else "attn" for block in model.layer_list]
    assert kinds == ["mixer", "mixer", "mixer", "attn"]
    assert module.Config().rotary_width == D // 4 // 2  # half of each head's 8 features


def test_generated_file_passes_ruff(process, tmp_path):
    text = _source()
    assert_ruff_clean(text, tmp_path)
    path = tmp_path / "model.py"
    formatted = process.run(["-m", "ruff", "format", "--isolated", "--line-length", "100", "--check", "--diff", str(path)])
    assert formatted.returncode == 0, formatted.stdout[-3000:] + formatted.stderr
    assert not [line for line in text.splitlines() if len(line) > 100 and not line.strip().startswith('"')]
    assert "def new_cache(self, batch: int, length: int) -> list[KVCache | MixerCache]:" in text


def test_mamba1_beside_attention_is_generated():
    """Mamba1 layers beside attention layers (Jamba's; tests/codegen/test_hybrids.py checks them against transformers)."""
    text = SPEC.replace("mixer: {kind: mamba2, inner: 2 * d, state: N, conv: 4, heads: 4, groups: 2, chunk: Q}",
                        "mixer: {kind: mamba, inner: 2 * d, state: N, conv: 4, dt_rank: 4}")
    text = text.replace("hf: {model_type: bamba, weights: bamba}\n", "")
    assert "class MambaBlocksMamba(nn.Module):" in emit(lower(bind(load_spec_text(text, "tiny.yaml"), "x")), "test")
