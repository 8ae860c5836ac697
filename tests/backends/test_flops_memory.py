"""FLOPs and memory figures: the published ones, the conventions, the CLI contracts."""

from __future__ import annotations

from pathlib import Path

import pytest

FAMILIES = Path(__file__).parent.parent / "data" / "families"


def test_gpt2_small_flops_contract(cli):
    r = cli("flops", "gpt2", "--size", "small", "--seq-len", "1024", "--json")
    assert r.status == 0, r.err
    result = r.json()["results"][0]
    for key in ("size", "seq_len", "batch", "forward_matmul", "forward_matmul_causal", "train_step_matmul", "per_token", "approximations"):
        assert key in result
    assert set(result["approximations"]) == {"6N", "kaplan", "chinchilla", "palm"}
    assert result["forward_matmul"] == 291_648_307_200
    assert result["train_step_matmul"] == 874_944_921_600
    assert result["approximations"]["palm"]["train_step"] == 879_894_724_608
    assert result["approximations"]["6N"]["train_step"] == 6 * 124_439_808 * 1024
    assert result["approximations"]["6N"]["ratio"] == pytest.approx(6 * 124_439_808 * 1024 / 874_944_921_600)
    # causal: the attention products over S(S+1)/2 pairs instead of S²
    attention_full = 12 * 2 * 2 * 12 * 64 * 1024 * 1024
    assert result["forward_matmul"] - result["forward_matmul_causal"] == attention_full - attention_full * 1025 // 2048
    assert type(result["forward_matmul"]) is int


def test_recompute_adds_a_forward(cli):
    base = cli("flops", "gpt2", "--size", "small", "--seq-len", "256", "--batch", "3", "--json").json()["results"][0]
    again = cli("flops", "gpt2", "--size", "small", "--seq-len", "256", "--batch", "3", "--recompute", "--json").json()["results"][0]
    assert again["train_step_matmul"] == 4 * base["forward_matmul"] == base["train_step_matmul"] * 4 // 3


def test_banded_layers_cut_causal_flops_not_parameters(cli):
    dense = cli("flops", "gpt3", "--size", "175b", "--seq-len", "2048", "--json").json()["results"][0]
    banded = cli("flops", "gpt3", "--size", "175b", "--seq-len", "2048", "--set", "band=256", "--json").json()["results"][0]
    assert banded["forward_matmul"] == dense["forward_matmul"]  # the full square is what torch counts
    saved = dense["forward_matmul_causal"] - banded["forward_matmul_causal"]
    pairs_dense, pairs_band = 2048 * 2049 // 2, 256 * 2048 - 256 * 255 // 2
    assert saved == 48 * 2 * 2 * 96 * 128 * (pairs_dense - pairs_band)  # 48 of 96 layers are banded
    counts = [cli("count", "gpt3", "--size", "175b", *extra, "--json").json()["results"][0]["total"]
              for extra in ([], ["--set", "band=256"])]
    assert counts[0] == counts[1]


def test_memory_contract_and_exact_figures(cli):
    r = cli("memory", "gpt2", "--size", "small", "--seq-len", "1024", "--batch", "1", "--dtype", "float32", "--json")
    result = r.json()["results"][0]
    assert result["weights_bytes"] == 497_759_232
    assert result["training"]["states_bytes"] == 16 * 124_439_808
    assert set(result["training"]) >= {"states_bytes", "activations_bytes"}
    bf16 = cli("memory", "gpt2", "--size", "small", "--seq-len", "1024", "--batch", "1", "--json").json()["results"][0]
    assert bf16["weights_bytes"] == 2 * 124_439_808


