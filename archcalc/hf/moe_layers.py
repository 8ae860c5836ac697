"""Per-layer structure of a mixture-of-experts decoder whose layers differ (the hook ``interleaved_moe_layers``):

- which layers are mixtures of experts: ``moe_layers``, else every ``interleave_moe_layer_step``-th layer (the last of
  each group), as transformers fills it in; the others are dense SwiGLU MLPs of width ``intermediate_size_mlp``
  (a stack ``dense_blocks`` beside the MoE stack ``blocks``, interleaved by the model's ``layer_order``);
- which layers rotate their queries and keys (``no_rope_layers``, :mod:`archcalc.hf.layers`) and which attend in
  chunks of ``attention_chunk_size`` tokens (``layer_types``, else the rotary layers, where the chunk size is not null);
- the query/key RMS norm without weights on the rotary layers (``use_qk_norm``, epsilon ``rms_norm_eps``) and the query
  temperature on the others (``attn_temperature_tuning`` with ``floor_scale`` and ``attn_scale``).

Each stack's patterns are the shortest cycles of its own layers' settings, in order. Each setting is a rule over the
layers with the period it repeats with (``Rule``); the rules together repeat with the least common multiple of their
periods, so two such cycles of layers are listed, never the whole stack, and the number of dense layers is counted by
arithmetic (:func:`~archcalc.hf.windows.how_many`). A list of layer indices that no rule gives is listed for every
layer, at most 100,000 (:func:`~archcalc.hf.windows.listed_layers`).

Qwen-MoE's dense layers (the hook ``sparse_step_layers``) are split the same way: layer ``i`` is a mixture of experts
unless it is in ``mlp_only_layers`` or ``i + 1`` is not a multiple of ``decoder_sparse_step``.
"""

from __future__ import annotations

import copy
import math
from typing import Any

from archcalc.hf.layers import Rule, _rotation
from archcalc.hf.reader import MISSING, Reader
from archcalc.hf.windows import _period, every_nth, how_many, listed_layers

LAYER_TYPES = {"full_attention": "global", "chunked_attention": "chunked"}


def interleaved_moe_layers(r: Reader, draft: Any) -> None:
    layers = draft.values["L"]
    moe_rule, rotation = _moe_rule(r, layers), _rotation(r, draft)
    chunk = r.int("attention_chunk_size", r.defaults.get("attention_chunk_size"), nullable=True)
    kinds_rule = _kinds_rule(r, layers, rotation, chunk)
    period, key = _combined([moe_rule, rotation, kinds_rule])
    listed = listed_layers(r, draft, "Llama 4's MoE and dense, rotary and NoPE, chunked and global layers", period, key)
    moe, rotated, kinds = ([rule[1](i) for i in range(listed)] for rule in (moe_rule, rotation, kinds_rule))
    if "chunked" in kinds and chunk is None:
        raise r.fail("attention_chunk_size", "null, but some layers are chunked_attention: transformers' chunked mask "
                                             "needs a chunk size")
    qk_norm = r.bool("use_qk_norm", r.defaults.get("use_qk_norm", True))
    eps = r.real("rms_norm_eps", r.defaults.get("rms_norm_eps"))
    tuning = r.bool("attn_temperature_tuning", r.defaults.get("attn_temperature_tuning", True))
    floor = r.real("floor_scale", r.defaults.get("floor_scale"))
    scale = r.real("attn_scale", r.defaults.get("attn_scale"))
    if tuning and not (floor and floor > 0 and scale is not None and scale > 0):
        raise r.fail("floor_scale" if not (floor and floor > 0) else "attn_scale",
                     "expected a positive number with attn_temperature_tuning (it divides the positions and scales the log)")
    stacks = _stacks(r, draft, moe, "intermediate_size_mlp")
    for stack, mine in stacks:
        attn = stack["attention"]
        rot, kind = _period([rotated[i] for i in mine]), _period([kinds[i] for i in mine])
        attn["rotary_pattern"] = rot if False in rot else None
        attn["pattern"] = kind if "chunked" in kind else None
        attn["chunk"] = chunk if "chunked" in kind else None
        attn["rotary_qk_norm"] = eps if qk_norm and True in rot else None
        attn["temperature"] = {"floor": floor, "scale": scale} if tuning and False in rot else None
        stack["attention"] = {k: v for k, v in attn.items() if v is not None}
    _place(r, draft, stacks, moe, period, moe_rule[2])


