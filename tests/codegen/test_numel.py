"""Symbols = numel: for random hyperparameters of the GPT specs, the generated module built on the meta
device has exactly the IR's parameter names and shapes, and the symbolic total."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from archcalc.backends.count import count
from archcalc.codegen.verify import verify
from tests.helpers import examples, lowered


@st.composite
def gpt_like(draw):
    H = draw(st.integers(1, 16))
    values = {"V": draw(st.integers(1, 70_000)), "T": draw(st.integers(1, 8192)), "L": draw(st.integers(1, 6)),
              "H": H, "d": H * draw(st.integers(1, 128)),
              "qkv_bias": draw(st.booleans()), "tie_embeddings": draw(st.booleans())}
    if draw(st.booleans()):
        values["d_head"] = draw(st.integers(1, 128))
    if draw(st.booleans()):
        values["d_ff"] = draw(st.integers(1, 8192))
    return values


# the GPT-shaped specs whose hyperparameters gpt_like() draws; every size of the rest of the library is
# verified on meta in test_families.py, and random configs of the other families in test_flops_torch.py
CODEGEN_SPECS = ["gpt2", "gpt3"]


@examples(60)
@given(spec=st.sampled_from(CODEGEN_SPECS), values=gpt_like())
def test_symbolic_count_equals_numel_on_meta(spec, values):
    low = lowered(spec, None, **values)
    report = verify(low, device="meta")
    assert report.ok, (report.missing, report.extra, report.shape_mismatches, report.tie_mismatches)
    assert report.module_total == count(low.binding).total


@pytest.mark.parametrize("size", ["small", "medium", "large", "xl", "2.7b", "6.7b", "13b", "175b", "100t"])
def test_every_gpt3_row_and_100t_verify_on_meta(size):
    low = lowered("gpt3", size)
    report = verify(low, device="meta")
    assert report.ok and report.module_total == count(low.binding).total


def test_a_mismatch_is_reported(monkeypatch):
    """verify must be able to fail: a module with a wrong shape is caught."""
    from archcalc.codegen import verify as verify_module
    from archcalc.codegen.emit import emit

    low = lowered("gpt2", "small")
    broken = emit(low, "test").replace("self.out = nn.Linear(cfg.heads * cfg.head_width, cfg.width, bias=True)",
                                      "self.out = nn.Linear(cfg.heads * cfg.head_width, cfg.width, bias=False)")
    monkeypatch.setattr(verify_module, "emit", lambda lowered, command: broken)
    report = verify_module.verify(low)
    assert not report.ok
    assert "blocks.0.attn.out.bias" in report.missing and report.ir_total - report.module_total == 12 * 768


@st.composite
def t5_like(draw):
    H = draw(st.integers(1, 16))
    return {"V": draw(st.integers(1, 70_000)), "L": draw(st.integers(1, 6)), "H": H, "d": draw(st.integers(1, 1024)),
            "d_head": draw(st.integers(1, 128)), "d_ff": draw(st.integers(1, 8192)), "buckets": draw(st.integers(1, 64)),
            "tie_embeddings": draw(st.booleans())}


@examples(30)
@given(spec=st.sampled_from(["t5", "transformer_2017"]), values=t5_like())
def test_encoder_decoder_count_equals_numel_on_meta(spec, values):
    """T5 and the 2017 Transformer at random sizes (the 2017 one takes d_head, d_ff and V too; no buckets)."""
    if spec == "transformer_2017":
        values = {k: v for k, v in values.items() if k != "buckets"}
    low = lowered(spec, None, **values)
    report = verify(low, device="meta")
    assert report.ok, (report.missing, report.extra, report.shape_mismatches, report.tie_mismatches)
    assert report.module_total == count(low.binding).total
