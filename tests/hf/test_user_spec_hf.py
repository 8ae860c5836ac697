"""A spec of one's own with ``hf: {model_type: llama}`` (docs/spec-language.md, "Your spec and transformers"): it
borrows the bundled spec's key table; export-hf writes a config transformers builds as the same model, and where it
cannot, the one-line error names the fix (a config key, or the hyperparameters named otherwise than the table's)."""

from __future__ import annotations

import json

import pytest

from tests.helpers import meta_count

MY_SPEC = """name: my1b
title: My 1B
hyperparameters:
  V: {default: 32000}
  tie_embeddings: {type: bool, default: false}
  L: {doc: blocks}
  d: {doc: width}
  H: {doc: heads}
  KV: {default: H}
  d_ff: {default: 4 * d}
model:
  embedding: {vocab: V, width: d, position: {kind: rotary, base: 10000}}
  block:
    repeat: L
    residual: pre-norm
    norm: {kind: rmsnorm, eps: 1e-5}
    attention: {heads: H, kv_heads: KV, head_width: d / H, qkv_bias: false, out_bias: false}
    mlp: {kind: gated, hidden: d_ff, activation: silu, bias: false}
  final_norm: {kind: rmsnorm, eps: 1e-5}
  head: {tied: tie_embeddings}
sizes:
  base: {L: 4, d: 256, H: 8, KV: 2}
hf:
  model_type: llama
  config: {rms_norm_eps: 1.0e-5}
"""


def _write(tmp_path, text: str):
    path = tmp_path / "my1b.yaml"
    path.write_text(text)
    return path


def test_the_documented_example_exports_a_config_transformers_builds_as_counted(cli, tmp_path):
    transformers = pytest.importorskip("transformers")
    spec, out = _write(tmp_path, MY_SPEC), tmp_path / "config.json"
    run = cli("export-hf", str(spec), "-o", str(out))
    assert run.status == 0, run.err
    total = cli("count", str(spec), "--json").json()["results"][0]["total"]
    data = json.loads(out.read_text())
    config = transformers.AutoConfig.for_model(data.pop("model_type"), **data)
    assert meta_count(config) == total


def test_a_setting_only_a_config_key_holds_is_named_with_its_fix(cli, tmp_path):
    spec = _write(tmp_path, MY_SPEC.replace("  config: {rms_norm_eps: 1.0e-5}\n", ""))
    run = cli("export-hf", str(spec), "-o", str(tmp_path / "c.json"))
    assert run.status == 2 and len(run.err.strip().splitlines()) == 1
    assert "eps is 1e-05 in the spec but 1e-06" in run.err and "config: {rms_norm_eps: 1e-05}" in run.err, run.err


def test_hyperparameters_named_otherwise_than_the_table_are_named(cli, tmp_path):
    renamed = MY_SPEC.replace("  H: {doc: heads}", "  heads: {doc: heads}").replace("KV: {default: H}", "KV: {default: heads}")
    renamed = renamed.replace("heads: H, kv_heads", "heads: heads, kv_heads").replace("d / H", "d / heads").replace("H: 8", "heads: 8")
    run = cli("export-hf", str(_write(tmp_path, renamed)), "-o", str(tmp_path / "c.json"))
    assert run.status == 2 and len(run.err.strip().splitlines()) == 1
    assert "num_attention_heads (H)" in run.err and "my1b lacks" in run.err and "spec/llama.yaml" in run.err, run.err
    assert not (tmp_path / "c.json").exists()
