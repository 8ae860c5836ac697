"""Source templates shared by the component kinds: activations, norms, embeddings.

Each template function reads an IR component, declares the config fields it needs on the emitter, and
returns the source of one class (or an expression). Only numbers, validated identifiers and ``repr()``
strings are interpolated. The other kinds live beside this module: ``archcalc.codegen.attention`` (attention and
rotary positions), ``archcalc.codegen.mlp`` (dense, gated and mixture-of-experts MLPs), ``archcalc.codegen.blocks``
(blocks and the model) and ``archcalc.codegen.hf`` (transformers weight names).
"""

from __future__ import annotations

import textwrap
from typing import TYPE_CHECKING

import sympy

from archcalc.codegen.errors import UnsupportedError
from archcalc.codegen.template import unit
from archcalc.ir import Component
from archcalc.ir.attrs import Embeddings, Norm

if TYPE_CHECKING:
    from archcalc.codegen.emitter import Emitter

ACTIVATIONS = {
    "gelu": ("F.gelu({x})", "GELU"),
    "gelu_tanh": ('F.gelu({x}, approximate="tanh")', "GELU (tanh approximation)"),
    "relu": ("F.relu({x})", "ReLU"),
    "relu2": ("F.relu({x}).square()", "squared ReLU"),
    "silu": ("F.silu({x})", "SiLU"),
    "xielu": ("xielu({x}, self.alpha_p, self.alpha_n, self.beta, self.eps)", "xIELU"),
}

OFFSET_RMSNORM = unit("parts", "OffsetRMSNorm")
HEAD_NORM = unit("parts", "HeadNorm")


def norm_expr(em: Emitter, norm: Component, width: str | None = None, own: tuple[str, ...] = ("norm_eps",),
              groups: str | None = None) -> str:
    """The constructor call of a LayerNorm or RMSNorm (``width``: the source of its width, default the model's; for a
    norm in groups, ``groups``: the source of their number, and ``width`` that of one group's).

    The epsilon is ``cfg.norm_eps`` where that has the same value, else the first of the field names
    ``own`` that is free or has the same value.
    """
    a = norm.attrs
    assert isinstance(a, Norm)
    value = float(a.eps)
    taken = lambda n: em.fields[n][0] if n in em.fields else value  # noqa: E731
    name = "norm_eps" if "norm_eps" in em.fields and taken("norm_eps") == value else next((n for n in own if taken(n) == value), None)
    if name is None:
        raise UnsupportedError(f"codegen: norms with several epsilons ({own[-1]} = {taken(own[-1])}, and {value})")
    eps = em.field(name, value, "normalisation epsilon")
    width = width or _width(em, a.width)
    if a.groups is not None:
        if a.unit_offset or groups is None:
            raise UnsupportedError("codegen: a norm in groups is generated for QK-norms without (1 + weight) scaling only")
        em.add(HEAD_NORM, helper=True)
        return f"HeadNorm({groups}, {width}, eps={eps}, bias={a.bias}, rms={norm.kind == 'rmsnorm'})"
    if a.unit_offset:
        if norm.kind != "rmsnorm":
            raise UnsupportedError("codegen does not generate (1 + weight) LayerNorms yet; only RMSNorm (Gemma)")
        em.add(OFFSET_RMSNORM, helper=True)
        return f"OffsetRMSNorm({width}, eps={eps})"
    if norm.kind == "rmsnorm":
        return f"nn.RMSNorm({width}, eps={eps})"
    return f"nn.LayerNorm({width}, eps={eps}, bias={a.bias})"


def _width(em: Emitter, expr) -> str:
    """``cfg.width`` when ``expr`` is the model width, else a literal field of its own."""
    if expr == em.lowered.root.attrs.width:
        return "cfg.width"
    return em.field("norm_width", expr)


