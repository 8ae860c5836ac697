"""Layers whose attention differs in shape by layer type, read from a config: the hook ``per_layer_type_attention``
reads Gemma 4's ``layer_types`` (``sliding_attention``, ``full_attention``; none: five sliding layers to one full, as
transformers fills it in, the last layer always full), its global layers' key/value heads (``attention_k_eq_v`` with
``num_global_key_value_heads``), the last ``num_kv_shared_layers`` that reuse an earlier layer's keys and values (with
``use_double_wide_mlp``: twice the MLP's width there) and a mixture of experts beside every MLP (``enable_moe_block``).

The bundled spec lists two stacks, ``local_blocks`` (sliding) and ``blocks`` (global); the hook sets their repeats and
the ``layer_order`` (the shortest cycle of the layers' kinds), and adds ``sharedlocal_blocks`` and ``shared_blocks``
for the layers that share keys and values (no key/value projections, no key norm, no cache).

>>> from archcalc.hf.jsonfile import parse_text
>>> from archcalc.hf.build import build
>>> spec = build(parse_text('{"model_type": "gemma4_text", "num_hidden_layers": 12, "num_kv_shared_layers": 2}'))
>>> [b.name for b in spec.model.blocks], spec.model.layer_order[-2:]
(['local_blocks', 'blocks', 'sharedlocal_blocks', 'shared_blocks'], ['sharedlocal_blocks', 'shared_blocks'])
"""

from __future__ import annotations

import copy
from typing import Any

from archcalc.hf.reader import MISSING, Reader
from archcalc.hf.windows import _period, how_many, listed_layers

FULL, SLIDING = "full_attention", "sliding_attention"
EVERY = 6  # transformers' default: every sixth layer full, the others sliding


def per_layer_type_attention(r: Reader, draft: Any) -> None:
    layers = draft.values["L"]
    full, period = _full_layers(r, layers)
    shared = r.int("num_kv_shared_layers", 0, minimum=0)
    if shared > layers:
        raise r.fail("num_kv_shared_layers", f"{shared} layers share keys and values, but there are {layers} layers")
    if shared:
        period = None  # the last layers differ: every layer is listed
        listed_layers(r, draft, "layers that share keys and values", None, "num_kv_shared_layers")
        _check_producers(r, full, layers - shared)
    names = [("shared" if i >= layers - shared else "") + ("" if full[i] else "local") for i in range(len(full))]
    names = [f"{n}_blocks" if n else "blocks" for n in names]
    counts = {name: how_many([n == name for n in names], period, layers)
              for name in ("local_blocks", "blocks", "sharedlocal_blocks", "shared_blocks")}
    place = r.where("layer_types" if r.get("layer_types") not in (MISSING, None) else "num_hidden_layers", value=True)
    for symbol, name in (("Lg", "blocks"), ("Ls", "sharedlocal_blocks"), ("Lsg", "shared_blocks")):
        if symbol == "Lg" or counts[name]:  # a stack of no layers is left out, and its symbol with it
            draft.set(symbol, counts[name], place, doc=f"layers of the stack {name}")
    _global_kv_heads(r, draft)
    _per_layer_config(r, draft, full, layers)
    _stacks(r, draft, counts)
    order = _period(names)
    kept = [b for b in draft.model["blocks"] if counts[b["name"]]]
    draft.model["blocks"] = kept
    if len(kept) == 1:
        draft.model.pop("layer_order", None)
    else:
        draft.model["layer_order"] = order


def _full_layers(r: Reader, layers: int) -> tuple[list[bool], int | None]:
    """Whether each listed layer is a full-attention one (the last always is, as transformers forces it), and the
    period of the list (None: every layer listed)."""
    given = r.get("layer_types")
    if given in (MISSING, None):
        period = EVERY if layers % EVERY == 0 else None
        listed = layers if period is None or layers <= 2 * period else 2 * period
        if listed > 100_000:
            raise r.fail("num_hidden_layers", f"{layers:,} layers whose kinds do not repeat (the last is always full); "
                                              "archcalc lists per-layer settings for at most 100,000 layers")
        full = [(i + 1) % EVERY == 0 for i in range(listed)]
        if period is None:
            full[-1] = True
        return full, period
    if not isinstance(given, list) or len(given) != layers:
        raise r.fail("layer_types", f"expected a list of {layers} layer types (one per layer, num_hidden_layers)")
    for i, kind in enumerate(given):
        if kind not in (FULL, SLIDING):
            raise r.fail(("layer_types", i), f"{str(kind)[:40]!r} is not modelled; expected {FULL} or {SLIDING}")
    full = [kind == FULL for kind in given]
    if not full[-1]:
        r.notes.append(f"layer_types ends in a {SLIDING} layer, which transformers makes a {FULL} one (as counted)")
        full[-1] = True
    return full, None


