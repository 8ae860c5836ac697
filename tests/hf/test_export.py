"""``archcalc export-hf``: every bundled size with an ``hf:`` section becomes a config.json that transformers builds
(on the meta device) with exactly archcalc's count, whose rotary base and scaling transformers reads as the spec
gives them, and that ``import-hf`` reads back to the same count, base and scaling. Specs with no transformers form,
variants transformers cannot express and hostile ``hf:`` sections exit 2 with one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from archcalc.backends.count import count_size
from archcalc.errors import SpecError, UsageError
from archcalc.hf import spec_from_hf_file
from archcalc.hf.export import MARKER, config_text, export_config
from archcalc.ir import lower
from archcalc.spec import load_spec, load_spec_text
from archcalc.spec.bind import bind, parse_overrides
from archcalc.spec.library import bundled_names

SPEC = Path(__file__).resolve().parents[2] / "spec"
NO_HF = {  # bundled specs with no transformers model type, and why
    "gpt3": "GPT-3 was never released; transformers has no GPT-3 class",
    "transformer_2017": "the 2017 Transformer (fairseq/tensor2tensor) has no transformers model type",
}
EXPORTED = [(name, size) for name in bundled_names() if load_spec(name).hf is not None for size in load_spec(name).sizes]


def _rope(spec, size):
    """The rotary base, scaling and rotated share of a head that lowering gives the size (the truth to recover)."""
    attrs = lower(bind(spec, size)).root.find("embed").attrs
    return attrs.rotary_base, attrs.rotary_scaling, attrs.position


def test_every_bundled_spec_has_an_hf_section_or_a_reason():
    assert {n for n in bundled_names() if load_spec(n).hf is None} == set(NO_HF)


@pytest.mark.parametrize("name,size", EXPORTED, ids=[f"{n}-{s}" for n, s in EXPORTED])
def test_transformers_builds_the_exported_config_with_archcalcs_count(name, size):
    """The oracle: transformers' own class from the exported config, on the meta device. A config that built any
    other number of parameters fails here; so does a rotary base or scaling transformers reads otherwise."""
    transformers = pytest.importorskip("transformers")
    from tests.hf.test_oracle import transformers_count

    spec = load_spec(name)
    config = export_config(spec, size)
    data = json.loads(config_text(config))
    assert transformers_count(dict(data)) == count_size(spec, size).total
    base, scaling, position = _rope(spec, size)
    if "rope_parameters" in data:  # as transformers 5 standardises them
        fields = {k: v for k, v in data.items() if k != "model_type"}
        theirs = transformers.AutoConfig.for_model(data["model_type"], **fields).rope_parameters
        if "full_attention" in theirs:  # one set per layer type (Gemma 3): the sliding layers' own base, the others'
            local = lower(bind(spec, size)).root.find("embed").attrs.rotary_local_base
            assert theirs["sliding_attention"]["rope_theta"] == (local if local is not None else base)
            theirs = theirs["full_attention"]
        assert theirs["rope_theta"] == base
        assert theirs["rope_type"] == (scaling.type if scaling is not None else "default")
        for field, value in (scaling.model_dump(exclude_none=True) if scaling is not None else {}).items():
            key = {"type": "rope_type", "original_context": "original_max_position_embeddings",
                   "fraction": "partial_rotary_factor"}.get(field, field)
            assert theirs[key] == value, field
    else:  # GPT-2, GPT-J, BERT, T5: the model type has no rotary parameters to write
        assert position != "rotary" or name == "gptj"


@pytest.mark.parametrize("name,size", EXPORTED, ids=[f"{n}-{s}" for n, s in EXPORTED])
def test_import_hf_reads_the_exported_config_back(cli, tmp_path, name, size):
    """Through the command line, both ways: export-hf writes the file, import-hf reads it to the same count, rotary
    base and scaling (spec and file agree tensor by tensor: archcalc compared them before writing)."""
    path = tmp_path / "config.json"
    run = cli("export-hf", name, "--size", size, "-o", str(path))
    assert run.status == 0 and run.err == "" and f"{count_size(load_spec(name), size).total:,} parameters" in run.out
    text = path.read_text()
    assert text.startswith("{\n  " + json.dumps(MARKER) + ":")
    imported = spec_from_hf_file(path)
    theirs = next(iter(imported.sizes))
    assert count_size(imported, theirs).total == count_size(load_spec(name), size).total
    assert _rope(imported, theirs) == _rope(load_spec(name), size)
    spec_yaml = tmp_path / "spec.yaml"
    assert cli("import-hf", str(path), "-o", str(spec_yaml)).status == 0
    assert count_size(load_spec_text(spec_yaml.read_text()), theirs).total == count_size(load_spec(name), size).total


def test_sizes_carry_their_published_rotary_base_and_scaling():
    llama = load_spec("llama")
    assert [_rope(llama, s)[0] for s in llama.sizes] == [10000.0] * 3 + [500000.0] * 4
    assert _rope(llama, "3-405b")[1] is None  # as pre-trained, 8K: the long-context scaling came with Llama 3.1
    assert _rope(llama, "3.1-405b")[1].model_dump(exclude_none=True) == {
        "type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_context": 8192}
    assert _rope(load_spec("deepseek_v3"), "671b")[1].model_dump(exclude_none=True) == {
        "type": "yarn", "factor": 40.0, "original_context": 4096, "beta_fast": 32.0, "beta_slow": 1.0, "mscale": 1.0,
        "mscale_all_dim": 1.0, "truncate": True}
    for size in ("20b", "120b"):
        base, scaling, _ = _rope(load_spec("gpt_oss"), size)
        assert base == 150000.0 and scaling.model_dump(exclude_none=True) == {
            "type": "yarn", "factor": 32.0, "original_context": 4096, "beta_fast": 32.0, "beta_slow": 1.0, "truncate": False}
    bases = {name: _rope(load_spec(name), next(iter(load_spec(name).sizes)))[0]
             for name in ("mixtral", "qwen2_5", "qwen3", "olmo2", "mistral", "gemma2", "phi3")}
    assert bases == {"mixtral": 1e6, "qwen2_5": 1e6, "qwen3": 1e6, "olmo2": 5e5, "mistral": 1e4, "gemma2": 1e4, "phi3": 1e4}


def test_set_carries_into_the_config():
    spec = load_spec("llama")
    config = export_config(spec, "3-8b", parse_overrides(spec, ["L=2", "KV=4", "tie_embeddings=true"]))
    assert (config["num_hidden_layers"], config["num_key_value_heads"], config["tie_word_embeddings"]) == (2, 4, True)
    assert config["rope_parameters"] == {"rope_type": "default", "rope_theta": 500000.0}


def test_special_tokens_outside_a_smaller_vocabulary_become_null():
    spec = load_spec("gpt_oss")
    config = export_config(spec, "20b", parse_overrides(spec, ["V=97", "L=2"]))
    assert config["pad_token_id"] is None and config["eos_token_id"] is None
    assert export_config(spec, "20b")["pad_token_id"] == 199999


# -- refusals: one line, exit 2 ------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(NO_HF))
def test_a_spec_with_no_transformers_form_exits_2(cli, tmp_path, name):
    run = cli("export-hf", name, "--size", next(iter(load_spec(name).sizes)), "-o", str(tmp_path / "c.json"))
    assert run.status == 2 and run.out == "" and len(run.err.strip().splitlines()) == 1
    assert "no transformers form" in run.err and name in run.err
    assert not (tmp_path / "c.json").exists()


@pytest.mark.parametrize("argv,needle", [
    (["llama", "-o", "-"], "give --size"),
    (["llama", "--size", "4-8b", "-o", "-"], "no size"),
    (["gpt2", "--size", "small", "--set", "qkv_bias=false", "-o", "-"], "124,439,808 parameters, not 124,412,160"),
    (["t5", "--size", "small", "--set", "tie_embeddings=false", "-o", "-"], "cannot express"),
    (["llama", "--size", "2-7b"], "required"),
])
def test_bad_input_exits_2_with_one_line(cli, argv, needle):
    run = cli("export-hf", *argv)
    assert run.status == 2 and run.out == "" and len(run.err.strip().splitlines()) == 1 and needle in run.err, run.err


def _variant(tmp_path: Path, name: str, old: str, new: str) -> Path:
    text = (SPEC / f"{name}.yaml").read_text()
    assert text.count(old) == 1, old
    path = tmp_path / f"{name}.yaml"
    path.write_text(text.replace(old, new))
    return path


def test_a_setting_transformers_would_read_otherwise_is_refused_not_written(cli, tmp_path):
    """Same count, different model: the spec's norm epsilon says 1e-6, its hf: section writes 1e-5."""
    path = _variant(tmp_path, "llama", "  final_norm: {kind: rmsnorm, eps: 1e-5}", "  final_norm: {kind: rmsnorm, eps: 1e-6}")
    with pytest.raises(SpecError, match="final_norm: eps is 1e-06 in the spec but 1e-05"):
        export_config(load_spec(str(path)), "2-7b")
    run = cli("export-hf", str(path), "--size", "2-7b", "-o", str(tmp_path / "c.json"))
    assert run.status == 2 and "describes another model" in run.err and not (tmp_path / "c.json").exists()


