"""Source template for Mamba's (Mamba1's) mixer (``templates/mamba.py``): the ``Mamba`` class, a sequential selective
scan over a sequence and a one-token ``step``, with the ``MixerCache`` of ``templates/mixer.py``.

The algorithm is transformers' MambaMixer slow path, and its matrix products are the FLOPs convention that
``archcalc flops`` counts: the in_proj, x_proj, dt_proj and out_proj projections, the depthwise conv (``F.conv1d``)
and one read-out ``state @ C`` a token; the discretisation and the state update are element-wise."""

from __future__ import annotations

from typing import TYPE_CHECKING

from archcalc.codegen.mixer import emit_mixer, mixer_names
from archcalc.ir import Component
from archcalc.ir.attrs import Mamba

if TYPE_CHECKING:
    from archcalc.codegen.emitter import Emitter


def mamba_class(em: Emitter, mixer: Component, p: str) -> str:
    """The Mamba class of a stack (``p``: its config fields' prefix); its name."""
    a = mixer.attrs
    assert isinstance(a, Mamba)
    fields = {"inner": (a.inner, "I: the mixer's inner width"), "state": (a.state, "N: state size per channel"),
              "conv": (a.conv, "K: conv taps"), "dt_rank": (a.dt_rank, "R: rank of the step sizes' projection")}
    if a.dt_bc_norm is not None:
        what = "norms" if a.dt_bc_norm_weights else "weightless norms"
        fields["norm_eps"] = (a.dt_bc_norm, f"epsilon of the {what} of dt, B and C")
    names = mixer_names(em, mixer, p, fields)
    plain = em.lowered.root.attrs.init.mixer == "plain"  # Jamba's: the conv normal(0, init_std), no dt init of its own
    if plain:
        names["cfg.init_std"] = em.field("init_std", float(em.lowered.root.attrs.init.std), "")
    return emit_mixer(em, "mamba", "Mamba", p, names, "Mamba's mixer (selective scan): in_proj to x and the gate z; a "
                      "causal depthwise conv over x; each token's step sizes, B and C from x; the selective state-space "
                      "scan, one token after another from a zero or a cached state; the gate; out_proj.",
                      {"dt_bc_norm": a.dt_bc_norm is not None, "dt_bc_norm_weights": a.dt_bc_norm_weights,
                       "plain_init": plain})
