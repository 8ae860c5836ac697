"""Rotary positions: the ``Rotary`` tables and the ``rotate`` function, from ``templates/rotary.py``.

The tables are computed in the model's forward from the positions of the tokens it is given, so a token
decoded with a KV cache at position ``start`` gets the same angles as in a full forward pass; the frequencies
they are built from are a buffer computed once by ``reset_parameters`` (not saved; nothing allocated on the meta
device), except for schemes whose frequencies follow the length. Rotary scaling (``position.scaling``: linear,
dynamic, llama3, yarn, longrope, proportional) keeps its scheme's region of the template (``archcalc.codegen.rope_scaling``
declares its config fields and gives its docstring paragraph); the pairing of the rotated features (half,
interleaved, deinterleaved) keeps its region of the tables and of ``rotate``.
"""

from __future__ import annotations

import textwrap
from typing import TYPE_CHECKING

import sympy

from archcalc.codegen.errors import UnsupportedError
from archcalc.codegen.rope_scaling import Scheme, scaling_scheme
from archcalc.codegen.template import fragment, unit
from archcalc.ir import Component
from archcalc.ir.attrs import LatentAttention

if TYPE_CHECKING:
    from archcalc.codegen.emitter import Emitter

PAIRINGS = ("half", "interleaved", "deinterleaved")  # how the rotated features pair up: regions of templates/rotary.py
SCHEMES = ("linear", "dynamic", "llama3", "yarn", "longrope", "proportional")  # rotary scaling: regions of templates/rotary.py


def rotary_class(pairing: str, scheme: Scheme | None = None, name: str = "Rotary", fields: dict[str, str] | None = None) -> str:
    """The Rotary class (``templates/rotary.py``): default rotary tables, or those of a scaling scheme (its docstring
    paragraph, and its region of __init__ and frequency lines); ``name`` and ``fields``: another class of tables with its
    own base, and width where it differs (LocalRotary, the sliding layers' own: its config fields by the template's).

    Frequencies that do not depend on the length (no scheme, linear, llama3, yarn) are computed once, by
    reset_parameters, into a buffer a checkpoint does not save: under torch.compile, tables computed from scratch in
    forward are fused into every kernel that rotates, which then evaluates a power per element (measured on an
    H200: 14 of a 127 ms Llama-1B training step, against 2.5 ms when the frequencies are read;
    docs/benchmarks.md). Schemes whose frequencies follow the length (dynamic, longrope) compute them in forward."""
    by_length = scheme is not None and scheme.own_frequencies  # dynamic NTK, LongRoPE: the length decides
    what = " of the sliding-window layers (their own base)" if name != "Rotary" else ""
    paragraph = (f"Rotary position tables{what}: the cos and sin of position x frequency, for the first rotary_width "
                 "features of each head, computed in forward for the positions asked for.")
    if not by_length:
        paragraph += (" The frequencies are computed once, by reset_parameters, into a buffer that checkpoints leave "
                      "out (on the meta device it allocates nothing): a compiled step reads them instead of evaluating "
                      "a power in every kernel that rotates.")
    doc = textwrap.wrap(paragraph, 100, initial_indent='    """', subsequent_indent="    ")
    if scheme is not None:
        doc += [""] + [f"    {line}" for line in scheme.doc]
    assert pairing in PAIRINGS, pairing
    flags = {kind: scheme is not None and scheme.kind == kind for kind in SCHEMES}
    flags |= {kind: pairing == kind for kind in PAIRINGS}
    flags |= {"by_length": by_length, "truncate": scheme is None or scheme.truncate,
              "attention_factor": scheme is not None and scheme.attention_factor}
    names = {"DOC": "\n".join(doc).removeprefix("    ") + '"""', "Rotary": name, **(fields or {})}
    return unit("rotary", "Rotary", flags, names)


