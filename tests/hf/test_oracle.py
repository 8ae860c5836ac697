"""transformers is the oracle: for each model type, real and random configs count exactly as
transformers instantiates them on the meta device (decoders as …ForCausalLM, BERT as BertModel,
T5 as T5ForConditionalGeneration: the class each bundled spec's hf.architectures names). The model types and their
random configs come from the bundled specs (tests/hf/oracle_configs.py): a new one is tested with no change here."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from archcalc.backends.count import count_size
from archcalc.errors import SpecError
from archcalc.hf import MODEL_TYPES, spec_from_hf_file
from archcalc.hf.build import family_of
from tests.helpers import meta_count, text_model
from tests.hf.oracle_configs import draw

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

HERE = Path(__file__).resolve().parent
HUB = HERE.parent / "data" / "hf"  # configs as the Hub serves them (older transformers versions wrote them)
REF = HERE.parent / "data" / "hf-reference"  # copied from the shared reference folder (its README says how)
RANDOM = 5  # random configs per model type


def transformers_count(data: dict) -> int:
    """sum(p.numel()) of the model transformers builds from ``data`` on the meta device, as the class archcalc counts
    for its model type (the bundled spec's hf.architectures: LlamaForCausalLM, BertModel, ...); a multimodal wrapper's
    text model."""
    data = dict(text_model(data))
    model_type = data.pop("model_type")
    transformers.logging.set_verbosity_error()
    family = family_of(model_type)  # a type read as another's (kimi_k2 as deepseek_v3): that type's config class
    return meta_count(transformers.AutoConfig.for_model(family.model_type, **data), family.hf_class)


def archcalc_count(path: Path) -> int:
    spec = spec_from_hf_file(path)
    return count_size(spec, next(iter(spec.sizes))).total


def real_configs() -> list[Path]:
    """tests/data/hf/ and tests/data/hf-reference/ (a config in both counts once)."""
    return sorted(HUB.glob("*.json")) + sorted(p for p in REF.glob("*.json") if p.name != "counts.json" and not (HUB / p.name).exists())


@pytest.mark.parametrize("path", real_configs(), ids=lambda p: p.stem)
def test_real_config_equals_transformers(path):
    assert archcalc_count(path) == transformers_count(json.loads(path.read_text()))


@pytest.mark.parametrize("model_type", MODEL_TYPES)
def test_class_defaults_equal_transformers(model_type, tmp_path):
    """An empty config is the class's defaults (Llama-2-7B, DeepSeek-V3 671B, ...): every default must match (no
    padding token: Phi-3's default pad id is past its default vocabulary; a padding index adds no parameter)."""
    data = {"model_type": model_type, "pad_token_id": None}
    path = tmp_path / f"{model_type}.json"
    path.write_text(json.dumps(data))
    try:
        theirs = transformers_count(data)
    except (TypeError, ValueError) as e:  # a class whose defaults do not build (LFM2-MoE's: no layer_types)
        with pytest.raises(SpecError, match="transformers' .* fails"):
            archcalc_count(path)
        pytest.skip(f"transformers does not build {model_type}'s class defaults ({type(e).__name__}); archcalc refuses them")
    assert archcalc_count(path) == theirs


@pytest.mark.filterwarnings("ignore:Initializing zero-element tensors")  # DeepSeek with n_shared_experts 0
@pytest.mark.parametrize("seed", range(RANDOM))
@pytest.mark.parametrize("model_type", MODEL_TYPES)
def test_random_config_equals_transformers(model_type, seed, tmp_path):
    """Small random configs: layers, widths, heads and kv heads, vocabulary, biases, tying, layouts.
    Odd seeds write the config as transformers' to_dict() does (every field, derived ones too)."""
    data = {"model_type": model_type} | draw(model_type, random.Random(f"{model_type}/{seed}"))
    if seed % 2:
        config = transformers.AutoConfig.for_model(model_type, **{k: v for k, v in data.items() if k != "model_type"})
        data = json.loads(json.dumps(config.to_dict(), default=str))
    path = tmp_path / f"{model_type}-{seed}.json"
    path.write_text(json.dumps(data, indent=2))
    assert archcalc_count(path) == transformers_count(data), data
