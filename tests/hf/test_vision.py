"""transformers is the oracle for ``--with-vision``: the vision tower and projector archcalc counts from a wrapper
config hold exactly the tensors (names, shapes, counts) of the modules transformers' ...ForConditionalGeneration
builds from it on the meta device: on each wrapper's class default config, on genuine configs of tests/data/hf and
on a few seeded random vision configs."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import pytest

from archcalc.errors import SpecError
from archcalc.hf.jsonfile import parse_text
from archcalc.hf.vision import WRAPPERS, vision_count

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

HUB = Path(__file__).resolve().parent.parent / "data" / "hf"
GENUINE = sorted(p for p in HUB.glob("*.json") if "vision_config" in json.loads(p.read_text())
                 and json.loads(p.read_text()).get("model_type") in WRAPPERS)

# wrapper -> its model class and the modules under ``model`` that are each part (the longest prefix wins): stated
# here from the modeling files, independently of archcalc's table
ORACLE = {
    "gemma3": ("Gemma3ForConditionalGeneration", {"vision_tower.": "vision_tower", "multi_modal_projector.": "projector"}),
    "qwen3_5": ("Qwen3_5ForConditionalGeneration", {"visual.": "vision_tower", "visual.merger.": "projector"}),
    "qwen3_5_moe": ("Qwen3_5MoeForConditionalGeneration", {"visual.": "vision_tower", "visual.merger.": "projector"}),
    "mistral3": ("Mistral3ForConditionalGeneration", {"vision_tower.": "vision_tower", "multi_modal_projector.": "projector"}),
    "gemma4": ("Gemma4ForConditionalGeneration", {"vision_tower.": "vision_tower", "embed_vision.": "projector"}),
}

# small text models (the projector reads their width; their layers do not matter here)
TEXT = {
    "gemma3": {"model_type": "gemma3_text", "vocab_size": 64, "num_hidden_layers": 1, "num_attention_heads": 2,
               "num_key_value_heads": 1, "head_dim": 8, "intermediate_size": 24},
    "qwen3_5": {"model_type": "qwen3_5_text", "vocab_size": 64, "num_hidden_layers": 1, "num_attention_heads": 2,
                "num_key_value_heads": 1, "head_dim": 8, "intermediate_size": 24},
    "qwen3_5_moe": {"model_type": "qwen3_5_moe_text", "vocab_size": 64, "num_hidden_layers": 1, "num_attention_heads": 2,
                    "num_key_value_heads": 1, "head_dim": 8, "moe_intermediate_size": 8, "num_experts": 2,
                    "num_experts_per_tok": 1, "shared_expert_intermediate_size": 8},
    "mistral3": {"model_type": "mistral", "vocab_size": 64, "num_hidden_layers": 1, "num_attention_heads": 2,
                 "num_key_value_heads": 1, "head_dim": 8, "intermediate_size": 24},
    "gemma4": {"model_type": "gemma4_text", "vocab_size": 64, "vocab_size_per_layer_input": 64, "num_hidden_layers": 1,
               "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 8, "global_head_dim": 8,
               "intermediate_size": 24, "hidden_size_per_layer_input": 4},
}


def transformers_parts(data: dict) -> dict[str, dict[str, tuple[tuple[int, ...], int]]]:
    """part -> {path with layer indices left out: (shape, parameters summed over the layers)} of the model
    transformers builds from ``data`` on the meta device."""
    cls, roots = ORACLE[data["model_type"]]
    model_class = getattr(transformers, cls)
    transformers.logging.set_verbosity_error()
    with torch.device("meta"):
        model = model_class(model_class.config_class.from_dict(data))
    parts: dict[str, dict[str, tuple[tuple[int, ...], int]]] = {"vision_tower": {}, "projector": {}}
    for name, p in model.model.named_parameters():
        root = max((r for r in roots if name.startswith(r)), key=len, default=None)
        if root is None:
            continue
        path = re.sub(r"\.\d+(?=\.)", "", name)
        shape, n = parts[roots[root]].get(path, (tuple(p.shape), 0))
        assert shape == tuple(p.shape), path  # one path, one shape in every layer
        parts[roots[root]][path] = (shape, n + p.numel())
    return parts


def archcalc_parts(data: dict) -> dict[str, dict[str, tuple[tuple[int, ...], int]]]:
    vc = vision_count(parse_text(json.dumps(data), "config.json"))
    parts: dict[str, dict[str, tuple[tuple[int, ...], int]]] = {"vision_tower": {}, "projector": {}}
    for t in vc.tensors_json():
        parts[t["role"]][t["path"]] = (tuple(t["shape"]), t["count"])
    assert vc.totals() == {part: sum(n for _, n in tensors.values()) for part, tensors in parts.items()}
    return parts


def check(data: dict) -> dict[str, int]:
    """archcalc's tensors of ``data`` equal transformers'; the parts' totals."""
    ours, theirs = archcalc_parts(data), transformers_parts(data)
    assert ours == theirs
    return {part: sum(n for _, n in tensors.values()) for part, tensors in theirs.items()}