@pytest.mark.parametrize("size,L,kv,dh", [("7b", 32, 32, 128), ("70b", 80, 8, 128), ("3-8b", 32, 8, 128)])
@pytest.mark.parametrize("seq,batch,dtype,width", [(4096, 1, "bfloat16", 2), (1000, 3, "float32", 4)])
def test_llama_kv_cache_is_exact(cli, size, L, kv, dh, seq, batch, dtype, width):
    r = cli("memory", str(FAMILIES / "llama2.yaml"), "--size", size, "--seq-len", str(seq), "--batch", str(batch),
            "--dtype", dtype, "--json")
    assert r.json()["results"][0]["kv_cache_bytes"] == 2 * L * kv * dh * seq * batch * width


def test_sliding_window_caps_the_kv_cache(cli):
    # gpt-oss: every other layer keeps only 128 tokens
    r = cli("memory", str(FAMILIES / "gpt_oss.yaml"), "--size", "20b", "--seq-len", "4096", "--batch", "1", "--json")
    assert r.json()["results"][0]["kv_cache_bytes"] == 12 * 2 * 8 * 64 * (4096 + 128) * 2


def test_zero_and_tensor_parallel_split(cli):
    """GPT-3 175B on 8 GPUs, worked out by hand. Every width divides by 8 except the vocabulary (50,257 rows: rank 0
    holds torch.chunk's 6,283); tensor parallelism splits the matrices, qkv's and up's biases and the embedding's rows,
    and keeps norms, out's and down's biases and the position table whole."""
    base = ["memory", "gpt3", "--size", "175b", "--seq-len", "2048", "--batch", "1", "--json"]
    n, d, L = 174_604_259_328, 12288, 96
    shard = (n - 50257 * d) // 8 + 6283 * d  # parameters on data rank 0 when every tensor's rows are split 8 ways
    for zero, (w, g, o) in {0: (2 * n, 2 * n, 12 * n), 1: (2 * n, 2 * n, 12 * shard), 2: (2 * n, 2 * shard, 12 * shard),
                            3: (2 * shard, 2 * shard, 12 * shard)}.items():
        split = cli(*base, "--dp", "8", "--zero", str(zero)).json()["results"][0]["parallel"]["per_gpu"]
        assert (split["weights_bytes"], split["gradients_bytes"], split["optimizer_bytes"]) == (w, g, o)
    tp = cli(*base, "--tp", "8").json()["results"][0]["parallel"]["per_gpu"]
    per_rank = L * (12 * d * d + 7 * d) // 8 + L * 6 * d + 6283 * d + 2048 * d + 2 * d
    assert tp["weights_bytes"] == 2 * per_rank


@pytest.mark.parametrize("name", ["S", "B", "N", "P"])
def test_a_hyperparameter_named_like_a_run_symbol_changes_no_number(name):
    """The run's B (sequences), S (tokens), and infer's P (prompt) and N (new tokens) are symbols of their own: a spec's
    hyperparameter of the same name (here the MLP width) is not taken for them."""
    from archcalc.backends.flops import flops
    from archcalc.backends.infer import infer
    from archcalc.spec import load_spec_text
    from archcalc.spec.bind import bind

    text = """
name: tiny
hyperparameters:
  V: {doc: vocabulary, default: 512}
  L: {doc: blocks}
  d: {doc: width}
  X: {doc: MLP width}
model:
  embedding: {vocab: V, width: d, position: {kind: rotary}}
  block:
    repeat: L
    norm: rmsnorm
    attention: {heads: 4, head_width: d / 4}
    mlp: {kind: gated, hidden: X, activation: silu}
  final_norm: rmsnorm
  head: {tied: true}
sizes:
  x: {L: 2, d: 64, X: 96}
"""
    plain, renamed = (bind(load_spec_text(t, "tiny.yaml"), "x") for t in (text, text.replace("X", name)))
    assert flops(plain, 128, 2).forward_matmul == flops(renamed, 128, 2).forward_matmul
    one, other = (infer(b, "h100-sxm", 2, 16, 8) for b in (plain, renamed))
    assert (one.flops.prefill, one.flops.decode, one.kv_cache_bytes) == (other.flops.prefill, other.flops.decode,
                                                                          other.kv_cache_bytes)
