"""Which layers of a hybrid decoder mix tokens by a state mixer and which by attention: the hook
``linear_attention_layers`` reads Qwen3.5's and Qwen3-Next's ``layer_types`` (``linear_attention``, ``full_attention``),
else every ``full_attention_interval``-th layer attention and the others linear attention, as transformers fills it in;
``attention_layer_indices`` Bamba's ``attn_layer_indices``.

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

from typing import Any

from archcalc.hf.reader import MISSING, Reader
from archcalc.hf.windows import _period, every_nth, how_many, listed_layers

LINEAR_ATTENTION = {"linear_attention": True, "full_attention": False}  # a layer type -> whether a mixer mixes it


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
    given = r.get("attn_layer_indices")
    indices = set()
    if given not in (MISSING, None):
        if not isinstance(given, list):
            raise r.fail("attn_layer_indices", "expected a list of layer indices (the attention layers)")
        for i, index in enumerate(given):
            if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < layers:
                raise r.fail(("attn_layer_indices", i), f"expected a layer index from 0 to {layers - 1}, got {index!r:.40}")
        indices = set(given)
    period = 1 if len(indices) in (0, layers) else None
    listed = listed_layers(r, draft, "Mamba2 and attention layers", period, "attn_layer_indices")
    place_mixer_layers(r, draft, [i not in indices for i in range(listed)], period, "attn_layer_indices")


def layer_kinds(r: Reader, given: Any, layers: int, table: dict[str, bool]) -> list[bool]:
    """``layer_types`` read through ``table`` (a type -> whether a state mixer mixes that layer), one per layer."""
    if not isinstance(given, list) or len(given) != layers:
        raise r.fail("layer_types", f"expected a list of {layers} layer types (one per layer, num_hidden_layers)")
    for i, kind in enumerate(given):
        if not isinstance(kind, str) or kind not in table:
            raise r.fail(("layer_types", i), f"{str(kind)[:40]!r} is not modelled; expected {' or '.join(table)}")
    return [table[kind] for kind in given]


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
