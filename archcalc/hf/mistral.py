"""Mistral 3's and 4's config keys that the key table cannot say (the hooks ``llama_4_scaling``, ``dense_stack`` and
``latent_rotary_share``), and the rope parameters export-hf writes back for them.

transformers' Ministral3Attention and Mistral4Attention multiply every layer's queries, after the rotation, by
``1 + beta * log(1 + floor(p / original))`` (``get_llama_4_attn_scale``, position ``p`` counted from 0), reading
``llama_4_scaling_beta`` and ``original_max_position_embeddings`` from ``rope_parameters`` whatever the rope_type: yarn
fills in the second (``max_position_embeddings``), any other type without both makes the forward fail. Mistral 4 rotates
``int(head_dim * partial_rotary_factor)`` features of ``head_dim = qk_nope_head_dim + qk_rope_head_dim``; its config
class defaults the share to ``qk_rope_head_dim / head_dim``, the rotary part of latent attention; another value (or
``head_dim``) gives frequencies that no longer fit the rotary part (the forward fails, or broadcasts one frequency).
"""

from __future__ import annotations

import copy
from typing import Any

from archcalc.hf.family import Draft
from archcalc.hf.reader import MISSING, Reader

BETA = "llama_4_scaling_beta"
ORIGINAL = "original_max_position_embeddings"


def _params(r: Reader, draft: Draft) -> tuple[tuple, dict[str, Any]]:
    """The rope parameters transformers reads (a non-empty legacy rope_scaling first, as in ``read_rope``), and their key."""
    legacy, params = r.get("rope_scaling"), r.get("rope_parameters")
    if legacy not in (MISSING, None, {}):
        return ("rope_scaling",), legacy
    if params in (MISSING, None):
        return ("rope_parameters",), dict(draft.family.origin.rope.parameters or {})
    return ("rope_parameters",), params


def llama_4_scaling(r: Reader, draft: Draft) -> None:
    """The query temperature of every layer (``attention.temperature``, offset 0); none where beta is 0, or where a key
    it needs is missing (noted: transformers builds that model, but its forward fails)."""
    key, params = _params(r, draft)
    params = params if isinstance(params, dict) else {}
    beta = r.real(key + (BETA,), params.get(BETA), nullable=True)
    if beta is not None and beta < 0:
        raise r.fail(key + (BETA,), f"{beta}: a negative temperature is not modelled; expected a number of at least 0")
    scaling = draft.get("embedding.position.scaling")
    if ORIGINAL in params:
        original = r.int(key + (ORIGINAL,), params[ORIGINAL])
    elif isinstance(scaling, dict) and scaling.get("type") == "yarn":
        original = scaling["original_context"]  # transformers' yarn fills it in: max_position_embeddings
    else:
        original = None
    if beta is None or (original is None and beta > 0):
        missing = BETA if beta is None else ORIGINAL
        r.notes.append(f"{'.'.join(key)} has no {missing}: transformers' {draft.family.hf_class} builds this model, but "
                       "its forward fails (its query temperature, 1 + beta * log(1 + floor(position / "
                       "original_max_position_embeddings)), needs both); counted, and generated without the temperature")
    temperature = {"floor": original, "scale": beta, "offset": 0, "every_layer": True} if beta and original else None
    path = "block.attention.temperature" if "block" in draft.model else "blocks.*.attention.temperature"
    draft.put(path, temperature)


def dense_stack(r: Reader, draft: Draft) -> None:
    """Mistral 4: the dense stack deepseek_stacks fills (``first_k_dense_replace`` leading layers) beside the bundled
    spec's one mixture-of-experts stack (its default has no dense layer, and a spec's stack cannot be empty): the MoE
    stack's layer with a SwiGLU MLP of width ``intermediate_size``."""
    (moe,) = draft.model["blocks"]
    dense = copy.deepcopy(moe) | {"name": "dense_blocks", "repeat": "L_dense"}
    dense["mlp"] = {"kind": "gated", "hidden": "d_ff", "activation": moe["mlp"]["activation"], "bias": False}
    draft.model["blocks"] = [dense, moe]


def latent_rotary_share(r: Reader, draft: Draft) -> None:
    """Mistral 4: the rotated features are latent attention's rotary part (``d_rope``), not a share of a head; a
    ``head_dim``, share or rope_type that gives frequencies for another number is refused (the forward fails on most).
    Its default rope_type computes them for the whole ``head_dim``, whatever the share."""
    key, params = _params(r, draft)
    d_rope, own = draft.values["d_rope"], draft.values["d_head"] + draft.values["d_rope"]
    given_width = r.int("head_dim", None, nullable=True)
    whole = given_width or own  # the config class sets it to own unless a config says otherwise
    fraction = params.get("partial_rotary_factor") if isinstance(params, dict) else None
    given = isinstance(fraction, (int, float)) and not isinstance(fraction, bool)
    scaled = isinstance(draft.get("embedding.position.scaling"), dict)
    # as transformers: int(head_dim * share), its default share d_rope / own; rope_type default: head_dim
    dims = int(whole * (fraction if given else d_rope / own)) if scaled else whole
    if dims != d_rope:
        where = key + ("partial_rotary_factor",) if given and scaled else "head_dim" if given_width else key
        kind = "" if scaled else " (rope_type default: the whole head)"
        raise r.fail(where, f"is not modelled: transformers' {draft.family.hf_class} computes rotary frequencies for {dims} "
                            f"of head_dim = {whole} features{kind}, not the qk_rope_head_dim = {d_rope} it rotates")
    draft.put("embedding.position.rotary_fraction", None)


def rope_keys(lowered, binding) -> dict[str, Any]:
    """export-hf: ``rope_parameters`` with the query temperature's beta and floor (beta 0: none)."""
    from archcalc.hf.export_parts import _rope

    embed = lowered.root.find("embed")
    temps = [n.attrs.temperature for _, n in lowered.root.walk() if getattr(n.attrs, "temperature", None) is not None]
    params = _rope(embed.attrs, binding)
    if temps:
        floor, beta = temps[0][0], temps[0][1]
        return {"rope_parameters": params | {BETA: beta, ORIGINAL: int(floor)}}
    return {"rope_parameters": params | {BETA: 0.0, ORIGINAL: params.get(ORIGINAL, 1)}}
