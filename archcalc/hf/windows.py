"""Sliding-window attention from a config: a window and the shortest repeating pattern of local/global layers,
written into ``model.block.attention`` (``window`` and ``pattern``; none when no layer slides). Three hooks, as
transformers' families configure it:

- ``sliding_window_every_layer``: every layer slides when ``sliding_window`` is set (Mistral, Mixtral, Phi-3);
- ``sliding_window_alternate``: ``layer_types``, else local and global layers alternating, the first local
  (Gemma 2, gpt-oss);
- ``sliding_window_qwen``: ``use_sliding_window`` turns it on, for the layers from ``max_window_layers`` on, unless
  ``layer_types`` says otherwise (Qwen2, Qwen3).

>>> _period(["local", "global", "local", "global"])
['local', 'global']
"""

from __future__ import annotations

from typing import Any

from archcalc.hf.reader import MISSING, Reader

LAYER_TYPES = {"full_attention": "global", "attention": "global", "sliding_attention": "local"}
MAX_PATTERN = 1024  # layers in one period of a local/global pattern
MAX_LISTED = 100_000  # layers whose settings a hook lists one by one (where the layers differ)


def listed_layers(r: Reader, draft: Any, why: str) -> int:
    """The number of layers, where a hook is about to list a setting per layer (``why``): bounded, so that a config
    with a billion layers is refused in a line instead of building a billion-long list."""
    layers = draft.values["L"]
    if layers > MAX_LISTED:
        raise r.fail("num_hidden_layers", f"{layers:,} layers whose settings differ ({why}); archcalc lists per-layer "
                                          f"settings for at most {MAX_LISTED:,} layers")
    return layers


def sliding_window_every_layer(r: Reader, draft: Any) -> None:
    _apply(r, draft, _window(r), ["local"], MISSING)


def sliding_window_alternate(r: Reader, draft: Any) -> None:
    given = r.get("layer_types")
    pattern = _given(r, draft, given) if given not in (MISSING, None) else ["local", "global"]
    _apply(r, draft, _window(r), pattern, given)


def sliding_window_qwen(r: Reader, draft: Any) -> None:
    window = _window(r)
    window = window if r.bool("use_sliding_window", r.defaults.get("use_sliding_window", False)) else None
    layers, given = draft.values["L"], r.get("layer_types")
    if given not in (MISSING, None):
        pattern = _given(r, draft, given)
    else:  # transformers: sliding from layer max_window_layers on
        first = min(r.int("max_window_layers", r.defaults["max_window_layers"], minimum=0), layers)
        if window is not None and 0 < first < layers and layers > MAX_PATTERN:
            raise r.fail("max_window_layers", f"full attention in the first {first} of {layers} layers, sliding after: "
                                              f"a pattern of {layers} layers; at most {MAX_PATTERN} are modelled")
        pattern = ["local"] if first == 0 else ["global"] * first + ["local"] * min(layers - first, MAX_PATTERN)
    _apply(r, draft, window, pattern, given)


def _window(r: Reader) -> int | None:
    return r.int("sliding_window", r.defaults.get("sliding_window"), nullable=True)


def _given(r: Reader, draft: Any, given: Any) -> list[str]:
    layers = draft.values["L"]
    if not isinstance(given, list) or len(given) != layers:
        raise r.fail("layer_types", f"expected a list of {layers} layer types (one per layer, num_hidden_layers)")
    for i, kind in enumerate(given):
        if not isinstance(kind, str) or kind not in LAYER_TYPES:
            raise r.fail(("layer_types", i), f"{str(kind)[:40]!r} is not modelled; expected full_attention or sliding_attention")
    return _period([LAYER_TYPES[k] for k in given])


def _apply(r: Reader, draft: Any, window: int | None, pattern: list[str], given: Any) -> None:
    if window is None or "local" not in pattern[: draft.values["L"]]:
        window = pattern = None
    elif len(pattern) > MAX_PATTERN:
        raise r.fail("layer_types" if given not in (MISSING, None) else "max_window_layers",
                     f"the layers' sliding/full pattern repeats only every {len(pattern)} layers; at most {MAX_PATTERN} are modelled")
    draft.put("block.attention.window", window)
    draft.put("block.attention.pattern", pattern)


def _period(kinds: list[str]) -> list[str]:
    """The shortest prefix whose repetition gives ``kinds`` (the prefix function, linear in the layers)."""
    border = [0] * len(kinds)
    for i in range(1, len(kinds)):
        k = border[i - 1]
        while k and kinds[i] != kinds[k]:
            k = border[k - 1]
        border[i] = k + (kinds[i] == kinds[k])
    return kinds[: len(kinds) - border[-1]] if kinds else kinds
