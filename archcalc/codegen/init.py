"""Source template of the generated ``Transformer.reset_parameters``: the spec's ``init`` section (normal, t5 or xavier,
with the scaled residual projections), as transformers' ``_init_weights`` for the family does it, so that a fresh
model starts where transformers' would (tests/codegen/test_init.py compares them tensor by tensor)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from archcalc.codegen.literal import flat
from archcalc.codegen.parts import docstring
from archcalc.codegen.template import unit

if TYPE_CHECKING:
    from archcalc.codegen.emitter import Emitter

RESIDUAL_OUT = ("attn.out.weight", "down.weight")  # the projections that add into the residual stream
#: parameters drawn normal(0, init_std) besides the matrices, by the end of their names (a zero expert's gate_up:
#: LongCat-Flash's, never used)
EXTRA_STD = ("sinks", "router.bias", ".gate_up")


TAIL = ("\n\nbuild() calls it; so does a model built on the meta device once it has memory (model.to_empty(device=...), "
        "e.g. after sharding it with FSDP2).")


def init_method(em: Emitter, layers: str, tied: bool) -> list[str]:
    """``reset_parameters`` (``templates/init.py``): the spec's init scheme, as transformers' ``_init_weights`` for the
    family does it; ``layers``: the source of the number of blocks."""
    init = em.lowered.root.attrs.init
    if init.scheme == "t5":
        em.field("init_std", float(init.std), "transformers' initializer_factor: the scale of every initial weight")
        return unit("init", "T5.reset_parameters").split("\n")
    if init.scheme == "xavier":
        doc = ("(Re)initialise every weight in place as fairseq's Transformer does: Xavier-uniform matrices, zero biases, "
               "embeddings normal(0, width**-0.5)" + (" (the tied head keeps them)" if tied else "") + ", norm weights one.")
        return unit("init", "Xavier.reset_parameters", {"tied": tied}, {"DOC": _doc(doc)}).split("\n")
    em.field("init_std", float(init.std), "weights start as normal(0, init_std) (transformers' initializer_range)")
    names = _leaf_names(em)
    extra_std = sorted(n for n in EXTRA_STD if any(name.endswith(n) for name in names))
    doc = ("(Re)initialise every weight in place as transformers' _init_weights does: matrices and embeddings normal(0, "
           "init_std), biases zero, norms reset (weight one; Gemma's (1 + w) weight zero)"
           + (";" if init.scaled_residual or extra_std else "."))
    if init.scaled_residual:
        doc += (" the projections into the residual stream (attention's out, the MLP's down) normal(0, init_std / "
                "sqrt(2 * layers))" + (";" if extra_std else "."))
    if set(extra_std) - {".gate_up"}:
        doc += " the attention sinks and the router's bias normal(0, init_std), as gpt-oss's."
    if ".gate_up" in extra_std:
        doc += " the zero experts' unused gate_up rows normal(0, init_std), as transformers' LongCat-Flash."
    flags = {"named": bool(init.scaled_residual or extra_std), "scaled_residual": bool(init.scaled_residual),
             "extra_std": bool(extra_std)}
    names = {"DOC": _doc(doc), "RESIDUAL_OUT": flat(RESIDUAL_OUT), "EXTRA_STD": flat(tuple(extra_std)), "LAYERS": layers}
    return unit("init", "Normal.reset_parameters", flags, names).split("\n")


def _doc(text: str) -> str:
    """The docstring of reset_parameters: ``text``, then how build() uses it."""
    first, tail = docstring(text, 8), TAIL.strip().replace("\n\n", "")
    return first[:-3] + "\n\n        " + docstring(tail, 8)[3:]


def _leaf_names(em: Emitter) -> list[str]:
    from archcalc.ir import leaves

    return [leaf.path for leaf in leaves(em.lowered.root)]