@pytest.mark.parametrize("wrapper", sorted(ORACLE))
def test_class_default_config(wrapper):
    config_class = getattr(transformers, ORACLE[wrapper][0]).config_class
    data = config_class().to_dict()
    totals = check(data)
    # Gemma 4's vision config is optional and absent by default: no tower; the others build one
    assert (totals["vision_tower"] > 0) == (data.get("vision_config") is not None)


@pytest.mark.parametrize("path", GENUINE, ids=lambda p: p.stem)
def test_genuine_config(path):
    data = json.loads(path.read_text())
    totals = check(data)
    assert totals["vision_tower"] > 0 and totals["projector"] > 0


# Published checkpoints whose config.json tests/data/hf lacks, as public code quotes them whole (the keys that shape
# parameters): google/gemma-3-4b-it and Mistral Small 3.x (24B, FLUX.2's text encoder)
PUBLISHED = {
    "gemma-3-4b-it": {
        "model_type": "gemma3", "mm_tokens_per_image": 256,
        "text_config": {"hidden_size": 2560, "intermediate_size": 10240, "model_type": "gemma3_text", "num_hidden_layers": 34,
                        "rope_scaling": {"factor": 8.0, "rope_type": "linear"}, "sliding_window": 1024},
        "vision_config": {"hidden_size": 1152, "image_size": 896, "intermediate_size": 4304, "model_type": "siglip_vision_model",
                          "num_attention_heads": 16, "num_hidden_layers": 27, "patch_size": 14, "vision_use_head": False}},
    "mistral-small-3": {
        "model_type": "mistral3", "multimodal_projector_bias": False, "projector_hidden_act": "gelu", "spatial_merge_size": 2,
        "vision_feature_layer": -1,
        "text_config": {"head_dim": 128, "hidden_act": "silu", "hidden_size": 5120, "intermediate_size": 32768,
                        "max_position_embeddings": 131072, "model_type": "mistral", "num_attention_heads": 32,
                        "num_hidden_layers": 40, "num_key_value_heads": 8, "vocab_size": 131072},
        "vision_config": {"head_dim": 64, "hidden_act": "silu", "hidden_size": 1024, "image_size": 1540, "intermediate_size": 4096,
                          "model_type": "pixtral", "num_attention_heads": 16, "num_channels": 3, "num_hidden_layers": 24,
                          "patch_size": 14}},
}


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_published_config(name):
    totals = check(PUBLISHED[name])
    assert totals["vision_tower"] > 0 and totals["projector"] > 0


def _random_vision(wrapper: str, rng: random.Random) -> dict:
    """A small vision config of ``wrapper``'s encoder, and the wrapper keys its projector reads."""
    heads, head_dim = rng.randint(1, 3), rng.choice([4, 8])
    width, hidden = heads * head_dim, rng.randint(4, 40)
    layers, patch = rng.randint(1, 3), rng.choice([2, 3, 4])
    if wrapper == "gemma3":
        return {"vision_config": {"model_type": "siglip_vision_model", "hidden_size": width, "intermediate_size": hidden,
                                  "num_hidden_layers": layers, "num_attention_heads": heads, "patch_size": patch,
                                  "image_size": patch * rng.randint(1, 4) + rng.randint(0, patch - 1),
                                  "num_channels": rng.randint(1, 4), "vision_use_head": rng.random() < 0.5},
                "mm_tokens_per_image": 1}
    if wrapper in ("qwen3_5", "qwen3_5_moe"):
        return {"vision_config": {"model_type": wrapper, "hidden_size": width, "intermediate_size": hidden,
                                  "depth": layers, "num_heads": heads, "patch_size": patch,
                                  "temporal_patch_size": rng.randint(1, 3), "in_channels": rng.randint(1, 4),
                                  "spatial_merge_size": rng.randint(1, 3), "out_hidden_size": rng.randint(4, 40),
                                  "num_position_embeddings": rng.randint(1, 5) ** 2}}
    if wrapper == "mistral3":
        layer = rng.choice([-1, [-1, -2], [-1, -2, -3]])
        return {"vision_config": {"model_type": "pixtral", "hidden_size": width, "intermediate_size": hidden,
                                  "num_hidden_layers": layers, "num_attention_heads": heads, "head_dim": head_dim,
                                  "patch_size": patch, "image_size": patch * 4, "num_channels": rng.randint(1, 4)},
                "spatial_merge_size": rng.randint(1, 3), "vision_feature_layer": layer,
                "multimodal_projector_bias": rng.random() < 0.5}
    kv = rng.choice([h for h in range(1, heads + 1) if heads % h == 0])
    return {"vision_config": {"model_type": "gemma4_vision", "hidden_size": width, "intermediate_size": hidden,
                              "num_hidden_layers": layers, "num_attention_heads": heads, "num_key_value_heads": kv,
                              "head_dim": rng.choice([4, 8]), "patch_size": patch,
                              "position_embedding_size": rng.randint(1, 50)}}


