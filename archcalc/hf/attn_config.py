"""The hook for a config that nests its attention settings in an ``attn_config`` mapping (MosaicML's MPT), which a
flat ``hf.keys`` table cannot say: each setting is read at its nested place, and one that would change the model
transformers builds, or that archcalc does not generate, is refused there with one line saying why."""

from __future__ import annotations

from typing import Any

from archcalc.hf.family import Draft
from archcalc.hf.reader import GENERIC_FALSY, GENERIC_KEYS, MISSING, Reader, _show

# setting -> (the values archcalc models, what another value would mean); values as MptAttentionConfig takes them
FIXED: dict[str, tuple[tuple[Any, ...], str]] = {
    "attn_type": (("multihead_attention",), "grouped or multi-query attention, which transformers' MptAttention does not build"),
    "qk_ln": ((False,), "a LayerNorm on the queries and keys, which archcalc does not generate for this config"),
    "clip_qkv": ((None,), "the q, k, v projection clamped to ±clip_qkv, which archcalc does not generate"),
    "prefix_lm": ((False,), "a prefix-LM mask (bidirectional over the prompt)"),
    "attn_uses_sequence_id": ((False,), "attention limited to each packed sequence"),
    "alibi": ((True,), "learned positions instead of ALiBi (transformers' MPT always adds ALiBi)"),
    "alibi_bias_max": ((8,), "ALiBi slopes 2^(-alibi_bias_max·k/H), which transformers' MPT builds with 8 whatever this says"),
}
IGNORED = {"attn_pdrop": "training only", "attn_impl": "the attention kernel, not the model"}


def nested_attn_config(r: Reader, draft: Draft) -> None:
    """``attn_config``: ``softmax_scale`` sets the attention's score scale (null: 1/sqrt(head width)); the settings in
    :data:`FIXED` must hold a modelled value; dropout, the kernel and the generic keys transformers' ``to_dict()`` writes
    into the nested config are ignored; an unknown setting is refused."""
    config = r.get("attn_config")
    if config is MISSING or config is None:
        return
    if not isinstance(config, dict):
        raise r.fail("attn_config", f"expected a mapping of attention settings, got {_show(config)}")
    for key, value in config.items():
        if key in FIXED:
            allowed, why = FIXED[key]
            if not any(value == a and type(value) is type(a) for a in allowed):
                shown = " or ".join(_show(a) for a in allowed)
                raise r.fail(("attn_config", key), f"{_show(value)} is not modelled ({why}); archcalc supports {shown} here")
        elif key == "softmax_scale":
            scale = r.real(("attn_config", key), None, nullable=True)
            if scale is not None and scale <= 0:
                raise r.fail(("attn_config", key), f"expected a number above 0 (or null), got {_show(value)}")
            draft.put("block.attention.scale", scale)
        elif key in GENERIC_FALSY and value not in (None, False, 0, {}, []):
            raise r.fail(("attn_config", key), f"{_show(value)} is not modelled ({GENERIC_FALSY[key]})")
        elif key not in IGNORED and key not in GENERIC_KEYS and key not in GENERIC_FALSY:  # to_dict() writes the generic ones
            known = ", ".join(sorted([*FIXED, *IGNORED, "softmax_scale"]))
            raise r.fail(("attn_config", key), f"unknown attention setting; archcalc cannot tell whether it changes the "
                                               f"architecture, so it does not guess (known: {known})")
