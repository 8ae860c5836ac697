"""Configs archcalc cannot count exactly are refused: exit 2, one line, FILE:LINE:COL of the key."""

from __future__ import annotations

import json
import re

import pytest

LOCATED = re.compile(r"^(?P<file>.+\.json):(?P<line>\d+):(?P<col>\d+): .+$")

CASES = [  # (config text, line, col, words the message must contain)
    ('{\n  "model_type": "zamba",\n  "hidden_size": 8\n}', 2, 3, ["model_type", "'zamba' is not supported", "state-space",
                                                             "not modelled yet"]),
    ('{\n  "model_type": "llama",\n  "num_experts": 8\n}', 3, 3, ["num_experts", "unknown field", "llama"]),
    ('{\n  "model_type": "llama",\n  "hidden_size": 64,\n}', 4, 1, ["malformed JSON"]),
    ('{"model_type": "llama", "rms_norm_eps": NaN}', 1, 25, ["rms_norm_eps", "NaN"]),
    ('{"model_type": "llama",\n "vocab_size": 10, "vocab_size": 12}', 2, 20, ["duplicate key 'vocab_size'"]),
    ('{\n  "model_type": "falcon",\n    "num_kv_heads": 3, "multi_query": false\n}', 3, 5, ["num_kv_heads", "not modelled"]),
    ('{"model_type": "gpt2", "add_cross_attention": true}', 1, 24, ["add_cross_attention", "cross-attention"]),
    ('{"model_type": "phi3", "attention_bias": true}', 1, 24, ["attention_bias", "phi3"]),
    ('{"model_type": "bert", "is_decoder": true}', 1, 24, ["is_decoder"]),
    ('{"model_type": "gemma2", "use_bidirectional_attention": true}', 1, 26, ["use_bidirectional_attention"]),
    ('{"model_type": "gpt2", "scale_attn_by_inverse_layer_idx": true}', 1, 24, ["scale_attn_by_inverse_layer_idx"]),
    ('{"model_type": "deepseek_v3", "moe_layer_freq": 2}', 1, 31, ["moe_layer_freq"]),
    # dense layers that transformers cannot place, routers that cannot run, clamped q/k/v
    ('{"model_type": "qwen2_moe", "decoder_sparse_step": 0}', 1, 29, ["decoder_sparse_step", "from 1"]),
    ('{"model_type": "qwen3_moe", "mlp_only_layers": [0, 24]}', 1, 52, ["mlp_only_layers[1]", "from 0 to 23"]),
    ('{"model_type": "qwen3_moe", "mlp_only_layers": 3}', 1, 29, ["mlp_only_layers", "list of layer indices"]),
    # a billion layers whose settings differ and do not repeat would be a billion-long list: refused at once, at the key
    # that makes them differ (a uniform or repeating stack is not listed: tests/hf/test_per_layer_limits.py)
    ('{"model_type": "qwen2_moe", "num_hidden_layers": 1000000000, "mlp_only_layers": [5]}', 1, 62,
     ["mlp_only_layers", "1,000,000,000 layers", "at most 100,000"]),
    ('{"model_type": "smollm3", "num_hidden_layers": 1000000000, "no_rope_layer_interval": 1000000000}', 1, 60,
     ["no_rope_layer_interval", "do not repeat", "at most 100,000"]),
    ('{"model_type": "llama4_text", "num_hidden_layers": 1000000000, "moe_layers": [1]}', 1, 64, ["moe_layers", "at most 100,000"]),
    ('{"model_type": "qwen3_moe", "use_sliding_window": true}', 1, 29, ["use_sliding_window"]),
    ('{"model_type": "deepseek_v2", "topk_method": "noaux_tc"}', 1, 31, ["topk_method", "group_limited_greedy"]),
    ('{"model_type": "deepseek_v2", "topk_method": "group_limited_greedy"}', 1, 31, ["needs n_group and topk_group"]),
    ('{"model_type": "olmoe", "clip_qkv": 8.0}', 1, 25, ["clip_qkv"]),
    ('{"model_type": "llama", "hidden_act": "quick_gelu"}', 1, 25, ["hidden_act", "'quick_gelu' is not modelled"]),
    ('{"model_type": "t5", "feed_forward_proj": "gated-quick_gelu"}', 1, 22, ["feed_forward_proj", "quick_gelu"]),
    ('{"model_type": "llama", "hidden_size": "big"}', 1, 25, ["hidden_size", "expected an integer"]),
    ('{"model_type": "llama", "num_hidden_layers": 0}', 1, 25, ["num_hidden_layers", "from 1"]),
    ('{"model_type": "llama", "hidden_size": 100, "num_attention_heads": 3}', 1, 45, ["num_attention_heads", "does not divide"]),
    ('{"model_type": "mistral", "hidden_size": 96, "num_attention_heads": 6}', 1, 1, ["num_key_value_heads: 8", "default"]),
    ('{"model_type": "qwen2", "num_hidden_layers": 2,\n "layer_types": ["full_attention", "chunked_attention"]}', 2, 36,
     ["layer_types[1]", "chunked_attention"]),
    ('{"model_type": "gemma2", "num_hidden_layers": 2, "layer_types": ["full_attention"]}', 1, 50, ["layer_types", "2 layer types"]),
    # issue 28: a hybrid's layer types, its interval, and an error inside a multimodal wrapper's text_config
    ('{"model_type": "qwen3_5_text", "num_hidden_layers": 2,\n "layer_types": ["linear_attention", "sliding_attention"]}', 2, 38,
     ["layer_types[1]", "sliding_attention", "linear_attention or full_attention"]),
    ('{"model_type": "qwen3_5_text", "full_attention_interval": 0}', 1, 32, ["full_attention_interval", "from 1"]),
    ('{"model_type": "qwen3_5", "text_config": {"model_type": "qwen3_5_text", "hidden_size": "big"}}', 1, 73,
     ["hidden_size", "expected an integer"]),
    ('{"model_type": "falcon", "new_decoder_architecture": true, "parallel_attn": false}', 1, 60, ["parallel_attn"]),
    ('{"model_type": "gpt2", "n_embd": 64, "hidden_size": 32}', 1, 38, ["'hidden_size' and 'n_embd'"]),
    ('{"model_type": "gpt_oss", "swiglu_alpha": 1.0}', 1, 27, ["swiglu_alpha"]),
    ('{"model_type": "llama", "pruned_heads": {"0": [1]}}', 1, 25, ["pruned_heads", "pruned attention heads"]),
    ('{"model_type": "llama", "rope_parameters": [1]}', 1, 25, ["rope_parameters", "expected an object"]),
    ('[1, 2]', 1, 1, ["expected a JSON object"]),
    ('{"hidden_size": 8}', 1, 1, ["no 'model_type'"]),
    ('{"architectures": ["NoSuchForCausalLM"], "hidden_size": 8}', 1, 1, ["no 'model_type'"]),  # no type has that class
    ('{"architectures": ["LlamaForCausalLM", "MistralForCausalLM"]}', 1, 1, ["no 'model_type'"]),  # which one?
    ('{"model_type": "llama"' + ', "x": [' * 40 + ']' * 40 + '}', 1, 1, ["nests more than"]),
    # issue 15: values transformers would accept and then divide by, or build tables too wide from
    ('{"model_type": "llama", "rms_norm_eps": -1}', 1, 25, ["rms_norm_eps", "above 0"]),
    ('{"model_type": "llama", "rms_norm_eps": 0}', 1, 25, ["rms_norm_eps", "above 0"]),
    ('{"model_type": "gpt2", "layer_norm_epsilon": 0.0}', 1, 24, ["layer_norm_epsilon", "above 0"]),
    ('{"model_type": "gemma2", "final_logit_softcapping": 0}', 1, 26, ["final_logit_softcapping", "above 0"]),
    ('{"model_type": "gpt_oss", "swiglu_limit": -7}', 1, 27, ["swiglu_limit", "above 0"]),
    ('{"model_type": "llama", "partial_rotary_factor": 2}', 1, 25, ["partial_rotary_factor", "at most 1"]),
    ('{"model_type": "llama", "partial_rotary_factor": 0}', 1, 25, ["partial_rotary_factor", "above 0"]),
    ('{"model_type": "llama", "rope_parameters": {"rope_theta": 10000, "partial_rotary_factor": 1.5}}', 1, 66,
     ["partial_rotary_factor", "at most 1"]),
    ('{"model_type": "qwen2", "num_hidden_layers": 2,\n "layer_types": [{}, "full_attention"]}', 2, 18, ["layer_types[0]", "not modelled"]),
    ('{"model_type": "gemma2", "num_hidden_layers": 1, "layer_types": [["sliding_attention"]]}', 1, 66, ["layer_types[0]"]),
]


