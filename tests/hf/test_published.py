"""Real configs as the Hub serves them: keys transformers itself does not read are noted, not refused (SmolLM2's
``is_llama_config`` and ``rope_interleaved``, the original TensorFlow BERT configs' ``pooler_*``); a config missing keys
every config of its declared type has (a Gemma 1 config relabelled ``gemma2``) is refused, located, rather than
counted with the other type's defaults. (That the counts equal transformers' is tests/hf/test_oracle.py's check.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

HUB = Path(__file__).resolve().parents[1] / "data" / "hf"

# google/gemma-7b's config.json as published (model type gemma), to be relabelled gemma2 below
GEMMA_7B = {
    "architectures": ["GemmaForCausalLM"], "attention_bias": False, "attention_dropout": 0.0, "bos_token_id": 2,
    "eos_token_id": 1, "head_dim": 256, "hidden_act": "gelu", "hidden_size": 3072, "initializer_range": 0.02,
    "intermediate_size": 24576, "max_position_embeddings": 8192, "model_type": "gemma", "num_attention_heads": 16,
    "num_hidden_layers": 28, "num_key_value_heads": 16, "pad_token_id": 0, "rms_norm_eps": 1e-06, "rope_scaling": None,
    "rope_theta": 10000.0, "torch_dtype": "bfloat16", "transformers_version": "4.38.0.dev0", "use_cache": True,
    "vocab_size": 256000,
}


@pytest.mark.parametrize("name,total,keys", [
    ("smollm2-135m", 134_515_008, ["is_llama_config", "rope_interleaved"]),
    ("bert-base-multilingual-cased", 177_853_440, ["directionality", "pooler_fc_size", "pooler_num_attention_heads",
                                                   "pooler_num_fc_layers", "pooler_size_per_head", "pooler_type"]),
])
def test_keys_transformers_does_not_read_are_noted_not_refused(cli, name, total, keys):
    run = cli("count", "--hf", str(HUB / f"{name}.json"), "--json")
    assert run.status == 0, run.err
    payload = run.json()
    assert payload["results"][0]["total"] == total
    notes = " ".join(payload.get("notes", "").split()) or _notes(HUB / f"{name}.json")
    assert f"so changing nothing counted: {', '.join(keys)} (" in notes


def test_gptj_n_ctx_of_older_checkpoints_is_noted(cli, tmp_path):
    """Cedille/fr-boris and other GPT-J checkpoints saved by older transformers carry n_ctx, which transformers' GPT-J
    does not read: counted as without it, with a note."""
    data = json.loads((HUB / "gpt-j-6b.json").read_text())
    path = tmp_path / "config.json"
    path.write_text(json.dumps(data | {"n_ctx": 2048}, indent=2))
    plain, with_n_ctx = cli("count", "--hf", str(HUB / "gpt-j-6b.json"), "--json"), cli("count", "--hf", str(path), "--json")
    assert with_n_ctx.status == 0, with_n_ctx.err
    assert with_n_ctx.json()["results"][0]["total"] == plain.json()["results"][0]["total"] == 6_050_882_784
    assert "so changing nothing counted: n_ctx (" in _notes(path)


def test_num_labels_written_by_old_transformers_is_not_refused(cli, tmp_path):
    """distilgpt2 and other GPT-2 fine-tunes saved by transformers 2-3 carry _num_labels (the base config's old name
    for the number of classification labels): no parameter of a causal LM depends on it."""
    path = tmp_path / "config.json"
    path.write_text(json.dumps(json.loads((HUB / "gpt2-hub.json").read_text()) | {"_num_labels": 1}, indent=2))
    run = cli("count", "--hf", str(path), "--json")
    assert run.status == 0, run.err
    assert run.json()["results"][0]["total"] == 124_439_808


def _notes(path: Path) -> str:
    from archcalc.hf import spec_from_hf_file

    return " ".join(spec_from_hf_file(path).notes.split())


def test_a_key_that_would_change_the_model_is_still_refused(cli, tmp_path):
    data = json.loads((HUB / "smollm2-135m.json").read_text()) | {"pretraining_tp": 1, "mlp_only_layers": [0]}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(data, indent=2))
    run = cli("count", "--hf", str(path))
    assert run.status == 2 and "mlp_only_layers: unknown field for model type llama" in run.err


def test_a_gemma_1_config_relabelled_gemma2_is_refused_at_its_model_type(cli, tmp_path):
    """Counted as Gemma 2 it would be 172,032 too many (the sandwich norms Gemma 1 lacks), with only an H·d_head warning."""
    path = tmp_path / "config.json"
    path.write_text(json.dumps(GEMMA_7B | {"model_type": "gemma2"}, indent=2))
    run = cli("count", "--hf", str(path))
    assert run.status == 2 and run.out == "" and len(run.err.strip().splitlines()) == 1
    line = next(i for i, text in enumerate(path.read_text().splitlines(), 1) if '"model_type"' in text)
    assert run.err.startswith(f"{path}:{line}:17: model_type: 'gemma2', but it lacks query_pre_attn_scalar, "
                              "attn_logit_softcapping, final_logit_softcapping and sliding_window"), run.err
    assert "GemmaForCausalLM" in run.err
    # a hand-written config (no transformers_version) may leave them to Gemma2Config's defaults
    hand = {k: v for k, v in GEMMA_7B.items() if k != "transformers_version"} | {"model_type": "gemma2"}
    path.write_text(json.dumps(hand))
    assert cli("count", "--hf", str(path)).status == 0
