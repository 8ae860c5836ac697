"""Per-layer settings from a config: which layers leave out rotary positions (NoPE), and which slide. Hooks
(:mod:`archcalc.hf.hooks` registers them):

- ``no_rope_layers``: ``no_rope_layers`` (1: the layer rotates, 0: it does not), else one layer in every
  ``no_rope_layer_interval`` without (the last of each group), as transformers fills it in;
- ``sliding_window_on_nope_layers``: ``layer_types``, else, with ``use_sliding_window`` and a ``sliding_window``, the
  layers without rotary positions slide (transformers' default layer types for such a config);
- ``sliding_window_pattern``: ``layer_types``, else every ``sliding_window_pattern``-th layer global and the others
  sliding (Gemma 3: five local layers, then a global one; every layer sliding where the pattern is longer than the
  stack, as transformers builds it).
- ``global_nope_layers``: the same layers, and rotary positions on the sliding layers alone: the global ones attend
  without them where there is a window ("global NoPE", EXAONE 4); every layer rotates where there is none;
- ``sliding_rope_layers``: the same, but no layer rotates where there is no window (Cohere 2's layers rotate only
  with a window of their own).

Patterns are written as their shortest cycle over the layers (``_period``), as the sliding windows' are, found from
a rule's first two cycles (:func:`~archcalc.hf.windows.listed_layers`), never from a list as long as the stack.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from archcalc.hf.reader import MISSING, Reader
from archcalc.hf.windows import MAX_PATTERN, _apply, _given, _period, _window, every_nth, listed_layers

Rule = tuple[int | None, Callable[[int], Any], str]  # (period, None: listed; the setting of layer i; its config key)


def _rotation(r: Reader, draft: Any) -> Rule:
    """Which layers rotate their queries and keys, as a rule that lists nothing: (the period it repeats with, None
    where a list gives each layer's; whether layer i rotates; the config key it comes from)."""
    layers = draft.values["L"]
    given = r.get("no_rope_layers")
    if given in (MISSING, None) or given == []:  # Llama 4 fills in an empty list too (it tests the list's truth)
        interval = r.int("no_rope_layer_interval", r.defaults.get("no_rope_layer_interval", 4))
        return every_nth(interval, layers), lambda i: (i + 1) % interval != 0, "no_rope_layer_interval"
    if not isinstance(given, list) or len(given) != layers:
        raise r.fail("no_rope_layers", f"expected a list of {layers} flags (one per layer, num_hidden_layers): "
                                       "1 where the layer uses rotary positions, 0 where it does not")
    for i, flag in enumerate(given):
        if isinstance(flag, bool) or flag not in (0, 1):
            raise r.fail(("no_rope_layers", i), f"expected 0 or 1, got {flag!r:.40}")
    r.get("no_rope_layer_interval")  # read, though the list decides
    return None, lambda i: given[i] == 1, "no_rope_layers"


def no_rope_layers(r: Reader, draft: Any) -> None:
    period, rotates, key = _rotation(r, draft)
    listed = listed_layers(r, draft, "layers with and without rotary positions", period, key)
    rotated = _period([rotates(i) for i in range(listed)])
    draft.put("block.attention.rotary_pattern", rotated if False in rotated else None)


def sliding_window_on_nope_layers(r: Reader, draft: Any) -> None:
    window, given = _window(r), r.get("layer_types")
    enabled = r.bool("use_sliding_window", r.defaults.get("use_sliding_window", False))
    if given not in (MISSING, None):
        pattern, key = _given(r, draft, given), "layer_types"
        if "local" in pattern and not enabled:
            raise r.fail("layer_types", "sliding_attention layers with use_sliding_window false are not modelled "
                                        "(transformers masks them with a window but gives the kernel none)")
    else:
        period, rotates, key = _rotation(r, draft)
        pattern = ["global"]  # no window: no layer slides, and nothing is listed
        if enabled and window is not None:
            listed = listed_layers(r, draft, "sliding layers where there are no rotary positions", period, key)
            pattern = _period(["global" if rotates(i) else "local" for i in range(listed)])
    if "local" in pattern and window is None:
        raise r.fail("sliding_window", "expected a window for the sliding_attention layers, got none")
    _apply(r, draft, window, pattern, key)


def sliding_window_pattern(r: Reader, draft: Any) -> None:
    given, window, layers = r.get("layer_types"), _window(r), draft.values["L"]
    if given not in (MISSING, None):
        pattern, key = _given(r, draft, given), "layer_types"
    else:  # transformers: layer i is global where (i + 1) % every == 0, so every layer slides where every > layers
        every, key = r.int("sliding_window_pattern", r.defaults.get("sliding_window_pattern", 6)), "sliding_window_pattern"
        period = every_nth(every, layers)
        if window is None:
            pattern = ["global"]  # nothing slides: the pattern is not built, however long
        elif period > MAX_PATTERN:
            raise r.fail(key, f"one full-attention layer in every {every:,} of {layers:,} layers: the layers' sliding/full "
                              f"pattern repeats only every {period:,} layers; at most {MAX_PATTERN} are modelled")
        elif period == 1:
            pattern = ["global"] if every == 1 else ["local"]
        else:
            pattern = ["local"] * (period - 1) + ["global"]
    _apply(r, draft, window, pattern, key)


def global_nope_layers(r: Reader, draft: Any) -> None:
    _rotary_on_sliding_layers(r, draft, [True])


def sliding_rope_layers(r: Reader, draft: Any) -> None:
    _rotary_on_sliding_layers(r, draft, [False])
    if _window(r) is None:
        r.notes.append(f"sliding_window null: transformers' {draft.family.hf_class} builds, but its forward fails (it "
                       "makes a sliding-window mask whatever the layers); counted as built, no layer rotating")


def _rotary_on_sliding_layers(r: Reader, draft: Any, without_window: list[bool]) -> None:
    """:func:`sliding_window_pattern`'s layers, rotary positions on the sliding ones alone; without a window, on every
    layer (``[True]``: EXAONE 4) or on none (``[False]``: Command R7B's, whose layers rotate only with a window)."""
    sliding_window_pattern(r, draft)
    pattern = draft.get("block.attention.pattern")
    pattern = ["global"] if pattern in (MISSING, None) else pattern  # none: no layer slides
    rotated = without_window if _window(r) is None else [kind == "local" for kind in pattern]
    draft.put("block.attention.rotary_pattern", rotated if rotated != [True] else None)
