"""``archcalc import-hf`` round trips, ``--hf`` on every command, and the package's own contracts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from archcalc.hf import MODEL_TYPES, spec_from_hf_config, spec_from_hf_file, spec_to_yaml
from archcalc.hf.build import family_of
from archcalc.hf.jsonfile import parse_text
from archcalc.spec import load_spec, load_spec_text
from tests.helpers import text_model

HUB = Path(__file__).resolve().parent.parent / "data" / "hf"
REF = Path(__file__).resolve().parent.parent / "data" / "hf-reference"
CONFIGS = sorted(HUB.glob("*.json")) + sorted(p for p in REF.glob("*.json") if p.name != "counts.json" and not (HUB / p.name).exists())


def _count(cli, *argv) -> dict:
    run = cli("count", *argv, "--json")
    assert run.status == 0, run.err
    (result,) = run.json()["results"]
    return result


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.stem)
def test_import_hf_round_trip(cli, tmp_path, path):
    """The written YAML loads back with 'archcalc count' to the same total, active and tensors."""
    out = tmp_path / "spec.yaml"
    run = cli("import-hf", str(path), "-o", str(out))
    assert run.status == 0 and "wrote" in run.out, run.err
    direct, loaded = _count(cli, "--hf", str(path)), _count(cli, str(out))
    for key in ("total", "active", "by_role", "by_path", "size", "values"):
        assert loaded[key] == direct[key], key
    # the type it is read as: Kimi K2's kimi_k2 configs are DeepSeek-V3's
    assert load_spec_text(out.read_text()).hf.model_type == family_of(text_model(json.loads(path.read_text()))["model_type"]).model_type


def test_import_hf_prints_the_spec_and_refuses_foreign_files(cli, tmp_path):
    config = HUB / "llama-3.1-8b.json"
    printed = cli("import-hf", str(config))
    assert printed.status == 0 and printed.out.startswith("# Imported by archcalc import-hf")
    assert "model_type llama" in printed.out and "llama-3.1-8b:" in printed.out
    mine = tmp_path / "mine.yaml"
    mine.write_text("name: hand_written\n")
    run = cli("import-hf", str(config), "-o", str(mine))
    assert run.status == 2 and "--force" in run.err and mine.read_text() == "name: hand_written\n"
    assert cli("import-hf", str(config), "-o", str(mine), "--force").status == 0
    assert cli("import-hf", str(config), "-o", str(mine)).status == 0  # archcalc wrote it: replaced freely
    assert mine.read_text() == printed.out
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary file left behind
    run = cli("import-hf", str(config), "-o", str(tmp_path / "no" / "such" / "dir.yaml"))
    assert run.status == 2 and "does not exist" in run.err


def test_hf_stands_in_for_spec_on_every_symbolic_command(cli, tmp_path):
    config = str(HUB / "qwen2.5-7b.json")
    flops = cli("flops", "--hf", config, "--seq-len", "128", "--json")
    assert flops.status == 0 and flops.json()["results"][0]["forward_matmul"] > 0
    memory = cli("memory", "--hf", config, "--seq-len", "128", "--batch", "1", "--json")
    assert memory.status == 0 and memory.json()["results"][0]["weights_bytes"] == 2 * 7_615_616_512
    text = cli("count", "--hf", config)
    assert text.status == 0 and f"HF config {config}" in text.out and "7,615,616,512" in text.out
    assert _count(cli, "--hf", config, "--set", "L=1")["total"] < 7_615_616_512
    solve = cli("solve", "--hf", config, "--target-params", "10B", "--fix", "L=28", "--fix", "H=28", "--fix", "d_ff=18944",
                 "--json")
    assert solve.status == 0, solve.err
    generated = tmp_path / "gpt2.py"
    run = cli("generate", "--hf", str(HUB / "gpt2-hub.json"), "-o", str(generated))
    assert run.status == 0, run.err
    assert "archcalc generate --hf" in generated.read_text()


def test_verify_builds_an_imported_spec():
    pytest.importorskip("torch")
    from archcalc.cli import main

    assert main(["verify", "--hf", str(HUB / "gpt2-hub.json")]) == 0


def test_dict_api_and_defaults():
    spec = spec_from_hf_config({"model_type": "mistral", "num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 8,
                                "num_key_value_heads": 2, "sliding_window": 16})
    assert spec.sizes["hf"].values["L"].text == "2"
    assert spec.hyperparameters["d_head"].default.text == "d / H"  # head_dim absent: transformers' hidden // heads
    attention = spec.model.block.attention
    assert attention.window.text == "16" and attention.pattern == ["local"]
    from archcalc.spec.library import bundled_names

    declared = [load_spec(n).hf.model_type for n in bundled_names() if load_spec(n).hf is not None]
    assert list(MODEL_TYPES) == sorted(declared) and len(set(declared)) == len(declared)  # one bundled spec per type


def test_layer_types_become_the_shortest_pattern():
    layers = ["sliding_attention", "sliding_attention", "full_attention"] * 2
    spec = spec_from_hf_config({"model_type": "gemma2", "num_hidden_layers": 6, "layer_types": layers})
    assert spec.model.block.attention.pattern == ["local", "local", "global"]
    spec = spec_from_hf_config({"model_type": "qwen2", "num_hidden_layers": 4, "use_sliding_window": True,
                                "max_window_layers": 3, "sliding_window": 64})
    assert spec.model.block.attention.pattern == ["global", "global", "global", "local"]
    spec = spec_from_hf_config({"model_type": "qwen2", "num_hidden_layers": 4, "sliding_window": 64})
    assert spec.model.block.attention.window is None  # use_sliding_window defaults to false


def test_deepseek_two_stacks_and_t5_untied_note():
    spec = spec_from_hf_file(HUB / "deepseek-v3.json")
    assert [b.name for b in spec.model.blocks] == ["dense_blocks", "blocks"]
    assert "quantization_config is ignored" in spec.notes
    t5 = spec_from_hf_file(HUB / "t5-v1_1-base.json")
    assert t5.model.decoder.block.mlp.kind == "gated" and "transformers 5 ties" in t5.notes
    assert "L_dec" in spec_to_yaml(t5)


def test_key_positions():
    cf = parse_text('{\n  "a": [1, {"b": 2}],\n  "c": {"d": "x\\"y"}, "e": 3\n}', "f.json")
    assert str(cf.where(("a", 1, "b"))) == "f.json:2:13"
    assert str(cf.where(("a", 1), value=True)) == "f.json:2:12"
    assert str(cf.where(("c", "d"))) == "f.json:3:9"
    assert str(cf.where(("e",))) == "f.json:3:23"
    assert str(cf.where(("zz",))) == "f.json:1:1"


def test_import_needs_neither_torch_nor_transformers(process):
    script = (
        "import sys\nfrom archcalc.cli import main\n"
        f"status = main(['count', '--hf', {str(HUB / 'deepseek-v3.json')!r}, '--json'])\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'numpy', 'transformers') or m.startswith('archcalc.codegen'))\n"
        "print('STATUS', status, 'HEAVY', heavy, file=sys.stderr)\n"
    )
    proc = process.run(["-c", script], capture_output=True, text=True, timeout=120)
    assert "STATUS 0 HEAVY []" in proc.stderr, proc.stderr[-2000:]
