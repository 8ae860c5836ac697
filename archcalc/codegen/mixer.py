"""Source templates for Mamba2's mixer (``templates/mixer.py``): the layer's state for generation (``MixerCache``),
its gated RMSNorm, the chunked scan (SSD) and the ``Mamba2`` class, with its one-token ``step``.

The algorithm and its matrix products are the FLOPs convention that ``archcalc flops`` counts: the in and out
projections, the depthwise conv (``F.conv1d``), and in the chunked scan the four products within and between chunks
(``@`` on the shapes in the comments); a decode step's one product ``C @ state``. The chunk size is the spec's
``chunk``, else 256 (transformers' Mamba2Config default)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from archcalc.codegen.errors import UnsupportedError
from archcalc.codegen.parts import camel, docstring
from archcalc.codegen.template import unit
from archcalc.ir import Component
from archcalc.ir.attrs import Mamba2

if TYPE_CHECKING:
    from archcalc.codegen.emitter import Emitter

MIXER_CACHE = unit("mixer", "MixerCache")
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
    names = mixer_names(em, mixer, p, fields)
    names["cfg.norm_eps"] = norm_eps(em, kids["norm"], p)
    plain = em.lowered.root.attrs.init.mixer == "plain"  # Bamba's: dt_bias one, the conv normal(0, init_std)
    if plain:
        names["cfg.init_std"] = em.field("init_std", float(em.lowered.root.attrs.init.std), "")
    return emit_mixer(em, "mixer", "Mamba2", p, names, "Mamba2's mixer (SSD): in_proj to the gate z, the conv's x B C and "
                      "a step size dt per head; a causal depthwise conv over x B C; the selective state-space scan, in "
                      "chunks over a sequence or one token at a time from a cached state; a gated RMSNorm; out_proj.",
                      {"plain_init": plain}, (HELPERS,))


def norm_eps(em: Emitter, norm: Component, p: str) -> str:
    """The gated norm's epsilon: ``cfg.norm_eps`` where that has its value (the block norm's), else a field of its own."""
    value = float(norm.attrs.eps)
    for name in ("norm_eps", f"{p}mixer_norm_eps"):
        if name not in em.fields or em.fields[name][0] == value:
            return em.field(name, value, "normalisation epsilon")
    raise UnsupportedError("codegen: a mixer's gated norm with an epsilon other than its block's")
