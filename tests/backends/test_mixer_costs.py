"""Mamba2 (SSD) mixer layers in the FLOPs, memory and inference backends: the chunked convention of
docs/conventions.md, checked against numbers worked out by hand from the formulas (Mamba's: test_mamba_costs.py)."""

from __future__ import annotations

import json

import pytest

from archcalc.backends.activations import activations
from archcalc.backends.flops import flops
from archcalc.backends.infer import infer
from archcalc.backends.infer.flops import generation_flops
from archcalc.backends.memory import memory
from archcalc.ir import lower
from archcalc.spec import load_spec_text
from archcalc.spec.bind import bind
from tests.ir.test_mixers import HYBRID, MAMBA2

# a pure Mamba2 stack: d = 48, I = 96, H = 8 (P = 12), G = 2, N = 16, K = 4 -> C = 96 + 64 = 160
V, L, D, INNER, STATE, HEADS, GROUPS, TAPS = 97, 3, 48, 96, 16, 8, 2, 4
CHANNELS, WIDTH = INNER + 2 * GROUPS * STATE, INNER // HEADS


def _mamba2(chunk: int = 256, tie: bool = True):
    text = MAMBA2.format(V=V, L=L, d=D, inner=INNER, N=STATE, heads=HEADS, G=GROUPS, K=TAPS, tie=str(tie).lower(),
                         bias="false", conv_bias="true").replace("chunk: 256", f"chunk: {chunk}")
    return bind(load_spec_text(text, "mamba2.yaml"), "x")


def _hybrid():
    return bind(load_spec_text(HYBRID, "hybrid.yaml"), "x")


