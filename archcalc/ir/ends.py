"""Lowering both ends of a model: the embeddings (token table, positions, token types, their norm, and a projection up
from a narrower token table) and the head (tied or not, over the token table's width).

>>> from archcalc.spec import load_spec
>>> from archcalc.spec.bind import bind
>>> from archcalc.ir import lower
>>> [c.name for c in lower(bind(load_spec("gpt2"), "small")).root.find("embed").children]
['token', 'position']
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import sympy

from archcalc.errors import SpecError
from archcalc.ir import attrs, factors, parts
from archcalc.ir.nodes import Component, Tensor
from archcalc.spec import components as sc
from archcalc.spec.loader import where

ZERO = sympy.Integer(0)  # a lookup reads rows: no parameter of the table is active in a matmul


def token_width(lowerer: Any, e: sc.Embedding, d: sympy.Expr, architecture: str, loc: tuple) -> sympy.Expr:
    """The token table's width: ``d`` itself (the very object) unless ``token_width`` gives another width at this size,
    as transformers builds OPT's projections only where word_embed_proj_dim differs from hidden_size."""
    if e.token_width is None:
        return d
    width = lowerer.width(e.token_width, loc + ("token_width",), "token embedding width")
    if lowerer.value(width) == lowerer.value(d):
        return d
    if architecture != "decoder":
        raise SpecError.at(where(lowerer.spec, loc + ("token_width",)), "a token table narrower or wider than the model "
                                                                       "(token_width) is modelled for decoders only")
    return width


def embedding(lowerer: Any, e: sc.Embedding, d: sympy.Expr, token: sympy.Expr, vocab: sympy.Expr, loc: tuple) -> Component:
    kids = [Component("token", "embedding", (Tensor("weight", (vocab, token), "token_embedding", ZERO),))]
    if token is not d:  # up to the model's width, before the positions are added
        kids.append(parts.linear("project_in", d, token, False, "other"))
    pos = position(lowerer, e.position)
    if pos.kind == "learned":
        assert pos.length is not None
        length = lowerer.width(pos.length, loc + ("position", "length"), "position table length")
        kids.append(Component("position", "embedding", (Tensor("weight", (length, d), "position_embedding", ZERO),)))
    if e.token_types is not None:
        types = lowerer.width(e.token_types, loc + ("token_types",), "token types")
        kids.append(Component("token_type", "embedding", (Tensor("weight", (types, d), "other", ZERO),)))
    if e.norm is not None:
        kids.append(lowerer.norm("norm", e.norm, d, loc + ("norm",)))
    fraction = None
    if pos.rotary_fraction is not None:
        fraction = lowerer.symbolic(pos.rotary_fraction, loc + ("position", "rotary_fraction"), "rotary_fraction")
    settings = attrs.Embeddings(pos.kind, e.scale, pos.base, pos.scaling, fraction,
                                float(pos.max_bias) if pos.max_bias is not None else 8.0, position_offset=pos.offset)
    settings = replace(settings, **factors.embedding_settings(lowerer, e, pos, loc))  # multiplier, local rotary tables
    return Component("embed", "embeddings", children=tuple(kids), attrs=settings)


def position(lowerer: Any, pos: sc.Position) -> sc.Position:
    """The model's positions with the size's own rotary base and scaling, where it gives them."""
    size = lowerer.spec.sizes.get(lowerer.binding.size)
    override = size.position if size is not None else None
    if override is None:
        return pos
    changes = {k: v for k, v in (("base", override.base), ("scaling", override.scaling)) if v is not None}
    return pos.model_copy(update=changes)


def head(lowerer: Any, h: sc.Head, width: sympy.Expr, vocab: sympy.Expr, loc: tuple) -> Component:
    """The head over ``width`` features (the token table's width: the model's, or OPT-350m's narrower one)."""
    if lowerer.flag(h.tied, loc + ("tied",)):
        weight = Tensor("weight", (vocab, width), "lm_head", tied_to="embed.token.weight")
    else:
        weight = Tensor("weight", (vocab, width), "lm_head")
    tensors = (weight,) + ((Tensor("bias", (vocab,), "lm_head"),) if lowerer.flag(h.bias, loc + ("bias",)) else ())
    multiplier = factors.factor(lowerer, h.multiplier, loc + ("multiplier",), "logit multiplier")
    return Component("head", "head", tensors, attrs=attrs.Head(h.softcap, h.scale_input, multiplier))
