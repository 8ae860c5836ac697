"""Every config key archcalc reads or accepts, toggled on a tiny model: the generated module computes what transformers
computes, or the import says in one line that transformers does not apply the key (and then neither applies it).

For each supported model type the keys come from archcalc's own tables (the bundled spec's ``hf.keys``, and the rotary
keys :meth:`archcalc.hf.family.Family.known` accepts beside them), not from a list kept by hand. Each key gets a value
other than its default and the tiny case's (:func:`toggled_value`) in the config of the model type's case of
``hf_cases``; then:

- a value archcalc refuses (an ``allowed`` key off its values, a value transformers cannot run) is one line naming the
  key; a value archcalc imports, transformers must build and run, unless a note names the key and says it fails
  (DeepSeek's ``num_key_value_heads`` other than the heads' number: counted, but transformers' forward fails);
- otherwise the count equals transformers', and once ``load_hf_state_dict`` has copied the same weights the logits equal
  transformers' (rel. error < 1e-4). To keep the cost bounded the module is generated only where the key changed
  something: transformers' logits (same weights) or the imported spec; where neither changed, both ignore the key;
- a key the table marks ``noted`` is named in the spec's notes.

Integer hyperparameters (widths, counts of heads, layers, experts) change shapes, which the count tests cover; keys that
set only the initialisation (``init.*``) change no logits of loaded weights. Both are left out. The outcome of each key
(computed, noted, no effect, refused) is :func:`outcome`'s return value; ``python -m tests.codegen.test_hf_keys`` prints
the table.

Falcon's ALiBi (``alibi: true``, Falcon-RW) is compared with transformers' SDPA attention, its default: its eager path
adds the bias twice (to the scores, and again with the mask), which neither the original Falcon-RW code nor SDPA does.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import re

import pytest
import torch

transformers = pytest.importorskip("transformers")

from archcalc.errors import SpecError  # noqa: E402
from archcalc.hf import MODEL_TYPES, spec_from_hf_config  # noqa: E402
from archcalc.hf.build import family_of  # noqa: E402
from archcalc.hf.reader import ACTIVATIONS  # noqa: E402
from archcalc.hf.rope import applies_share  # noqa: E402
from tests.codegen.hf_cases import CASES, TOLERANCE, build_hf, refused, rel  # noqa: E402

ROLES = ("symbol", "sets", "allowed", "ignored", "noted")

#: Values for keys whose default gives no rule for another value (null defaults, strings, per-layer lists) or whose
#: rule would change nothing; a callable takes the case's config. Keys in CANDIDATES list candidates: the first that
#: differs from the case's value. A key with no rule and no value here fails the test, to be given one.
VALUES = {
    "tie_word_embeddings": False, "head_dim": 3, "num_key_value_heads": 2, "sliding_window": 3, "sliding_window_size": 3, "max_window_layers": 1,
    "use_sliding_window": True, "attn_layer_indices": [0], "full_attn_idxs": [0, 3], "mlp_layer_types": lambda kw: ["dense"] * 2 + ["sparse"] * (kw["num_hidden_layers"] - 2), "position_embedding_type": "rope",
    "layer_types": lambda kw: ["full_attention"] * kw["num_hidden_layers"] if "attention_chunk_size" in kw  # Llama 4's
    else ["sliding_attention", "full_attention"] * (kw.get("num_hidden_layers", 2) // 2) + ["sliding_attention"] * (kw.get("num_hidden_layers", 2) % 2),
    "no_rope_layers": lambda kw: [0] + [1] * (kw.get("num_hidden_layers", 2) - 1),
    # Zamba2's derived keys given otherwise than the class derives them (it refuses to run them)
    "attention_hidden_size": 3, "mamba_headdim": 5, "hybrid_layer_ids": [0],
    "qk_head_dim": 3,  # LongCat-Flash: a query width other than qk_nope_head_dim + qk_rope_head_dim (refused)
    # GLM-5: every layer its own indexer, or every layer after the first reusing the previous layer's selection
    "indexer_types": lambda kw: ["full"] * kw.get("num_hidden_layers", 2),
    "index_topk_pattern": lambda kw: "F" + "S" * (kw.get("num_hidden_layers", 2) - 1),
    "no_rope_layer_interval": 2, "mlp_only_layers": [0], "decoder_sparse_step": 2, "intermediate_size": 20,
    "moe_layers": [0], "interleave_moe_layer_step": 2, "intermediate_size_mlp": 20, "attention_chunk_size": 3,
    "floor_scale": 2, "attn_scale": 0.5, "num_kv_heads": 1, "num_ln_in_parallel_attn": 2,
    "max_position_embeddings": 6, "original_max_position_embeddings": 5, "rotary_dim": 2,
    "first_k_dense_replace": 2, "n_shared_experts": 1, "q_lora_rank": 6, "n_group": 2, "topk_group": 1,
    "topk_method": ["group_limited_greedy", "greedy"], "word_embed_proj_dim": 24, "type_vocab_size": 3,
    "relative_attention_max_distance": 7, "feed_forward_proj": "gated-silu", "dense_act_fn": "gelu_new",
    "is_gated_act": True, "scale_decoder_outputs": False, "attn_config": {"softmax_scale": 0.3},
    "attn_logit_softcapping": 0.7, "final_logit_softcapping": 0.9, "logit_scale": 0.3, "swiglu_limit": 0.2,
    "routed_scaling_factor": 3.0, "embedding_multiplier": 3.0, "residual_multiplier": 0.5,
    "attention_multiplier": 0.3, "logits_scaling": 3.0, "scoring_func": "sigmoid",
    "partial_rotary_factor": [0.5, 0.25], "rotary_pct": [0.5, 0.25], "rope_theta": 7.0, "rotary_emb_base": 7.0,
    "rope_local_base_freq": 3.0, "rope_parameters": {"rope_type": "linear", "factor": 3.0, "rope_theta": 50.0},
    "rope_scaling": {"type": "linear", "factor": 3.0},
    "time_step_limit": [0.0, 1.0],  # Mamba2: a clamp on the step sizes (the class default, (0.0, inf), clamps nothing)
    # Falcon-H1: the factors of in_proj's z, x, B, C and dt, and of the MLP's gate and output
    "ssm_multipliers": [0.3, 2.0, 0.7, 1.6, 0.4], "mlp_multipliers": [1.7, 0.6],
    # Nemotron-H: each layer's kind (all four, a Mamba2 layer first); a layer count and next-token layers it does not read
    "hybrid_override_pattern": "M*E-M", "layers_block_type": ["linear_attention", "mlp", "full_attention", "moe"],
    "num_hidden_layers": 3, "mtp_layers_block_type": ["full_attention", "mlp"], "mtp_hybrid_override_pattern": "*-",
    # Gemma 4: K = V's key/value heads, the global layers' shape in transformers' per_layer_config, the experts
    "num_global_key_value_heads": 1, "num_experts": 4, "top_k_experts": 2, "moe_intermediate_size": 12,
    "per_layer_config": lambda kw: {str(kw.get("num_hidden_layers", 2) - 1): {"head_dim": 32, "num_key_value_heads": 1}},
}
CANDIDATES = {"topk_method", "partial_rotary_factor", "rotary_pct"}
#: Keys that matter only beside others: set with them (where the family reads the others and does not refuse them).
COMPANIONS = {
    "use_sliding_window": {"sliding_window": 3, "max_window_layers": 1},  # Qwen2/3: sliding from layer max_window_layers
    "sliding_window": {"use_sliding_window": True, "max_window_layers": 1},
    "max_window_layers": {"use_sliding_window": True, "sliding_window": 3},
    "layer_types": {"use_sliding_window": True, "sliding_window": 3},
    "intermediate_size": {"decoder_sparse_step": 2},  # Qwen-MoE's dense layers' width: some layers dense
}
#: Changes to a model type's tiny case so that its keys can matter (a quarter of an 8-wide head rotates 2 features, one
#: frequency, whose base changes nothing).
BASE = {"gpt_neox": {"rotary_pct": 0.5}, "stablelm": {"partial_rotary_factor": 0.5}}
#: Noted and ignored keys whose default is null take this (a value transformers' classes store as they are).
INERT = 3
#: Keys whose import is right but whose generated module cannot load transformers' weights yet, and why.
KNOWN_GAPS: dict[tuple[str, str], str] = {  # (model type, key): why the generated module cannot follow yet
    **{("glm_moe_dsa", key): "codegen does not generate layers that reuse the previous layer's top-k selection yet"
       for key in ("index_topk_pattern", "index_topk_freq")},  # the toggled values make layers after the first shared
}


def keys_of(model_type: str) -> list[tuple[str, str]]:
    """(key, role) for each key archcalc reads or accepts for ``model_type``, from its tables: ``hf.keys`` (role:
    symbol, sets, allowed, ignored, noted, or hook where a hook or the rotary reader reads it) and the rotary keys the
    family accepts beside them (role: rope). Integer hyperparameters and keys that set only the initialisation are
    left out (see the module's doc)."""
    family = family_of(model_type)
    out = []
    for key, entry in family.keys.items():
        role = next((r for r in ROLES if getattr(entry, r) is not None), "hook")
        if role == "symbol" and not isinstance(entry.default, bool):
            continue
        if role == "sets" and all(path.startswith("init.") for path in entry.sets):
            continue
        if key in ("initializer_range", "init_std"):  # a hook reads them into init.std only
            continue
        out.append((key, role))
    return out + [(key, "rope") for key in sorted(family.known() - set(family.keys))]


def _param(model_type: str, key: str, role: str):
    gap = KNOWN_GAPS.get((model_type, key))
    marks = [pytest.mark.xfail(strict=True, reason=gap)] if gap else []
    return pytest.param(model_type, key, role, id=f"{model_type}-{key}", marks=marks)


PARAMS = [_param(mt, key, role) for mt in MODEL_TYPES for key, role in keys_of(mt)]


@pytest.fixture(autouse=True)
def one_thread():
    """Tiny models: one thread is several times faster than many on a shared machine."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _field(model_type: str, key: str):
    """The dataclass field ``key`` of the model type's transformers config class (None: the class has none)."""
    fields = {f.name: f for f in dataclasses.fields(getattr(transformers, CASES[model_type][0]))}
    return fields.get(key)


def toggled_value(model_type: str, key: str, kwargs: dict):
    """A value of ``key`` other than its default and the tiny case's, that changes the model's math where transformers
    reads the key (an ``allowed`` key: a value outside those allowed)."""
    entry = family_of(model_type).keys.get(key)
    if entry is not None and entry.allowed is not None:
        return next(v for v in (True, False, 3, "x", 0.5) if not any(v == a and type(v) is type(a) for a in entry.allowed))
    current = kwargs.get(key, entry.default if entry is not None else None)
    field = _field(model_type, key)
    if current is None and field is not None and not isinstance(field.default, dataclasses._MISSING_TYPE):
        current = field.default  # the config class's, where the table gives none
    if key in VALUES:
        value = VALUES[key](kwargs) if callable(VALUES[key]) else VALUES[key]
        for candidate in value if key in CANDIDATES else [value]:
            if candidate != current:
                return candidate
    value = _other_value(key, current, entry, str(getattr(_field(model_type, key), "type", "")))
    if value is not None:
        return value
    raise AssertionError(f"no toggled value for {model_type}'s {key} (default {current!r}): add one to VALUES")


def _other_value(key: str, current, entry, kind: str):
    """A value other than ``current`` of the same kind (None: none found by type)."""
    if isinstance(current, bool):
        return not current
    if isinstance(current, str) and current in ACTIVATIONS:
        return "relu" if ACTIVATIONS[current] != "relu" else "gelu"
    inert = entry is not None and (entry.noted is not None or entry.ignored is not None)
    if inert and (isinstance(current, str) or (current is None and "str" in kind)):
        return f"{current}-other"
    if isinstance(current, float):
        return 0.25 if "eps" in key or "epsilon" in key else current * 1.7 + 0.3
    if isinstance(current, int):
        return current + 1
    if current is None and ("bool" in kind):
        return True
    if current is None and ("float" in kind or "dropout" in key or "pdrop" in key):
        return 0.3
    if current is None and inert:
        return INERT
    return None


def companions(model_type: str, key: str, config: dict) -> dict:
    """The COMPANIONS of ``key`` that the family reads and accepts at that value (not an ``allowed`` key off its values)."""
    family, out = family_of(model_type), {}
    for other, value in COMPANIONS.get(key, {}).items():
        entry = family.keys.get(other)
        if entry is not None and (entry.allowed is None or value in entry.allowed) and entry.ignored is None and other not in config:
            out[other] = value
    return out


def _attention(config: dict) -> str:
    return "sdpa" if config["model_type"] == "falcon" and config.get("alibi") else "eager"  # see the module's doc


def hf_model(model_type: str, config: dict, weights: dict | None = None):
    """transformers' model of ``config`` (fp32, CPU, every parameter perturbed as hf_cases does); ``weights``: the
    base model's, loaded where the shapes allow, so that only the key's math differs."""
    conf = getattr(transformers, CASES[model_type][0])(**{k: copy.deepcopy(v) for k, v in config.items() if k != "model_type"})
    torch.manual_seed(0)
    model = build_hf(conf, attn_implementation=_attention(config))
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.1)
        for name, b in model.named_buffers():
            if name.endswith("e_score_correction_bias"):
                b.add_(torch.randn_like(b) * 0.1)
    state = model.state_dict()
    if weights is not None and set(weights) == set(state) and all(weights[k].shape == state[k].shape for k in state):
        model.load_state_dict(weights)
    return model.eval()


