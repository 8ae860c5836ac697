"""archcalc infer at any number of new tokens: the decode steps summed in closed form (pieces between windows; the
roofline's compute/memory split on each) equal the step-by-step sums exactly; 10^7 or 10^12 new tokens cost what 10
do; what cannot fit is refused before anything is counted; the per-step JSON list stops at its limit."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from archcalc.backends.infer import MAX_TOKENS, dtype_bytes, infer
from archcalc.backends.infer import flops as infer_flops
from archcalc.backends.infer.decode import Line, decode_sums
from archcalc.backends.infer.flops import STEP_LIST_LIMIT, B, N, P
from archcalc.backends.infer.traffic import kv_terms, matmul_io
from archcalc.errors import UsageError
from archcalc.ir import lower
from archcalc.spec import load_spec
from archcalc.spec.bind import bind
from tests.helpers import examples

coefficients = st.one_of(st.integers(0, 50), st.fractions(0, 50, max_denominator=8))
lines = st.builds(Line, st.one_of(st.integers(0, 500), st.fractions(0, 500, max_denominator=8)),
                  st.lists(st.tuples(coefficients, st.one_of(st.none(), st.integers(1, 40))), max_size=4).map(tuple))


@examples(300)
@given(flops=lines, bytes_=lines, first=st.integers(1, 60), steps=st.integers(0, 60), peak=st.integers(1, 1000),
       bandwidth=st.integers(1, 1000))
def test_closed_form_sums_equal_the_step_by_step_sums(flops, bytes_, first, steps, peak, bandwidth):
    """Any FLOPs and bytes of the form c0 + Σ c·min(x, w), any roofline: totals, and the compute-bound steps' FLOPs
    and the memory-bound steps' bytes, exactly as a loop over the steps finds them."""
    last = first + steps - 1
    got = decode_sums(flops, bytes_, first, last, peak, bandwidth)
    f = [flops.at(x) for x in range(first, last + 1)]
    b = [bytes_.at(x) for x in range(first, last + 1)]
    compute = [fx * bandwidth >= bx * peak for fx, bx in zip(f, b, strict=True)]
    assert got.flops == sum(f) and got.bytes == sum(b) and flops.total(first, last) == sum(f)
    assert got.compute_flops == sum(fx for fx, c in zip(f, compute, strict=True) if c)
    assert got.memory_bytes == sum(bx for bx, c in zip(b, compute, strict=True) if not c)


def _step_by_step(r):
    """The decode phase as archcalc once summed it, a step at a time (positions P .. P + N - 2)."""
    low = lower(r.binding)
    terms, width, act = kv_terms(low), dtype_bytes(r.kv_dtype), dtype_bytes(r.dtype)
    body, head = matmul_io(low)

    def kv(tokens: int) -> Fraction:
        return r.batch * sum(e * (tokens if w is None else min(tokens, w)) for w, e in terms) * width

    flops, bytes_, read, compute, memory = 0, Fraction(0), Fraction(0), 0, Fraction(0)
    for i, f in enumerate(r.flops.decode_steps):
        seen = r.prompt + i + 1
        b = r.weights.read(r.batch) + kv(seen) + r.batch * (body + head) * act
        flops, bytes_, read = flops + f, bytes_ + b, read + kv(seen) - kv(1)
        if f * r.bandwidth >= b * r.peak:
            compute += f
        else:
            memory += b
    seconds = (Fraction(compute, r.peak) + memory / r.bandwidth) / r.tp
    bound = "compute" if compute and not memory else "memory" if memory and not compute else "mixed" if flops else "none"
    return flops, bytes_, read, seconds, bound


# windows (gpt-oss, Gemma 2, Mistral), chunks and NoPE layers (Llama 4), latent attention (DeepSeek-V3), experts
MODELS = [("llama", "3-8b"), ("gpt_oss", "20b"), ("gemma2", "2b"), ("mistral", "7b"), ("llama4", "scout"),
          ("deepseek_v3", "671b"), ("mixtral", "8x7b")]


@examples(40)
@given(model=st.sampled_from(MODELS), batch=st.integers(1, 3000), prompt=st.integers(1, 300), new=st.integers(1, 300),
       peak=st.sampled_from([None, 10**12, 10**16]))