def ssd(b: int, s: int, heads: int, state: int, width: int, q: int) -> int:
    """The chunked mixing of one layer, by hand: 2·b·H·nc·(Q²N + Q²P + 2QNP) + 2·b·H·(nc + 1)²·N·P."""
    nc = -(-s // q)
    return 2 * b * heads * nc * (q * q * state + q * q * width + 2 * q * state * width) \
        + 2 * b * heads * (nc + 1) ** 2 * state * width


def mamba2_forward(b: int, s: int, q: int) -> int:
    """forward_matmul of the pure Mamba2 stack by hand: per layer in_proj, conv, chunked mixing, out_proj; the head."""
    per_layer = (2 * b * s * D * (INNER + CHANNELS + HEADS) + 2 * b * s * CHANNELS * TAPS
                 + ssd(b, s, HEADS, STATE, WIDTH, q) + 2 * b * s * INNER * D)
    return L * per_layer + 2 * b * s * D * V


@pytest.mark.parametrize("seq, chunk", [
    (100, 256),  # one chunk, padded
    (256, 256),  # exactly one chunk
    (300, 256),  # above the chunk: two chunks
    (512, 256),  # a multiple of the chunk
    (200, 64),  # four chunks, the last one partial
    (192, 64),  # a multiple of a smaller chunk
])
def test_mamba2_forward_flops_equal_the_chunked_formula(seq, chunk):
    r = flops(_mamba2(chunk), seq_len=seq, batch=2)
    assert r.forward_matmul == mamba2_forward(2, seq, chunk)
    assert r.forward_matmul_causal == r.forward_matmul  # the chunked mixing is the same full or causal
    assert r.train_step_matmul == 3 * r.forward_matmul and r.backward_matmul == 2 * r.forward_matmul
    assert r.mixer_by_kind == {"conv": L * 2 * 2 * seq * CHANNELS * TAPS, "ssd": L * ssd(2, seq, HEADS, STATE, WIDTH, chunk)}
    j = r.to_json()
    assert j["mixer_forward"]["conv"] == r.mixer_by_kind["conv"]
    assert j["mixer_forward"]["chunked_mixing"] == r.mixer_by_kind["ssd"]
    assert set(j["approximations"]) == {"6N"}


def test_the_formula_has_the_chunk_count_and_evaluates_to_the_exact_figure():
    import sympy

    from archcalc.ir.ops import SEQ  # the run's tokens: a symbol of its own

    r = flops(_mamba2(64), seq_len=200, batch=1)
    assert "ceiling(S/64)" in r.to_json()["forward_formula"]
    values = {sympy.Symbol(k, integer=True, positive=True): sympy.Integer(v) for k, v in
              {"V": V, "L": L, "d": D, "inner": INNER, "N": STATE, "heads": HEADS, "G": GROUPS, "K": TAPS}.items()}
    for seq in (1, 64, 65, 200):
        at = {**values, SEQ: sympy.Integer(seq)}
        assert r.forward_formula.xreplace(at) == mamba2_forward(1, seq, 64)


def test_the_hybrid_counts_its_mixers_by_the_default_chunk_and_its_attention_as_before():
    # d = 64, I = 128, H = 4 (P = 32), G = 2, N = 16, K = 4 -> C = 192; Q = 256 (no chunk in the spec); 3 mixer layers
    b, s = 2, 300
    r = flops(_hybrid(), seq_len=s, batch=b)
    conv, mixing = 3 * 2 * b * s * 192 * 4, 3 * ssd(b, s, 4, 16, 32, 256)
    projections = 3 * (2 * b * s * 64 * (128 + 192 + 4) + 2 * b * s * 128 * 64)
    assert r.mixer_by_kind == {"conv": conv, "ssd": mixing} == {"conv": 2_764_800, "ssd": 327_376_896}
    assert r.by_role["mixer"] == projections + conv + mixing
    attention = 2 * b * s * 64 * (64 + 2 * 32) + 2 * b * s * 64 * 64 + 2 * 2 * b * 4 * s * s * 16  # q k v, out, products
    assert r.by_role["attention"] == attention
    assert r.forward_matmul - r.forward_matmul_causal == 2 * b * 4 * 16 * (s * s - s * (s + 1) // 2) * 2


def _state_elements(layers: int, channels: int, taps: int, inner: int, state: int) -> int:
    return layers * (channels * (taps - 1) + inner * state)  # H·N·P = I·N


def test_a_pure_mamba2_state_is_constant_in_the_context_and_there_is_no_kv_cache():
    b = 2
    results = [memory(_mamba2(), seq_len=t, batch=b, dtype="bfloat16") for t in (32_768, 131_072)]
    expected = b * _state_elements(L, CHANNELS, TAPS, INNER, STATE) * 2
    for m in results:
        assert m.kv_cache_bytes == 0 and m.state_bytes == expected == 24_192
        j = m.to_json()
        assert j["recurrent_state_bytes"] == expected and j["kv_cache_layers"] == 0
        assert j["recurrent_state"]["layers"] == L
        assert j["inference_cache_bytes"] == expected
        assert j["parallel"]["per_gpu"]["recurrent_state_bytes"] == expected
    assert results[0].acts.total_bytes() < results[1].acts.total_bytes()  # training activations do grow


def test_the_hybrid_keeps_a_kv_cache_for_its_attention_layers_only():
    b = 2
    small, large = (memory(_hybrid(), seq_len=t, batch=b, dtype="bfloat16") for t in (32_768, 131_072))
    state = b * _state_elements(3, 192, 4, 128, 16) * 2
    assert small.state_bytes == large.state_bytes == state == 31_488
    for m, t in ((small, 32_768), (large, 131_072)):  # one attention layer: K and V, 2 key/value heads of 16
        assert m.kv_cache_bytes == 1 * 2 * 2 * 16 * t * b * 2
        assert m.to_json()["kv_cache_layers"] == 1
    assert large.kv_cache_bytes == 4 * small.kv_cache_bytes


def test_mixer_activations_are_counted_stack_by_stack():
    acts = activations(lower(_hybrid()), seq_len=300, batch=2, mixed=True)
    names = [name for name, _, _ in acts.stacks]
    assert names == ["mamba_blocks", "blocks"] and [n for _, n, _ in acts.stacks] == [3, 1]
    scores = {label: b for label, b, _ in acts.stacks[0][2]}["chunk scores and decay mask (B x H x nc x Q x Q)"]
    assert scores == 2 * 4 * 2 * 256 * 256 * (2 + 4)  # two chunks of 256 at S = 300
    per_stack = [sum(b for _, b, _ in items) for _, _, items in acts.stacks]
    assert acts.total_bytes() == 3 * per_stack[0] + per_stack[1] + acts.outside_bytes()
    assert acts.per_layer_bytes() == max(per_stack)


def test_decode_terms_of_a_pure_mamba2_stack():
    b, prompt, new = 2, 300, 5
    g = generation_flops(_mamba2(), b, prompt, new)
    steps = new - 1
    projections = 2 * D * (INNER + CHANNELS + HEADS) + 2 * INNER * D
    per_token = L * (projections + 2 * CHANNELS * TAPS + 2 * HEADS * STATE * WIDTH) + 2 * D * V
    assert g.decode_steps == [b * per_token] * steps  # the same at every position: no cache grows
    assert g.decode == b * steps * per_token
    assert g.decode_by_role["mixer_conv"] == b * steps * L * 2 * CHANNELS * TAPS
    assert g.decode_by_role["mixer_state_read_out"] == b * steps * L * 2 * HEADS * STATE * WIDTH
    assert g.decode_state_update == b * steps * L * 3 * HEADS * STATE * WIDTH  # apart from the matmul totals
    prefill = mamba2_forward(b, prompt, 256) - 2 * b * (prompt - 1) * D * V  # the head at the last position only
    assert g.prefill == g.prefill_dense == prefill
    assert g.prefill_by_role["mixer_chunked_mixing"] == L * ssd(b, prompt, HEADS, STATE, WIDTH, 256)


def test_the_prefill_of_a_large_run_is_exact_to_the_last_flop():
    """I / H at one size is a sympy quotient, not a float: past 2**53 FLOPs a float would round the chunked mixing."""
    b, prompt = 10**9 + 7, 10**6 + 3
    g = generation_flops(_mamba2(), b, prompt, 1)
    assert g.prefill_by_role["mixer_chunked_mixing"] == L * ssd(b, prompt, HEADS, STATE, WIDTH, 256) > 2**53
    assert g.prefill == mamba2_forward(b, prompt, 256) - 2 * b * (prompt - 1) * D * V


def test_infer_reads_and_writes_the_state_once_a_step_and_sizes_the_batch_by_it():
    b, new = 2, 9
    state = b * _state_elements(L, CHANNELS, TAPS, INNER, STATE) * 2
    runs = [infer(_mamba2(), "h100-sxm", b, prompt, new) for prompt in (32_768, 131_072)]
    for r in runs:
        assert r.kv_cache_bytes == 0 and r.state_bytes == state
        assert r.decode_state_bytes == 2 * state * (new - 1)
        assert r.needed_bytes_per_gpu == r.weights.total + state
        assert r.largest_batch == int((r.capacity - r.weights.total) // (state // b))
    assert runs[0].largest_batch == runs[1].largest_batch
    hybrid = [infer(_hybrid(), "h100-sxm", b, prompt, new) for prompt in (32_768, 131_072)]
    for r, prompt in zip(hybrid, (32_768, 131_072)):
        assert r.state_bytes == 31_488
        assert r.kv_cache_bytes == 2 * 2 * 16 * (prompt + new) * b * 2  # the one attention layer
        per_sequence = 2 * 2 * 16 * (prompt + new) * 2 + 31_488 // b
        assert r.largest_batch == int((r.capacity - r.weights.total) // per_sequence)


@pytest.mark.parametrize("command, key", [
    (["flops", "--seq-len", "300"], "mixer_forward"),
    (["memory", "--seq-len", "300", "--batch", "2"], "recurrent_state_bytes"),
    (["infer", "--hardware", "h100-sxm", "--batch", "2", "--prompt", "300", "--new-tokens", "5"], "recurrent_state"),
])
def test_the_cli_shows_the_mixer_terms(command, key, tmp_path, capsys):
    from archcalc.cli import main

    path = tmp_path / "hybrid.yaml"
    path.write_text(HYBRID)
    assert main([command[0], str(path), *command[1:]]) == 0
    text = capsys.readouterr().out
    assert "Mamba2" in text or "recurrent state" in text
    assert main([command[0], str(path), *command[1:], "--json"]) == 0
    result = json.loads(capsys.readouterr().out)["results"][0]
    assert key in result
    assert main([command[0], "gpt2", "--size", "small", *command[1:], "--json"]) == 0
    assert key not in json.loads(capsys.readouterr().out)["results"][0]  # attention alone: the JSON as before