def _ids(seq: int) -> torch.Tensor:
    return torch.randint(0, 97, (2, seq), generator=torch.Generator().manual_seed(1))


def hf_logits(model, model_type: str, seq: int) -> torch.Tensor:
    ids = _ids(seq)
    with torch.no_grad():
        if model_type == "t5":
            return model(input_ids=ids, decoder_input_ids=ids[:, : seq - 3]).logits
        out = model(ids)
        return out.last_hidden_state if model_type == "bert" else out.logits


def generated(spec):
    """The module archcalc generates from the imported ``spec`` (imported once per process and source)."""
    from archcalc.codegen.emit import emit
    from archcalc.ir import lower
    from archcalc.spec.bind import bind
    from tests.helpers import loaded

    return loaded(emit(lower(bind(spec, next(iter(spec.sizes)))), "test"))


def our_logits(spec, hf, model_type: str, seq: int) -> torch.Tensor:
    refused(model_type, lambda: generated(spec))  # the count and the import are checked before
    module = generated(spec)
    model = module.build().eval()
    module.load_hf_state_dict(model, hf.state_dict())
    ids = _ids(seq)
    with torch.no_grad():
        return model(ids, ids[:, : seq - 3]) if model_type == "t5" else model(ids)


def _count(spec) -> int:
    from archcalc.backends.count import count_size

    return count_size(spec, next(iter(spec.sizes))).total