def test_the_decode_phase_is_the_step_by_step_one(model, batch, prompt, new, peak):
    """FLOPs, bytes, KV read, seconds and the bound of the decode phase, exactly, with batches on both sides of the
    compute-bound crossover (a mixed phase included)."""
    b = bind(load_spec(model[0]), model[1])
    r = infer(b, "h100", batch, prompt, new, peak=peak, capacity=10**18)
    flops, bytes_, read, seconds, bound = _step_by_step(r)
    assert (r.decode.flops, r.decode.bytes, r.decode_kv_read, r.decode.seconds, r.decode.bound) == (flops, bytes_, read, seconds, bound)
    assert r.flops.decode == sum(r.flops.decode_steps) == sum(r.flops.decode_by_role.values())
    assert len(r.flops.decode_steps) == new - 1


@pytest.mark.parametrize("new", [10**7, 10**12, MAX_TOKENS - 512])
def test_any_number_of_new_tokens_costs_what_ten_do(new):
    """Mistral keeps 4,096 tokens a layer, so 10^12 new tokens fit an H100: the phase is summed over its two pieces
    (before and after the window fills) without a step list, and agrees with the closed-form formula and with a step
    taken anywhere."""
    b = bind(load_spec("mistral"), "7b")
    r = infer(b, "h100", 2, 512, new)
    assert r.flops.generate == int(r.flops.formula.xreplace({**b.numeric(), B: 2, P: 512, N: new}))
    last = r.flops.step_at(512 + new - 2)
    assert last == r.flops.step_at(10**6) and r.flops.decode == r.flops.step_at(512) * (4096 - 513) + (new - 1 - (4096 - 513)) * last \
        + sum(r.flops.step_at(p) - r.flops.step_at(512) for p in range(512, 4095))
    with pytest.raises(ValueError, match="use step_at"):
        r.flops.decode_steps  # noqa: B018  # never a list of 10^12
    assert r.decode.bound == "memory" and r.tokens_per_second is not None


def test_what_cannot_fit_is_refused_before_anything_is_counted(cli, monkeypatch):
    """Llama 2 7B's cache at 10^7 or 10^12 tokens is terabytes: one line, exit 2, and no FLOPs counted (the
    generation figures are never asked for)."""
    def counted(*args, **kwargs):
        raise AssertionError("FLOPs counted for a run that cannot fit")

    monkeypatch.setattr("archcalc.backends.infer.generation_flops", counted)
    for new in ("10000000", "1000000000000", str(MAX_TOKENS - 512)):
        run = cli("infer", "llama", "--size", "2-7b", "--hardware", "h100", "--batch", "1", "--prompt", "512", "--new-tokens", new)
        assert run.status == 2 and "largest batch that fits is 0" in run.err and len(run.err.strip().splitlines()) == 1, run.err
    with pytest.raises(UsageError, match="--prompt \\+ --new-tokens = 1,000,000,000,000,000,001: expected at most 10"):
        infer(bind(load_spec("mistral"), "7b"), "h100", 1, 2, MAX_TOKENS - 1)


@pytest.mark.parametrize("new, listed", [(STEP_LIST_LIMIT + 1, True), (STEP_LIST_LIMIT + 2, False), (10**12, False)])
def test_the_json_lists_steps_up_to_its_limit(cli, new, listed):
    run = cli("infer", "mistral", "--hardware", "h100", "--batch", "1", "--prompt", "8", "--new-tokens", str(new), "--json")
    assert run.status == 0, run.err
    r = run.json()["results"][0]
    assert r["decode_step_matmul_limit"] == STEP_LIST_LIMIT and isinstance(r["decode_matmul"], int)
    first, last = r["decode_step_matmul_first_last"]
    if listed:
        assert len(r["decode_step_matmul"]) == new - 1 and sum(r["decode_step_matmul"]) == r["decode_matmul"]
        assert r["decode_step_matmul"][0] == first and r["decode_step_matmul"][-1] == last
    else:
        assert r["decode_step_matmul"] is None and 0 < first < last < r["decode_matmul"]


def test_the_step_list_is_the_generation_flops_own():
    g = infer_flops.generation_flops(bind(load_spec("gpt2"), "small"), 2, 8, 4)
    assert g.decode_steps == [g.step_at(p) for p in (8, 9, 10)] == [2 * g.step_at(p, 1) for p in (8, 9, 10)]
