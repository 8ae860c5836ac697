"""LongCat-Flash's zero-compute experts (the hook ``zero_compute_experts``): ``zero_expert_num`` identity experts that
the router scores beside the ``n_routed_experts`` real ones (transformers' LongcatFlashExperts; 0: none, the mixture
then an ordinary one). A token's slot routed to a zero expert adds the token's input times the slot's weight:
no parameters and no matmul FLOPs. transformers 5 allocates the zero experts' gate_up_proj rows all the same (never
used), so the bundled spec counts them (``zero_gate_up``) as transformers builds them.

>>> from archcalc.hf.jsonfile import parse_text
>>> from archcalc.hf.build import build
>>> spec = build(parse_text('{"model_type": "longcat_flash", "zero_expert_num": 0}'))
>>> spec.model.blocks[0].mlp.zero_experts is None
True
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from archcalc.hf.reader import Reader


def zero_compute_experts(r: Reader, draft: Any) -> None:
    """Also LongcatFlashConfig's ``qk_head_dim``, a field of its own: null is qk_nope_head_dim + qk_rope_head_dim; another
    width makes transformers build q_b_proj that wide, and its forward fail."""
    width, whole = r.int("qk_head_dim", None, nullable=True), draft.values["d_head"] + draft.values["d_rope"]
    if width is not None and width != whole:
        raise r.fail("qk_head_dim", f"{width} is not modelled: transformers' {draft.family.hf_class} splits each query into "
                                    f"qk_nope_head_dim + qk_rope_head_dim = {whole} features, and its forward fails")
    zero = r.int("zero_expert_num", r.defaults["zero_expert_num"], minimum=0)
    mlp = draft.model["blocks"][0]["mlp"]
    if zero:
        draft.set("Z", zero, r.where("zero_expert_num", value=True))
        draft.set("K_real", real_slots(r, draft.values["K"], draft.values["E"], zero), r.where("zero_expert_num", value=True))
    else:  # none: an ordinary mixture
        for key in ("zero_experts", "zero_gate_up", "real_top_k"):
            mlp.pop(key, None)


def real_slots(r: Reader, top_k: int, experts: int, zero: int) -> int:
    """The slots of a token's top_k that land on real experts, for the active count and the FLOPs: top_k · E / (E + Z),
    their share under even routing (LongCat-Flash-Chat: 12 · 512 / 768 = 8, the average its router's bias is tuned to
    keep); where that is not whole, the nearest count (at least 1, at most top_k and E), said in a note."""
    share = Fraction(top_k * experts, experts + zero)
    real = min(max(1, round(share)), top_k, experts)
    if real != share:
        r.notes.append(f"the active parameters and FLOPs count {real} real experts a token (real_top_k, K_real): the even "
                       f"share top_k · E / (E + Z) = {share.numerator}/{share.denominator} is not whole; --set K_real to change it")
    return real