@pytest.mark.parametrize("text,line,col,words", CASES, ids=[str(i) for i in range(len(CASES))])
@pytest.mark.parametrize("command", ["count", "import-hf"])
def test_bad_config_is_one_located_line_and_exit_2(cli, tmp_path, command, text, line, col, words):
    path = tmp_path / "config.json"
    path.write_text(text)
    run = cli(command, str(path)) if command == "import-hf" else cli(command, "--hf", str(path), "--json")
    assert run.status == 2 and run.out == ""
    message = run.err.strip()
    assert "\n" not in message and "Traceback" not in message
    m = LOCATED.match(message)
    assert m, message
    assert (m["file"], int(m["line"]), int(m["col"])) == (str(path), line, col), message
    for word in words:
        assert word in message, message


def test_unreadable_and_non_utf8_files(cli, tmp_path):
    run = cli("count", "--hf", str(tmp_path / "missing.json"))
    assert run.status == 2 and "cannot read the config file" in run.err
    (tmp_path / "bin.json").write_bytes(b'{"model_type": "\xff"}')
    run = cli("count", "--hf", str(tmp_path / "bin.json"))
    assert run.status == 2 and "not UTF-8" in run.err and ":1:17:" in run.err


def test_spec_and_hf_are_exclusive(cli, tmp_path):
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"model_type": "gpt2"}))
    for argv in (("count",), ("count", "gpt2", "--hf", str(path)), ("flops", "--seq-len", "8"), ("generate", "-o", "-")):
        run = cli(*argv)
        assert run.status == 2 and "--hf CONFIG.json" in run.err and run.err.count("\n") == 1, (argv, run.err)


