"""HF export: a spec's size as a transformers ``config.json`` that transformers builds as archcalc counts it.

The spec's ``hf:`` section says how (:class:`~archcalc.spec.hf_origin.HFOrigin`): ``model_type`` and
``architectures``, the ``keys`` that name a hyperparameter (``hidden_size: {symbol: d}``) and ``symbols`` (export-only
keys whose values are expressions over the hyperparameters), both evaluated at the bound size, so ``--set`` carries
through; ``config`` (keys with one value at every size) and each size's own ``hf:`` keys; the rotary base, scaling and rotated share come from the lowered model (the size's ``position``
included) and are written as transformers 5's ``rope_parameters`` (which transformers 5 builds as written; its legacy
``rope_theta``/``rope_scaling`` keys would be converted to it), never from ``hf:`` keys. Special token ids past a
``--set`` vocabulary become null (transformers would refuse an embedding padding index outside the table).

The config is then read back with archcalc's own importer (the reader that the tests check against transformers
on the meta device) and must describe the same model: the same total, and the same IR — every parameter's path,
shape and role, every setting (norm epsilon, activation, rotary base and scaling, windows, soft-caps, ...).
A variant that transformers cannot express (``--set qkv_bias=false`` on GPT-2) is refused with the first
difference, rather than written as a config of another model. No torch, no transformers.

>>> from archcalc.spec import load_spec
>>> config = export_config(load_spec("llama"), "3.1-405b")
>>> config["num_hidden_layers"], config["rope_parameters"]["rope_type"], config["rope_parameters"]["rope_theta"]
(126, 'llama3', 500000.0)
"""

from __future__ import annotations

import json
from typing import Any

from archcalc import __version__
from archcalc.errors import SpecError, UsageError
from archcalc.hf.export_parts import ROPE_KEYS, _rope, layer_attends  # noqa: F401 - also read from here
from archcalc.hf.lfm2_moe_layers import short_conv_moe_keys
from archcalc.hf.mistral import rope_keys as mistral_rope_keys
from archcalc.hf.readback import check_same_model
from archcalc.hf.reader import ROPE_CONFIG_KEYS, TOKEN_KEYS
from archcalc.hf.zamba2_layers import zamba2_keys
from archcalc.ir import lower
from archcalc.ir.attrs import Block, LatentAttention
from archcalc.spec.bind import bind
from archcalc.spec.expr import Expr
from archcalc.spec.hf_origin import HFOrigin
from archcalc.spec.loader import where
from archcalc.spec.schema import Spec

#: The key that marks a config.json as written by ``archcalc export-hf`` (transformers keeps unknown keys as plain
#: attributes and ignores them; archcalc's importer knows it). The writer replaces only files that carry it with
#: the hash of their own content (a checkpoint's config.json that transformers saved keeps the key, not the content).
MARKER = "archcalc_exported"
#: How the marker reads in the written file (the key, then the start of its value "archcalc VERSION: SPEC..."): the
#: writer puts the file's content hash right after it (archcalc.cli.output.stamp), inside the string.
FILE_MARKER = f'"{MARKER}": "archcalc'

#: Keys that make transformers run code from a model's repository (auto_map: the classes to import from its .py
#: files; custom_pipelines: pipeline code) or ask for it. A spec is untrusted input: export-hf leaves them out, at
#: any depth (a sub-config's auto_map), unless asked (--keep-remote-code).
REMOTE_CODE_KEYS = frozenset({"auto_map", "custom_pipelines", "trust_remote_code", "code_revision"})