_BASE: dict[str, tuple] = {}


def _base(model_type: str) -> tuple:
    if model_type not in _BASE:
        _, kwargs, seq = CASES[model_type]
        config = {"model_type": model_type, **{k: v for k, v in kwargs.items() if v is not None}, **BASE.get(model_type, {})}
        hf = hf_model(model_type, config)
        spec = spec_from_hf_config(json.loads(json.dumps(config)), "tiny.json")
        _BASE[model_type] = (config, hf, hf_logits(hf, model_type, seq), spec)
    return _BASE[model_type]


def _math(spec) -> dict:
    data = spec._source.data
    return {"model": data["model"], "sizes": data["sizes"], "hyperparameters": data["hyperparameters"]}


def _notes_naming(spec, key: str) -> list[str]:
    """The notes that name ``key`` (the first note, which says where the spec came from, aside)."""
    notes = spec.notes.split("(rotary tables, masks) excluded.", 1)[-1]
    return [note for note in notes.split(". ") if re.search(rf"\b{key}\b", note)]


def outcome(model_type: str, key: str, role: str) -> str:
    """Toggle ``key`` on the model type's tiny case, check it (see the module's doc) and say what happened: computed
    (transformers applies it, and so does the module), noted, no effect (neither applies it), refused."""
    config, hf_base, logits_base, spec_base = _base(model_type)
    seq = CASES[model_type][2]
    value = toggled_value(model_type, key, config)
    extra = companions(model_type, key, config)
    if extra:  # the key's effect is measured against the case with its companions
        config = {**config, **extra}
        hf_base = hf_model(model_type, config, hf_base.state_dict())
        logits_base, spec_base = hf_logits(hf_base, model_type, seq), spec_from_hf_config(json.loads(json.dumps(config)), "tiny.json")
    config = {**config, key: value}
    try:
        spec = spec_from_hf_config(json.loads(json.dumps(config)), "tiny.json")
    except SpecError as e:
        assert "\n" not in str(e) and key in str(e), str(e)
        return "refused"
    assert role != "allowed", f"{key}: {value!r} is outside the allowed values, yet imported"
    noted = _notes_naming(spec, key)
    try:
        hf = hf_model(model_type, config, hf_base.state_dict())
        theirs = hf_logits(hf, model_type, seq)
    except Exception as e:  # noqa: BLE001 (any failure: transformers cannot build or run the config)
        assert any("fails" in note for note in noted), (
            f"{key}={value!r} imports, but transformers cannot run it ({type(e).__name__}: {str(e).splitlines()[0][:150]}): "
            "the import should refuse it, or say so, in one line")
        return "noted"
    assert _count(spec) == sum(p.numel() for p in hf.parameters())
    applied = theirs.shape != logits_base.shape or rel(theirs, logits_base) > TOLERANCE
    if applied or _math(spec) != _math(spec_base):
        ours = our_logits(spec, hf, model_type, seq)
        assert ours.shape == theirs.shape and rel(ours, theirs) < TOLERANCE, (
            f"{key}={value!r}: the generated logits differ from transformers' by {rel(ours, theirs):.3g} "
            f"(transformers {'applies' if applied else 'does not apply'} it)")
    assert role != "noted" or noted, f"{key} is marked noted, but no note names it: {spec.notes}"
    return "computed" if applied else "noted" if noted else "no effect"