def emit_rotary(em: Emitter, embed: Component, attentions: list[Component]) -> None:
    """Declare the rotary config fields and add the Rotary class and ``rotate`` for these attention layers."""
    local = local_rotary(embed, attentions)
    # the sliding layers' own tables may be narrower than the others' (Gemma 4: heads of 256 beside 512)
    local_width = _one_width(em, embed, [attn for attn in attentions if local and attn.attrs.banded])
    width = _one_width(em, embed, [attn for attn in attentions if not (local and _only_local(attn))]) or local_width
    if len({isinstance(attn.attrs, LatentAttention) for attn in attentions}) != 1:
        raise UnsupportedError("codegen: stacks with latent and standard attention are not generated yet")
    em.field("rotary_width", sympy.Integer(width), "features of each head that rotary positions rotate")
    em.field("rotary_base", float(embed.attrs.rotary_base), "rotary base (theta)")
    latent = isinstance(attentions[0].attrs, LatentAttention)
    default = "deinterleaved" if latent else "half"  # DeepSeek's rope layout (transformers: rope_interleave, default true)
    pairing = embed.attrs.rotary_pairing or default  # the spec's position.pairing
    if width % 2 and pairing != "half":
        raise UnsupportedError(f"codegen: an odd rotary width ({width}) with {pairing} pairs of features (transformers' "
                               "models of that layout fail on it)")
    partial = not latent and any(rotary_width(em, embed, attn) != em.value(attn.attrs.head_width) for attn in attentions)
    scaling = embed.attrs.rotary_scaling
    scheme = scaling_scheme(em, scaling, width) if scaling is not None else None
    for source in rotary_sources(pairing, partial, scheme):
        em.add(source, helper=True)
    if local:  # the sliding layers' own tables (Gemma 3, Gemma 4)
        if embed.attrs.rotary_local_scaling is not None:
            raise UnsupportedError("codegen: rotary scaling on the sliding-window layers' own tables is not generated yet")
        em.field("rotary_local_base", float(embed.attrs.rotary_local_base), "rotary base (theta) of the sliding-window layers")
        fields = {"cfg.rotary_base": "cfg.rotary_local_base"}
        if local_width not in (None, width):
            em.field("rotary_local_width", sympy.Integer(local_width), "features of a sliding-window layer's head that rotate")
            fields["cfg.rotary_width"] = "cfg.rotary_local_width"
        em.add(rotary_class(pairing, None, "LocalRotary", fields), helper=True)


def _one_width(em: Emitter, embed: Component, attentions: list[Component]) -> int | None:
    """The rotary width these layers share (None: no layers): one table for all of them."""
    widths = {rotary_width(em, embed, attn) for attn in attentions}
    if len(widths) > 1:
        raise UnsupportedError(f"codegen: stacks with different rotary widths ({sorted(widths)}) are not generated yet")
    return widths.pop() if widths else None


def _only_local(attn: Component) -> bool:
    """Are all of this stack's layers sliding-window ones (they read the local tables alone)?"""
    return set(attn.attrs.pattern) == {"local"}


def local_rotary(embed: Component, attentions: list[Component]) -> bool:
    """Do the sliding-window layers have rotary tables of their own (``position.local``), and the model such layers?"""
    return embed.attrs.rotary_local_base is not None and any(attn.attrs.banded for attn in attentions)


def rotary_sources(pairing: str, partial: bool, scheme: Scheme | None = None) -> list[str]:
    """The Rotary class and the ``rotate`` function that applies its tables to queries and keys (to the first
    rotary_width features of each head where ``partial``)."""
    pairings = {kind: pairing == kind for kind in PAIRINGS}
    turn = fragment("rotary", "turn", 4, pairings, {} if partial else {"rot": "x"})
    return [rotary_class(pairing, scheme), unit("rotary", "rotate", {"partial": partial}, inserts={"turn": turn})]


def rotary_width(em: Emitter, embed: Component, attn: Component) -> int:
    """Rotated features of each head: head_width x rotary_fraction (HF: int(head_dim * partial_rotary_factor));
    latent attention rotates its rope_width features (transformers' qk_rope_head_dim)."""
    fraction = embed.attrs.rotary_fraction
    if isinstance(attn.attrs, LatentAttention):
        width = em.value(attn.attrs.rope_width)
        if width % 2 or fraction is not None:
            raise UnsupportedError(f"codegen: latent attention rotates all of an even rope_width (got {width}, "
                                   f"rotary_fraction {fraction})")
        return width
    head = em.value(attn.attrs.head_width)
    if fraction is None:
        return head
    width = int(sympy.floor(head * fraction.xreplace(em.numeric)))
    # an odd width n turns ceil(n / 2) frequencies, so rotate_half (transformers' GPT-NeoX, Phi, ...) rotates the first
    # 2 * ceil(n / 2) features; the frequencies keep n as their exponent's denominator
    if width < 1 or width + width % 2 > head:
        raise UnsupportedError(f"rotary width {width} (head width {head} x rotary_fraction {fraction}) rotates "
                               f"{width + width % 2} features; expected from 1 to {head}")
    return width
