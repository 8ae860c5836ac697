"""The IR's typed settings: each kind of component carries its own frozen dataclass (whose class is the component's
kind), a misspelt field is an error,
the attention kernel is decided at lowering (and is what the generated module runs), and the old string-keyed view
kept for archcalc/hf/export.py has the old keys."""

from __future__ import annotations

import dataclasses

import pytest
import sympy

from archcalc.ir import Component, Tensor
from archcalc.ir.attrs import KINDS, Attention, LatentAttention, LayerNorm, Norm, RMSNorm
from archcalc.spec import load_spec
from archcalc.spec.library import bundled_names
from tests.helpers import lowered


@pytest.mark.parametrize("name", bundled_names())
def test_every_component_has_the_settings_of_its_kind(name):
    spec = load_spec(name)
    for _, node in lowered(spec, next(iter(spec.sizes))).root.walk():
        assert type(node.attrs) in (KINDS[node.kind], LatentAttention), (node.kind, type(node.attrs).__name__)
        assert node.kind == type(node.attrs).kind  # the kind is the settings' class: one way to say what a node is


def test_the_kind_follows_the_settings():
    width = sympy.Integer(4)
    ln, rms = Component("ln", LayerNorm(width, 1e-5)), Component("ln", RMSNorm(width, 1e-5))
    assert (ln.kind, rms.kind) == ("layernorm", "rmsnorm")
    assert isinstance(ln.attrs, Norm) and isinstance(rms.attrs, Norm) and not isinstance(ln.attrs, RMSNorm)
    attn = lowered("deepseek_v3", "671b").root.find("blocks.attn")
    assert attn is not None and attn.kind == "attention" and isinstance(attn.attrs, LatentAttention)


def test_a_misspelt_field_or_a_wrong_kind_is_an_error():
    attn = lowered("llama", "3-8b").root.find("blocks.attn")
    assert attn is not None and attn.attrs.heads == sympy.Symbol("H", integer=True, positive=True)
    with pytest.raises(AttributeError):
        attn.attrs.hedas  # noqa: B018
    with pytest.raises(dataclasses.FrozenInstanceError):
        attn.attrs.heads = 1  # type: ignore[misc]
    with pytest.raises(TypeError, match="Norm settings make no kind of component; kinds: model, embeddings"):
        Component("ln", Norm(sympy.Integer(4), 1e-5), (Tensor("weight", (sympy.Integer(4),), "norm"),))
    with pytest.raises(TypeError, match="dict settings make no kind of component"):
        Component("ln", {"width": 4})  # type: ignore[arg-type]


@pytest.mark.parametrize("spec,size,path,explicit,sharing", [
    ("gpt2", "small", "blocks.attn", False, "none"),  # multi-head: every query head has its own keys
    ("llama", "3-8b", "blocks.attn", False, "sdpa"),  # GQA without a mask: SDPA shares the key/value heads
    ("mistral", "7b", "blocks.attn", False, "repeat"),  # a sliding window is a mask: repeated
    ("gemma2", "9b", "blocks.attn", True, "repeat"),  # soft-capped scores: written out, repeated
    ("gpt_oss", "20b", "blocks.attn", True, "repeat"),  # sinks: written out
    ("deepseek_v3", "671b", "blocks.attn", False, "none"),  # latent attention: one latent for all heads
])
def test_the_attention_kernel_is_decided_at_lowering(spec, size, path, explicit, sharing):
    attn = lowered(spec, size).root.find(path)
    assert attn is not None
    assert (attn.attrs.explicit_softmax, attn.attrs.kv_sharing) == (explicit, sharing)
    assert attn.attrs.grouped == (sharing != "none")


def test_heads_wider_than_flash_attention_takes_are_repeated():
    assert lowered("llama", None, V=10, L=1, d=64, H=2, KV=1, d_ff=8).root.find("blocks.attn").attrs.kv_sharing == "sdpa"
    wide = lowered("llama", None, V=10, L=1, d=1024, H=2, KV=1, d_ff=8).root.find("blocks.attn").attrs  # heads 512 wide
    assert wide.head_width.xreplace(lowered("llama", None, V=10, L=1, d=1024, H=2, KV=1, d_ff=8).binding.numeric()) == 512
    assert wide.kv_sharing == "repeat"


def test_t5_self_attention_has_a_position_bias_and_cross_attention_none():
    root = lowered("t5", "small").root
    assert root.find("encoder.blocks.attn").attrs.position_bias
    assert root.find("decoder.blocks.attn").attrs.position_bias
    assert not root.find("decoder.blocks.cross_attn").attrs.position_bias


def test_windows_per_layer_follow_the_pattern():
    a = lowered("gemma2", "9b").root.find("blocks.attn").attrs
    assert isinstance(a, Attention) and a.banded and a.pattern == ("local", "global")
    assert a.layer_windows == (a.window, None)


def test_settings_have_no_string_keyed_reading():
    """Fields only: ``attrs["heads"]`` and ``attrs.get("heads")`` fail, so no module can lean on the old dictionary."""
    attn = lowered("llama", "3-8b").root.find("blocks.attn").attrs
    with pytest.raises(TypeError):
        attn["heads"]  # noqa: B018
    assert not hasattr(attn, "get") and not hasattr(attn, "items") and attn.heads == sympy.Symbol("H", positive=True, integer=True)
