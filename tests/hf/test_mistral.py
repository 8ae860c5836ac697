"""Mistral 3 and 4: the mistral3 wrapper read as its text model (mistral, ministral3 or mistral4) with the head tied as
transformers ties it, and the query temperature (rope_parameters' llama_4_scaling_beta) read, refused and written back.
transformers is the oracle: Mistral3ForConditionalGeneration built on the meta device, less its vision tower and
projector."""

from __future__ import annotations

import json

import pytest

from archcalc.backends.count import count_size
from archcalc.errors import SpecError
from archcalc.hf import spec_from_hf_config
from archcalc.hf.build import WRAPPER_NOTE
from archcalc.hf.export import export_config

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

PIXTRAL = {"model_type": "pixtral", "hidden_size": 16, "intermediate_size": 16, "num_hidden_layers": 1,
           "num_attention_heads": 2, "head_dim": 8, "image_size": 28, "patch_size": 14}
TEXT = {  # the three text models Mistral 3 wraps: Mistral Small 3.1 (mistral), Ministral 3, Mistral Small 4
    "mistral": {"model_type": "mistral", "vocab_size": 64, "hidden_size": 16, "intermediate_size": 32,
                "num_hidden_layers": 2, "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 8,
                "sliding_window": None},
    "ministral3": {"model_type": "ministral3", "vocab_size": 64, "hidden_size": 16, "intermediate_size": 32,
                   "num_hidden_layers": 2, "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 8},
    "mistral4": {"model_type": "mistral4", "vocab_size": 64, "hidden_size": 16, "intermediate_size": 32,
                 "moe_intermediate_size": 8, "num_hidden_layers": 2, "num_attention_heads": 2, "num_key_value_heads": 2,
                 "q_lora_rank": 8, "kv_lora_rank": 8, "qk_rope_head_dim": 4, "qk_nope_head_dim": 4, "v_head_dim": 4,
                 "n_routed_experts": 4, "num_experts_per_tok": 2, "first_k_dense_replace": 1},
}


def text_count(data: dict) -> int:
    """The parameters of transformers' Mistral3ForConditionalGeneration less its vision tower and projector (a tied
    head once)."""
    transformers.logging.set_verbosity_error()
    config = transformers.Mistral3Config(**{k: v for k, v in data.items() if k != "model_type"})
    with torch.device("meta"):
        model = transformers.Mistral3ForConditionalGeneration(config)
    return sum(p.numel() for name, p in model.named_parameters()
               if not name.startswith(("model.vision_tower.", "model.multi_modal_projector.")))


@pytest.mark.parametrize("tie", [None, True, False], ids=["tie-default", "tie-true", "tie-false"])
@pytest.mark.parametrize("inner_tie", [None, False], ids=["text-tie-unsaid", "text-tie-false"])
@pytest.mark.parametrize("kind", sorted(TEXT))
def test_the_wrapper_counts_its_text_model_as_transformers(kind, tie, inner_tie):
    """Mistral3Config ties the head by its own flag (default true), whatever its text config says."""
    text = TEXT[kind] | ({} if inner_tie is None else {"tie_word_embeddings": inner_tie})
    data = {"model_type": "mistral3", "text_config": text, "vision_config": PIXTRAL}
    data |= {} if tie is None else {"tie_word_embeddings": tie}
    spec = spec_from_hf_config(json.loads(json.dumps(data)), "wrapper.json")
    assert count_size(spec, next(iter(spec.sizes))).total == text_count(data)
    assert spec.notes.count(WRAPPER_NOTE) == 1


def test_the_query_temperature_is_read_and_written_back():
    data = dict(TEXT["ministral3"], rope_parameters={"rope_type": "yarn", "rope_theta": 1e6, "factor": 4.0,
                                                     "original_max_position_embeddings": 7, "llama_4_scaling_beta": 0.25})
    spec = spec_from_hf_config(data, "m.json")
    temperature = spec.model.block.attention.temperature
    assert (temperature.floor, temperature.scale, temperature.offset, temperature.every_layer) == (7, 0.25, 0, True)
    params = export_config(spec, None)["rope_parameters"]
    assert (params["llama_4_scaling_beta"], params["original_max_position_embeddings"]) == (0.25, 7)


def test_a_missing_beta_is_noted_not_modelled():
    """transformers builds such a model (the count holds) but its forward fails: one note says so."""
    data = dict(TEXT["ministral3"], rope_parameters={"rope_type": "default", "rope_theta": 1e6})
    spec = spec_from_hf_config(data, "m.json")
    assert spec.model.block.attention.temperature is None
    assert "has no llama_4_scaling_beta" in spec.notes


def test_a_negative_beta_is_refused_in_one_line():
    data = dict(TEXT["ministral3"], rope_parameters={"rope_type": "yarn", "factor": 4.0, "llama_4_scaling_beta": -0.1})
    with pytest.raises(SpecError, match=r"llama_4_scaling_beta: -0.1: a negative temperature is not modelled") as caught:
        spec_from_hf_config(data, "m.json")
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize("change, key", [({"head_dim": 12}, "head_dim"),
                                         ({"rope_parameters": {"rope_type": "yarn", "factor": 4.0, "llama_4_scaling_beta": 0.1,
                                                               "partial_rotary_factor": 0.75}}, "partial_rotary_factor"),
                                         ({"rope_parameters": {"rope_type": "default", "rope_theta": 1e4}}, "rope_parameters")])
def test_mistral4_rotary_features_transformers_cannot_run_are_refused(change, key):
    """transformers rotates int(head_dim * partial_rotary_factor) features (default rope: head_dim): any number but
    qk_rope_head_dim fails in its forward."""
    data = TEXT["mistral4"] | change
    config = transformers.Mistral4Config(**{k: v for k, v in data.items() if k != "model_type"})
    model = transformers.Mistral4ForCausalLM(config)
    with pytest.raises(RuntimeError):
        model(torch.zeros(1, 3, dtype=torch.long))
    with pytest.raises(SpecError, match=key) as caught:
        spec_from_hf_config(data, "m4.json")
    assert "\n" not in str(caught.value)
