"""Rotary scaling in generated modules, against transformers 5 (fp32, CPU, eager attention).

For each scheme a tiny random transformers model, imported through ``spec_from_hf_config`` and loaded with
``load_hf_state_dict``, gives the same logits (relative error < 1e-4) on sequences three times longer than the
original context (8 tokens), and the same greedy tokens from ``generate()`` with a KV cache as transformers'
``generate(do_sample=False)``, from a prompt inside the original context to well past it and from a prompt
already past it. The scaling must matter: the same weights without it give logits far from transformers'.
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import pytest
import torch

transformers = pytest.importorskip("transformers")

from archcalc.codegen.emit import emit  # noqa: E402
from archcalc.codegen.errors import UnsupportedError  # noqa: E402
from archcalc.codegen.load import load_source  # noqa: E402
from archcalc.hf import spec_from_hf_config  # noqa: E402
from archcalc.ir import lower  # noqa: E402
from archcalc.spec import load_spec_text  # noqa: E402
from archcalc.spec.bind import bind  # noqa: E402
from tests.codegen.hf_cases import DEEPSEEK, MOE, TOLERANCE, generated, hf_model, rel  # noqa: E402
from tests.helpers import assert_ruff_clean  # noqa: E402

ORIGINAL = 8  # the original context of every case: sequences of 24 tokens are three times as long
WIDE = dict(vocab_size=97, hidden_size=64, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, max_position_embeddings=64)  # 16 features per head: 8 frequencies to scale
RAMP = {"beta_fast": 2.0, "beta_slow": 0.25}  # with an 8-token context, YaRN's ramp then spans several features


def _yarn(**extra):
    return {"rope_type": "yarn", "rope_theta": 100.0, "factor": 4.0, "original_max_position_embeddings": ORIGINAL, **extra}


def _longrope(pairs: int):
    return {"rope_type": "longrope", "short_factor": [1.0 + 0.25 * i for i in range(pairs)],
            "long_factor": [2.0 + 1.5 * i for i in range(pairs)]}


# case: (config class, its arguments); each with the scaling in rope_parameters (or Phi-3's legacy rope_scaling)
CASES = {
    "llama3": ("LlamaConfig", {**WIDE, "rope_parameters": {  # wavelengths 6.3 (short), 11.2 (between), 20+ (long)
        "rope_type": "llama3", "rope_theta": 100.0, "factor": 4.0, "low_freq_factor": 0.5, "high_freq_factor": 1.2,
        "original_max_position_embeddings": ORIGINAL}}),
    "llama3-no-band": ("LlamaConfig", {**WIDE, "rope_parameters": {  # equal factors, as Llama 4 Scout's: no blended band
        "rope_type": "llama3", "rope_theta": 100.0, "factor": 4.0, "low_freq_factor": 1.0, "high_freq_factor": 1.0,
        "original_max_position_embeddings": ORIGINAL}}),
    "linear": ("LlamaConfig", {**WIDE, "rope_parameters": {"rope_type": "linear", "rope_theta": 100.0, "factor": 4.0}}),
    "dynamic": ("LlamaConfig", {**WIDE, "max_position_embeddings": ORIGINAL,  # dynamic grows past max_position_embeddings
                                "rope_parameters": {"rope_type": "dynamic", "rope_theta": 100.0, "factor": 4.0}}),
    "yarn": ("LlamaConfig", {**WIDE, "rope_parameters": _yarn(**RAMP)}),
    "qwen2-yarn": ("Qwen2Config", {**WIDE, "rope_parameters": _yarn()}),  # transformers' betas (32, 1)
    "deepseek_v3-yarn": ("DeepseekV3Config", {**DEEPSEEK, "rope_scaling": {  # mscale: cos/sin; mscale_all_dim: scores too
        "type": "yarn", "factor": 4.0, "original_max_position_embeddings": ORIGINAL, "mscale": 1.0, "mscale_all_dim": 0.8,
        **RAMP}}),
    "gpt_oss-yarn": ("GptOssConfig", {**WIDE, **MOE, "head_dim": 8, "sliding_window": 5,
                                      "rope_parameters": _yarn(truncate=False, **RAMP)}),  # an unrounded ramp
    "phi3-longrope": ("Phi3Config", {**WIDE, "pad_token_id": 0, "partial_rotary_factor": 0.5,  # 8 rotary features
                                     "original_max_position_embeddings": ORIGINAL, "rope_scaling": {
                                         "type": "longrope", **{k: v for k, v in _longrope(4).items() if k != "rope_type"}}}),
    "llama-longrope": ("LlamaConfig", {**WIDE, "rope_parameters": {"rope_theta": 100.0, **_longrope(8),
                                                                   "original_max_position_embeddings": ORIGINAL}}),
}


def _config(case: str, unscaled: bool = False):
    name, kwargs = CASES[case]
    if unscaled:  # the same model with default rotary tables at the same base
        kwargs = {k: v for k, v in kwargs.items() if k not in ("rope_parameters", "rope_scaling")}
        kwargs["rope_parameters"] = {"rope_type": "default", "rope_theta": 10000.0 if "deepseek" in case else 100.0}
    return getattr(transformers, name)(**kwargs)


def _pair(case: str, unscaled: bool = False):
    hf = hf_model(_config(case))
    module = generated(_config(case, unscaled))
    model = module.build().eval()
    module.load_hf_state_dict(model, hf.state_dict())
    hf.generation_config.eos_token_id = None  # never stop early
    hf.generation_config.pad_token_id = 0
    return hf, model


def _ids(length: int, seed: int = 1) -> torch.Tensor:
    return torch.randint(0, 97, (2, length), generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("case", list(CASES))
def test_logits_match_transformers_past_the_original_context(case):
    hf, model = _pair(case)
    for length in (3 * ORIGINAL, ORIGINAL - 2):  # past the original context, then within it (longrope: short factors)
        ids = _ids(length)
        with torch.no_grad():
            ours, theirs = model(ids), hf(ids).logits
        assert ours.shape == theirs.shape and rel(ours, theirs) < TOLERANCE, (length, rel(ours, theirs))


@pytest.mark.parametrize("case", list(CASES))
def test_the_scaling_matters(case):
    """Without the scaling, the same weights give logits far from transformers' (so the test above can fail)."""
    hf, unscaled = _pair(case, unscaled=True)
    ids = _ids(3 * ORIGINAL)
    with torch.no_grad():
        assert rel(unscaled(ids), hf(ids).logits) > 1e-2


