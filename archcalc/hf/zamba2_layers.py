"""Zamba2's layers: every layer a Mamba2 layer, those ``layers_block_type`` marks ``hybrid`` running a shared
transformer block first (the spec's second stack, ``hybrid_blocks``, with ``La`` layers); the hook ``zamba2_layers``
reads the list (``mamba``, its older name, is ``linear_attention``), or transformers' default list of 54 layers where it
is null, and ``use_mem_rope`` (rotary positions on the shared attention, or none). ``zamba2_keys`` writes both back.

>>> from archcalc.hf.jsonfile import parse_text
>>> from archcalc.hf.build import build
>>> spec = build(parse_text('{"model_type": "zamba2", "num_hidden_layers": 4, '
...                         '"layers_block_type": ["mamba", "hybrid", "mamba", "hybrid"]}'))
>>> [b.repeat.text for b in spec.model.blocks], spec.model.layer_order
(['L - La', 'La'], ['mamba_blocks', 'hybrid_blocks'])
"""

from __future__ import annotations

from typing import Any

from archcalc.errors import UsageError
from archcalc.hf.mixer_layers import LEGACY_LAYER_TYPES, place_mixer_layers
from archcalc.hf.reader import MISSING, Reader
from archcalc.hf.windows import MAX_LISTED, listed_layers
from archcalc.ir.attrs import Block, SharedBlock

#: a layer type -> whether the layer is a Mamba2 layer alone (else a hybrid layer: the shared block, then Mamba2)
ZAMBA2_TYPES = {"linear_attention": True, "hybrid": False}


def default_block_types() -> list[str]:
    """Zamba2Config's layers when ``layers_block_type`` is null: 54, the shared block at 6, 12, ..., 42, 47 and 51."""
    mamba = "linear_attention"
    return [mamba] + ([mamba] * 5 + ["hybrid"]) * 7 + [mamba] * 4 + ["hybrid"] + [mamba] * 3 + ["hybrid"] + [mamba] * 2


def zamba2_layers(r: Reader, draft: Any) -> None:
    layers, given = draft.values["L"], r.get("layers_block_type")
    if given in (MISSING, None):
        kinds = [ZAMBA2_TYPES[kind] for kind in default_block_types()]
        if layers != len(kinds):
            raise r.fail("num_hidden_layers", f"{layers} layers, but with no layers_block_type transformers' Zamba2Config "
                                              f"lists its own {len(kinds)} (and refuses another number): give the list")
    else:  # a list as long as the file that holds it: its length is checked before anything is built from it
        kinds = _kinds(r, given, layers)
        listed_layers(r, draft, "Mamba2 and hybrid layers", None, "layers_block_type")
    place_mixer_layers(r, draft, kinds, 1 if len(set(kinds)) == 1 else None, "layers_block_type")
    draft.decls.setdefault("La", {}).pop("default", None)  # the config's count, not the bundled cycle's formula of L
    _untied_copies(r, draft)
    _derived_keys(r, draft, [i for i, mamba in enumerate(kinds) if not mamba])
    rope = r.bool("use_mem_rope", r.defaults["use_mem_rope"], nullable=True)
    draft.put("embedding.position", {**draft.get("embedding.position"), "kind": "rotary"} if rope else {"kind": "none"})


def _kinds(r: Reader, given: Any, layers: int) -> list[bool]:
    """``layers_block_type``, one type a layer: whether each is a Mamba2 layer alone."""
    if not isinstance(given, list) or len(given) != layers:
        raise r.fail("layers_block_type", f"expected a list of {layers} layer types (one per layer, num_hidden_layers)")
    for i, kind in enumerate(given):
        if LEGACY_LAYER_TYPES.get(kind, kind) not in ZAMBA2_TYPES if isinstance(kind, str) else True:
            raise r.fail(("layers_block_type", i), f"{str(kind)[:40]!r} is not a Zamba2 layer type; expected mamba "
                                                   "(or linear_attention) or hybrid")
    return [ZAMBA2_TYPES[LEGACY_LAYER_TYPES.get(kind, kind)] for kind in given]


def zamba2_keys(lowered, binding) -> dict[str, Any]:
    """Each layer's type (``hybrid`` where its stack runs the shared block) and whether the shared attention rotates."""
    stacks = {c.name: c for c in lowered.root.children if isinstance(c.attrs, Block)}
    layers = sum(int(c.repeat.xreplace(binding.numeric())) for c in stacks.values())
    if layers > MAX_LISTED:  # the config lists every layer: bounded, as the importer bounds what it reads
        raise UsageError(f"{layers:,} layers: the config would list each layer's type, and export-hf lists at most "
                         f"{MAX_LISTED:,}")
    hybrid = {name for name, c in stacks.items() if any(isinstance(k.attrs, SharedBlock) for k in c.children)}
    order = lowered.root.attrs.layer_order or [next(iter(stacks))]
    embed = lowered.root.find("embed")
    return {"layers_block_type": ["hybrid" if order[i % len(order)] in hybrid else "mamba" for i in range(layers)],
            "use_mem_rope": embed is not None and embed.attrs.position == "rotary"}


def _derived_keys(r: Reader, draft: Any, hybrid: list[int]) -> None:
    """The keys Zamba2Config derives, which a config may still give (its value then wins): each must be what the class
    derives, or transformers' Zamba2ForCausalLM fails to run (the concatenated input is 2d wide, the Mamba2 heads split
    the inner width, the hybrid layers find their adapters by these indices)."""
    v = draft.values
    if v["expand"] * v["d"] % v["ssm_heads"]:
        raise r.fail("n_mamba_heads", f"{v['ssm_heads']} heads do not split the Mamba2 layers' inner width mamba_expand × "
                                      f"hidden_size = {v['expand'] * v['d']}: transformers' Zamba2ForCausalLM fails to run it")
    derived = {"attention_hidden_size": 2 * v["d"], "mamba_headdim": v["expand"] * v["d"] // v["ssm_heads"],
               "hybrid_layer_ids": hybrid}
    for key, want in derived.items():
        given = r.get(key)
        if given not in (MISSING, None, "auto") and given != want:
            raise r.fail(key, f"{str(given)[:40]}, but Zamba2Config derives {str(want)[:40]} here; transformers' "
                              "Zamba2ForCausalLM fails to run another")


def _untied_copies(r: Reader, draft: Any) -> None:
    """transformers 5 ties Zamba2's shared blocks only where it ties the embeddings (tie_word_embeddings): untied, each
    hybrid layer holds a block of its own, with the adapters of every layer its block serves (counted so)."""
    if r.bool("tie_word_embeddings", r.defaults["tie_word_embeddings"], nullable=True):
        return
    hybrid = next((stack for stack in draft.model["blocks"] if "shared" in stack), None)
    if hybrid is None:
        return
    hybrid["shared"]["copies"] = "La"
    # M blocks serve La layers in turn: La % M of them serve floor(La / M) + 1 layers, the others floor(La / M)
    hybrid["shared"]["adapter_copies"] = "(La % M) * (floor(La / M) + 1) ** 2 + (M - La % M) * floor(La / M) ** 2"
    r.notes.append("tie_word_embeddings is false: transformers then ties no shared block either, so each hybrid layer "
                   "holds its own copy (and its block's adapters), as counted")
