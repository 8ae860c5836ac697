"""LFM2-MoE's layers (the hook ``short_conv_moe_layers``): each layer of transformers' Lfm2MoeForCausalLM mixes tokens
by a gated short convolution or by attention, as ``layer_types`` says (``conv`` or ``full_attention``), and its MLP is
dense (SwiGLU of width ``intermediate_size``) in the first ``num_dense_layers`` layers, a mixture of experts after.
Lfm2MoeConfig, unlike Lfm2Config, fills in no ``layer_types``: without one transformers fails to build the model, so
the importer refuses it.

The spec lists three stacks, as the released models have them: short convolutions with a dense MLP
(``conv_blocks``), with experts (``convmoe_blocks``) and attention with experts (``moe_blocks``); attention with a
dense MLP (``blocks``) is built from them. Stacks without a layer are dropped; ``layer_order`` is the layers' kinds
(the dense layers lead, so it lists every layer unless one stack holds them all).

>>> from archcalc.hf.jsonfile import parse_text
>>> from archcalc.hf.build import build
>>> spec = build(parse_text('{"model_type": "lfm2_moe", "num_hidden_layers": 4, "num_dense_layers": 1, '
...                         '"layer_types": ["conv", "full_attention", "conv", "full_attention"]}'))
>>> spec.model.layer_order
['conv_blocks', 'moe_blocks', 'convmoe_blocks', 'moe_blocks']
"""

from __future__ import annotations

import copy
from typing import Any

from archcalc.hf.mixer_layers import SHORT_CONV, layer_kinds
from archcalc.hf.reader import MISSING, Reader
from archcalc.hf.windows import _period, listed_layers

#: (attends, mixture of experts) -> the stack of such layers, in the weight layout's order
STACKS = {(False, False): "conv_blocks", (True, False): "blocks", (False, True): "convmoe_blocks", (True, True): "moe_blocks"}
#: each stack's count, as hyperparameters: L_dense dense layers, La attention layers, Lad attention layers among the dense
REPEATS = {"conv_blocks": ("+L_dense", "-Lad"), "blocks": ("+Lad",), "convmoe_blocks": ("+L", "-L_dense", "-La", "+Lad"),
           "moe_blocks": ("+La", "-Lad")}


def short_conv_moe_layers(r: Reader, draft: Any) -> None:
    layers, given = draft.values["L"], r.get("layer_types")
    # a type per layer, listed: bounded before the list is asked for or read
    listed_layers(r, draft, "short-convolution and attention layers", None, "num_hidden_layers")
    if given in (MISSING, None):
        raise r.fail("layer_types", f"expected a list of {layers} layer types (conv or full_attention, one per layer): "
                                    f"Lfm2MoeConfig fills in none and transformers' {draft.family.hf_class} fails without one")
    mixer = layer_kinds(r, given, layers, SHORT_CONV)
    dense = min(r.int("num_dense_layers", r.defaults["num_dense_layers"], minimum=0), layers)
    kinds = [(not mixer[i], i >= dense) for i in range(layers)]
    values = {"L_dense": dense, "La": sum(a for a, _ in kinds), "Lad": sum(a for a, m in kinds if not m)}
    docs = {"L_dense": ("num_dense_layers", "leading layers with a dense MLP (num_dense_layers; the others are MoE)"),
            "La": ("layer_types", "attention layers (full_attention; the others are short convolutions)"),
            "Lad": ("layer_types", "attention layers among the dense ones")}
    for name, value in values.items():
        if value:  # a symbol is positive: a count of zero is left out of the repeats
            draft.set(name, value, r.where(docs[name][0], value=True), doc=docs[name][1])
    given_stacks = {stack["name"]: stack for stack in draft.model["blocks"]}
    given_stacks["blocks"] = {**copy.deepcopy(given_stacks["moe_blocks"]), "name": "blocks",
                              "mlp": copy.deepcopy(given_stacks["conv_blocks"]["mlp"])}
    used = {STACKS[kind] for kind in kinds}
    stacks = [given_stacks[name] for name in STACKS.values() if name in used]
    for stack in stacks:
        stack["repeat"] = _repeat(REPEATS[stack["name"]], values) if len(stacks) > 1 else "L"
    draft.model["blocks"] = stacks
    draft.model.pop("layer_order", None)
    if len(stacks) > 1:
        draft.model["layer_order"] = _period([STACKS[kind] for kind in kinds])


def _repeat(terms: tuple[str, ...], values: dict[str, int]) -> str:
    """A stack's count from its signed terms (``"+L"``, ``"-La"``), leaving out those whose count is zero (no symbol is
    declared for them); the first term is never zero where the stack has layers."""
    text = " ".join(f"{t[0]} {t[1:]}" for t in terms if values.get(t[1:], 1))
    return text.removeprefix("+ ")


def short_conv_moe_keys(lowered, binding) -> dict[str, Any]:
    """The keys the hook reads, from the lowered model: each layer's type and how many layers have a dense MLP (they
    lead in transformers' model; a spec whose dense layers do not lead reads back as another model and is refused)."""
    from archcalc.hf.export_parts import layer_attends
    from archcalc.ir.attrs import Block

    attends = layer_attends(lowered, binding)  # bounded: every layer listed
    stacks = {c.name: c for c in lowered.root.children if isinstance(c.attrs, Block)}
    order = lowered.root.attrs.layer_order or [next(iter(stacks))]
    dense = {name for name, stack in stacks.items() if stack.find("mlp") is not None and stack.find("mlp").kind != "moe"}
    return {"layer_types": ["full_attention" if a else "conv" for a in attends],
            "num_dense_layers": sum(order[i % len(order)] in dense for i in range(len(attends)))}
