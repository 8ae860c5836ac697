"""A nested ``attn_config`` (MPT's): settings that would change the model are refused at their nested key, with one
line; the score scale is read; dropout, the kernel and the generic keys of transformers' to_dict() are accepted."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from archcalc.errors import SpecError
from archcalc.hf import spec_from_hf_file

REAL = Path(__file__).resolve().parents[1] / "data" / "hf" / "mpt-7b-instruct.json"


def _with(tmp_path: Path, **settings) -> Path:
    data = json.loads(REAL.read_text())
    data["attn_config"].update(settings)
    path = tmp_path / "config.json"
    path.write_text(json.dumps(data, indent=2))
    return path


@pytest.mark.parametrize(("key", "value", "why"), [
    ("qk_ln", True, "LayerNorm on the queries and keys"),
    ("clip_qkv", 6, "clamped to ±clip_qkv"),
    ("attn_type", "multiquery_attention", "multi-query"),
    ("prefix_lm", True, "prefix-LM"),
    ("attn_uses_sequence_id", True, "each packed sequence"),
    ("alibi", False, "learned positions"),
    ("alibi_bias_max", 16, "builds with 8"),
    ("sliding_window", 4, "sliding-window attention"),
    ("rope_theta", 10000, "unknown attention setting"),
])
def test_a_setting_that_changes_the_model_is_refused_at_its_nested_key(tmp_path, key, value, why):
    with pytest.raises(SpecError) as e:
        spec_from_hf_file(_with(tmp_path, **{key: value}))
    message = str(e.value)
    assert f"attn_config.{key}:" in message and why in message and "\n" not in message.strip()


def test_softmax_scale_sets_the_score_scale_and_the_rest_is_accepted(tmp_path):
    spec = spec_from_hf_file(_with(tmp_path, softmax_scale=0.125, attn_pdrop=0.1, attn_impl="flash", output_attentions=False))
    assert spec.model.block.attention.scale == 0.125
    assert spec_from_hf_file(REAL).model.block.attention.scale is None