# the spec's RopeScaling field -> transformers' rope_parameters key (the importer reads them back the other way)
def export_config(spec: Spec, size: str | None, overrides: dict[str, Expr] | None = None, *,
                  keep_remote_code: bool = False, left_out: list[str] | None = None) -> dict[str, Any]:
    """The config.json of ``spec`` at ``size`` (None: the spec's only size, or no size) with ``--set`` overrides,
    checked to describe the same model as the spec (else a SpecError naming the first difference). Remote-code keys
    (:data:`REMOTE_CODE_KEYS`) are left out unless ``keep_remote_code``; their dotted paths go to ``left_out``."""
    origin, family = _table(spec)
    size = _size(spec, size)
    binding = bind(spec, size, overrides)
    lowered = lower(binding)
    config: dict[str, Any] = {MARKER: f"archcalc {__version__}: {spec.name}" + (f", size {size}" if size else ""),
                              "model_type": origin.model_type, "architectures": list(origin.architectures or [family.hf_class])}
    imported = origin is not spec.hf  # the keys that hold its hyperparameters; the rest are the imported config's own
    unwritten = _write_keys(spec, size, origin, family, binding.values, _Writer(spec, config, family))
    _drop_missing_tokens(config)
    if not keep_remote_code:
        dropped = drop_remote_code(config)
        if left_out is not None:
            left_out.extend(dropped)
    _write_rope(config, family, lowered, binding)
    for hook in origin.hooks:  # the keys a hook reads, from the lowered model (which layers attend, ...)
        if hook in HOOK_KEYS:
            config.update(HOOK_KEYS[hook](lowered, binding))
    if "mlp_layer_types" in family.keys:  # GLM-4.7-Flash: the dense layers lead, as many as the dense stack has
        config["mlp_layer_types"] = _mlp_layer_types(lowered, binding)
    check_same_model(spec, size, overrides, lowered, config_text(config), unwritten if imported else [])
    return config


def _table(spec: Spec) -> tuple[HFOrigin, Any]:
    """The spec's ``hf:`` section and its model type's family; an imported spec (no key table of its own) borrows the
    bundled spec's table, with the imported config's keys."""
    from archcalc.hf.build import family_of
    from archcalc.hf.registry import MODEL_TYPES

    origin = spec.hf
    if origin is None:
        raise UsageError(f"{spec.name} ({spec.title or spec.name}) has no transformers form: the spec has no 'hf:' section "
                         "naming a transformers model_type, so there is no config.json to export")
    family = family_of(origin.model_type)
    if family is None:
        raise SpecError.at(where(spec, ("hf", "model_type")), f"hf.model_type: {origin.model_type!r} is not one archcalc "
                           f"reads back; export-hf supports: {', '.join(MODEL_TYPES)}")
    if not origin.keys and not origin.symbols:  # an imported spec: the bundled spec's table, the imported config's keys
        origin = family.origin.model_copy(update={"architectures": origin.architectures or family.origin.architectures,
                                                  "config": origin.config})
    return origin, family


class _Writer:
    """Puts keys into the config, each once, and none that the spec's position writes (the rotary keys)."""

    def __init__(self, spec: Spec, config: dict[str, Any], family) -> None:
        self.spec, self.config, self.given = spec, config, {}
        self.rope_keys = ROPE_CONFIG_KEYS if family.origin.rope is not None else set()

    def __call__(self, key: str, value: Any, loc: tuple) -> None:
        label = ".".join(map(str, loc))
        if key in self.rope_keys:
            raise SpecError.at(where(self.spec, loc), f"{label}: {key!r} is written from the spec's position (its base and "
                                                      "scaling, or the size's position:), not from an hf: key")
        if key in self.config:
            first = f" (also at {where(self.spec, self.given[key])})" if key in self.given else " (archcalc writes it itself)"
            raise SpecError.at(where(self.spec, loc), f"{label}: config key {key!r} is given twice{first}")
        self.config[key], self.given[key] = value, loc


def _write_keys(spec: Spec, size: str | None, origin: HFOrigin, family, values: dict, put: _Writer) -> list[str]:
    """The keys computed from the hyperparameters at the bound size, then ``config`` and the size's own ``hf:`` keys.
    Returns the keys of a borrowed table whose hyperparameters this spec lacks (named if the check fails)."""
    imported = origin is not spec.hf
    symbols = origin.key_symbols() if imported else origin.exported_symbols()
    unwritten: list[str] = []
    for key, expr in symbols.items():
        if imported and not expr.names <= set(spec.hyperparameters):
            # pruned at import (a null window): the imported config's own value is among the kept keys; or a spec of
            # one's own that names its hyperparameters otherwise than the bundled spec whose table it borrows
            unwritten.append(f"{key} ({expr.text})")
            continue
        loc = ("hf", "symbols", key) if key in origin.symbols else ("hf", "keys", key, "symbol")
        entry = family.keys.get(key)  # a key whose class default is a real number takes a fraction (1 / d_head)
        put(key, _evaluate(spec, expr, values, loc, real=entry is not None and isinstance(entry.default, float)), loc)
    for key, value in origin.config.items():
        put(key, value, ("hf", "config", key))
    for key, value in (spec.sizes[size].hf.items() if size is not None else ()):
        put(key, value, ("sizes", size, "hf", key))
    return unwritten


