"""archcalc infer: generation FLOPs and bytes, roofline bounds, the command line."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from archcalc.backends.flops import flops
from archcalc.backends.infer import infer
from archcalc.backends.memory import memory
from archcalc.spec import load_spec
from archcalc.spec.bind import bind
from tests.helpers import examples

DENSE_DECODERS = ["gpt2", "gpt3", "llama", "mistral", "mixtral", "qwen2_5", "qwen3", "gemma2", "phi3", "olmo2", "gptj",
                  "gpt_neox", "falcon", "gpt_oss"]  # DeepSeek-V3 generates in the latent space: see test_latent_...


def test_llama_2_7b_on_an_a100_acceptance():
    """bf16, A100-80GB, B=1, P=512, N=128: generate_matmul exact; the KV cache equals archcalc memory's at 640 tokens;
    tokens/s at most B / (weight bytes / 2,039 GB/s) and within 20% of it."""
    b = bind(load_spec("llama"), "2-7b")
    r = infer(b, "a100-80gb", batch=1, prompt=512, new_tokens=128)
    V, d = b.values["V"], b.values["d"]
    assert r.flops.generate == flops(b, 639, 1).forward_matmul_causal - 2 * V * d * 511
    assert r.kv_cache_bytes == memory(b, 640, 1).kv_cache_bytes == 335_544_320
    bound = 2_039 * 10**9 / r.weights.total
    assert r.tokens_per_second <= bound and r.tokens_per_second >= bound * 0.8
    assert r.decode.bound == "memory" and r.prefill.bound == "compute"


@examples(40)
@given(name=st.sampled_from(DENSE_DECODERS), batch=st.integers(1, 4), prompt=st.integers(1, 300), new=st.integers(1, 300),
       data=st.data())
def test_generate_is_the_causal_forward_minus_the_unused_head_positions(name, batch, prompt, new, data):
    spec = load_spec(name)
    size = data.draw(st.sampled_from(list(spec.sizes)))
    b = bind(spec, size)
    r = infer(b, "h100", batch, prompt, new)
    V, d = b.values["V"], b.values["d"]
    assert r.flops.generate == flops(b, prompt + new - 1, batch).forward_matmul_causal - 2 * V * d * batch * (prompt - 1)
    assert r.flops.decode == sum(r.flops.decode_steps) and len(r.flops.decode_steps) == new - 1
    assert r.kv_cache_bytes == memory(b, prompt + new, batch).kv_cache_bytes
    symbolic = r.flops.formula.xreplace({**{s: v for s, v in b.numeric().items()}})
    from archcalc.backends.infer.flops import B, N, P

    assert symbolic.xreplace({B: batch, P: prompt, N: new}) == r.flops.generate


def test_sliding_windows_cap_what_decoding_reads():
    """gpt-oss: half its layers keep 128 tokens; past them the decode step's FLOPs and KV read grow half as fast."""
    b = bind(load_spec("gpt_oss"), "20b")
    short, long = (infer(b, "h100", 1, p, 3) for p in (100, 4000))
    full = bind(load_spec("gpt_oss"), "20b")
    assert long.flops.decode_steps[1] - long.flops.decode_steps[0] < short.flops.decode_steps[1] - short.flops.decode_steps[0] + 1
    assert long.kv_cache_bytes == memory(full, 4003, 1).kv_cache_bytes


def test_latent_attention_caches_the_latent_and_decodes_in_it():
    b = bind(load_spec("deepseek_v3"), "671b")
    r = infer(b, "h200", batch=1, prompt=1000, new_tokens=10, tp=8)
    assert r.kv_cache_bytes == memory(b, 1010, 1).kv_cache_bytes == 61 * (512 + 64) * 1010 * 2
    assert r.flops.generate > 0 and r.flops.decode_steps[1] > r.flops.decode_steps[0]


def test_quantized_weights_are_exact_bytes_with_their_scales():
    b = bind(load_spec("llama"), "2-7b")
    bf16, int4, fp8 = (infer(b, "l4", 1, 10, 2, weights_dtype=w) for w in (None, "int4", "fp8"))
    matrices = 32 * (4 * 4096 * 4096 + 3 * 4096 * 11008)
    rest = bf16.weights.total - 2 * matrices
    assert int4.weights.total == rest + matrices / 2 + matrices / 128 * 2
    assert fp8.weights.total == rest + matrices + 32 * (4 * 4096 + 2 * 11008 + 4096) * 4
    assert int4.tokens_per_second > bf16.tokens_per_second