@pytest.mark.parametrize("model_type,key,role", PARAMS)
def test_each_key_is_computed_as_transformers_does_or_noted(model_type, key, role):
    outcome(model_type, key, role)


# -- the rotated share of a head, which Llama's descendants read but do not apply ------------------------------------
SHARE_IGNORED = [mt for mt in MODEL_TYPES if family_of(mt).origin.rope is not None and not applies_share(family_of(mt))]


def test_the_families_that_rotate_a_share_of_the_head_are_those_whose_transformers_code_reads_it():
    """From transformers' own modeling files: a family applies partial_rotary_factor where its modeling code reads it."""
    import inspect

    for model_type in MODEL_TYPES:
        family = family_of(model_type)
        if family.origin.rope is None:
            continue
        source = inspect.getsourcefile(getattr(transformers, family.hf_class))  # the class's modeling file
        reads = "partial_rotary_factor" in open(source, encoding="utf-8").read()
        # or the class's own default rope parameters hold a share, which transformers' rope init applies (Gemma 4's
        # proportional rotary positions on its global layers)
        reads = reads or "partial_rotary_factor" in json.dumps(family.origin.rope.parameters or {})
        # or the config class fills the share in from its own widths (Mistral 4: qk_rope_head_dim / head_dim), which
        # the rope init then applies
        config_source = inspect.getsource(inspect.getmodule(getattr(transformers, family.hf_class).config_class))
        reads = reads or re.search(r"""["']partial_rotary_factor["']\s*[:,]\s*self\.""", config_source) is not None
        assert applies_share(family) == reads, model_type