def _write_rope(config: dict[str, Any], family, lowered, binding) -> None:
    """``rope_parameters`` from the lowered positions (the hf: keys cannot hold it): one set, or one per layer type
    (Gemma 3: the sliding layers' own base and scaling)."""
    embed = lowered.root.find("embed")
    if family.origin.rope is None or embed is None or embed.attrs.position != "rotary":
        return
    config["rope_parameters"] = _rope(embed.attrs, binding)
    if family.origin.rope.local_theta is not None:
        a = embed.attrs
        local = _rope(a, binding, a.rotary_local_base, a.rotary_local_scaling) if a.rotary_local_base is not None else None
        config["rope_parameters"] = {"full_attention": config["rope_parameters"],
                                     "sliding_attention": local or config["rope_parameters"]}


def layer_pattern(lowered, binding) -> str:
    """Each layer's kind, as hybrid_override_pattern writes it (M a state mixer, * attention, E a mixture of experts,
    - an MLP alone), from its stack, in the layer order where the stacks interleave."""
    stacks = {c.name: c for c in lowered.root.children if isinstance(c.attrs, Block)}
    kinds = {}
    for name, stack in stacks.items():
        kids = {k.name: k for k in stack.children}
        kinds[name] = "M" if "mixer" in kids else "*" if "attn" in kids else "E" if kids["mlp"].kind == "moe" else "-"
    attends = layer_attends(lowered, binding)  # bounded as it is: every layer listed
    order = lowered.root.attrs.layer_order or [next(iter(stacks))]
    return "".join(kinds[order[i % len(order)]] for i in range(len(attends)))


def _granite_hybrid_keys(lowered, binding) -> dict[str, Any]:
    """Granite 4.0-H: a type per layer (the older names, which transformers 4 and 5 both read) and whether the attention
    layers rotate."""
    embed = lowered.root.find("embed")
    return {"layer_types": ["attention" if a else "mamba" for a in layer_attends(lowered, binding)],
            "position_embedding_type": "rope" if embed is not None and embed.attrs.position == "rotary" else "nope"}


#: The keys a hook reads, written from the lowered model: which layers attend, from the stacks and their layer order.
HOOK_KEYS = {
    # Bamba: the attention layers' indices (null: none, every layer a Mamba2 layer)
    "attention_layer_indices": lambda lowered, binding: {
        "attn_layer_indices": [i for i, a in enumerate(layer_attends(lowered, binding)) if a] or None},
    # LFM2: a type per layer (full_attn_idxs, the older key, is then not read)
    "short_conv_layers": lambda lowered, binding: {
        "layer_types": ["full_attention" if a else "conv" for a in layer_attends(lowered, binding)], "full_attn_idxs": None},
    "granite_hybrid_layers": _granite_hybrid_keys,
    # LFM2-MoE: a type per layer, and how many lead with a dense MLP
    "short_conv_moe_layers": lambda lowered, binding: short_conv_moe_keys(lowered, binding),
    # DeepSeek Sparse Attention (GLM-5): the layers that reuse the previous layer's top-k selection
    "sparse_attention_layers": lambda lowered, binding: _indexer_types(lowered, binding),
    "falcon_h1_mixer": lambda lowered, binding: _falcon_h1_multipliers(lowered),
    # Mistral 3 and 4: the query temperature's beta and floor, in rope_parameters
    "llama_4_scaling": lambda lowered, binding: mistral_rope_keys(lowered, binding),
    # Nemotron-H: each layer's kind, a character a layer
    "hybrid_pattern_layers": lambda lowered, binding: {"hybrid_override_pattern": layer_pattern(lowered, binding)},
    # Zamba2: each layer's type (hybrid: the shared block first) and whether the shared attention rotates
    "zamba2_layers": lambda lowered, binding: zamba2_keys(lowered, binding),
}


def _mlp_layer_types(lowered, binding) -> list[str]:
    """``dense`` for each layer of the dense stack (they lead), ``sparse`` for the others."""
    layers = len(layer_attends(lowered, binding))  # bounded as it is: every layer listed
    dense = next((int(c.repeat.xreplace(binding.numeric())) for c in lowered.root.children
                  if isinstance(c.attrs, Block) and c.name == "dense_blocks"), 0)
    return ["dense"] * dense + ["sparse"] * (layers - dense)