GENERATE_CASES = [pytest.param(case, prompt, id=f"{case}-{name}")
                  for case in CASES for name, prompt in (("crossing", ORIGINAL - 2), ("past", ORIGINAL + 4))]


@pytest.mark.parametrize("case, prompt", GENERATE_CASES)
def test_greedy_tokens_equal_transformers(case, prompt):
    """From a prompt inside the original context to 24 tokens (dynamic and longrope change their frequencies on the
    way), and from a prompt already past it."""
    hf, model = _pair(case)  # a fresh transformers model: its dynamic rotary keeps the longest length it has seen
    ids = _ids(prompt, seed=2)
    new = 3 * ORIGINAL - prompt
    theirs = hf.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False, max_new_tokens=new, min_new_tokens=new)
    ours = model.generate(ids, new, temperature=0)
    assert ours.shape == theirs.shape == (2, 3 * ORIGINAL) and torch.equal(ours, theirs), (ours, theirs)


HUB = Path(__file__).resolve().parent.parent / "data" / "hf"
PHI35_LIKE = dict(hidden_size=3072, num_attention_heads=32, max_position_embeddings=131072, original_max_position_embeddings=4096,
                  rope_scaling={"type": "longrope", "short_factor": [1.0 + 0.01 * i for i in range(48)],
                                "long_factor": [1.0 + 0.9 * i for i in range(48)]})  # Phi-3.5-mini's shapes, made-up factors
REAL = {  # name: (config dict as a config.json holds it, transformers' rotary module)
    "llama-3.1-8b": lambda: json.loads((HUB / "llama-3.1-8b.json").read_text()),
    "deepseek-v3": lambda: {k: v for k, v in json.loads((HUB / "deepseek-v3.json").read_text()).items() if k != "quantization_config"},
    "gpt-oss-default": lambda: {k: v for k, v in transformers.GptOssConfig().to_dict().items() if k != "rope_parameters"},
    "phi-3.5-like": lambda: transformers.Phi3Config(**PHI35_LIKE).to_dict(),
    "dynamic-4k": lambda: transformers.LlamaConfig(max_position_embeddings=4096, rope_parameters={
        "rope_type": "dynamic", "factor": 2.0, "rope_theta": 500000.0}).to_dict(),
}


