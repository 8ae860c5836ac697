"""Which layers of a hybrid decoder mix tokens by a state mixer and which by attention: the hook
``linear_attention_layers`` reads Qwen3.5's and Qwen3-Next's ``layer_types`` (``linear_attention``, ``full_attention``),
else every ``full_attention_interval``-th layer attention and the others linear attention, as transformers fills it in;
``attention_layer_indices`` Bamba's ``attn_layer_indices``; ``short_conv_layers`` LFM2's ``layer_types`` (``conv``,
``full_attention``), else its ``full_attn_idxs`` (none: every layer attends, as transformers fills it in);
``granite_hybrid_layers`` Granite 4.0-H's ``layer_types`` (none: every layer a Mamba2 layer), with its
``position_embedding_type`` (``rope`` rotates; null and ``nope`` do not) and its dense form (``num_local_experts``
0: the shared MLP alone, of width ``shared_intermediate_size``).

The spec lists two stacks in ``model.blocks``, the mixer's first and the attention stack second, with ``La`` attention
layers; the hook sets ``La`` and the ``layer_order`` (the shortest cycle of the layers' kinds, over two periods of the
rule at most, as :mod:`archcalc.hf.moe_layers` does), or keeps one stack where every layer is of one kind.

>>> from archcalc.hf.jsonfile import parse_text
>>> from archcalc.hf.build import build
>>> spec = build(parse_text('{"model_type": "qwen3_5_text", "num_hidden_layers": 6, "full_attention_interval": 3}'))
>>> [b.repeat.text for b in spec.model.blocks], spec.model.layer_order
(['L - La', 'La'], ['delta_blocks', 'delta_blocks', 'blocks'])
"""

from __future__ import annotations

import copy
import math
from typing import Any

from archcalc.hf.reader import MISSING, Reader
from archcalc.hf.windows import _period, every_nth, how_many, listed_layers

LINEAR_ATTENTION = {"linear_attention": True, "full_attention": False}  # a layer type -> whether a mixer mixes it
SHORT_CONV = {"conv": True, "full_attention": False}
#: the older names of layer types, which transformers reads as the newer (``remap_legacy_layer_types``)
LEGACY_LAYER_TYPES = {"mamba": "linear_attention", "attention": "full_attention"}


def linear_attention_layers(r: Reader, draft: Any) -> None:
    layers = draft.values["L"]
    given = r.get("layer_types")
    if given in (MISSING, None):
        every = r.int("full_attention_interval", r.defaults.get("full_attention_interval", 4), minimum=1)
        period, key, rule = every_nth(every, layers), "full_attention_interval", lambda i: (i + 1) % every != 0
    else:
        r.get("full_attention_interval")  # read, though the list decides
        kinds = layer_kinds(r, given, layers, LINEAR_ATTENTION)
        period, key, rule = None, "layer_types", lambda i: kinds[i]
    listed = listed_layers(r, draft, "linear-attention and attention layers", period, key)
    place_mixer_layers(r, draft, [rule(i) for i in range(listed)], period, key)


def attention_layer_indices(r: Reader, draft: Any) -> None:
    """Bamba's (and Granite 4.0-H's) ``attn_layer_indices``: those layers attend, the others are Mamba2 layers (none
    given: every layer a Mamba2 layer, as transformers fills it in)."""
    layers = draft.values["L"]
    indices = _indices(r, "attn_layer_indices", layers, " (the attention layers)") or set()
    period = 1 if len(indices) in (0, layers) else None
    listed = listed_layers(r, draft, "Mamba2 and attention layers", period, "attn_layer_indices")
    place_mixer_layers(r, draft, [i not in indices for i in range(listed)], period, "attn_layer_indices")


def short_conv_layers(r: Reader, draft: Any) -> None:
    """LFM2's ``layer_types``; where a config has none, its ``full_attn_idxs`` attend and the other layers are short
    convolutions (no list: every layer attends)."""
    layers, given = draft.values["L"], r.get("layer_types")
    if given not in (MISSING, None):
        r.get("full_attn_idxs")  # read, though the list decides
        kinds, key = layer_kinds(r, given, layers, SHORT_CONV), "layer_types"
    else:
        key, attends = "full_attn_idxs", _indices(r, "full_attn_idxs", layers)
        if attends is None:  # every layer attends
            place_mixer_layers(r, draft, [False], 1, key)
            return
        listed_layers(r, draft, "short-convolution and attention layers", None, key)  # bounded before it is listed
        kinds = [i not in attends for i in range(layers)]
    period = 1 if len(set(kinds)) == 1 else None
    listed = listed_layers(r, draft, "short-convolution and attention layers", period, key)
    place_mixer_layers(r, draft, kinds[:listed], period, key)