@pytest.mark.parametrize("model_type", SHARE_IGNORED)
def test_a_share_transformers_does_not_apply_is_noted_in_one_line(model_type):
    """At the top level or in the rope parameters, beside the default rope type (gpt-oss's class default is yarn)."""
    config, _, _, _ = _base(model_type)
    config = {k: v for k, v in config.items() if k not in ("rope_scaling", "rope_parameters")}
    default = {"rope_type": "default"}
    for given in ({"partial_rotary_factor": 0.5, "rope_parameters": default}, {"rope_parameters": default | {"partial_rotary_factor": 0.5}}):
        if family_of(model_type).origin.rope.local_theta is not None:  # one set per layer type (Gemma 3, OLMo 3)
            given = {k: v if k != "rope_parameters" else {"full_attention": v} for k, v in given.items()}
        spec = spec_from_hf_config(json.loads(json.dumps(config | given)), "tiny.json")
        notes = _notes_naming(spec, "partial_rotary_factor")
        assert len(notes) == 1 and "is not applied" in notes[0], spec.notes
        assert "rotary_fraction" not in json.dumps(spec._source.data["model"])


@pytest.mark.parametrize("model_type,extra", [("llama", {}), ("mistral", {}), ("gemma3_text", {}),
                                              ("deepseek_v3", {"qk_rope_head_dim": 8})])  # 4: one frequency broadcasts