@pytest.mark.parametrize("old,new,needle", [
    ("  rope: {theta: 10000.0}\n", "  rope: {theta: 10000.0}\n  symbols: {head_third: d_head / 3}\n", "must be a whole number"),
    ("mlp_bias: false,", "mlp_bias: false, vocab_size: 5,", "given twice"),
    ("  model_type: llama\n", "  model_type: gpt_bigcode\n", "is not one archcalc reads back"),
    ("mlp_bias: false,", "mlp_bias: false, rope_scaling: {type: linear, factor: 2.0},", "written from the spec's position"),
    ("mlp_bias: false,", "mlp_bias: false, mystery_switch: true,", "not one archcalc reads back"),
])
def test_a_bad_hf_section_is_located(cli, tmp_path, old, new, needle):
    path = _variant(tmp_path, "llama", old, new)
    run = cli("export-hf", str(path), "--size", "2-7b", "-o", "-")
    assert run.status == 2 and run.out == "" and len(run.err.strip().splitlines()) == 1, run.err
    assert run.err.startswith(f"{path}:") and needle in run.err, run.err


# -- the file: atomic, never over a file archcalc did not write --------------------------------------------------------


def test_writes_only_its_own_files(cli, tmp_path):
    path = tmp_path / "config.json"
    path.write_text('{"model_type": "llama"}\n')
    run = cli("export-hf", "gpt2", "--size", "small", "-o", str(path))
    assert run.status == 2 and "--force" in run.err and path.read_text() == '{"model_type": "llama"}\n'
    assert cli("export-hf", "gpt2", "--size", "small", "-o", str(path), "--force").status == 0
    assert json.loads(path.read_text())["n_layer"] == 12
    assert cli("export-hf", "gpt2", "--size", "xl", "-o", str(path)).status == 0  # its own file: replaced
    assert json.loads(path.read_text())["n_layer"] == 48
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.json"]  # no temporary files left