@pytest.mark.parametrize("wrapper", sorted(ORACLE))
def test_random_vision_configs(wrapper):
    rng = random.Random(f"vision-{wrapper}")
    for _ in range(3):
        text = {**TEXT[wrapper], "hidden_size": rng.randint(2, 6) * 8}
        data = {"model_type": wrapper, "text_config": text, **_random_vision(wrapper, rng)}
        totals = check(data)
        assert totals["projector"] > 0


def test_a_wrapper_not_modelled_is_refused():
    cf = parse_text(json.dumps({"model_type": "llava", "text_config": {"model_type": "llama"}}), "c.json")
    with pytest.raises(SpecError, match=r"^c\.json:1:\d+: model_type: 'llava': its vision tower is not modelled"):
        vision_count(cf)


def test_an_encoder_not_modelled_is_refused():
    text = '{"model_type": "gemma3",\n "text_config": {"model_type": "gemma3_text"},\n "vision_config": {"model_type": "clip_vision_model"}}'
    with pytest.raises(SpecError, match=r"^c\.json:3:20: vision_config\.model_type: 'clip_vision_model' is not the encoder"):
        vision_count(parse_text(text, "c.json"))


def test_a_bad_size_points_at_its_key():
    text = '{"model_type": "qwen3_5",\n "text_config": {"model_type": "qwen3_5_text"},\n "vision_config": {"patch_size": [14, 14]}}'
    with pytest.raises(SpecError, match=r"^c\.json:3:20: vision_config\.patch_size: expected an integer"):
        vision_count(parse_text(text, "c.json"))


def test_a_text_config_is_refused():
    with pytest.raises(SpecError, match="has no text_config"):
        vision_count(parse_text('{"model_type": "llama"}', "c.json"))


@pytest.mark.parametrize("wrapper", sorted(ORACLE))
def test_a_config_without_vision_config(wrapper):
    # the wrapper's class fills the vision config in (Mistral 3 with defaults of its own), or builds no tower (Gemma 4)
    totals = check({"model_type": wrapper, "text_config": {**TEXT[wrapper], "hidden_size": 16}})
    assert (totals["vision_tower"] > 0) == (wrapper != "gemma4")


def test_an_audio_tower_is_noted_not_counted():
    data = {"model_type": "gemma4", "text_config": {**TEXT["gemma4"], "hidden_size": 16}, "audio_config": {},
            "vision_config": _random_vision("gemma4", random.Random(0))["vision_config"]}
    plain = vision_count(parse_text(json.dumps({**data, "audio_config": None}), "c.json"))
    vc = vision_count(parse_text(json.dumps(data), "c.json"))
    assert vc.totals() == plain.totals() and vc.totals()["vision_tower"] > 0 and not plain.notes
    assert any("audio tower" in note and "not counted" in note for note in vc.notes)


def test_hostile_sizes_stay_exact_or_are_refused_at_their_key():
    huge = 10**18
    data = {"model_type": "qwen3_5", "text_config": {"model_type": "qwen3_5_text"},
            "vision_config": {"hidden_size": huge, "depth": huge, "spatial_merge_size": huge}}
    totals = vision_count(parse_text(json.dumps(data), "c.json")).totals()
    assert totals["projector"] > huge**6 and type(totals["projector"]) is int  # (d_v·m²)², exactly
    text = '{"model_type": "mistral3", "text_config": {"model_type": "mistral"},\n "vision_config": {"hidden_size": -4}}'
    with pytest.raises(SpecError, match=r"^c\.json:2:20: vision_config\.hidden_size: expected an integer from 1"):
        vision_count(parse_text(text, "c.json"))
