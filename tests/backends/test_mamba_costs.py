"""Mamba (Mamba1) mixer layers in the FLOPs, memory and inference backends: the sequential-scan convention of
docs/conventions.md (projections, conv and one read-out a token in the matmul totals; the state update apart),
checked against numbers worked out by hand from the formulas."""

from __future__ import annotations

import json

import pytest
import sympy

from archcalc.backends.activations import activations
from archcalc.backends.flops import flops
from archcalc.backends.infer import infer
from archcalc.backends.infer.flops import generation_flops
from archcalc.backends.memory import memory
from archcalc.ir import lower
from archcalc.ir.ops import SEQ
from archcalc.spec import load_spec_text
from archcalc.spec.bind import bind
from tests.ir.test_mixers import HYBRID, MAMBA

# a pure Mamba stack: d = 40, I = 80, N = 8, R = 3, K = 4, V = 97, 2 layers, tied head
V, L, D, STATE, RANK, TAPS = 97, 2, 40, 8, 3, 4
INNER = 2 * D


def _mamba():
    text = MAMBA.format(V=V, L=L, d=D, N=STATE, R=RANK, K=TAPS, bias="false", conv_bias="true")
    return bind(load_spec_text(text, "mamba.yaml"), "x")


def _hybrid():
    """Bamba's 3:1 stack with Mamba (Mamba1) layers: d = 64, I = 128, N = 16, R = 4, K = 4."""
    text = HYBRID.replace("{kind: mamba2, inner: 2 * d, state: 16, conv: 4, heads: 4, groups: 2}",
                          "{kind: mamba, inner: 2 * d, state: 16, conv: 4, dt_rank: 4}")
    return bind(load_spec_text(text, "hybrid.yaml"), "x")


def projections(d: int, inner: int, state: int, rank: int) -> int:
    """One token's four projections in one layer: in_proj, x_proj, dt_proj, out_proj."""
    return 2 * (d * 2 * inner + inner * (rank + 2 * state) + rank * inner + inner * d)


def mamba_forward(b: int, s: int) -> int:
    """forward_matmul of the pure Mamba stack by hand: per layer the projections, the conv 2·b·S·I·K and the
    read-outs 2·b·S·I·N; the head."""
    per_layer = b * s * projections(D, INNER, STATE, RANK) + 2 * b * s * INNER * TAPS + 2 * b * s * INNER * STATE
    return L * per_layer + 2 * b * s * D * V


@pytest.mark.parametrize("b, seq", [(1, 1), (2, 3), (2, 64), (3, 1000)])
def test_forward_flops_equal_the_scan_formula(b, seq):
    r = flops(_mamba(), seq_len=seq, batch=b)
    assert r.forward_matmul == mamba_forward(b, seq)
    assert r.forward_matmul_causal == r.forward_matmul  # the scan does the same work full or causal
    assert r.train_step_matmul == 3 * r.forward_matmul
    conv, read_out = L * 2 * b * seq * INNER * TAPS, L * 2 * b * seq * INNER * STATE
    assert r.mixer_by_kind == {"conv": conv, "scan": read_out}
    assert r.by_role["mixer"] == L * b * seq * projections(D, INNER, STATE, RANK) + conv + read_out
    j = r.to_json()["mixer_forward"]
    assert (j["conv"], j["state_read_out"]) == (conv, read_out)
    assert j["state_update_ops"] == L * 3 * b * seq * INNER * STATE  # element operations, in no matmul total
    assert "chunked_mixing" not in j
    assert set(r.to_json()["approximations"]) == {"6N"}


def test_the_formula_is_linear_in_the_sequence_and_evaluates_to_the_exact_figure():
    r = flops(_mamba(), seq_len=64, batch=1)
    S = SEQ  # noqa: N806 (the run's tokens: a symbol of its own)
    assert sympy.degree(r.forward_formula, S) == 1
    values = {sympy.Symbol(k, integer=True, positive=True): sympy.Integer(v) for k, v in
              {"V": V, "L": L, "d": D, "N": STATE, "R": RANK, "K": TAPS}.items()}
    for seq in (1, 7, 64, 4096):
        assert r.forward_formula.xreplace({**values, S: sympy.Integer(seq)}) == mamba_forward(1, seq)
    # by hand at S = 64: 2 layers x 64 x (2·(40·160 + 80·19 + 3·80 + 80·40) = 22,720 + 640 + 1,280) + 2·64·40·97
    assert mamba_forward(1, 64) == 3_650_560


