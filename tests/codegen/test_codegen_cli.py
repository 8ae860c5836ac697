"""`archcalc generate`, `verify` and `run` on the command line."""

from __future__ import annotations

import json

import pytest

from archcalc.codegen.emit import MARKER


def test_generate_writes_the_module(cli, tmp_path):
    target = tmp_path / "gpt2_small.py"
    r = cli("generate", "gpt2", "--size", "small", "-o", str(target))
    assert r.status == 0 and "wrote" in r.out
    assert MARKER in target.read_text()
    assert not [p for p in tmp_path.iterdir() if p.name != target.name]  # no temporary file left behind


def test_generate_refuses_to_overwrite_a_file_it_did_not_write(cli, tmp_path):
    target = tmp_path / "mine.py"
    target.write_text("precious = True\n")
    r = cli("generate", "gpt2", "--size", "small", "-o", str(target))
    assert r.status == 2 and "--force" in r.err and len(r.err.splitlines()) == 1
    assert target.read_text() == "precious = True\n"
    assert cli("generate", "gpt2", "--size", "small", "-o", str(target), "--force").status == 0
    assert MARKER in target.read_text()
    # a file archcalc generated may be replaced without --force
    assert cli("generate", "gpt2", "--size", "medium", "-o", str(target)).status == 0


