"""Per-layer and parameter-free model settings: rotary patterns (NoPE layers), the sliding layers' own rotary tables,
score scales and multipliers given as expressions, odd rotary widths. What they change is the generated module's
arithmetic (its logits parity with transformers is in tests/codegen/hf_cases.py: smollm3, gemma3_text, granite,
granitemoe, cohere, gpt_neox-odd-rotary); here, how the spec reads and lowers them and what they refuse."""

from __future__ import annotations

import copy

import pytest

from archcalc.backends.count import count_size
from archcalc.backends.nonmatmul import non_matmul_forward
from archcalc.errors import ArchcalcError
from archcalc.ir import lower
from archcalc.ir.parts import layer_cycle
from archcalc.spec import load_spec
from archcalc.spec.bind import bind
from archcalc.spec.loader import spec_from_source
from archcalc.spec.source import Source


def _variant(name: str, change) -> object:
    """The bundled spec ``name`` with its data changed by ``change(data)``."""
    data = copy.deepcopy(load_spec(name)._source.data)
    change(data)
    return spec_from_source(Source(f"{name}-variant.yaml", data))


@pytest.mark.parametrize("pattern,layers,cycle", [
    (("local",) * 5 + ("global",), 26, ("local",) * 5 + ("global",)),
    (("local",) * 5 + ("global",), 2, ("local",)),  # only the first two layers are built
    (("a", "a", "b", "a", "a", "b"), 12, ("a", "a", "b")),
    ((True, True, True, False), 3, (True,)),
])
def test_a_pattern_lowers_as_its_cycle_over_the_built_layers(pattern, layers, cycle):
    assert layer_cycle(pattern, layers) == cycle


def test_nope_layers_and_their_cycle():
    attn = lower(bind(load_spec("smollm3"), "3b")).root.find("blocks.attn").attrs
    assert attn.rotary_pattern == (True, True, True, False)
    two = lower(bind(load_spec("smollm3"), "3b", _set("smollm3", L="2"))).root.find("blocks.attn").attrs
    assert two.rotary_pattern == (True,)  # every built layer rotates


def _set(name: str, **values: str):
    from archcalc.spec.bind import parse_overrides

    return parse_overrides(load_spec(name), [f"{k}={v}" for k, v in values.items()])


def test_rotary_pattern_needs_rotary_positions():
    def change(data):
        data["model"]["block"]["attention"]["rotary_pattern"] = [True, False]
    spec = _variant("gpt2", change)
    with pytest.raises(ArchcalcError, match="rotary_pattern .* not rotary"):
        lower(bind(spec, "small"))


def test_multipliers_and_expression_scales_are_evaluated_per_size():
    granite = load_spec("granite")
    for size, d_head, logits in (("3.3-2b", 64, 8), ("3.3-8b", 128, 16)):
        root = lower(bind(granite, size)).root
        assert root.find("blocks.attn").attrs.scale == 1 / d_head
        assert root.find("head").attrs.multiplier == 1 / logits
        assert root.find("embed").attrs.multiplier == 12.0 and root.find("blocks").attrs.residual_multiplier == 0.22
    # no parameter: the counts are Llama's; the non-matmul estimate adds one FLOP per multiplied element
    plain = _variant("granite", lambda data: [data["model"]["embedding"].pop("multiplier"),
                                               data["model"]["block"].pop("residual_multiplier"),
                                               data["model"]["head"].pop("multiplier")])
    assert count_size(plain, "3.3-2b").total == count_size(granite, "3.3-2b").total
    extra = non_matmul_forward(lower(bind(granite, "3.3-2b")), 8, 1) - non_matmul_forward(lower(bind(plain, "3.3-2b")), 8, 1)
    assert extra == 8 * 2048 + 40 * 2 * 8 * 2048 + 8 * 49159


@pytest.mark.parametrize("value", [0, -1.5, "d - d"])
def test_a_multiplier_must_be_above_zero(value):
    def change(data):
        data["model"]["block"]["residual_multiplier"] = value
    with pytest.raises(ArchcalcError, match="residual_multiplier|above 0"):
        lower(bind(_variant("granite", change), "3.3-2b"))


def test_scale_and_scale_width_are_one_or_the_other():
    def change(data):
        data["model"]["block"]["attention"]["scale"] = 0.5
    with pytest.raises(ArchcalcError, match="scale_width"):
        _variant("gemma3_text", change)
    attn = lower(bind(load_spec("gemma3_text"), "27b")).root.find("blocks.attn").attrs
    assert attn.scale == 168 ** -0.5  # 27B: d / H = 168, its heads 128 wide


def test_the_sliding_layers_own_rotary_tables():
    embed = lower(bind(load_spec("gemma3_text"), "4b")).root.find("embed").attrs
    assert (embed.rotary_base, embed.rotary_scaling.type, embed.rotary_scaling.factor) == (1e6, "linear", 8.0)
    assert (embed.rotary_local_base, embed.rotary_local_scaling) == (10000.0, None)
    assert lower(bind(load_spec("gemma3_text"), "1b")).root.find("embed").attrs.rotary_scaling is None


def test_an_odd_rotary_width_is_generated_for_rotate_half_only():
    pytest.importorskip("torch")
    from archcalc.codegen.emit import emit
    from archcalc.codegen.errors import UnsupportedError

    neox = _variant("gpt_neox", lambda data: None)
    source = emit(lower(bind(neox, "20b", _set("gpt_neox", d="768", H="64"))), "test")  # 12 x 1/4 = 3 rotated
    assert "rotary_width: int = 3" in source

    def odd(data):
        data["model"]["embedding"]["position"]["rotary_fraction"] = "65/256"  # 65 of GPT-J's 256, rotated in pairs
    with pytest.raises(UnsupportedError, match="odd rotary width"):
        emit(lower(bind(_variant("gptj", odd), next(iter(load_spec("gptj").sizes)))), "test")
