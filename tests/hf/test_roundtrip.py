"""import-hf, then export-hf: a spec imported from a real config exports a config.json that describes the same model
(export-hf itself reads it back and compares count and IR, and refuses otherwise). The keys the spec's hyperparameters
hold are written from the size's values (so ``--set`` carries through); the others are the imported config's own,
kept in the spec's ``hf.config``."""

from __future__ import annotations

import json

import pytest

from archcalc.backends.count import count_size
from archcalc.errors import SpecError
from archcalc.hf import spec_from_hf_config, spec_from_hf_file, spec_to_yaml
from archcalc.hf.build import family_of
from archcalc.hf.export import config_text, export_config
from archcalc.spec import load_spec_text
from archcalc.spec.bind import parse_overrides
from tests.helpers import text_model
from tests.hf.test_oracle import HUB, real_configs


def _total(spec) -> int:
    return count_size(spec, next(iter(spec.sizes))).total


@pytest.mark.parametrize("path", real_configs(), ids=lambda p: p.stem)
def test_an_imported_real_config_exports_the_same_model(path):
    spec = load_spec_text(spec_to_yaml(spec_from_hf_file(path)), "imported.yaml")  # as `import-hf -o` writes it
    config = json.loads(config_text(export_config(spec, None)))
    assert config["model_type"] == family_of(text_model(json.loads(path.read_text()))["model_type"]).model_type  # kimi_k2: deepseek_v3
    assert _total(spec_from_hf_config(config, "<exported>")) == _total(spec)


def test_set_carries_through_and_transformers_builds_it():
    pytest.importorskip("transformers")
    from tests.hf.test_oracle import transformers_count

    spec = load_spec_text(spec_to_yaml(spec_from_hf_file(HUB / "llama-3.1-8b.json")), "imported.yaml")
    config = json.loads(config_text(export_config(spec, None, parse_overrides(spec, ["L=40"]))))
    assert config["num_hidden_layers"] == 40 and config["rope_parameters"]["rope_type"] == "llama3"
    assert transformers_count(config) == 9_775_157_248


def test_a_change_the_kept_keys_contradict_is_refused():
    """SmolLM3 lists a rotary switch per layer (no_rope_layers, 36 of them): 30 layers cannot be written with that list."""
    spec = load_spec_text(spec_to_yaml(spec_from_hf_file(HUB / "smollm3-3b.json")), "imported.yaml")
    with pytest.raises(SpecError, match="no_rope_layers|layer_types"):
        export_config(spec, None, parse_overrides(spec, ["L=30"]))