def test_config_dict_api_errors_name_the_file():
    from archcalc.errors import SpecError
    from archcalc.hf import spec_from_hf_config

    with pytest.raises(SpecError, match=r"^my\.json:1:1: num_experts: unknown field"):
        spec_from_hf_config({"model_type": "llama", "num_experts": 4}, "my.json")
    with pytest.raises(SpecError, match="expected a config dict"):
        spec_from_hf_config([1], "my.json")  # type: ignore[arg-type]


MUTATIONS = [None, True, False, 0, -1, 1, 3, 7, 10**19, 10**30, 1.5, -2.5, 1e308, "", "x", "gelu", "sliding_attention",
             [], [1], ["full_attention"], {}, {"rope_theta": "a"}, {"rope_theta": -1.0}, {"partial_rotary_factor": 5}]


def test_mutated_configs_count_or_fail_in_one_located_line(cli, tmp_path):
    """Hostile values in real configs: exit 0 or 2 with one located line, never a traceback or an internal error."""
    import random
    from pathlib import Path

    here = Path(__file__).resolve().parent.parent / "data" / "hf"
    paths = sorted(here.glob("*.json"))
    rng = random.Random(0)
    target = tmp_path / "fz.json"
    for _ in range(200):
        data = json.loads(rng.choice(paths).read_text())
        for _ in range(rng.randint(1, 3)):
            key = rng.choice(list(data) + ["layer_types", "head_dim", "rope_parameters", "num_key_value_heads", "first_k_dense_replace"])
            data[key] = rng.choice(MUTATIONS)
        target.write_text(json.dumps(data))
        run = cli("count", "--hf", str(target), "--json")
        assert run.status in (0, 2), (data, run.err)
        if run.status == 2:
            assert run.err.count("\n") == 1 and LOCATED.match(run.err.strip()), (data, run.err)


