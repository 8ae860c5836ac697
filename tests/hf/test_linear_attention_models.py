"""Qwen3.5 and Qwen3-Next configs as published (issue 28): a multimodal wrapper's text model is imported and the
import says so in one line; an error inside its text_config points into the file; Qwen3-Next-80B-A3B's inference
keeps a fixed state in its 36 Gated DeltaNet layers and a KV cache in its 12 attention layers only."""

from __future__ import annotations

import json
from pathlib import Path

from archcalc.backends.infer import infer
from archcalc.hf import spec_from_hf_file
from archcalc.spec.bind import bind

HUB = Path(__file__).resolve().parents[1] / "data" / "hf"
NEXT = HUB / "qwen3-next-80b-a3b-instruct.json"


def test_a_wrapper_imports_its_text_model_and_says_so_in_one_line(cli):
    path = HUB / "qwen3.5-27b.json"
    run = cli("count", "--hf", str(path), "--json")
    assert run.status == 0
    assert run.err.count("\n") == 1 and "qwen3_5 is a multimodal model: its text model" in run.err
    assert "vision tower" in run.err and run.err.startswith(f"archcalc: {path}: ")
    assert json.loads(run.out)["results"][0]["total"] == 26_895_998_464  # transformers' Qwen3_5ForCausalLM


def test_an_error_in_the_text_config_points_into_the_file(cli, tmp_path):
    data = json.loads((HUB / "qwen3.5-4b.json").read_text())
    data["text_config"]["linear_num_key_heads"] = 5  # does not divide the 32 value heads
    path = tmp_path / "config.json"
    path.write_text(json.dumps(data, indent=2))
    run = cli("count", "--hf", str(path))
    line = next(i for i, text in enumerate(path.read_text().splitlines(), 1) if '"linear_num_key_heads"' in text)
    assert run.status == 2 and run.err.startswith(f"{path}:{line}:") and "linear_num_key_heads" in run.err, run.err


def test_qwen3_next_state_is_constant_and_kv_comes_from_the_attention_layers():
    """At 32k and 128k tokens of context: per Gated DeltaNet layer and sequence C·(K − 1) + H·Dk·Dv elements
    (C = 2·16·128 + 32·128 conv channels, 32 value heads of a 128 × 128 state), whatever the context; the KV cache of
    the 12 attention layers (2 key/value heads of 256) grows with it."""
    spec = spec_from_hf_file(NEXT)
    binding = bind(spec, next(iter(spec.sizes)))
    state = 36 * ((2 * 16 * 128 + 32 * 128) * 3 + 32 * 128 * 128) * 2  # bfloat16
    for context in (32_768, 131_072):
        r = infer(binding, "h200", batch=1, prompt=context - 256, new_tokens=256, tp=2)
        assert (r.state_layers, r.state_bytes) == (36, state) == (36, 39_518_208)
        assert r.kv_cache_bytes == 12 * 2 * 2 * 256 * context * 2