def granite_hybrid_layers(r: Reader, draft: Any) -> None:
    layers, given = draft.values["L"], r.get("layer_types")
    if given in (MISSING, None):  # every layer a Mamba2 layer
        place_mixer_layers(r, draft, [True], 1, "layer_types")
    else:
        kinds = layer_kinds(r, given, layers, LINEAR_ATTENTION)
        period = 1 if len(set(kinds)) == 1 else None
        listed = listed_layers(r, draft, "Mamba2 and attention layers", period, "layer_types")
        place_mixer_layers(r, draft, kinds[:listed], period, "layer_types")
    position = r.get("position_embedding_type")
    if position not in (MISSING, None, "nope", "rope"):
        raise r.fail("position_embedding_type", f"expected rope (rotary positions) or nope or null (none), got "
                                                f"{str(position)[:40]!r}")
    draft.put("embedding.position", {**draft.get("embedding.position"), "kind": "rotary"} if position == "rope"
              else {"kind": "none"})
    if draft.values["E"] == 0:  # no experts: each layer's MLP is the shared one alone
        for stack in draft.model["blocks"]:
            stack["mlp"] = {"kind": "gated", "hidden": "d_shared", "activation": "silu", "bias": False}


def _indices(r: Reader, key: str, layers: int, what: str = "") -> set[int] | None:
    """A list of layer indices at ``key`` (None where the key is absent or null; ``what``: what they are, for the
    error)."""
    given = r.get(key)
    if given in (MISSING, None):
        return None
    if not isinstance(given, list):
        raise r.fail(key, f"expected a list of layer indices{what}")
    for i, index in enumerate(given):
        if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < layers:
            raise r.fail((key, i), f"expected a layer index from 0 to {layers - 1}, got {index!r:.40}")
    return set(given)


def layer_kinds(r: Reader, given: Any, layers: int, table: dict[str, bool]) -> list[bool]:
    """``layer_types`` read through ``table`` (a type -> whether a state mixer mixes that layer), one per layer."""
    if not isinstance(given, list) or len(given) != layers:
        raise r.fail("layer_types", f"expected a list of {layers} layer types (one per layer, num_hidden_layers)")
    kinds = [LEGACY_LAYER_TYPES.get(kind, kind) if isinstance(kind, str) else kind for kind in given]
    for i, kind in enumerate(kinds):
        if not isinstance(kind, str) or kind not in table:
            raise r.fail(("layer_types", i), f"{str(given[i])[:40]!r} is not modelled; expected {' or '.join(table)}")
    return [table[kind] for kind in kinds]


def place_mixer_layers(r: Reader, draft: Any, mixer: list[bool], period: int | None, key: str) -> None:
    """Give the mixer stack and the attention stack their layers: ``mixer`` lists the first layers (all of them, or two
    periods of a rule repeating every ``period``), true where a state mixer mixes the layer."""
    mixer_stack, attention_stack = draft.model["blocks"]
    layers = draft.values["L"]
    attention = how_many([not m for m in mixer], period, layers)
    if attention in (0, layers):  # one kind of layer: one stack of all of them
        stack = mixer_stack if attention == 0 else attention_stack
        stack["repeat"] = "L"
        draft.model["blocks"] = [stack]
        draft.model.pop("layer_order", None)
        draft.set("La", attention, r.where(key, value=True))
        return
    draft.set("La", attention, r.where(key, value=True))
    draft.model["layer_order"] = _period([mixer_stack["name"] if m else attention_stack["name"] for m in mixer])


#: Jamba's four kinds of layer -> their stack: (attends, mixture of experts) -> the stack's name, in the layout's order
JAMBA_STACKS = {(False, False): "mamba_blocks", (False, True): "mambamoe_blocks", (True, False): "blocks",
                (True, True): "moe_blocks"}