def _indexer_types(lowered, binding) -> dict[str, Any]:
    """DeepSeek Sparse Attention (GLM-5): ``indexer_types`` where some layer reuses the previous layer's selection (else
    none: transformers' default gives every layer its own indexer), from its stack, in the layer order."""
    stacks = {c.name: c for c in lowered.root.children if isinstance(c.attrs, Block)}
    shared = {name for name, c in stacks.items()
              if any(isinstance(k.attrs, LatentAttention) and k.attrs.index_shared for k in c.children)}
    if not shared:
        return {}
    layers = len(layer_attends(lowered, binding))  # bounded as it is: every layer listed
    order = lowered.root.attrs.layer_order or [name for name, c in stacks.items()
                                               for _ in range(int(c.repeat.xreplace(binding.numeric())))]
    return {"indexer_types": ["shared" if order[i % len(order)] in shared else "full" for i in range(layers)]}


def _falcon_h1_multipliers(lowered) -> dict[str, Any]:
    """Falcon-H1: the five factors of the mixer's in_proj outputs and the MLP's gate and down factors (ones where the
    model has none)."""
    stack = next(c for c in lowered.root.children if isinstance(c.attrs, Block))
    kids = {c.name: c for c in stack.children}
    mixer, mlp = kids["mixer"].attrs, kids["mlp"].attrs
    return {"ssm_multipliers": list(mixer.in_proj_multipliers or (1.0,) * 5),
            "mlp_multipliers": [mlp.gate_multiplier or 1.0, mlp.down_multiplier or 1.0]}


def _drop_missing_tokens(config: dict[str, Any]) -> None:
    """A special token id past a smaller vocabulary (``--set V=97``) names no token: transformers would refuse the
    embedding's padding index, so it becomes null. Ids inside the vocabulary are kept as the spec gives them."""
    vocab = config.get("vocab_size")
    for key in TOKEN_KEYS:
        if isinstance(vocab, int) and isinstance(config.get(key), int) and not 0 <= config[key] < vocab:
            config[key] = None


def drop_remote_code(config: dict[str, Any]) -> list[str]:
    """Remove every :data:`REMOTE_CODE_KEYS` key from ``config`` and the dicts inside it (lists included; a nested
    value is replaced by a cleaned copy, never changed where the spec holds it); their dotted paths, in order. The
    config's nesting is bounded (a spec's JSON values are), so is this walk.

    >>> inner = {"custom_pipelines": {}, "b": [{"auto_map": 1}]}
    >>> config = {"a": 1, "auto_map": {"AutoModel": "x.Y"}, "text_config": inner}
    >>> drop_remote_code(config), config, inner["b"]
    (['auto_map', 'text_config.custom_pipelines', 'text_config.b.0.auto_map'], {'a': 1, 'text_config': {'b': [{}]}}, [{'auto_map': 1}])
    """
    found: list[str] = []

    def clean(value: Any, path: str) -> Any:
        if isinstance(value, dict):
            out = {}
            for key, item in value.items():
                here = f"{path}.{key}" if path else str(key)
                if key in REMOTE_CODE_KEYS:
                    found.append(here)
                else:
                    out[key] = clean(item, here)
            return out
        if isinstance(value, list):
            return [clean(item, f"{path}.{i}") for i, item in enumerate(value)]
        return value

    cleaned = clean(config, "")
    config.clear()
    config.update(cleaned)
    return found


def config_text(config: dict[str, Any]) -> str:
    """The config as config.json text (two-space indent, the marker first, a final newline)."""
    return json.dumps(config, indent=2, ensure_ascii=False, allow_nan=False) + "\n"


def _size(spec: Spec, size: str | None) -> str | None:
    if size is not None or len(spec.sizes) <= 1:
        return size if size is not None else next(iter(spec.sizes), None)
    raise UsageError(f"{spec.name} has {len(spec.sizes)} sizes; a config.json describes one: give --size "
                     f"(one of: {', '.join(spec.sizes)})")


def _evaluate(spec: Spec, expr: Expr, values: dict, loc: tuple, real: bool = False) -> int | bool | float:
    """An ``hf.symbols`` expression at the bound size: a boolean, a whole number, or for a real-valued key (``real``: a
    score scale, a multiplier) a float."""
    value = expr.evaluate(values)
    if isinstance(value, bool):
        return value
    if real:
        return float(value)
    if value.denominator != 1:
        raise SpecError.at(where(spec, loc), f"{'.'.join(loc)}: {expr.text} = {value} at this size; a config.json "
                                             "value must be a whole number")
    return int(value)
