"""Per-layer settings from a config: which layers leave out rotary positions (NoPE), and which slide. Hooks
(:mod:`archcalc.hf.hooks` registers them):

- ``no_rope_layers``: ``no_rope_layers`` (1: the layer rotates, 0: it does not), else one layer in every
  ``no_rope_layer_interval`` without (the last of each group), as transformers fills it in;
- ``sliding_window_on_nope_layers``: ``layer_types``, else, with ``use_sliding_window`` and a ``sliding_window``, the
  layers without rotary positions slide (transformers' default layer types for such a config);
- ``sliding_window_pattern``: ``layer_types``, else every ``sliding_window_pattern``-th layer global and the others
  sliding (Gemma 3: five local layers, then a global one).

Patterns are written as their shortest cycle over the layers (``_period``), as the sliding windows' are.
"""

from __future__ import annotations

from typing import Any

from archcalc.hf.reader import MISSING, Reader
from archcalc.hf.windows import MAX_LISTED, _apply, _given, _period, _window, listed_layers


def _rotated(r: Reader, draft: Any) -> list[bool]:
    """For each layer: does it rotate its queries and keys?"""
    layers = draft.values["L"]
    given = r.get("no_rope_layers")
    if given in (MISSING, None) or given == []:  # Llama 4 fills in an empty list too (it tests the list's truth)
        interval = r.int("no_rope_layer_interval", r.defaults.get("no_rope_layer_interval", 4))
        if interval > layers:  # every layer rotates: the pattern is one True (a caller that lists layers bounds them)
            return [True] * min(layers, MAX_LISTED)
        layers = listed_layers(r, draft, "no rotary positions on every no_rope_layer_interval-th layer")
        return [(i + 1) % interval != 0 for i in range(layers)]
    if not isinstance(given, list) or len(given) != layers:
        raise r.fail("no_rope_layers", f"expected a list of {layers} flags (one per layer, num_hidden_layers): "
                                       "1 where the layer uses rotary positions, 0 where it does not")
    for i, flag in enumerate(given):
        if isinstance(flag, bool) or flag not in (0, 1):
            raise r.fail(("no_rope_layers", i), f"expected 0 or 1, got {flag!r:.40}")
    r.get("no_rope_layer_interval")  # read, though the list decides
    return [flag == 1 for flag in given]


def no_rope_layers(r: Reader, draft: Any) -> None:
    rotated = _rotated(r, draft)
    pattern = _period(rotated) if False in rotated else None
    draft.put("block.attention.rotary_pattern", pattern)


def sliding_window_on_nope_layers(r: Reader, draft: Any) -> None:
    window, given = _window(r), r.get("layer_types")
    enabled = r.bool("use_sliding_window", r.defaults.get("use_sliding_window", False))
    if given not in (MISSING, None):
        pattern = _given(r, draft, given)
        if "local" in pattern and not enabled:
            raise r.fail("layer_types", "sliding_attention layers with use_sliding_window false are not modelled "
                                        "(transformers masks them with a window but gives the kernel none)")
    else:
        pattern = _period(["local" if enabled and window is not None and not rotates else "global"
                           for rotates in _rotated(r, draft)])
    if "local" in pattern and window is None:
        raise r.fail("sliding_window", "expected a window for the sliding_attention layers, got none")
    _apply(r, draft, window, pattern, given)


def sliding_window_pattern(r: Reader, draft: Any) -> None:
    given = r.get("layer_types")
    if given not in (MISSING, None):
        pattern = _given(r, draft, given)
    else:
        every = r.int("sliding_window_pattern", r.defaults.get("sliding_window_pattern", 6))
        pattern = ["local"] * (every - 1) + ["global"]  # layer i is global where (i + 1) % every == 0
    _apply(r, draft, _window(r), pattern, given)
