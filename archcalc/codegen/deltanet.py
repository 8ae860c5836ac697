"""Source templates for Gated DeltaNet (``templates/deltanet.py``), Qwen3-Next's and Qwen3.5's linear attention: its
output norm, the chunked gated delta rule and the ``GatedDeltaNet`` class, with its one-token ``step``; and for LFM2's
gated short convolution (``templates/short_conv.py``).

The products are the FLOPs convention that ``archcalc flops`` counts (:class:`archcalc.ir.attrs.GatedDeltaNet`): the
projections, the depthwise conv and in the chunked form six products a chunk (``@`` on the shapes in the comments;
the UT transform's triangular solve is no matmul); a decode step's three products with the state. The chunk size is
the spec's ``chunk``, else 64 (transformers')."""

from __future__ import annotations

from typing import TYPE_CHECKING

from archcalc.codegen.mixer import CUMSUM, emit_mixer, mixer_names, norm_eps
from archcalc.codegen.template import unit
from archcalc.ir import Component
from archcalc.ir.attrs import GatedDeltaNet, ShortConv

if TYPE_CHECKING:
    from archcalc.codegen.emitter import Emitter

HELPERS = "\n\n\n".join(unit("deltanet", name) for name in ("l2norm", "DeltaNorm", "chunk_delta_rule"))


def deltanet_class(em: Emitter, mixer: Component, p: str) -> str:
    """The GatedDeltaNet class of a stack (``p``: its config fields' prefix) and the helpers it uses; its name."""
    a = mixer.attrs
    assert isinstance(a, GatedDeltaNet)
    fields = {"key_heads": (a.key_heads, "Hk: query/key heads"),
              "value_heads": (a.heads, "Hv: value heads (each query/key head serves Hv / Hk)"),
              "key_width": (a.key_width, "Dk: query/key head width"), "value_width": (a.value_width, "Dv: value head width"),
              "conv": (a.conv, "K: conv taps"), "chunk": (a.chunk_size, "Q: tokens per chunk of the delta rule")}
    names = mixer_names(em, mixer, p, fields)
    names["cfg.norm_eps"] = norm_eps(em, next(c for c in mixer.children if c.name == "norm"), p)
    fused = any(c.name == "in_proj_qkvz" for c in mixer.children)
    return emit_mixer(em, "deltanet", "GatedDeltaNet", p, names, "Gated DeltaNet (linear attention with a delta-rule "
                      "state): in_proj to q k v, the output gate z, each token's write strength b and decay a; a causal "
                      "depthwise conv over q k v; the gated delta rule, in chunks over a sequence or one token at a time "
                      "from a cached state; a gated RMSNorm per head; out_proj.", {"fused": fused}, (CUMSUM, HELPERS))


def short_conv_class(em: Emitter, mixer: Component, p: str) -> str:
    """The ShortConv class of a stack (``p``: its config fields' prefix); its name."""
    a = mixer.attrs
    assert isinstance(a, ShortConv)
    names = mixer_names(em, mixer, p, {"conv": (a.conv, "K: conv taps")})
    return emit_mixer(em, "short_conv", "ShortConv", p, names, "LFM2's gated short convolution: in_proj to the gates B "
                      "and C and x; B·x through a causal depthwise conv, over a sequence or one token from a cached "
                      "window; times C; out_proj.")