def test_the_state_is_constant_in_the_context_and_there_is_no_kv_cache():
    b = 2
    results = [memory(_mamba(), seq_len=t, batch=b, dtype="bfloat16") for t in (4_096, 131_072)]
    expected = b * L * (INNER * (TAPS - 1) + INNER * STATE) * 2  # I·(K-1) + I·N a layer, bf16
    assert expected == 7_040
    for m in results:
        assert m.kv_cache_bytes == 0 and m.state_bytes == expected
        j = m.to_json()
        assert j["recurrent_state_bytes"] == expected and j["kv_cache_layers"] == 0
        assert j["recurrent_state"]["layers"] == L
        assert j["recurrent_state"]["by_layer_kind"][0]["elements_per_layer_per_sequence"] == INNER * (TAPS - 1 + STATE)
        assert "I·(K-1) + I·N" in j["recurrent_state"]["convention"]
        assert j["parallel"]["per_gpu"]["recurrent_state_bytes"] == expected
    assert results[0].acts.total_bytes() < results[1].acts.total_bytes()  # training activations do grow


def test_the_hybrid_keeps_a_kv_cache_for_its_attention_layers_only():
    b = 2
    small, large = (memory(_hybrid(), seq_len=t, batch=b, dtype="bfloat16") for t in (32_768, 131_072))
    state = b * 3 * 128 * (3 + 16) * 2
    assert small.state_bytes == large.state_bytes == state == 29_184
    for m, t in ((small, 32_768), (large, 131_072)):
        assert m.kv_cache_bytes == 2 * 2 * 16 * t * b * 2  # one attention layer: K and V, 2 key/value heads of 16


def test_mamba_activations_are_an_estimate_per_layer():
    b, s = 2, 100
    acts = activations(lower(_mamba()), seq_len=s, batch=b, mixed=True)
    items = {label: n for label, n, _ in acts.stacks[0][2]}
    n = b * s
    assert items["each token's state (n x I x N, fp32)"] == n * INNER * STATE * 4
    assert items["discretised decay and input (2 x n x I x N, fp32)"] == 2 * n * INNER * STATE * 4
    assert acts.total_bytes() == L * sum(n for _, n, _ in acts.stacks[0][2]) + acts.outside_bytes()
    assert acts.per_layer_bytes() == sum(n for _, n, _ in acts.stacks[0][2])


def test_decode_terms_of_a_pure_mamba_stack():
    b, prompt, new = 2, 300, 5
    g = generation_flops(_mamba(), b, prompt, new)
    steps = new - 1
    per_token = L * (projections(D, INNER, STATE, RANK) + 2 * INNER * TAPS + 2 * INNER * STATE) + 2 * D * V
    assert g.decode_steps == [b * per_token] * steps  # the same at every position: no cache grows
    assert g.decode == b * steps * per_token
    assert g.decode_by_role["mixer_conv"] == b * steps * L * 2 * INNER * TAPS
    assert g.decode_by_role["mixer_state_read_out"] == b * steps * L * 2 * INNER * STATE
    assert g.decode_state_update == b * steps * L * 3 * INNER * STATE  # apart from the matmul totals
    prefill = mamba_forward(b, prompt) - 2 * b * (prompt - 1) * D * V  # the head at the last position only
    assert g.prefill == g.prefill_dense == prefill
    assert g.prefill_by_role["mixer_state_read_out"] == L * 2 * b * prompt * INNER * STATE
    assert "mixer_chunked_mixing" not in g.prefill_by_role


def test_infer_reads_and_writes_the_state_once_a_step_and_sizes_the_batch_by_it():
    b, new = 2, 9
    state = b * L * INNER * (TAPS - 1 + STATE) * 2
    runs = [infer(_mamba(), "h100-sxm", b, prompt, new) for prompt in (4_096, 131_072)]
    for r in runs:
        assert r.kv_cache_bytes == 0 and r.state_bytes == state
        assert r.state_layers == L and r.state_kinds == ("mamba",)
        assert r.decode_state_bytes == 2 * state * (new - 1)
        assert r.needed_bytes_per_gpu == r.weights.total + state
        assert r.largest_batch == int((r.capacity - r.weights.total) // (state // b))
    assert runs[0].largest_batch == runs[1].largest_batch


@pytest.mark.parametrize("command, key", [
    (["flops", "--seq-len", "300"], "mixer_forward"),
    (["memory", "--seq-len", "300", "--batch", "2"], "recurrent_state_bytes"),
    (["infer", "--hardware", "h100-sxm", "--batch", "2", "--prompt", "300", "--new-tokens", "5"], "recurrent_state"),
])
def test_the_cli_shows_the_mamba_terms(command, key, tmp_path, capsys):
    from archcalc.cli import main

    path = tmp_path / "mamba.yaml"
    path.write_text(MAMBA.format(V=V, L=L, d=D, N=STATE, R=RANK, K=TAPS, bias="false", conv_bias="true"))
    assert main([command[0], str(path), *command[1:]]) == 0
    assert "Mamba" in capsys.readouterr().out
    assert main([command[0], str(path), *command[1:], "--json"]) == 0
    result = json.loads(capsys.readouterr().out)["results"][0]
    assert key in result
    if command[0] == "infer":
        assert any(c.startswith("Mamba layers:") for c in result["conventions"])
        assert result["recurrent_state"]["decode_state_update_ops"] == 2 * 4 * L * 3 * INNER * STATE