def test_deepseek_rope_interleave_is_the_rotary_pairing(cli, tmp_path):
    """rope_interleave changes the module's function, not its count: it sets the spec's position.pairing (true: the
    checkpoints' pairs de-interleaved, false: half), which the generated module reads; anything else is refused."""
    from pathlib import Path

    from archcalc.hf import spec_from_hf_file

    config = json.loads((Path(__file__).parents[1] / "data" / "hf" / "deepseek-v3.json").read_text())
    counts = set()
    for value, pairing in ((True, "deinterleaved"), (False, "half")):
        path = tmp_path / f"ds-{value}.json"
        path.write_text(json.dumps({**config, "rope_interleave": value}, indent=1))
        r = cli("count", "--hf", str(path), "--json")
        assert r.status == 0, r.err
        counts.add(r.json()["results"][0]["total"])
        assert spec_from_hf_file(path)._source.data["model"]["embedding"]["position"]["pairing"] == pairing
    assert len(counts) == 1
    path.write_text(json.dumps({**config, "rope_interleave": "yes"}, indent=1))
    r = cli("count", "--hf", str(path), "--json")
    assert r.status == 2 and "rope_interleave" in r.err and len(r.err.strip().splitlines()) == 1, r.err


def test_a_billion_uniform_layers_are_counted_without_listing_them(cli, tmp_path):
    """Every layer a mixture of experts (Qwen3-MoE's default): no per-layer list, so no bound on the layers; the total
    is the one-layer model's plus a layer's count 10^9 - 1 more times."""
    totals = {}
    for layers in (1, 2, 10**9):
        path = tmp_path / f"{layers}.json"
        path.write_text(f'{{"model_type": "qwen3_moe", "num_hidden_layers": {layers}}}')
        run = cli("count", "--hf", str(path), "--json")
        assert run.status == 0, run.err
        totals[layers] = run.json()["results"][0]["total"]
    assert totals[10**9] == totals[1] + (totals[2] - totals[1]) * (10**9 - 1) == 613_683_328_622_331_904


UNMODELLED = [  # (model_type, extra keys): state-space and linear-attention models, by name or by their config keys
    ("zamba", {}), ("plamo2", {}),
    ("xlstm", {}), ("minimax", {}), ("rwkv", {}), ("recurrent_gemma", {}),
    ("my_ssm_lm", {"mamba_d_state": 16}), ("my_lm", {"ssm_state_size": 16}), ("my_lm", {"linear_num_value_heads": 8}),
]


@pytest.mark.parametrize("model_type,extra", UNMODELLED, ids=[t + "-" + "".join(e) for t, e in UNMODELLED])
def test_a_state_space_or_linear_attention_type_is_told_so_not_given_a_lookalike(cli, tmp_path, model_type, extra):
    """Issue 26: a Mamba config was told 'closest supported: llama, gemma', letters in common and nothing else."""
    from archcalc.hf import MODEL_TYPES

    path = tmp_path / "config.json"
    path.write_text(json.dumps({"model_type": model_type, "hidden_size": 64} | extra))
    run = cli("count", "--hf", str(path))
    message = run.err.strip()
    assert run.status == 2 and "\n" not in message and LOCATED.match(message), message
    assert f"'{model_type}' is not supported: " in message and "not modelled yet" in message, message
    assert ("state-space" if "mamba" in message.lower() else "linear-attention") in message, message
    assert "closest" not in message and not any(f" {t} " in message.replace(",", " ") for t in MODEL_TYPES), message


TYPOS = [("lama", "llama"), ("Llama", "llama"), ("qwen-2", "qwen2"), ("deepseek-v3", "deepseek_v3"), ("gemma9", "gemma"),
         ("llama4", "llama4_text"), ("gemma3", "gemma3_text"), ("mistrl", "mistral")]


@pytest.mark.parametrize("asked,near", TYPOS)
def test_a_near_spelling_of_a_supported_type_names_it(cli, tmp_path, asked, near):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"model_type": asked}))
    run = cli("import-hf", str(path))
    assert run.status == 2 and f"'{asked}' is not supported; the closest supported: {near}" in run.err, run.err
    assert "import-hf --list" in run.err


@pytest.mark.parametrize("asked", ["xyz", "my_custom_lm", "bart", "whisper"])
def test_a_type_close_to_nothing_supported_gets_no_suggestion(cli, tmp_path, asked):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"model_type": asked}))
    run = cli("count", "--hf", str(path))
    assert run.status == 2 and f"'{asked}' is not supported" in run.err and "closest" not in run.err, run.err
    assert "'archcalc import-hf --list' shows the" in run.err and run.err.count("\n") == 1