def jamba_layers(r: Reader, draft: Any) -> None:
    """Jamba's layers, as JambaConfig's ``layers_block_type`` and ``layers_num_experts`` give them: layer i attends
    where ``i % attn_layer_period == attn_layer_offset``, else it is a Mamba layer; its MLP is a mixture of experts
    where ``i % expert_layer_period == expert_layer_offset`` and ``num_experts > 1``, else SwiGLU (each offset below
    its period, as the class checks).

    The spec lists three stacks: Mamba layers with SwiGLU (``mamba_blocks``), with experts (``mambamoe_blocks``) and
    attention layers with SwiGLU (``blocks``); attention layers with experts (``moe_blocks``) are built from them.
    ``La`` counts the attention layers, ``Lm`` the layers with experts and ``Lam`` those that are both (declared where
    there are some); stacks without a layer are dropped, and ``layer_order`` is the shortest cycle of the layers."""
    layers = draft.values["L"]
    rules = {}
    for kind in ("attn", "expert"):
        period_key, offset_key = f"{kind}_layer_period", f"{kind}_layer_offset"
        period = r.int(period_key, r.defaults[period_key])
        offset = r.int(offset_key, r.defaults[offset_key], minimum=0)
        if offset >= period:
            raise r.fail(offset_key, f"{offset} is not smaller than {period_key} = {period}: transformers' "
                                     f"{draft.family.hf_class} refuses it")
        rules[kind] = (period, offset)
    moe_layers = draft.values["E"] > 1  # one expert: every MLP is SwiGLU
    (pa, oa), (pe, oe) = rules["attn"], rules["expert"]
    period = math.lcm(pa, pe if moe_layers else 1)
    why = "Mamba and attention layers, with experts and without"
    listed = listed_layers(r, draft, why, period, "attn_layer_period")
    kinds = [(i % pa == oa, moe_layers and i % pe == oe) for i in range(listed)]
    attention, moe, both = (how_many([test(a, m) for a, m in kinds], period, layers)
                            for test in (lambda a, m: a, lambda a, m: m, lambda a, m: a and m))
    counts = {"mamba_blocks": layers - attention - moe + both, "mambamoe_blocks": moe - both,
              "blocks": attention - both, "moe_blocks": both}
    # each count a symbol where it is not zero (a stack's repeat names only those)
    symbols = {"La": (attention, "attn_layer_period", "attention layers (the others are Mamba layers)"),
               "Lm": (moe, "expert_layer_period", "layers whose MLP is a mixture of experts"),
               "Lam": (both, "attn_layer_period", "attention layers whose MLP is a mixture of experts")}
    for name, (value, key, doc) in symbols.items():
        if value:
            draft.set(name, value, r.where(key, value=True), doc=doc)
    minus = "".join(f" {sign} {name}" for sign, name in (("-", "La"), ("-", "Lm"), ("+", "Lam")) if symbols[name][0])
    repeats = {"mamba_blocks": "L" + minus, "mambamoe_blocks": "Lm" + (" - Lam" if both else ""),
               "blocks": "La" + (" - Lam" if both else ""), "moe_blocks": "Lam"}
    given = {stack["name"]: stack for stack in draft.model["blocks"]}
    given["moe_blocks"] = {**copy.deepcopy(given["blocks"]), "name": "moe_blocks",
                           "mlp": copy.deepcopy(given["mambamoe_blocks"]["mlp"])}
    stacks = [given[name] for name in JAMBA_STACKS.values() if counts[name]]
    for stack in stacks:
        stack["repeat"] = repeats[stack["name"]] if len(stacks) > 1 else "L"
    draft.model["blocks"] = stacks
    draft.model.pop("layer_order", None)
    if len(stacks) > 1:
        draft.model["layer_order"] = _period([JAMBA_STACKS[kind] for kind in kinds])


#: Nemotron-H's hybrid_override_pattern: one character per layer, its kind; layers_block_type (transformers 5's
#: name for the same list) names them
PATTERN_KINDS = {"M": "Mamba2", "*": "attention", "-": "MLP", "E": "mixture-of-experts"}
BLOCK_TYPES = {"linear_attention": "M", "full_attention": "*", "mlp": "-", "moe": "E"}