def test_a_share_with_a_scaled_rope_type_is_refused_where_transformers_fails(model_type, extra):
    """Scaled rope types compute frequencies for the share only, while these families rotate the whole head: transformers'
    forward fails on the mismatch, so the import refuses the config in one located line."""
    config = _base(model_type)[0] | extra
    scaling = {"rope_type": "linear", "factor": 2.0, "partial_rotary_factor": 0.5}
    rope = {"full_attention": scaling} if model_type == "gemma3_text" else scaling
    config = {k: v for k, v in config.items() if k != "rope_scaling"} | {"rope_parameters": rope}
    with pytest.raises(SpecError, match="partial_rotary_factor: 0.5 with rope_type 'linear' is not modelled") as e:
        spec_from_hf_config(json.loads(json.dumps(config)), "tiny.json")
    assert "\n" not in str(e.value)
    with pytest.raises(RuntimeError):  # and transformers indeed cannot run it
        hf_logits(hf_model(model_type, config), model_type, CASES[model_type][2])


# -- Falcon-RW: ALiBi ------------------------------------------------------------------------------------------------
FALCON_ALIBI = {"vocab_size": 97, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4, "alibi": True,
                "bias": True, "multi_query": False}  # Falcon-RW's attention: ALiBi, biases, a key/value head per head


@pytest.mark.parametrize("extra", [{}, {"num_attention_heads": 8, "hidden_size": 64, "max_position_embeddings": 512},
                                   {"multi_query": True, "num_attention_heads": 6, "hidden_size": 48},
                                   {"new_decoder_architecture": True, "num_kv_heads": 2}],
                         ids=["falcon-alibi", "8-heads-long", "multi-query-6-heads", "new-decoder"])
def test_falcon_alibi_logits_and_greedy_tokens_equal_transformers(extra):
    """Falcon with ``alibi: true``: slopes as BLOOM's, but rounded to bfloat16 with the products and divided by
    sqrt(head width); 8 heads over 300 tokens, where the rounding shows (a bias computed in float32 is off by 1e-2)."""
    config = {"model_type": "falcon", **FALCON_ALIBI, **extra}
    seq = 300 if "max_position_embeddings" in extra else 11
    hf = hf_model("falcon", config)
    spec = spec_from_hf_config(json.loads(json.dumps(config)), "falcon-alibi.json")
    assert spec._source.data["model"]["embedding"]["position"] == {"kind": "alibi", "form": "bfloat16_scaled"}
    assert _count(spec) == sum(p.numel() for p in hf.parameters())
    assert rel(our_logits(spec, hf, "falcon", seq), hf_logits(hf, "falcon", seq)) < TOLERANCE
    module = generated(spec)
    model = module.build().eval()
    module.load_hf_state_dict(model, hf.state_dict())
    ids = _ids(6)
    hf.generation_config.eos_token_id, hf.generation_config.pad_token_id = None, 0
    theirs = hf.generate(ids, do_sample=False, max_new_tokens=8)
    assert torch.equal(model.generate(ids, 8, temperature=0), theirs)
    exported = module.to_hf_state_dict(model)
    assert all(torch.equal(exported[k], v) for k, v in hf.state_dict().items())