def embeddings_class(em: Emitter, embed: Component, start: bool = False) -> str:
    """The Embeddings class (``templates/parts.py``); ``start``: forward takes the position of the first token
    (generation with a cache)."""
    kids = {c.name: c for c in embed.children}
    a = embed.attrs
    assert isinstance(a, Embeddings)
    if a.position not in ("learned", "none", "rotary", "relative-bias", "sinusoidal", "alibi"):
        raise UnsupportedError(f"codegen does not generate {a.position} positions yet")
    sinusoidal = a.position == "sinusoidal"  # the 2017 Transformer: sqrt(d)-scaled tokens plus fixed sin/cos positions
    if sinusoidal and ({"project_in", "token_type", "position", "norm"} & set(kids)):
        raise UnsupportedError("codegen: sinusoidal positions with other embeddings or an embedding norm are not generated yet")
    names = {"TOKEN_WIDTH": "cfg.width"}
    terms = ["self.token(input_ids)"]
    if "project_in" in kids:  # OPT-350m: a narrower token table, projected up before the positions are added
        names["TOKEN_WIDTH"] = em.field("token_width", kids["token"].tensors[0].shape[1],
                                        "width of the token table (projected to and from cfg.width)")
        terms = ["self.project_in(self.token(input_ids))"]
    if "token_type" in kids:
        names["TOKEN_TYPES"] = em.field("token_types", kids["token_type"].tensors[0].shape[0], "token types (segments)")
        terms.append("self.token_type(types)")
    if "position" in kids:
        names |= _positions(em, kids["position"], a.position_offset)
        terms.append("self.position(positions)")
    if "norm" in kids:
        names["NORM"] = norm_expr(em, kids["norm"], own=("norm_eps", "embed_norm_eps"))
    if a.multiplier is not None:
        names["cfg.embedding_multiplier"] = em.field("embedding_multiplier", a.multiplier,
                                                     "the token embeddings are multiplied by this")
    flags = {"project_in": "project_in" in kids, "token_type": "token_type" in kids, "position": "position" in kids,
             "offset": bool(a.position_offset), "norm": "norm" in kids, "scale": bool(a.scale) and not sinusoidal,
             "sinusoidal_scale": bool(a.scale) and sinusoidal, "multiplier": a.multiplier is not None, "start": start,
             "sinusoidal": sinusoidal, "per_layer": "per_layer" in kids}
    names |= _per_layer(em, kids) if "per_layer" in kids else {}
    names |= {"EMBEDDED": _embedded(terms, a, sinusoidal, "norm" in kids), "DOC": docstring(_embeddings_doc(kids, a, sinusoidal), 4)}
    flags["fits"] = len(f"        return {names['EMBEDDED']}  # (B, T, d)") <= 100
    return unit("parts", "Embeddings", flags, names)


def _per_layer(em: Emitter, kids: dict[str, Component]) -> dict[str, str]:
    """Gemma 4's per-layer input embeddings: their config fields, and their norm's constructor call."""
    vocab, packed = kids["per_layer"].tensors[0].shape
    width = kids["per_layer_norm"].attrs.width
    em.field("per_layer_vocab", vocab, "vocabulary of the per-layer input embeddings")
    em.field("per_layer_width", width, "P: width of a layer's per-layer input")
    em.field("ple_layers", packed / width, "layers with a per-layer input (every layer)")
    return {"PER_LAYER_NORM": norm_expr(em, kids["per_layer_norm"], "cfg.per_layer_width", own=("norm_eps", "ple_norm_eps"))}


def _positions(em: Emitter, position: Component, offset: int) -> dict[str, str]:
    """The learned position table's rows: the context, and the rows before position 0 (OPT's 2)."""
    length = position.tensors[0].shape[0]
    context = em.field("context", length - offset, f"{length - offset}: learned position table length"
                       + (" past the offset" if offset else ""))
    if not offset:
        return {"POSITION_ROWS": context}
    rows = em.field("position_offset", sympy.Integer(offset), "rows of the position table before position 0")
    return {"POSITION_ROWS": f"{context} + {rows}", "cfg.position_offset": rows}


def _embedded(terms: list[str], a: Embeddings, sinusoidal: bool, norm: bool) -> str:
    """The sum forward returns: the terms, scaled, multiplied and normalised as the spec says."""
    total = " + ".join(terms)
    if a.scale:
        total = f"({total}) * self.scale" if len(terms) > 1 else f"{total} * self.scale"
    if sinusoidal:
        return total
    if a.multiplier is not None:
        total = f"({total}) * self.multiplier" if " + " in total else f"{total} * self.multiplier"
    return f"self.norm({total})" if norm else total


def _embeddings_doc(kids: dict[str, Component], a: Embeddings, sinusoidal: bool) -> str:
    doc = "Token embeddings" + (" projected up to the model width" if "project_in" in kids else "")
    doc += " plus learned absolute positions" if "position" in kids else ""
    doc += (" and token types (segments)" if "token_type" in kids else "") + (", normalised" if "norm" in kids else "")
    doc += ", scaled by sqrt(width)" if a.scale else ""
    doc += "; and each layer's per-layer input (per_layer_inputs, Gemma 4's)" if "per_layer" in kids else ""
    return doc + (", plus sinusoidal positions (no parameters)." if sinusoidal else ".")


def docstring(text: str, indent: int) -> str:
    """``text`` as a docstring at ``indent`` spaces, its lines wrapped to the generated file's 100 characters."""
    lines = textwrap.wrap(f'"""{text}"""', 100 - indent, break_long_words=False, break_on_hyphens=False)
    return f"\n{' ' * indent}".join(lines)


def camel(prefix: str) -> str:
    return "".join(part.capitalize() for part in prefix.split("_") if part)