def test_a_batch_turns_compute_bound_at_short_contexts_only():
    """Llama 3 8B on an H100, bf16: at 80 tokens the weights dominate the bytes, and a large enough batch is
    compute-bound; at 600 tokens one sequence's KV cache read (131 KB a token) outlasts its FLOPs: never."""
    b = bind(load_spec("llama"), "3-8b")
    short = infer(b, "h100", batch=1, prompt=64, new_tokens=16)
    assert short.compute_bound_batch is not None and short.compute_bound_batch > 100
    above = infer(b, "h100", batch=short.compute_bound_batch, prompt=64, new_tokens=16)
    below = infer(b, "h100", batch=short.compute_bound_batch - 1, prompt=64, new_tokens=16)
    assert above.decode.bound == "compute" and below.decode.bound != "compute"  # the crossover is at the last step
    assert infer(b, "h100", batch=1, prompt=512, new_tokens=88).compute_bound_batch is None


@pytest.mark.parametrize("args, message", [
    (["llama", "--size", "2-7b", "--hardware", "h100", "--batch", "1", "--prompt", "5", "--new-tokens", "0"], "--new-tokens"),
    (["llama", "--size", "2-7b", "--hardware", "h100", "--batch", "1", "--prompt", "5", "--new-tokens", "-3"], "--new-tokens"),
    (["llama", "--size", "2-7b", "--hardware", "h1000", "--batch", "1", "--prompt", "5", "--new-tokens", "3"], "known: a100-40gb"),
    (["llama", "--size", "2-70b", "--hardware", "l4", "--batch", "1", "--prompt", "5", "--new-tokens", "3"], "largest batch"),
    (["llama", "--size", "2-7b", "--hardware", "h100", "--batch", "1", "--prompt", "5", "--new-tokens", "3", "--tp", "3"],
     "--tp 3 does not divide"),
    (["bert", "--size", "base", "--hardware", "h100", "--batch", "1", "--prompt", "5", "--new-tokens", "3"], "decoders"),
    (["llama", "--size", "2-7b", "--hardware", "h100", "--batch", "1"], "missing --prompt, --new-tokens"),
    (["llama", "--size", "2-7b", "--hardware", "a100", "--batch", "1", "--prompt", "5", "--new-tokens", "3",
      "--dtype", "float8"], "no published dense float8 peak"),
])
def test_bad_input_is_one_line_and_exit_2(cli, args, message):
    run = cli("infer", *args)
    assert run.status == 2 and message in run.err and len(run.err.strip().splitlines()) == 1, run.err


def test_json_has_exact_integers_and_the_bounds(cli):
    run = cli("infer", "llama", "--size", "3-8b", "--hardware", "h100", "--batch", "4", "--prompt", "128", "--new-tokens", "16",
              "--weights-dtype", "int4", "--json")
    assert run.status == 0, run.err
    r = run.json()["results"][0]
    assert isinstance(r["generate_matmul"], int) and r["generate_matmul"] == r["prefill_matmul"] + r["decode_matmul"]
    assert len(r["decode_step_matmul"]) == 15 and all(isinstance(x, int) for x in r["decode_step_matmul"])
    assert isinstance(r["bytes"]["kv_cache_bytes"], int) and r["memory"]["fits"] is True
    assert r["roofline"]["tokens_per_second"] > 0 and r["conventions"]


def test_list_hardware_names_every_row(cli):
    run = cli("infer", "--list-hardware")
    assert run.status == 0
    for key in ("h100-sxm", "h100-pcie", "h200", "b200", "a100-40gb", "a100-80gb", "l4", "l40s", "mi300x", "rtx-4090", "apple-m2-ultra"):
        assert key in run.out


def test_intensity_by_component_is_the_textbook_one():
    """bf16 decode: a projection does 2 FLOPs per weight per sequence over 2 bytes: intensity = batch; Llama 3's
    attention products do 2·2·(H/KV) FLOPs per cached key and value element (2 bytes each): 4 × 4 / 2 / 2 = 4."""
    r = infer(bind(load_spec("llama"), "3-8b"), "h100", batch=8, prompt=512, new_tokens=64)
    parts = r.by_component()
    assert parts["decode"]["mlp"]["intensity"] == 8 and parts["decode"]["attention"]["intensity"] == 8
    assert parts["decode"]["attention_products"]["intensity"] == pytest.approx(4, rel=1e-3)
    assert sum(v["flops"] for v in parts["decode"].values()) == r.flops.decode