def test_stdout_is_the_same_json(cli, tmp_path):
    run = cli("export-hf", "mixtral", "--size", "8x22b", "-o", "-")
    assert run.status == 0 and run.err == ""
    assert json.loads(run.out) == json.loads(config_text(export_config(load_spec("mixtral"), "8x22b")))


def test_usage_error_for_a_spec_without_hf_is_not_a_spec_error():
    with pytest.raises(UsageError, match="no transformers form"):
        export_config(load_spec("gpt3"), "small")


def test_the_help_examples_hold(cli, tmp_path, monkeypatch):
    """``export-hf --help`` shows Llama 3.1 405B read back to 405,853,388,800 and a tiny GPT-2 on stdout: both as printed."""
    from archcalc.cli.hf_cmd import EXPORT_EPILOG

    monkeypatch.chdir(tmp_path)
    assert cli("export-hf", "llama", "--size", "3.1-405b", "-o", "config.json").status == 0
    run = cli("count", "--hf", "config.json", "--json")
    total = run.json()["results"][0]["total"]
    assert f"read back: {total:,}, as the spec counts" in EXPORT_EPILOG and total == count_size(load_spec("llama"), "3.1-405b").total
    run = cli("export-hf", "gpt2", "--size", "small", "--set", "L=2", "--set", "d=64", "--set", "H=4", "-o", "-")
    assert run.status == 0 and json.loads(run.out)["n_embd"] == 64