def _check_producers(r: Reader, full: list[bool], first_shared: int) -> None:
    """transformers refuses a sharing layer whose kind no earlier (unshared) layer has: there are no keys to reuse."""
    if first_shared == 0:
        return
    if set(full[:first_shared]) != set(full):
        raise r.fail("num_kv_shared_layers", "the layers that share keys and values include a kind of layer (sliding or "
                                             "full) that no earlier layer has; transformers refuses such a config")


def _global_kv_heads(r: Reader, draft: Any) -> None:
    """The global layers' key/value heads: num_global_key_value_heads where attention_k_eq_v (a null: KV), else KV."""
    given = r.int("num_global_key_value_heads", None, nullable=True)
    if draft.values["k_eq_v"] and given is not None:
        draft.set("KVg", given, r.where("num_global_key_value_heads", value=True))
    else:
        if given is not None and given != draft.values["KV"]:
            r.notes.append(f"num_global_key_value_heads {given} is not read: transformers reads it only with "
                           "attention_k_eq_v, and the global layers have num_key_value_heads key/value heads")
        draft.set("KVg", draft.values["KV"])
        draft.decls["KVg"]["default"] = "KV"
        draft.size.pop("KVg", None)


def _per_layer_config(r: Reader, draft: Any, full: list[bool], layers: int) -> None:
    """transformers' ``per_layer_config`` (which configs it saves hold in place of global_head_dim and
    num_global_key_value_heads): each listed layer's head_dim and num_key_value_heads; the same for every layer of a
    kind, or refused."""
    given = r.get("per_layer_config")
    if given in (MISSING, None):
        return
    if not isinstance(given, dict):
        raise r.fail("per_layer_config", "expected an object: layer index -> {head_dim, num_key_value_heads}")
    if len(full) < layers:
        listed_layers(r, draft, "layers with settings of their own", None, "per_layer_config")
        full = [(i + 1) % 6 == 0 or i == layers - 1 for i in range(layers)]
    base = {"head_dim": draft.values["d_head"], "num_key_value_heads": draft.values["KV"]}
    shapes: dict[bool, set] = {True: set(), False: set()}
    for i in range(layers):
        own = given.get(str(i), given.get(i, {}))
        if not isinstance(own, dict) or set(own) - set(base):
            raise r.fail(("per_layer_config", str(i)), "expected an object of head_dim and num_key_value_heads")
        for key, value in own.items():
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise r.fail(("per_layer_config", str(i), key), f"expected a positive integer, got {value!r:.40}")
        shapes[full[i]].add(tuple(sorted((base | own).items())))
    if len(shapes[True]) > 1 or len(shapes[False]) > 1 or shapes[False] - {tuple(sorted(base.items()))}:
        raise r.fail("per_layer_config", "layers of one kind with different shapes, or sliding layers with a shape other "
                                         "than head_dim and num_key_value_heads, are not modelled")
    if shapes[True]:
        shape = dict(next(iter(shapes[True])))
        draft.set("d_global", shape["head_dim"], r.where("per_layer_config", value=True))
        draft.set("KVg", shape["num_key_value_heads"], r.where("per_layer_config", value=True))


def _stacks(r: Reader, draft: Any, counts: dict[str, int]) -> None:
    """The stacks with their repeats; the sharing ones copied from the others; the experts beside every MLP."""
    local, full = draft.model["blocks"]
    local["repeat"] = " - ".join(["L", "Lg"] + [s for s in ("Ls", "Lsg") if s in draft.values])
    full["repeat"] = "Lg"
    double = r.bool("use_double_wide_mlp", False)
    stacks = [local, full]
    for name, source, repeat in (("sharedlocal_blocks", local, "Ls"), ("shared_blocks", full, "Lsg")):
        stack = copy.deepcopy(source)
        stack["name"], stack["repeat"] = name, repeat
        stack["attention"]["kv_shared"] = True
        stack["attention"].pop("k_eq_v", None)
        if double:
            stack["mlp"]["hidden"] = "2 * d_ff"
        stacks.append(stack)
    draft.model["blocks"] = stacks
    if not counts["sharedlocal_blocks"] + counts["shared_blocks"]:
        r.get("use_double_wide_mlp")
    _experts(r, draft)


def _experts(r: Reader, draft: Any) -> None:
    keys = ("num_experts", "top_k_experts", "moe_intermediate_size")
    if not r.bool("enable_moe_block", False):
        for key in keys:
            r.get(key)  # read: the experts are not built
        return
    for key, symbol, doc in zip(keys, ("E", "K", "d_moe"), ("experts", "experts per token", "expert hidden width")):
        value = r.int(key, None, nullable=True)
        if value is None:
            raise r.fail(key, "expected an integer, got null (enable_moe_block needs it)")
        draft.set(symbol, value, r.where(key, value=True), doc=doc)
    for stack in draft.model["blocks"]:
        mlp = stack["mlp"]
        stack["moe_beside"] = {"kind": "moe", "hidden": "d_moe", "experts": "E", "top_k": "K",
                               "activation": mlp.get("activation", "gelu_tanh"), "bias": False, "layout": "fused"}
