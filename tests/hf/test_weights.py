"""The transformers knowledge that is data: the weight-name layouts a spec names (``hf.weights``, archcalc/hf/weights.py)
and the model settings that were once chosen by the model type, now the spec's own (``position.pairing``,
``position.form``, ``position.longrope_rerun``): validated where they are written, carried into the IR, kept by the
importer, and read by codegen and export alike."""

from __future__ import annotations

import pytest

from archcalc.codegen.emit import UnsupportedError, emit
from archcalc.errors import SpecError
from archcalc.hf import spec_from_hf_config, spec_from_hf_file
from archcalc.hf.build import family_of
from archcalc.hf.registry import MODEL_TYPES, weights_of
from archcalc.hf.weights import LAYOUTS
from archcalc.ir import lower
from archcalc.spec import load_spec, load_spec_text
from archcalc.spec.bind import bind
from tests.hf.test_user_spec_hf import MY_SPEC

DATA = "tests/data/hf"


def _embed(spec, size=None):
    return lower(bind(spec, size or next(iter(spec.sizes)))).root.find("embed").attrs


@pytest.mark.parametrize("setting,value,kind", [("pairing", "interleaved", "rotary"), ("longrope_rerun", "true", "rotary"),
                                                ("form", "bfloat16_scaled", "alibi")])
def test_a_position_setting_of_another_kind_is_refused_where_it_is_written(setting, value, kind):
    text = MY_SPEC.replace("position: {kind: rotary, base: 10000}", f"position: {{kind: learned, length: 64, {setting}: {value}}}")
    with pytest.raises(SpecError, match=f"{setting} only applies to 'kind: {kind}'") as e:
        load_spec_text(text, "my1b.yaml")
    assert str(e.value).startswith("my1b.yaml:12:")  # the line of the embedding, where the key is


def test_a_pairing_that_is_not_one_is_refused_with_the_choices():
    with pytest.raises(SpecError, match="my1b.yaml:12:82: .*pairing: expected one of 'half', 'interleaved' or 'deinterleaved'"):
        load_spec_text(MY_SPEC.replace("kind: rotary, base: 10000", "kind: rotary, base: 10000, pairing: twisted"), "my1b.yaml")


def test_the_bundled_specs_say_what_the_model_type_once_decided():
    """GPT-J, Cohere and Llama 4 rotate interleaved pairs, DeepSeek de-interleaves, Phi-3 re-runs LongRoPE: each in its spec."""
    pairing = {name: _embed(load_spec(name)).rotary_pairing for name in ("gptj", "cohere", "llama4", "deepseek_v3", "llama")}
    assert pairing == {"gptj": "interleaved", "cohere": "interleaved", "llama4": "interleaved", "deepseek_v3": "deinterleaved",
                       "llama": None}
    assert _embed(load_spec("phi3")).longrope_rerun and not _embed(load_spec("llama")).longrope_rerun
    assert _embed(load_spec("bloom")).alibi_form == "relative"


def test_imports_keep_the_settings_of_the_bundled_model():
    assert _embed(spec_from_hf_file(f"{DATA}/gpt-j-6b.json")).rotary_pairing == "interleaved"
    assert _embed(spec_from_hf_file(f"{DATA}/phi-3-mini-4k.json")).longrope_rerun
    rw = spec_from_hf_config({"model_type": "falcon", "vocab_size": 97, "hidden_size": 32, "num_hidden_layers": 2,
                              "num_attention_heads": 4, "alibi": True, "bias": True, "multi_query": False})
    assert _embed(rw).alibi_form == "bfloat16_scaled"  # Falcon-RW: transformers' Falcon computes ALiBi its own way


def test_every_model_type_names_a_layout_and_imported_specs_borrow_it():
    for model_type in MODEL_TYPES:
        assert family_of(model_type).origin.weights in LAYOUTS, model_type
    imported = spec_from_hf_file(f"{DATA}/mistral-7b-instruct-v0.3.json")
    assert imported.hf.weights is None and weights_of(imported.hf) == "llama"  # the bundled mistral spec's


def test_an_unknown_layout_is_refused_where_it_is_named():
    with pytest.raises(SpecError, match="expected a weight-name layout of archcalc/hf/weights.py") as e:
        load_spec_text(MY_SPEC.replace("  model_type: llama\n", "  model_type: llama\n  weights: lama\n"), "my1b.yaml")
    assert str(e.value).startswith("my1b.yaml:25:12:")


def test_a_model_type_of_ones_own_loads_through_a_named_layout():
    """A model type archcalc does not know, whose checkpoints kept Llama's names: the YAML alone gives the generated
    module its transformers weight names (export-hf would still need a bundled spec of that type)."""
    spec = load_spec_text(MY_SPEC.replace("  model_type: llama\n", "  model_type: my_llama\n  weights: llama\n"), "my1b.yaml")
    source = emit(lower(bind(spec, "base")), "test")
    assert "my_llama" in source and "model.layers.{i}.self_attn.q_proj.weight" in source and "def load_hf_state_dict(" in source
    without = load_spec_text(MY_SPEC.replace("  model_type: llama\n", "  model_type: my_llama\n"), "my1b.yaml")
    with pytest.raises(UnsupportedError, match="no transformers weight names for model_type 'my_llama': name a layout"):
        emit(lower(bind(without, "base")), "test")


def test_export_refuses_a_pairing_the_model_type_cannot_express():
    """The settings are compared on the way back: Llama's config cannot say that pairs are interleaved."""
    spec = load_spec_text(MY_SPEC.replace("kind: rotary, base: 10000", "kind: rotary, base: 10000, pairing: interleaved"), "my1b.yaml")
    from archcalc.hf.export import export_config

    with pytest.raises(SpecError, match="rotary_pairing absent, not .interleaved."):
        export_config(spec, "base")
