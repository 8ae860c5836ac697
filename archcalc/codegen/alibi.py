"""Source template for ALiBi positions (Press et al. 2022, "Train Short, Test Long"): no position embeddings; every
attention layer adds slope_h · (j - i) to the score of query i over key j in head h, a penalty linear in the distance.

The model computes the bias once per forward, for the tokens it runs over every token they may see (the cached ones
too), with the causal mask in it, and hands it to every layer as SDPA's ``attn_mask``. It has no parameters and no
buffers. transformers' BLOOM adds slope_h · j and MPT slope_h · (j - S + 1) instead: each differs from slope_h · (j - i)
by a constant per query, which the softmax does not see.

Falcon (Falcon-RW, ``alibi: true``) differs in two ways, which its spec asks for (``position.form: bfloat16_scaled``): transformers'
``build_alibi_tensor`` rounds the slopes and slope_h · j to bfloat16 (as the original Falcon-RW code did), and the bias
is divided by sqrt(head width) like the scores (BLOOM adds it unscaled). That is its SDPA path, the default; its eager
path adds the bias twice (to the scores, and again with the mask), which the original model did not.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from archcalc.codegen.errors import UnsupportedError
from archcalc.codegen.template import unit
from archcalc.ir import Component

if TYPE_CHECKING:
    from archcalc.codegen.emitter import Emitter

ALIBI = unit("alibi", "Alibi")  # templates/alibi.py
FALCON_ALIBI = unit("alibi", "FalconAlibi", names={"FalconAlibi": "Alibi"})


def emit_alibi(em: Emitter, embed: Component, attns: list[Component]) -> None:
    """Declare ALiBi's config fields (the heads, the slopes' exponent) and add the ``Alibi`` class (Falcon's where the
    position's form says so). One bias serves every layer, so every stack has the same heads; it holds the causal mask, so the
    layers are causal and dense."""
    heads = {em.value(a.attrs.heads) for a in attns}
    if len(heads) != 1 or any(not a.attrs.causal or a.attrs.banded for a in attns):
        raise UnsupportedError("codegen generates ALiBi for causal, dense attention with one head count in every stack only")
    em.field("heads", attns[0].attrs.heads, f"{attns[0].attrs.heads}: attention heads")
    em.field("alibi_max_bias", float(embed.attrs.alibi_max_bias), "ALiBi's slopes are 2^(-alibi_max_bias * k / heads)")
    if embed.attrs.alibi_form == "bfloat16_scaled":  # the spec's position.form
        if len({em.value(a.attrs.head_width) for a in attns}) != 1:
            raise UnsupportedError("codegen generates Falcon's ALiBi for one head width in every stack only")
        em.field("head_width", attns[0].attrs.head_width, f"{attns[0].attrs.head_width}: width of one head")
        em.add(FALCON_ALIBI, helper=True)
    else:
        em.add(ALIBI, helper=True)