# -- remote code: a spec is untrusted input; export-hf writes no key that makes transformers run a repository's code -----

REMOTE = 'mlp_bias: false, auto_map: {AutoModelForCausalLM: "evil/repo--modeling_evil.EvilForCausalLM"}, custom_pipelines: {}, '


def test_remote_code_keys_are_left_out_with_a_note(cli, tmp_path):
    path = _variant(tmp_path, "llama", "mlp_bias: false, ", REMOTE)
    run = cli("export-hf", str(path), "--size", "2-7b", "-o", "-")
    assert run.status == 0, run.err
    config = json.loads(run.out)
    assert not {"auto_map", "custom_pipelines"} & set(config) and config["num_hidden_layers"] == 32
    assert run.err.count("\n") == 1 and run.err.startswith("note: left out the spec's remote-code keys auto_map, custom_pipelines")
    assert "--keep-remote-code" in run.err
    target = tmp_path / "config.json"
    run = cli("export-hf", str(path), "--size", "2-7b", "-o", str(target))
    assert run.status == 0 and "auto_map" in run.err and "auto_map" not in target.read_text()


def test_keep_remote_code_writes_them_as_the_spec_gives_them(cli, tmp_path):
    path = _variant(tmp_path, "llama", "mlp_bias: false, ", REMOTE)
    run = cli("export-hf", str(path), "--size", "2-7b", "--keep-remote-code", "-o", "-")
    assert run.status == 0 and run.err == "", run.err
    config = json.loads(run.out)
    assert config["auto_map"] == {"AutoModelForCausalLM": "evil/repo--modeling_evil.EvilForCausalLM"}
    assert config["custom_pipelines"] == {}


def test_the_library_leaves_remote_code_out_too_and_leaves_the_spec_alone(tmp_path):
    path = _variant(tmp_path, "llama", "mlp_bias: false, ", REMOTE)
    spec = load_spec(str(path))
    left_out: list[str] = []
    assert "auto_map" not in export_config(spec, "2-7b", left_out=left_out)
    assert left_out == ["auto_map", "custom_pipelines"]
    assert "auto_map" in spec.hf.config and "auto_map" in export_config(spec, "2-7b", keep_remote_code=True)


def test_remote_code_is_found_at_any_depth_and_only_there():
    from archcalc.hf.export import REMOTE_CODE_KEYS, drop_remote_code

    assert {"auto_map", "custom_pipelines", "trust_remote_code"} <= REMOTE_CODE_KEYS
    config = {"text_config": {"auto_map": {"AutoConfig": "x--c.C"}, "hidden_size": 8}, "layers": [{"trust_remote_code": True}],
              "note": "auto_map", "hidden_size": 8}
    assert drop_remote_code(config) == ["text_config.auto_map", "layers.0.trust_remote_code"]
    assert config == {"text_config": {"hidden_size": 8}, "layers": [{}], "note": "auto_map", "hidden_size": 8}


def test_the_help_names_the_flag_and_the_keys():
    from archcalc.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction").choices["export-hf"]
    text = sub.format_help()
    assert "--keep-remote-code" in text and "auto_map" in text and "trust_remote_code" in text