def sparse_step_layers(r: Reader, draft: Any) -> None:
    """Qwen-MoE (transformers' Qwen2MoeDecoderLayer, Qwen3MoeDecoderLayer): layer ``i`` is a mixture of experts unless
    it is in ``mlp_only_layers`` or ``i + 1`` is not a multiple of ``decoder_sparse_step``; the others are dense SwiGLU
    MLPs of width ``intermediate_size``."""
    layers = draft.values["L"]
    step = r.int("decoder_sparse_step", r.defaults.get("decoder_sparse_step", 1))
    only = set(_indices(r, "mlp_only_layers", layers, "the layers with a dense MLP"))
    extra = {i for i in only if (i + 1) % step == 0}  # the layers the list makes dense, which the step leaves MoE
    if extra and len(extra) < layers // step:  # some MoE layers left, at places no rule gives: listed layer by layer
        period, key = None, "mlp_only_layers"
    else:
        period, key = (every_nth(step, layers), "decoder_sparse_step") if not extra else (1, "mlp_only_layers")
    if period == 1 and step == 1 and not extra:
        return  # every layer a mixture of experts, as in the released models: nothing to list
    listed = listed_layers(r, draft, "dense layers among the mixture-of-experts ones", period, key)
    moe = [i not in only and (i + 1) % step == 0 for i in range(listed)]
    _place(r, draft, _stacks(r, draft, moe, "intermediate_size"), moe, period, key)


def dense_and_moe_stacks(r: Reader, draft: Any, dense: int, shared: int, keys: tuple[str, str],
                         doc: str | None = None) -> None:
    """The dense stack (``blocks.0``, ``L_dense`` layers) and the mixture-of-experts stack (``blocks.1``, the others),
    either dropped where it has no layer; the MoE layers with ``E_shared`` shared experts, or none. ``keys``: the config
    keys the dense layers and the shared experts come from (where the errors point)."""
    dense_stack, moe_stack = draft.model["blocks"]
    stacks = []
    if dense:
        draft.set("L_dense", dense, r.where(keys[0], value=True), doc=doc)
        dense_stack["repeat"] = "L_dense"
        stacks.append(dense_stack)
    if dense < draft.values["L"]:
        moe_stack["repeat"] = "L - L_dense" if dense else "L"
        if shared:
            draft.set("E_shared", shared, r.where(keys[1], value=True))
        else:
            moe_stack["mlp"].pop("shared_experts", None)
        stacks.append(moe_stack)
    draft.model["blocks"] = stacks


