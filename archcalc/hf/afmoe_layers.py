"""AFMoE's layers (the hook ``afmoe_layers``, Arcee's Trinity models as transformers' AfmoeForCausalLM builds them):
the first ``num_dense_layers`` layers have a dense SwiGLU MLP (``blocks.0``), the others a mixture of experts
(``blocks.1``) with ``num_shared_experts`` shared experts as one MLP; each layer attends to a sliding window of
``sliding_window`` keys with rotary positions (``sliding_attention``) or to every key without positions
(``full_attention``), as ``layer_types`` says, else one full layer in every ``global_attn_every_n_layers`` (the last of
each group), as AfmoeConfig fills it in. Each stack's ``pattern`` and ``rotary_pattern`` are the shortest cycle of its
own layers' kinds: one period of the rule, or the listed layers (at most :data:`~archcalc.hf.windows.MAX_LISTED`).

>>> from archcalc.hf.jsonfile import parse_text
>>> from archcalc.hf.build import build
>>> spec = build(parse_text('{"model_type": "afmoe", "num_hidden_layers": 9, "num_dense_layers": 1}'))
>>> [(b.repeat.text, b.attention.pattern, b.attention.rotary_pattern) for b in spec.model.blocks]
[('L_dense', ['local'], None), ('L - L_dense', ['local', 'local', 'global', 'local'], [True, True, False, True])]
"""

from __future__ import annotations

from typing import Any

from archcalc.hf.moe_layers import dense_and_moe_stacks
from archcalc.hf.reader import MISSING, Reader
from archcalc.hf.windows import MAX_PATTERN, _given, _period, _window, every_nth, listed_layers


def afmoe_layers(r: Reader, draft: Any) -> None:
    layers = draft.values["L"]
    dense = min(r.int("num_dense_layers", r.defaults["num_dense_layers"], minimum=0), layers)
    shared = r.int("num_shared_experts", r.defaults["num_shared_experts"], minimum=0)
    window, given = _window(r), r.get("layer_types")
    if given not in (MISSING, None):
        r.get("global_attn_every_n_layers")  # read, though the list decides
        listed_layers(r, draft, "sliding and full attention layers", None, "layer_types")  # bounded before it is read
        kinds, period, key = _given(r, draft, given), None, "layer_types"  # the shortest cycle of the layers' kinds
    else:
        every = r.int("global_attn_every_n_layers", r.defaults["global_attn_every_n_layers"], minimum=1)
        period, key = every_nth(every, layers), "global_attn_every_n_layers"
        if period > MAX_PATTERN:
            raise r.fail(key, f"one full-attention layer in every {every:,} of {layers:,} layers: the pattern repeats only "
                              f"every {period:,} layers; at most {MAX_PATTERN} are modelled")
        kinds = None
    dense_and_moe_stacks(r, draft, dense, shared, ("num_dense_layers", "num_shared_experts"))
    spans = [(0, dense)] * bool(dense) + [(dense, layers)] * (dense < layers)
    for stack, (start, stop) in zip(draft.model["blocks"], spans, strict=True):
        if kinds is not None:  # listed: the shortest cycle of the stack's own layers
            pattern = _period([kinds[(start + j) % len(kinds)] for j in range(stop - start)])
        else:  # the rule's cycle from the stack's first layer (shorter only where a shorter one divides it)
            cycle = ["global" if (start + j + 1) % every == 0 else "local" for j in range(min(stop - start, period))]
            shortest = _period(cycle)
            pattern = shortest if len(cycle) % len(shortest) == 0 else cycle
        attention = stack["attention"]
        # the sliding layers rotate, the full ones have no positions; without a window nothing slides (transformers'
        # sliding mask then fails, but the layers build and rotate as their type says)
        attention["rotary_pattern"] = [kind == "local" for kind in pattern] if "global" in pattern else None
        slides = window is not None and "local" in pattern
        attention["window"], attention["pattern"] = (window, pattern) if slides else (None, None)
        stack["attention"] = {k: v for k, v in attention.items() if v is not None}
    if window is None and ("local" in kinds if kinds is not None else every > 1):
        r.notes.append(f"sliding_window null: transformers' {draft.family.hf_class} builds, but its sliding layers' mask "
                       "fails; counted as built")
