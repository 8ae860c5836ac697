"""Rotary scaling read from HF configs (archcalc/hf/rope.py): every number transformers 5 uses, filled in as it
fills them in, and one located line with exit 2 for a rope_type archcalc does not model or a missing key.
(The numbers' effect, logits and tokens against transformers: tests/codegen/test_rope_scaling.py.)"""

from __future__ import annotations

import json
import re

import pytest

from archcalc.hf import spec_from_hf_config

LOCATED = re.compile(r"^(?P<file>.+\.json):(?P<line>\d+):(?P<col>\d+): .+$")


def _scaling(config: dict) -> dict | None:
    spec = spec_from_hf_config(config, "config.json")
    scaling = spec.model.embedding.position.scaling
    return None if scaling is None else {k: v for k, v in scaling.model_dump().items() if v is not None}


def test_llama3_as_llama_3_1_writes_it():
    config = {"model_type": "llama", "rope_theta": 500000.0, "rope_scaling": {
        "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 8192, "rope_type": "llama3"}}
    assert _scaling(config) == {"type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                "original_context": 8192}


def test_transformers_defaults_are_filled_in():
    # yarn: original context from max_position_embeddings, factor null -> their ratio, betas `or 32` / `or 1`, truncate
    yarn = {"model_type": "qwen2", "max_position_embeddings": 32768, "rope_parameters": {
        "rope_type": "yarn", "factor": None, "beta_fast": 0, "original_max_position_embeddings": 4096}}
    assert _scaling(yarn) == {"type": "yarn", "factor": 8.0, "original_context": 4096, "beta_fast": 32.0, "beta_slow": 1.0,
                              "truncate": True}
    # dynamic grows past max_position_embeddings (the family's default, 2048 for Llama, when the config has none)
    assert _scaling({"model_type": "llama", "rope_parameters": {"rope_type": "dynamic", "factor": 2}}) == {
        "type": "dynamic", "factor": 2.0, "original_context": 2048}
    # gpt-oss without rope parameters: GptOssConfig's own YaRN; DeepSeek's mscales kept
    assert _scaling({"model_type": "gpt_oss"}) == {"type": "yarn", "factor": 32.0, "original_context": 4096,
                                                   "beta_fast": 32.0, "beta_slow": 1.0, "truncate": False}
    deepseek = _scaling({"model_type": "deepseek_v3", "rope_scaling": {"type": "yarn", "factor": 40, "mscale": 1.0,
                                                                       "mscale_all_dim": 1.0, "original_max_position_embeddings": 4096}})
    assert deepseek["mscale"] == deepseek["mscale_all_dim"] == 1.0 and deepseek["factor"] == 40.0


def test_phi3_reads_su_and_yarn_as_longrope_with_its_own_original_context():
    """Phi3Config: 'su' and 'yarn' are LongRoPE; its top-level original_max_position_embeddings (default 4096)
    replaces the one in rope_scaling; factor, when absent, is max_position_embeddings / original."""
    factors = {"short_factor": [1.0] * 48, "long_factor": [2.0] * 48}
    for name in ("longrope", "su", "yarn"):
        scaling = _scaling({"model_type": "phi3", "max_position_embeddings": 131072, "rope_scaling": {
            "type": name, **factors, "original_max_position_embeddings": 999}})
        assert scaling == {"type": "longrope", "factor": 32.0, "original_context": 4096, **factors}


def test_legacy_rope_scaling_wins_over_rope_parameters_as_in_transformers():
    config = {"model_type": "llama", "rope_parameters": {"rope_type": "default", "rope_theta": 1000.0},
              "rope_scaling": {"rope_type": "linear", "factor": 4.0}}
    assert _scaling(config) == {"type": "linear", "factor": 4.0}
    assert _scaling({**config, "rope_scaling": None}) is None


def test_imported_spec_round_trips_through_yaml(cli, tmp_path):
    """import-hf writes the scaling (LongRoPE's lists included) and counting the written spec gives the same."""
    path = tmp_path / "phi.json"
    path.write_text(json.dumps({"model_type": "phi3", "hidden_size": 64, "num_attention_heads": 4, "rope_scaling": {
        "type": "longrope", "short_factor": [1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5], "long_factor": [2.0] * 8}}))
    out = tmp_path / "phi.yaml"
    assert cli("import-hf", str(path), "-o", str(out)).status == 0
    text = out.read_text()
    assert "longrope" in text and "short_factor" in text
    assert cli("count", str(out), "--json").json()["results"][0]["total"] == cli("count", "--hf", str(path), "--json").json()["results"][0]["total"]


CASES = [  # (config text, the key the message must point at (its first occurrence), words the message must contain)
    ('{"model_type": "llama", "rope_parameters": {"rope_type": "mystery"}}', '"rope_type"', ["'mystery' is not modelled", "yarn"]),
    ('{"model_type": "llama", "rope_scaling": {"type": "ntk"}}', '"type"', ["rope_scaling.type", "'ntk' is not modelled"]),
    ('{"model_type": "llama", "rope_parameters": {"rope_type": "yarn"}}', '"rope_parameters"', ["needs 'factor'"]),
    ('{"model_type": "llama", "rope_parameters": {"rope_type": "llama3", "factor": 8}}', '"rope_parameters"', ["needs 'low_freq_factor'"]),
    ('{"model_type": "llama", "rope_parameters": {"rope_type": "linear", "factor": -2}}', '"factor"', ["factor", "positive number"]),
    ('{"model_type": "llama", "rope_parameters": {"rope_type": "linear", "factor": null}}', '"factor"', ["factor", "null"]),
    ('{"model_type": "qwen2", "rope_parameters": {"rope_type": "yarn", "factor": 4, "beta_slow": -1}}', '"beta_slow"', ["positive"]),
    ('{"model_type": "qwen2", "rope_parameters": {"rope_type": "yarn", "factor": 4, "truncate": 1}}', '"truncate"', ["true or false"]),
    ('{"model_type": "qwen2", "rope_parameters": {"rope_type": "yarn", "factor": 4,\n "original_max_position_embeddings": 0}}',
     '"original_max_position_embeddings"', ["positive integer"]),
    ('{"model_type": "phi3", "hidden_size": 64, "num_attention_heads": 4,\n "rope_scaling": {"type": "longrope", "short_factor": [1, 1],'
     ' "long_factor": [1, 1]}}', '"short_factor"', ["expected 8 factors"]),
    ('{"model_type": "phi3", "rope_scaling": {"type": "longrope", "short_factor": [1, "x"], "long_factor": [1]}}', '"x"',
     ["short_factor[1]", "positive number"]),
    ('{"model_type": "gemma2", "rope_parameters": {"sliding_attention": {"rope_type": "default"}}}', '"sliding_attention"',
     ["per layer type"]),
]


@pytest.mark.parametrize("text,token,words", CASES, ids=[str(i) for i in range(len(CASES))])
def test_bad_rope_parameters_are_one_located_line_and_exit_2(cli, tmp_path, text, token, words):
    path = tmp_path / "config.json"
    path.write_text(text)
    run = cli("count", "--hf", str(path), "--json")
    assert run.status == 2 and run.out == ""
    message = run.err.strip()
    assert "\n" not in message and "Traceback" not in message
    m = LOCATED.match(message)
    assert m, message
    before = text[: text.index(token)]
    line, col = before.count("\n") + 1, len(before) - (before.rfind("\n") + 1) + 1
    assert (m["file"], int(m["line"]), int(m["col"])) == (str(path), line, col), message
    for word in words:
        assert word in message, message
