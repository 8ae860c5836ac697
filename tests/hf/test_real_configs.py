"""The published configs kept in tests/data/hf/ (issue 28 asks two per model type): each of a supported type, each
type checked against at least two, except where only one was found whole (said here, with why; the family tests
name no model type, so the exceptions live in this file)."""

from __future__ import annotations

import json
from collections import Counter

from archcalc.hf import MODEL_TYPES
from archcalc.hf.build import family_of
from tests.helpers import text_model
from tests.hf.test_oracle import HUB

# model types with one published config here, and why (every other has two or more)
ONE_CONFIG = {"longcat_flash": "LongCat-Flash-Chat's published config.json names no model_type (it is the remote-code "
                               "config, read by its class); no other was found (the class defaults are its dimensions)"}


# model types with no published config here yet, and why: imported from configs transformers saves (class defaults,
# random and tiny configs in the oracle and parity tests), their bundled sizes not checked against a published file
NO_CONFIG = {"seed_oss": "no Seed-OSS config.json was found whole in the stored public sources",
             "cohere2": "no Command R7B or Command A config.json was found whole in the stored public sources (the "
                        "CohereLabs checkpoints are gated)"}


def test_every_model_type_has_two_real_configs_here():
    """Each model type is checked against at least two published configs kept in this repository (tests/data/hf/), so
    a clone without the shared reference folder checks them too; every config there is of a supported type."""
    types = Counter(_read_as(text_model(json.loads(p.read_text())).get("model_type")) for p in HUB.glob("*.json"))
    assert set(types) <= set(MODEL_TYPES), set(types) - set(MODEL_TYPES)
    short = {t: types[t] for t in MODEL_TYPES if types[t] < (0 if t in NO_CONFIG else 1 if t in ONE_CONFIG else 2)}
    assert not short, f"model types with fewer than two real configs in {HUB}: {short}"
    stale = {t: types[t] for t in (*NO_CONFIG, *ONE_CONFIG) if types[t] != (0 if t in NO_CONFIG else 1)}
    assert not stale, f"exceptions above that no longer hold (configs found since): {stale}"


def _read_as(model_type: str) -> str:
    """The model type a config's is read as (Kimi K2's kimi_k2 as deepseek_v3), else its own."""
    family = family_of(model_type)
    return family.model_type if family is not None else model_type


def test_a_config_without_model_type_is_read_by_its_one_class():
    """LongCat-Flash-Chat's published config.json is the remote-code one (auto_map, no model_type): its one class is
    transformers' longcat_flash, so it is read as that, and the import says so."""
    from archcalc.hf import spec_from_hf_file

    spec = spec_from_hf_file(HUB / "longcat-flash-chat.json")
    assert spec.hf.model_type == "longcat_flash"
    assert "names no model_type" in spec.notes and "read as longcat_flash" in spec.notes