@pytest.mark.parametrize("name, shown", [
    ("myllama.yaml", "myllama.yaml"),
    ("my llama.yaml", "'my llama.yaml'"),  # shell-quoted
    ("evil\nimport os.yaml", "SPEC.yaml"),  # a newline must not end the comment line
])
def test_the_regenerate_line_names_the_spec_as_given(cli, tmp_path, monkeypatch, name, shown):
    from archcalc.spec.library import library_dir

    spec = (library_dir() / "llama.yaml").read_text(encoding="utf-8").replace("name: llama", "name: myllama")
    (tmp_path / name).write_text(spec, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    r = cli("generate", name, "--size", "2-7b", "--set", "L=2", "-o", "-")
    assert r.status == 0, r.err
    assert f"# Regenerate with: archcalc generate {shown} --size 2-7b --set L=2 -o FILE.py\n" in r.out
    assert "\nimport os" not in r.out


def test_generate_needs_one_size_and_prints_to_stdout(cli):
    r = cli("generate", "gpt2", "-o", "-")
    assert r.status == 2 and "--size" in r.err
    r = cli("generate", "gpt2", "--size", "small", "-o", "-")
    assert r.status == 0 and r.out.startswith('"""gpt2, size small')


def test_generate_bad_spec_leaves_no_file(cli, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nhyperparameters: {d: {}}\nmodel: {embedding: {vocab: 10, width: d}}\nsizes: {s: {d: 0}}\n")
    target = tmp_path / "out.py"
    r = cli("generate", str(bad), "-o", str(target))
    assert r.status == 2 and not target.exists()


def test_verify_prints_both_totals(cli):
    r = cli("verify", "gpt2", "--size", "small")
    assert r.status == 0
    assert "IR 124,439,808 parameters in 148 tensors; module on meta 124,439,808 in 148" in r.out
    payload = cli("verify", "gpt3", "--size", "100t", "--json").json()
    assert payload["results"][0]["ok"] and payload["results"][0]["module_total"] == 105_560_844_664_832


def test_fuse_projections_on_generate_verify_and_run(cli, tmp_path):
    r = cli("generate", "llama", "--size", "2-7b", "--set", "L=2", "--fuse-projections", "-o", "-")
    assert r.status == 0
    assert "Regenerate with: archcalc generate llama --size 2-7b --set L=2 --fuse-projections -o FILE.py" in r.out
    assert "self.qkv = nn.Linear(" in r.out and "self.gate_up = nn.Linear(" in r.out and "self.q = nn.Linear(" not in r.out
    r = cli("verify", "llama", "--size", "3-8b", "--fuse-projections", "--json")
    result = json.loads(r.out)["results"][0]
    assert r.status == 0 and result["ok"] and result["ir_total"] == result["module_total"] == 8_030_261_248
    assert result["ir_tensors"] == 32 * 6 + 3  # qkv, out, gate_up, down and two norms a block
    r = cli("run", "llama", "--size", "2-7b", "--set", "L=1", "--set", "d=64", "--set", "H=4", "--set", "d_ff=96",
            "--set", "V=101", "--fuse-projections", "--device", "cpu", "--steps", "3", "--json")
    assert r.status == 0 and json.loads(r.out)["results"][0]["parameters"] == 2 * 101 * 64 + 64 + 64 * 64 * 4 + 3 * 64 * 96 + 2 * 64


def test_verify_exits_1_with_a_diff_on_mismatch(cli, monkeypatch):
    from archcalc.codegen import verify as verify_module

    real_emit = verify_module.emit
    monkeypatch.setattr(verify_module, "emit", lambda lowered, command: real_emit(lowered, command).replace(
        "self.final_norm = nn.LayerNorm(cfg.width, eps=cfg.norm_eps, bias=True)",
        "self.final_norm = nn.LayerNorm(cfg.width, eps=cfg.norm_eps, bias=False)"))
    r = cli("verify", "gpt2", "--size", "small")
    assert r.status == 1
    assert "MISMATCH" in r.out and "missing from the module: final_norm.bias" in r.out


def test_run_trains_on_cpu_and_reports(cli):
    r = cli("run", "gpt2", "--size", "small", "--set", "L=1", "--set", "d=64", "--set", "H=2", "--set", "V=101",
            "--device", "cpu", "--batch", "2", "--seq-len", "16", "--steps", "4", "--json")
    assert r.status == 0, r.err
    result = json.loads(r.out)["results"][0]
    assert result["last_loss"] < result["first_loss"]
    assert result["tokens_per_second"] > 0 and result["peak_memory_bytes"] > 0
    assert result["peak_tflops"] is None and result["mfu"] is None  # no peak rate for a CPU
    # achieved TFLOP/s is train_step_matmul over the median step time
    assert result["achieved_tflops"] == pytest.approx(result["train_step_matmul"] / result["median_step_seconds"] / 1e12)
    with_peak = json.loads(cli("run", "gpt2", "--size", "small", "--set", "L=1", "--set", "d=64", "--set", "H=2",
                               "--set", "V=101", "--device", "cpu", "--batch", "2", "--seq-len", "16", "--steps", "3",
                               "--peak", "0.5", "--json").out)["results"][0]
    assert with_peak["mfu"] == pytest.approx(with_peak["achieved_tflops"] / 0.5)


def test_peak_table():
    from archcalc.cli.run_cmd import peak_tflops

    assert peak_tflops("NVIDIA H100 80GB HBM3") == 989.0
    assert peak_tflops("NVIDIA H200") == 989.0
    assert peak_tflops("NVIDIA A100-SXM4-80GB") == 312.0
    assert peak_tflops("CPU (2 cores)") is None


@pytest.mark.parametrize("argv,needle", [
    (["run", "gpt3", "--size", "175b", "--device", "cpu"], "GiB"),
    (["run", "gpt2", "--size", "small", "--seq-len", "5000", "--device", "cpu"], "position table"),
    (["run", "gpt2", "--size", "small", "--steps", "0"], "positive integer"),
    (["run", "gpt2", "--size", "small", "--device", "tpu"], "expected cpu or cuda"),
])
def test_run_refuses_what_cannot_work(cli, argv, needle):
    r = cli(*argv)
    assert r.status == 2 and needle in r.err and len(r.err.strip().splitlines()) == 1


@pytest.mark.parametrize("key, value, noted", [("torch_dtype", "bfloat16", True), ("dtype", "float16", True),
                                               ("torch_dtype", "float32", False), (None, None, False)])
def test_verify_hf_says_when_transformers_builds_in_another_dtype(cli, tmp_path, key, value, noted):
    config = {"model_type": "llama", "vocab_size": 97, "hidden_size": 32, "intermediate_size": 48, "num_hidden_layers": 2,
              "num_attention_heads": 4, "num_key_value_heads": 2, **({key: value} if key else {})}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    run = cli("verify", "--hf", str(path), "--device", "meta")
    assert run.status == 0, run.err
    assert ("note: the config's dtype is" in run.out) == noted and (value in run.out if noted else True)
    payload = cli("verify", "--hf", str(path), "--device", "meta", "--json").json()
    assert len(payload["notes"]) == noted