def hybrid_pattern_layers(r: Reader, draft: Any) -> None:
    """Nemotron-H's layers, each one norm and one of four operators: ``hybrid_override_pattern`` (a character per layer:
    ``M`` Mamba2, ``*`` attention, ``-`` MLP, ``E`` mixture of experts) or ``layers_block_type`` (the same as a list,
    which wins where both are given, as in transformers); neither: the class's four layers ``ME*-``. The number of
    layers is the pattern's (transformers ignores num_hidden_layers). Each kind is one stack of ``model.blocks``, found
    by what it holds; the MLP stack, absent from a bundled spec whose layers have none, is the mixture-of-experts
    stack's norm with a dense MLP of ``intermediate_size`` (the family's symbol for it). Stacks with no layers are
    dropped; the others keep their order and get their exact number of layers (the first, L less the others'), and the
    layer order is the pattern's shortest cycle."""
    kinds = _pattern(r)
    layers = len(kinds)
    where = r.where("layers_block_type" if r.get("layers_block_type") not in (MISSING, None) else "hybrid_override_pattern",
                    value=True)
    given = r.get("num_hidden_layers")
    if isinstance(given, int) and not isinstance(given, bool) and given != layers:
        r.notes.append(f"num_hidden_layers is {given}, but the pattern lists {layers} layers: transformers builds "
                       f"{layers}, as counted")
    draft.set("L", layers, where)
    stacks = {_stack_kind(stack): stack for stack in draft.model["blocks"]}
    if "-" in kinds and "-" not in stacks:
        moe = stacks["E"]
        hidden = draft.family.keys["intermediate_size"].symbol
        mlp = {"kind": "dense", "hidden": hidden, "activation": moe["mlp"]["activation"], "bias": False}
        stacks["-"] = {"name": "mlp_blocks", "repeat": "Lf", "norm": dict(moe["norm"]), "mlp": mlp}
    kept = sorted(((kind, stack) for kind, stack in stacks.items() if kind in kinds), key=lambda pair: "M*-E".index(pair[0]))
    for kind, stack in stacks.items():  # counted from the pattern, not by the bundled pattern's formulas of L
        decl = draft.decls.setdefault(stack["repeat"], {})
        decl["doc"] = f"{PATTERN_KINDS[kind]} layers ({kind} in the pattern)"
        decl.pop("default", None)
    (_, first), *rest = kept
    for kind, stack in rest:
        draft.set(stack["repeat"], kinds.count(kind), where)
    draft.decls[first["repeat"]]["default"] = " - ".join(["L", *(stack["repeat"] for _, stack in rest)])  # the others
    draft.size.pop(first["repeat"], None)
    draft.model["blocks"] = [stack for _, stack in kept]
    if len(kept) == 1:
        draft.model.pop("layer_order", None)
    else:
        names = {kind: stack["name"] for kind, stack in kept}
        draft.model["layer_order"] = _period([names[kind] for kind in kinds])


def _pattern(r: Reader) -> list[str]:
    """The layers' kinds, one character each (``M``, ``*``, ``-``, ``E``), from the pattern or the list."""
    listed = r.get("layers_block_type")
    if listed not in (MISSING, None):
        if not isinstance(listed, list) or not listed:
            raise r.fail("layers_block_type", f"expected a list of layer types, one per layer ({', '.join(BLOCK_TYPES)})")
        for i, kind in enumerate(listed):
            if not isinstance(kind, str) or kind not in BLOCK_TYPES:
                raise r.fail(("layers_block_type", i), f"{str(kind)[:40]!r} is not a layer type; expected one of "
                                                       f"{', '.join(BLOCK_TYPES)}")
        r.get("hybrid_override_pattern")  # read, though the list decides
        return [BLOCK_TYPES[kind] for kind in listed]
    pattern = r.get("hybrid_override_pattern")
    if pattern in (MISSING, None):
        return list("ME*-")  # NemotronHConfig's default: linear_attention, moe, full_attention, mlp
    if not isinstance(pattern, str) or not pattern:
        raise r.fail("hybrid_override_pattern", "expected a string of one character per layer: M (Mamba2), * (attention), "
                                                "- (MLP) or E (mixture of experts)")
    for i, char in enumerate(pattern):
        if char not in PATTERN_KINDS:
            raise r.fail("hybrid_override_pattern", f"character {i} is {char[:1]!r}; expected M (Mamba2), * (attention), "
                                                    "- (MLP) or E (mixture of experts)")
    return list(pattern)


def _stack_kind(stack: dict[str, Any]) -> str:
    """The pattern character of a stack's layers: what it holds."""
    if "mixer" in stack:
        return "M"
    if "attention" in stack:
        return "*"
    return "E" if stack["mlp"].get("kind") == "moe" else "-"
