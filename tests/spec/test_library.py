"""The bundled spec library: every size of every family counts exactly what transformers builds.

The oracle is transformers itself: for each (spec, size) with an ``hf:`` section the model class is
instantiated on the meta device (allocating nothing) from the size's exported config.json, and
``sum(p.numel() for p in model.parameters())`` must equal archcalc's total (tests/hf/test_export.py, which
iterates over the specs). Sizes without a transformers class (GPT-3's table rows, the 2017 Transformer)
are listed in NO_ORACLE, so a new bundled size cannot go unchecked by accident; EXACT holds published figures.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import sympy

from archcalc.backends.count import count_size
from archcalc.spec import load_spec
from archcalc.spec.library import bundled_names, library_dir

# sizes with no transformers class to compare against (checked by the figures and tests below)
NO_ORACLE = {
    "gpt3": "Table 2.1 of Brown et al. as printed (inconsistent rows) and a hypothetical 100T size",
    "transformer_2017": "no transformers class; compared with torch.nn.Transformer below",
}

EXACT = {  # transformers on the meta device (../shared/reference/README.md)
    ("llama", "2-7b"): 6_738_415_616,
    ("llama", "2-13b"): 13_015_864_320,
    ("llama", "2-70b"): 68_976_648_192,
    ("llama", "3-8b"): 8_030_261_248,
    ("mistral", "7b"): 7_241_732_096,
    ("mixtral", "8x7b"): 46_702_792_704,
    ("qwen2_5", "7b"): 7_615_616_512,
    ("bert", "base"): 109_482_240,
    ("t5", "small"): 60_506_624,
    ("gpt_oss", "20b"): 20_914_757_184,
    ("gpt_oss", "120b"): 116_829_156_672,
}

ALL_SIZES = [(name, size) for name in bundled_names() for size in load_spec(name).sizes]


def test_every_bundled_size_has_an_oracle_or_a_reason():
    """Every size of a spec with an hf: section is built by transformers from its exported config and counted on the
    meta device (tests/hf/test_export.py: derived from the specs, so a new family needs no row here); the others
    say why they have no oracle."""
    from tests.hf.test_export import EXPORTED

    checked = set(EXPORTED)
    unchecked = {(n, s) for n, s in ALL_SIZES if (n, s) not in checked and n not in NO_ORACLE}
    assert not unchecked, f"bundled sizes without a transformers oracle: {sorted(unchecked)}"
    assert not {n for n, _ in checked} & set(NO_ORACLE), "a spec with an hf: section has an oracle"


@pytest.mark.parametrize("name,size", EXACT)
def test_known_exact_counts(name, size):
    assert count_size(load_spec(name), size).total == EXACT[name, size]


@pytest.mark.parametrize("name,size", ALL_SIZES, ids=[f"{n}-{s}" for n, s in ALL_SIZES])
def test_roles_add_up_and_the_formula_evaluates_to_the_total(name, size):
    r = count_size(load_spec(name), size)
    assert sum(r.by_role.values()) == r.total
    assert r.formula.xreplace(r.binding.numeric()) == sympy.Integer(r.total)
    assert 0 < r.active <= r.total


@pytest.mark.parametrize("name", bundled_names())
def test_specs_are_documented(name):
    spec = load_spec(name)
    assert spec.name == name and (library_dir() / f"{name}.yaml").is_file()
    assert spec.title and spec.source and spec.notes
    assert all(hp.doc for hp in spec.hyperparameters.values()), [n for n, hp in spec.hyperparameters.items() if not hp.doc]
    hypothetical = {("gpt3", "100t"), ("falcon_h1", "default"), ("zamba2", "default")}  # no authors' figure: a hypothetical size, class defaults
    assert all(s.reported for k, s in spec.sizes.items() if (name, k) not in hypothetical)


def test_shared_hyperparameter_names():
    """The same quantity has the same name in every family (V, L, d, H, KV, d_head, d_ff, E, K)."""
    aliases = {"n_embd", "hidden_size", "n_layer", "n_head", "num_heads", "kv_heads", "n_kv_heads", "head_dim",
               "d_kv", "intermediate_size", "experts", "top_k", "vocab", "vocab_size"}
    for name in bundled_names():
        assert not aliases & set(load_spec(name).hyperparameters), name


def test_mixtral_active_parameters_with_the_embedding_are_the_reported_12_9b():
    r = count_size(load_spec("mixtral"), "8x7b")
    assert r.active == 12_748_853_248
    assert r.active + r.by_role["token_embedding"] == 12_879_925_248  # Mistral AI: 12.9B active


def test_gpt_oss_active_parameters_match_the_model_card():
    spec = load_spec("gpt_oss")
    assert count_size(spec, "20b").active == 3_608_307_264
    assert count_size(spec, "120b").active == 5_132_849_472


def test_transformer_2017_matches_torch_nn_transformer_with_a_shared_embedding():
    torch = pytest.importorskip("torch")
    spec = load_spec("transformer_2017")
    for size, (d, H, ff) in {"base": (512, 8, 2048), "big": (1024, 16, 4096)}.items():
        with torch.device("meta"):
            model = torch.nn.Transformer(d_model=d, nhead=H, num_encoder_layers=6, num_decoder_layers=6, dim_feedforward=ff,
                                         batch_first=True)
        final_norms = 2 * 2 * d  # torch.nn.Transformer's encoder and decoder end in a LayerNorm; the paper's do not
        expected = sum(p.numel() for p in model.parameters()) - final_norms + 37000 * d
        assert count_size(spec, size).total == expected
    assert count_size(spec, "base").total == 63_082_496  # Table 3: 65M (vocabulary not given exactly)
    assert count_size(spec, "big").total == 214_245_376  # Table 3: 213M


def test_library_folder_holds_only_specs():
    assert sorted(p.stem for p in Path(library_dir()).glob("*.yaml")) == bundled_names()
