"""Source templates for Mamba2's mixer (``templates/mixer.py``): the layer's state for generation (``MixerCache``),
its gated RMSNorm, the chunked scan (SSD) and the ``Mamba2`` class, with its one-token ``step``.

The algorithm and its matrix products are the FLOPs convention that ``archcalc flops`` counts: the in and out
projections, the depthwise conv (``F.conv1d``), and in the chunked scan the four products within and between chunks
(``@`` on the shapes in the comments); a decode step's one product ``C @ state``. The chunk size is the spec's
``chunk``, else 256 (transformers' Mamba2Config default)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import sympy

from archcalc.codegen.errors import UnsupportedError
from archcalc.codegen.parts import camel, docstring
from archcalc.codegen.rope_scaling import _tuple_field
from archcalc.codegen.template import unit
from archcalc.ir import Component
from archcalc.ir.attrs import Mamba2

if TYPE_CHECKING:
    from archcalc.codegen.emitter import Emitter

MIXER_CACHE = unit("mixer", "MixerCache")
# the chunked scans' cumsum (Mamba2's, Gated DeltaNet's): eager under torch.compile where CUDA is
CUMSUM = unit("mixer", "scan_sum") + "\n\n\n" + unit("mixer", "cumsum")
HELPERS = "\n\n\n".join(unit("mixer", name) for name in ("GatedRMSNorm", "segsum", "ssd"))


def mixer_names(em: Emitter, mixer: Component, p: str, fields: dict[str, tuple]) -> dict[str, str]:
    """Declare a mixer's config fields (``fields``: name -> (value, note), as ``cfg.<p>mixer_<name>``) and return the
    template's names for them and for its layers' biases (IN_BIAS, CONV_BIAS, OUT_BIAS)."""
    kids = {c.name: c for c in mixer.children}
    names = {f"cfg.mixer_{name}": em.field(f"{p}mixer_{name}", expr, note) for name, (expr, note) in fields.items()}
    first = next(c for c in mixer.children if c.name.startswith("in_proj"))  # a mixer's input projections share a bias
    return names | {"IN_BIAS": str(first.attrs.bias), "CONV_BIAS": str(kids["conv"].attrs.bias),
                    "OUT_BIAS": str(kids["out_proj"].attrs.bias)}


def emit_mixer(em: Emitter, module: str, cls: str, p: str, names: dict[str, str], doc: str,
               flags: dict[str, bool] | None = None, helpers: tuple[str, ...] = ()) -> str:
    """Add a state mixer's class, templates/<module>.py's ``cls`` renamed for the stack (``p``), its docstring ``doc``,
    with MixerCache and ``helpers`` before it; its name."""
    name = f"{camel(p)}{cls}"
    names[cls] = name
    names["DOC"] = docstring(doc, 4)
    em.add(MIXER_CACHE, helper=True)
    for helper in helpers:
        em.add(helper, helper=True)
    em.add(unit(module, cls, flags or {}, names))
    return name


def mamba2_class(em: Emitter, mixer: Component, p: str) -> str:
    """The Mamba2 class of a stack (``p``: its config fields' prefix) and the helpers it uses; its name."""
    a = mixer.attrs
    assert isinstance(a, Mamba2)
    kids = {c.name: c for c in mixer.children}
    fields = {"inner": (a.inner, "I: the mixer's inner width"), "state": (a.state, "N: state size per head"),
              "heads": (a.heads, "H: mixer heads, each inner / heads wide"), "groups": (a.groups, "G: groups of heads sharing B and C"),
              "conv": (a.conv, "K: conv taps"),
              "chunk": (a.chunk_size, "Q: tokens per chunk of the scan")}
    if a.dt_min is not None:
        fields["dt_min"] = (a.dt_min, "the chunked scan's least step size")
    names = mixer_names(em, mixer, p, fields)
    if a.in_proj_multipliers is not None:
        _tuple_field(em, f"{p}mixer_in_proj_multipliers", tuple(float(f) for f in a.in_proj_multipliers),
                     "in_proj's z, x, B, C and dt times these")
        names["cfg.mixer_in_proj_multipliers"] = f"cfg.{p}mixer_in_proj_multipliers"
    helpers = HELPERS
    if a.gated_norm:
        names["cfg.norm_eps"] = norm_eps(em, kids["norm"], p)
    if not a.gated_norm or a.norm_before_gate:  # Falcon-H1's: no norm, or one that gates last
        helpers = "\n\n\n".join(unit("mixer", name) for name in ("NormThenGate", "segsum", "ssd")[not a.gated_norm:])
        names["GatedRMSNorm"] = "NormThenGate"
    scheme = em.lowered.root.attrs.init.mixer
    plain = scheme == "plain"  # Bamba's: dt_bias one, the conv normal(0, init_std)
    rescaled = scheme == "rescaled"  # Nemotron-H's: the conv normal(0, init_std), out_proj divided by sqrt(layers)
    if plain or rescaled:
        names["cfg.init_std"] = em.field("init_std", float(em.lowered.root.attrs.init.std), "")
    if rescaled:
        layers = sum((c.repeat for c in em.lowered.root.children if c.kind == "block"), sympy.Integer(0))
        names["cfg.init_layers"] = em.field("init_layers", layers, "layers: out_proj starts divided by their square root")
    scaled = " (each part times its own multiplier)" if a.in_proj_multipliers is not None else ""
    gate = ("a gated RMSNorm" if not a.norm_before_gate else "an RMSNorm, then the gate silu(z)") if a.gated_norm else \
        "the gate silu(z), no norm"
    return emit_mixer(em, "mixer", "Mamba2", p, names, f"Mamba2's mixer (SSD): in_proj to the gate z, the conv's x B C and "
                      f"a step size dt per head{scaled}; a causal depthwise conv over x B C; the selective state-space "
                      f"scan, in chunks over a sequence or one token at a time from a cached state; {gate}; out_proj.",
                      {"plain_init": plain, "conv_init": plain or rescaled, "rescaled_init": rescaled, "dt_min": a.dt_min is not None,
                       "in_proj_multipliers": a.in_proj_multipliers is not None, "gated_norm": a.gated_norm}, (CUMSUM, helpers))


def norm_eps(em: Emitter, norm: Component, p: str) -> str:
    """The gated norm's epsilon: ``cfg.norm_eps`` where that has its value (the block norm's), else a field of its own."""
    value = float(norm.attrs.eps)
    for name in ("norm_eps", f"{p}mixer_norm_eps"):
        if name not in em.fields or em.fields[name][0] == value:
            return em.field(name, value, "normalisation epsilon")
    raise UnsupportedError("codegen: a mixer's gated norm with an epsilon other than its block's")
