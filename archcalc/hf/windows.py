"""Sliding-window attention from a config: a window and the shortest repeating pattern of local/global layers,
written into ``model.block.attention`` (``window`` and ``pattern``; none when no layer slides). Three hooks, as
transformers' families configure it:

- ``sliding_window_every_layer``: every layer slides when ``sliding_window`` is set (Mistral, Mixtral, Phi-3);
- ``sliding_window_alternate``: ``layer_types``, else local and global layers alternating, the first local
  (Gemma 2, gpt-oss);
- ``sliding_window_qwen``: ``use_sliding_window`` turns it on, for the layers from ``max_window_layers`` on, unless
  ``layer_types`` says otherwise (Qwen2, Qwen3).

A config's per-layer settings are never listed for every layer of a deep stack: a rule such as "every n-th layer"
repeats, so the first two cycles of it say everything (:func:`listed_layers`), and a stack that is the same in every
layer is not listed at all. What cannot be learnt from at most :data:`MAX_LISTED` layers is refused, at the key that
asks for it, before anything of that size is built.

>>> _period(["local", "global", "local", "global"])
['local', 'global']
>>> every_nth(6, 26), every_nth(2_000, 26), every_nth(10**18, 10**18)
(6, 1, 1000000000000000000)
"""

from __future__ import annotations

from typing import Any

from archcalc.hf.reader import MISSING, Reader

LAYER_TYPES = {"full_attention": "global", "attention": "global", "sliding_attention": "local"}
MAX_PATTERN = 1024  # layers in one period of a local/global pattern
MAX_LISTED = 100_000  # layers whose settings a hook lists one by one (where the layers differ)


def listed_layers(r: Reader, draft: Any, why: str, period: int | None = None, key: str = "num_hidden_layers") -> int:
    """How many leading layers a hook lists to learn a setting per layer (``why``): every layer, or, where the settings
    repeat every ``period`` layers, the first two periods, which hold the shortest cycle of the settings and of any
    stack's own layers among them (:func:`_period`). More than :data:`MAX_LISTED` is refused at ``key`` before any
    list is built, so a config with a billion layers is answered in a line."""
    layers = draft.values["L"]
    listed = layers if period is None or layers <= 2 * period else 2 * period
    if listed > MAX_LISTED:
        repeats = "do not repeat" if period is None or period >= layers else f"repeat only every {period:,} layers"
        raise r.fail(key, f"{layers:,} layers whose settings differ ({why}) and {repeats}; archcalc lists per-layer "
                          f"settings for at most {MAX_LISTED:,} layers")
    return listed


def every_nth(every: int, layers: int) -> int:
    """The period over ``layers`` layers of transformers' rule "layer i is marked where (i + 1) % every == 0" (Gemma 3's
    global layers, the NoPE layers of SmolLM3 and Llama 4, the MoE layers of Llama 4 and Qwen-MoE): ``every``, or 1
    where no layer or every layer is marked."""
    return every if 1 < every <= layers else 1


def how_many(flags: list[bool], period: int | None, layers: int) -> int:
    """How many of ``layers`` layers are flagged, where ``flags`` lists the first of them (:func:`listed_layers`) and
    the flags repeat every ``period`` layers (None: ``flags`` lists every layer)."""
    if period is None or len(flags) == layers:
        return sum(flags)
    whole, rest = divmod(layers, period)
    return whole * sum(flags[:period]) + sum(flags[:rest])


def sliding_window_every_layer(r: Reader, draft: Any) -> None:
    _apply(r, draft, _window(r), ["local"], "sliding_window")


def sliding_window_alternate(r: Reader, draft: Any) -> None:
    given = r.get("layer_types")
    pattern = _given(r, draft, given) if given not in (MISSING, None) else ["local", "global"]
    _apply(r, draft, _window(r), pattern, "layer_types")


def sliding_window_qwen(r: Reader, draft: Any) -> None:
    window = _window(r)
    window = window if r.bool("use_sliding_window", r.defaults.get("use_sliding_window", False)) else None
    layers, given = draft.values["L"], r.get("layer_types")
    if given not in (MISSING, None):
        pattern, key = _given(r, draft, given), "layer_types"
    else:  # transformers: sliding from layer max_window_layers on, where there is a window
        first, key = min(r.int("max_window_layers", r.defaults["max_window_layers"], minimum=0), layers), "max_window_layers"
        if window is None or first == layers:
            pattern = ["global"]  # no layer slides: max_window_layers changes nothing, however large
        elif first == 0:
            pattern = ["local"]
        elif layers > MAX_PATTERN:  # full, then sliding: one cycle as long as the stack
            given_here = "" if r.get(key) is not MISSING else " (the default of the config class)"
            raise r.fail(key, f"full attention in the first {first:,}{given_here} of {layers:,} layers, sliding after: a "
                              f"pattern of {layers:,} layers; at most {MAX_PATTERN} are modelled")
        else:
            pattern = ["global"] * first + ["local"] * (layers - first)
    _apply(r, draft, window, pattern, key)


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


def _apply(r: Reader, draft: Any, window: int | None, pattern: list[str], key: str) -> None:
    """Write the window and the pattern (a cycle over the layers, at most MAX_PATTERN long: else refused at ``key``,
    the config key the pattern comes from)."""
    if window is None or "local" not in pattern[: draft.values["L"]]:
        window = pattern = None
    elif len(pattern) > MAX_PATTERN:
        raise r.fail(key, f"the layers' sliding/full pattern repeats only every {len(pattern):,} layers; at most "
                          f"{MAX_PATTERN} are modelled")
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