def moe_layer_range(r: Reader, draft: Any) -> None:
    """ERNIE 4.5's MoE (transformers' Ernie4_5_MoeDecoderLayer): layer ``i`` is a mixture of experts where ``i + 1`` is a
    multiple of ``moe_layer_interval`` and ``moe_layer_start_index`` <= i <= ``moe_layer_end_index`` (-1: the last
    layer); the others are dense SwiGLU MLPs (``blocks.0``, width ``intermediate_size``), the mixtures ``blocks.1``, in
    the layers' order (``layer_order`` where the dense layers do not all come first). ``moe_num_shared_experts`` 0: no
    shared experts."""
    layers = draft.values["L"]
    start = r.int("moe_layer_start_index", r.defaults["moe_layer_start_index"], minimum=0)
    end = r.int("moe_layer_end_index", r.defaults["moe_layer_end_index"], minimum=-1)
    end = layers - 1 if end == -1 else end  # as Ernie4_5_MoeConfig fills it in
    every = r.int("moe_layer_interval", r.defaults["moe_layer_interval"], minimum=1)
    shared = r.int("moe_num_shared_experts", r.defaults["moe_num_shared_experts"], minimum=0)
    lo, hi = start, min(end, layers - 1)
    moe_count = max(0, (hi + 1) // every - lo // every) if lo <= hi else 0  # i in [lo, hi] with (i + 1) % every == 0
    dense = layers - moe_count
    dense_and_moe_stacks(r, draft, dense, shared, ("moe_layer_start_index", "moe_num_shared_experts"),
                         doc="dense layers (the others are MoE)")
    if dense and moe_count and not (every == 1 and hi == layers - 1):  # not the dense layers first: the layers' order
        whole = lo < every and hi >= layers // every * every - 1  # the rule alone, over the whole stack: it repeats
        period = every_nth(every, layers) if whole else None
        listed = listed_layers(r, draft, "dense and mixture-of-experts layers (moe_layer_start_index, moe_layer_end_index, "
                                         "moe_layer_interval)", period, "moe_layer_start_index")
        order = ["blocks" if (i + 1) % every == 0 and lo <= i <= hi else "dense_blocks" for i in range(listed)]
        draft.model["layer_order"] = _period(order)


def _combined(rules: list[Rule]) -> tuple[int | None, str]:
    """The period of several per-layer rules together (None where one lists its layers), and the key to name when
    that is too long to list: the listing rule's, else the one with the longest period."""
    listing = [key for period, _, key in rules if period is None]
    if listing:
        return None, listing[0]
    return math.lcm(*(period for period, _, _ in rules)), max(rules, key=lambda rule: rule[0])[2]


def _stacks(r: Reader, draft: Any, moe: list[bool], width_key: str) -> list[tuple[dict, list[int]]]:
    """(stack, its layer indices): a ``dense_blocks`` copy of the MoE block whose MLP is SwiGLU of width
    ``width_key`` (when some layer is dense), then the MoE block (when some layer is MoE)."""
    moe_stack, layers, stacks = draft.model["block"], len(moe), []
    if not all(moe):
        width = r.int(width_key, r.defaults.get(width_key))
        draft.set("d_ff_dense", width, r.where(width_key, value=True),
                  doc=f"SwiGLU hidden width of the dense layers ({width_key})")
        dense = copy.deepcopy(moe_stack)
        dense["name"] = "dense_blocks"
        dense["mlp"] = {"kind": "gated", "hidden": "d_ff_dense", "activation": moe_stack["mlp"]["activation"], "bias": False}
        stacks.append((dense, [i for i in range(layers) if not moe[i]]))
    if any(moe):
        stacks.append((moe_stack, [i for i in range(layers) if moe[i]]))
    return stacks


def _place(r: Reader, draft: Any, stacks: list[tuple[dict, list[int]]], moe: list[bool], period: int | None,
           count_key: str) -> None:
    """One stack replaces the block; two become ``blocks`` with ``L_dense`` dense layers (located at ``count_key``),
    interleaved by ``layer_order``. ``moe`` lists the first layers (all of them, or two cycles of ``period``)."""
    if len(stacks) == 1:
        draft.model["block"] = stacks[0][0]
        return
    dense = how_many([not m for m in moe], period, draft.values["L"])
    draft.set("L_dense", dense, r.where(count_key, value=True), doc="dense layers (the others are MoE)")
    stacks[0][0]["repeat"], stacks[1][0]["repeat"] = "L_dense", "L - L_dense"
    del draft.model["block"]
    draft.model["blocks"] = [stack for stack, _ in stacks]
    draft.model["layer_order"] = _period(["blocks" if m else "dense_blocks" for m in moe])


def _moe_rule(r: Reader, layers: int) -> Rule:
    """Which layers are mixtures of experts: ``moe_layers``, else every ``interleave_moe_layer_step``-th layer."""
    if r.get("moe_layers") in (MISSING, None):
        step = r.int("interleave_moe_layer_step", r.defaults.get("interleave_moe_layer_step", 1))
        return every_nth(step, layers), lambda i: (i + 1) % step == 0, "interleave_moe_layer_step"
    given = set(_indices(r, "moe_layers", layers, "the mixture-of-experts layers"))
    r.get("interleave_moe_layer_step")  # read, though the list decides
    if not given or len(given) == layers:  # none or all: the same in every layer
        return 1, lambda i: bool(given), "moe_layers"
    return None, lambda i: i in given, "moe_layers"


def _indices(r: Reader, key: str, layers: int, what: str) -> list[int]:
    """The layer indices listed at ``key`` (absent or null: none)."""
    given = r.get(key)
    if given in (MISSING, None):
        return []
    if not isinstance(given, list):
        raise r.fail(key, f"expected a list of layer indices ({what})")
    for i, index in enumerate(given):
        if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < layers:
            raise r.fail((key, i), f"expected a layer index from 0 to {layers - 1}, got {index!r:.40}")
    return given


def _kinds_rule(r: Reader, layers: int, rotation: Rule, chunk: int | None) -> Rule:
    """Which layers attend in chunks: ``layer_types``, else the rotary layers where there is a chunk size (as
    transformers fills it in: with ``attention_chunk_size`` null every layer attends to all)."""
    given = r.get("layer_types")
    if given in (MISSING, None):
        period, rotates, key = rotation
        return period, lambda i: "chunked" if chunk is not None and rotates(i) else "global", key
    if not isinstance(given, list) or len(given) != layers:
        raise r.fail("layer_types", f"expected a list of {layers} layer types (one per layer, num_hidden_layers)")
    for i, kind in enumerate(given):
        if not isinstance(kind, str) or kind not in LAYER_TYPES:
            raise r.fail(("layer_types", i), f"{str(kind)[:40]!r} is not modelled; expected full_attention or chunked_attention")
    return None, lambda i: LAYER_TYPES[given[i]], "layer_types"
