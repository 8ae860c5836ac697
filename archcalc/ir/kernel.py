"""How the generated module computes each attention layer, decided once at lowering.

The choices change no parameter and no matmul FLOP, but they change what the module keeps for backward (the
activation estimate) and what codegen writes, so both read them off the IR instead of deciding again:

- ``explicit_softmax``: sinks (a learned logit per head that takes a share of the softmax) and soft-capped scores
  (cap · tanh(score / cap)) need the scores themselves, so the two products are written out (``q @ kᵀ``, then
  ``probs @ v``: the same two matmuls, the same FLOPs) instead of ``F.scaled_dot_product_attention``;
- ``kv_sharing`` under grouped-query attention: SDPA shares each key/value head among its queries itself
  (``enable_gqa=True``: no copies, flash attention keeps working), ``sdpa``, only without a mask (no window, no
  position bias), without a written-out softmax, with equal key and value widths, and for heads flash attention
  takes (at most 256 wide); otherwise k and v are repeated to every head first, ``repeat``;
- ``position_bias``: an additive bias on the scores (T5's relative positions, the causal mask in it), given to SDPA
  as ``attn_mask``.

>>> attention_kernel(heads=32, kv_heads=8, head_width=128, value_width_differs=False, sinks=False, softcap=None,
...                  banded=False, position_bias=False)
{'explicit_softmax': False, 'kv_sharing': 'sdpa'}
>>> attention_kernel(heads=64, kv_heads=8, head_width=64, value_width_differs=False, sinks=True, softcap=None,
...                  banded=True, position_bias=False)["kv_sharing"]
'repeat'
"""

from __future__ import annotations

FLASH_MAX_HEAD_WIDTH = 256  # the widest head flash attention takes


def attention_kernel(heads: int, kv_heads: int, head_width: int, value_width_differs: bool, sinks: bool,
                     softcap: float | None, banded: bool, position_bias: bool) -> dict[str, bool | str]:
    """The kernel fields of an attention node (``explicit_softmax``, ``kv_sharing``) from its numbers at the size:
    ``heads``, ``kv_heads``, ``head_width``; ``value_width_differs``: the value width is another expression than the
    key width."""
    explicit = sinks or softcap is not None
    if heads == kv_heads:
        sharing = "none"
    elif not explicit and not position_bias and not banded and not value_width_differs and head_width <= FLASH_MAX_HEAD_WIDTH:
        sharing = "sdpa"
    else:
        sharing = "repeat"
    return {"explicit_softmax": explicit, "kv_sharing": sharing}
