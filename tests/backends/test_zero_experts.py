"""Zero-compute experts (the spec's ``zero_experts``, LongCat-Flash's ``zero_expert_num``): the router scores them, a
token's slot on one costs no matmul, and they have no parameters beyond the gate_up rows transformers allocates for
them (``zero_gate_up``: counted, never active). The figures are derived here from the dimensions."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import pytest

from archcalc.backends.count import count_size
from archcalc.errors import SpecError
from archcalc.ir.ops import BATCH, SEQ, forward_ops
from archcalc.spec import load_spec, load_spec_text
from tests.helpers import lowered

SPEC = Path(__file__).resolve().parents[2] / "spec" / "longcat_flash.yaml"

DIMS = dict(L=2, d=32, H=4, d_ff=48, d_expert=12, E=4, Z=3, K=2, q_rank=8, kv_rank=12, d_head=6, d_rope=4, d_v=5, V=97)


@pytest.mark.parametrize("real", [1, 2])
def test_a_token_computes_its_real_experts_only(real):
    """forward_matmul's experts: K_real real experts' matmuls a token (gate, up, down: 3 · 2 · d · d_expert each), the
    other slots on zero experts none; the router scores all E + Z."""
    low = lowered("longcat_flash", **DIMS, K_real=real)
    batch, seq = 3, 7
    numeric = {**low.binding.numeric(), BATCH: batch, SEQ: seq}
    ops = forward_ops(low)
    total = {key: sum(Fraction(str(op.total_full.xreplace(numeric))) for op in ops if key in op.path)
             for key in (".mlp.experts.", ".mlp.router", "zero_experts")}
    d, hidden, experts, zero, layers = (DIMS[n] for n in ("d", "d_expert", "E", "Z", "L"))
    tokens = batch * seq
    assert total[".mlp.experts."] == layers * tokens * real * 3 * 2 * d * hidden
    assert total[".mlp.router"] == layers * tokens * 2 * d * (experts + zero)
    assert total["zero_experts"] == 0  # no matmul on a zero expert's slot


def test_zero_experts_gate_up_rows_are_counted_never_active():
    """The bundled spec counts transformers' unused gate_up rows of the zero experts (Z · 2 · d_expert · d a layer) in
    the total and leaves them out of the active count; without zero_gate_up they are not there at all."""
    spec = load_spec("longcat_flash")
    result = count_size(spec, "flash-chat")
    values = {str(k): int(v) for k, v in result.binding.numeric().items()}
    rows = values["L"] * values["Z"] * 2 * values["d_expert"] * values["d"]
    assert result.by_path["blocks.mlp.zero_experts.gate_up"] == rows
    plain = load_spec_text(SPEC.read_text().replace("zero_gate_up: true", "zero_gate_up: false"))
    without = count_size(plain, "flash-chat")
    assert result.total - without.total == rows and result.active == without.active


def test_the_even_share_is_the_default_and_a_fraction_is_said():
    """K_real defaults to K · E / (E + Z) (LongCat-Flash-Chat: 12 · 512 / 768 = 8); an import whose share is not whole
    takes the nearest count and says so in its notes."""
    spec = load_spec("longcat_flash")
    values = {str(k): int(v) for k, v in count_size(spec, "flash-chat").binding.numeric().items()}
    assert values["K_real"] * (values["E"] + values["Z"]) == values["K"] * values["E"]
    from archcalc.hf import spec_from_hf_config

    imported = spec_from_hf_config({"model_type": "longcat_flash", "moe_topk": 4, "n_routed_experts": 8, "zero_expert_num": 3},
                                   "tiny.json")
    share = Fraction(4 * 8, 8 + 3)
    assert next(iter(imported.sizes.values())).values["K_real"].text == str(round(share))
    assert f"{share.numerator}/{share.denominator} is not whole" in imported.notes


def test_zero_experts_must_be_a_positive_count():
    text = SPEC.read_text().replace("zero_experts: Z,", "zero_experts: Z - Z,")
    with pytest.raises(SpecError, match="zero experts = Z - Z is 0"):
        count_size(load_spec_text(text), "flash-chat")