@pytest.mark.parametrize("name", list(REAL))
def test_tables_of_real_configs_equal_transformers_bit_for_bit(name):
    """At real sizes (gpt-oss's default YaRN comes from a config without rope parameters, as GptOssConfig fills it in),
    cos and sin equal transformers' rotary module's exactly, at the start and 100,000 positions in."""
    data = REAL[name]()
    spec = spec_from_hf_config(data, f"{name}.json")
    module = load_source(emit(lower(bind(spec, next(iter(spec.sizes)))), "test"))
    ours = module.Rotary(module.Config())
    config = transformers.AutoConfig.for_model(**data)
    modeling = importlib.import_module(f"transformers.models.{config.model_type}.modeling_{config.model_type}")
    rotary_class = next(getattr(modeling, n) for n in dir(modeling) if n.endswith("RotaryEmbedding"))
    for start in (0, 100_000):
        cos, sin = ours(start, 16, torch.device("cpu"))
        theirs = rotary_class(config)(torch.zeros(1), torch.arange(start, start + 16)[None])  # a fresh module each time
        hf_cos, hf_sin = (t[0].repeat(1, 2) if t.shape[-1] != cos.shape[-1] else t[0] for t in theirs)  # gpt-oss: half tables
        assert torch.equal(cos, hf_cos) and torch.equal(sin, hf_sin), (start, (cos - hf_cos).abs().max())


@pytest.mark.parametrize("case", ["llama3", "linear", "dynamic", "yarn", "gpt_oss-yarn", "llama-longrope"])
def test_scaled_tables_are_computed_in_forward_in_one_graph(case, tmp_path):
    """A meta build allocates nothing; the only buffer is the frequencies, for schemes whose frequencies do not
    follow the length (dynamic NTK and LongRoPE compute theirs in forward); no graph breaks; a lint-clean file."""
    spec = spec_from_hf_config(_config(case).to_dict(), "tiny.json")
    source = emit(lower(bind(spec, next(iter(spec.sizes)))), "test")
    module = load_source(source)
    meta = module.build(device="meta")
    assert all(t.is_meta for t in [*meta.parameters(), *meta.buffers()])
    by_length = case in ("dynamic", "llama-longrope")
    assert [name for name, _ in meta.named_buffers()] == ([] if by_length else ["rotary.inv_freq"])
    if not case.startswith("gpt_oss"):  # the MoE's routing breaks graphs of its own
        explanation = torch._dynamo.explain(module.build().eval())(_ids(3 * ORIGINAL))
        assert explanation.graph_break_count == 0
    assert_ruff_clean(source, tmp_path)


@pytest.mark.parametrize("scaling, words", [
    ("yarn", ["'yarn' needs its numbers", "factor", "original_context"]),
    ("{type: llama3, factor: 8.0, original_context: 8192}", ["low_freq_factor", "high_freq_factor"]),
    ("{type: proportional, factor: 2.0}", ["'proportional' needs its numbers", "fraction"]),
    ("{type: proportional, fraction: 0.25, factor: 2.0}", ["proportional rotary positions without a factor"]),
    ("{type: longrope, original_context: 8, factor: 4.0, short_factor: [1.0], long_factor: [1.0]}", ["2 positive factors"]),
])
def test_scaling_without_its_numbers_is_refused(scaling, words):
    """A bare scheme name (``scaling: yarn``) records the scheme for counting; codegen needs its numbers."""
    spec = load_spec_text(f"""
name: tiny
hyperparameters: {{}}
model:
  embedding: {{vocab: 11, width: 8, position: {{kind: rotary, scaling: {scaling}}}}}
  block:
    repeat: 1
    norm: {{kind: rmsnorm}}
    attention: {{heads: 2, head_width: 4}}
    mlp: {{kind: gated, hidden: 8, activation: silu}}
  final_norm: {{kind: rmsnorm}}
  head: {{tied: false}}
sizes: {{a: {{}}}}
""", "tiny.yaml")
    with pytest.raises(UnsupportedError) as error:
        emit(lower(bind(spec, "a")), "t")
    assert all(word in str(error.value) for word in words), str(error.value)
