"""The generated file's ``train_step_flops(seq_len)`` and ``flops_per_token(seq_len)`` are exactly what
``archcalc flops`` counts for a causal training step: ``train_step_matmul_causal``, per sequence and per token."""

from __future__ import annotations

from fractions import Fraction

import pytest

from archcalc.backends.flops import flops
from tests.helpers import lowered, module

# dense and learned positions, GQA with rotary, a mixture of experts, a sliding window on every layer, and one on
# every other layer (the count is piecewise in seq_len: the window caps the attention span)
CASES = [("gpt2", "small"), ("llama", "3-8b"), ("mixtral", "8x7b"), ("mistral", "7b"), ("gemma2", "2b")]
LENGTHS = [1, 2, 127, 1024, 4096, 4097, 8192, 10000]


@pytest.mark.parametrize("spec,size", CASES)
def test_generated_flops_equal_archcalc_flops(spec, size):
    pytest.importorskip("torch")
    generated, low = module(spec, size), lowered(spec, size)
    for seq_len in LENGTHS:
        exact = flops(low.binding, seq_len, lowered=low).train_step_matmul_causal
        assert generated.train_step_flops(seq_len) == exact, seq_len
        assert generated.flops_per_token(seq_len) == float(Fraction(exact, seq_len))


def test_the_json_per_token_figure_is_the_generated_files(cli):
    """What a trainer reads from ``archcalc flops --json`` (per_token.train_step_matmul_causal) is what the generated
    file's flops_per_token(seq_len) returns: one number for MFU, whichever way it is taken."""
    import json

    pytest.importorskip("torch")
    run = cli("flops", "llama", "--size", "3-8b", "--seq-len", "4097", "--json")
    per_token = json.loads(run.out)["results"][0]["per_token"]["train_step_matmul_causal"]
    exact = Fraction(per_token) if isinstance(per_token, str) else Fraction(per_token)
    assert module("llama", "3-8b").flops_per_token(4097) == float(exact)
