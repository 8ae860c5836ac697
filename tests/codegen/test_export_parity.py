"""Both ways from one spec: a tiny variant of each bundled family (its first and last size, with ``--set`` shrinking
it to the tiny model of its model type's row in tests/codegen/hf_cases.py, so a new family needs no row here) is
exported with ``export-hf``, transformers builds a random model from that config (fp32, eager attention, every
parameter perturbed), and the module ``archcalc generate`` writes for the same variant loads its weights with
``load_hf_state_dict`` and gives the same logits (relative error < 1e-4). The sizes keep their rotary base and
scaling (Llama 3.1's llama3, DeepSeek-V3's and gpt-oss's YaRN), so the exported rope_parameters are checked too."""

from __future__ import annotations

import json

import pytest
import torch

transformers = pytest.importorskip("transformers")

from archcalc.hf.export import config_text, export_config  # noqa: E402
from archcalc.spec import load_spec  # noqa: E402
from archcalc.spec.bind import parse_overrides  # noqa: E402
from tests.codegen.hf_cases import configs as hf_configs  # noqa: E402
from tests.codegen.hf_cases import refused  # noqa: E402
from tests.codegen.test_hf_parity import TOLERANCE, _hf_model, _rel  # noqa: E402
from tests.helpers import module  # noqa: E402


def _tiny_values(spec, config) -> dict:
    """The --set values that shrink ``spec`` to the tiny model of its model type's row in tests/codegen/hf_cases.py:
    the integer hyperparameters the imported tiny config gives (and a window the bundled model names as a symbol)."""
    from archcalc.hf import spec_from_hf_config

    tiny = spec_from_hf_config(json.loads(config.to_json_string(use_diff=False)), "tiny.json")
    given = {n: e for n, e in next(iter(tiny.sizes.values())).values.items()}
    ints = {n for n, hp in spec.hyperparameters.items() if hp.type == "int"}
    values = {n: int(e.text) for n, e in given.items() if n in ints and e.text.isdigit()}
    values |= _symbols_given_as_numbers(spec._source.data["model"], tiny._source.data["model"], ints)
    return values


def _symbols_given_as_numbers(ours, theirs, ints: set) -> dict:
    """Where the bundled model names a hyperparameter (window: window) and the imported one has a number (window: 5)."""
    if isinstance(ours, dict) and isinstance(theirs, dict):
        return {k: v for key in ours if key in theirs for k, v in _symbols_given_as_numbers(ours[key], theirs[key], ints).items()}
    if isinstance(ours, list) and isinstance(theirs, list) and len(ours) == len(theirs):
        return {k: v for a, b in zip(ours, theirs) for k, v in _symbols_given_as_numbers(a, b, ints).items()}
    if isinstance(ours, str) and ours in ints and isinstance(theirs, int) and not isinstance(theirs, bool):
        return {ours: theirs}
    return {}


def _cases() -> dict:
    """case: (spec, size, overrides, tokens per sequence), for the first and the last size of every bundled spec with
    an hf: section (Llama 2 7B and 3.1 405B with its llama3 scaling, Qwen2.5 0.5B tied and 72B untied, ...)."""
    from archcalc.spec.library import bundled_names

    cases = {}
    for name in bundled_names():
        spec = load_spec(name)
        if spec.hf is None:
            continue
        config, seq = hf_configs(spec.hf.model_type)
        values = _tiny_values(spec, config)
        sizes = list(spec.sizes)
        for size in dict.fromkeys([sizes[0], sizes[-1]]):
            cases[f"{name}-{size}"] = (name, size, values, seq)
    return cases


CASES = _cases()


def _exported(name: str, size: str, values: dict):
    spec = load_spec(name)
    config = json.loads(config_text(export_config(spec, size, parse_overrides(spec, [f"{k}={v}" for k, v in values.items()]))))
    model_type = config.pop("model_type")
    return transformers.AutoConfig.for_model(model_type, **config)


def test_every_exported_family_has_a_case():
    from tests.hf.test_export import EXPORTED

    assert {name for name, _ in EXPORTED} == {name for name, *_ in CASES.values()}
    # at most ten layers: a hybrid's layer order up to its first attention layer (Qwen3.5's fourth, Bamba-9B's tenth)
    assert all(values.get("L", 99) <= 10 and values.get("d", 999) <= 128 for *_, values, _ in CASES.values()), "not tiny"


@pytest.mark.parametrize("case", list(CASES))
def test_generated_module_loads_the_exported_configs_model(case):
    name, size, values, seq = CASES[case]
    config = _exported(name, size, values)
    hf = _hf_model(config)
    refused(config.model_type, lambda: module(name, size, **values))
    generated = module(name, size, **values)  # the file archcalc generate writes for this variant
    model = generated.build().eval()
    generated.load_hf_state_dict(model, hf.state_dict())
    ids = torch.randint(0, config.vocab_size, (2, seq), generator=torch.Generator().manual_seed(1))
    architecture = load_spec(name).model.architecture
    with torch.no_grad():
        if architecture == "encoder-decoder":
            dec = torch.randint(0, config.vocab_size, (2, seq - 3), generator=torch.Generator().manual_seed(2))
            logits, theirs = model(ids, dec), hf(input_ids=ids, decoder_input_ids=dec).logits
        elif architecture == "encoder":
            out = hf(ids)
            hidden = model(ids)
            assert _rel(model.pooler(hidden), out.pooler_output) < TOLERANCE
            logits, theirs = hidden, out.last_hidden_state
        else:
            logits, theirs = model(ids), hf(ids).logits
    assert logits.shape == theirs.shape
    assert _rel(logits, theirs) < TOLERANCE, _rel(logits, theirs)