# tiiuae/falcon-rw-1b's config.json, reconstructed (not downloaded: no network here) from its model card (24 layers,
# width 2048, 32 heads, ALiBi, the GPT-2 tokenizer's 50,304 rows) and the Falcon-RW keys transformers' FalconConfig
# documents (alibi, bias, multi_query false, parallel_attn false); keras-hub's falcon_refinedweb_1b_en preset, converted
# from that checkpoint, reports 1,311,625,216 parameters, which both transformers and archcalc count from it.
FALCON_RW_1B = {
    "alibi": True, "apply_residual_connection_post_layernorm": False, "architectures": ["FalconForCausalLM"],
    "attention_dropout": 0.0, "bias": True, "bos_token_id": 1, "eos_token_id": 2, "hidden_dropout": 0.0, "hidden_size": 2048,
    "initializer_range": 0.02, "layer_norm_epsilon": 1e-05, "model_type": "falcon", "multi_query": False,
    "new_decoder_architecture": False, "num_attention_heads": 32, "num_hidden_layers": 24, "parallel_attn": False,
    "torch_dtype": "bfloat16", "transformers_version": "4.27.4", "use_cache": True, "vocab_size": 50304,
}


def test_falcon_rw_1b_counts_as_transformers_and_keras_hub_do():
    from tests.helpers import meta_count

    spec = spec_from_hf_config(copy.deepcopy(FALCON_RW_1B), "falcon-rw-1b.json")
    config = transformers.FalconConfig(**{k: v for k, v in FALCON_RW_1B.items() if k not in ("model_type", "transformers_version")})
    assert _count(spec) == meta_count(config) == 1_311_625_216
    model = spec._source.data["model"]
    assert model["embedding"]["position"] == {"kind": "alibi", "form": "bfloat16_scaled"} and model["block"]["residual"] == "pre-norm"


# -- keys transformers reads though the model has no use for them ---------------------------------------------------
@pytest.mark.parametrize("model_type,given,words", [
    ("gemma3_text", {"attn_logit_softcapping": 50.0}, "attn_logit_softcapping 50 is not applied"),
    ("gemma3_text", {"rope_scaling": {"type": "linear", "factor": 8.0}}, "rope_scaling's type 'linear' is not read"),
])
def test_gemma3_keys_transformers_stores_but_does_not_apply_are_noted(model_type, given, words):
    config, hf_base, logits_base, _ = _base(model_type)
    config = {k: v for k, v in config.items() if k != "rope_scaling"}
    spec = spec_from_hf_config(json.loads(json.dumps(config | given)), "tiny.json")
    assert words in spec.notes
    plain = spec_from_hf_config(json.loads(json.dumps(config)), "tiny.json")
    assert _math(spec) == _math(plain)  # applied by neither
    seq = CASES[model_type][2]
    assert rel(hf_logits(hf_model(model_type, config | given, hf_base.state_dict()), model_type, seq),
               hf_logits(hf_model(model_type, config, hf_base.state_dict()), model_type, seq)) < TOLERANCE


if __name__ == "__main__":  # the table of outcomes: python -m tests.codegen.test_hf_keys
    torch.set_num_threads(1)
    transformers.logging.set_verbosity_error()
    for param in PARAMS:
        model_type, key, role = param.values
        try:
            result = outcome(model_type, key, role)
        except AssertionError as e:
            result = f"FAILS: {str(e).splitlines()[0][:200]}"
        except Exception as e:  # noqa: BLE001
            result = f"ERROR: {type(e).__name__}: {str(e).splitlines()[0][:200]}"
        print(f"{model_type:12} {key:34} {role:8} {result}", flush=True)
