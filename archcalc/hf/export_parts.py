"""Pieces of export-hf that the hooks' own export functions share (the layer list, the rotary parameters), apart
from :mod:`archcalc.hf.export` so that a hook module can use them without importing the exporter (which imports
every hook module)."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import sympy

from archcalc.errors import UsageError
from archcalc.hf.windows import MAX_LISTED
from archcalc.ir.attrs import Attention, Block, Embeddings

ROPE_KEYS = {"original_context": "original_max_position_embeddings", "fraction": "partial_rotary_factor"}


def layer_attends(lowered, binding) -> list[bool]:
    """Whether each layer attends (else a mixer or an MLP alone mixes it): its stack's, in the layer order where the
    stacks interleave."""
    stacks = {c.name: c for c in lowered.root.children if isinstance(c.attrs, Block)}
    attends = {name for name, c in stacks.items() if any(isinstance(k.attrs, Attention) for k in c.children)}
    layers = sum(int(c.repeat.xreplace(binding.numeric())) for c in stacks.values())
    order = lowered.root.attrs.layer_order or [next(iter(stacks))]
    if layers > MAX_LISTED:  # the config lists every layer: bounded, as the importer bounds what it reads
        raise UsageError(f"{layers:,} layers: the config would list each layer's kind, and export-hf lists at most "
                         f"{MAX_LISTED:,}")
    return [order[i % len(order)] in attends for i in range(layers)]


def _rope(attrs: Embeddings, binding, base: float | None = None, scaling: Any = "model") -> dict[str, Any]:
    """transformers 5's rope_parameters: rope_type and rope_theta, the scaling's fields, the rotated share of a head
    (``base``, ``scaling``: another set's, the sliding layers' own)."""
    scaling = attrs.rotary_scaling if scaling == "model" else scaling
    params: dict[str, Any] = {"rope_type": scaling.type if scaling is not None else "default",
                              "rope_theta": float(attrs.rotary_base if base is None else base)}
    if scaling is not None:
        for name, value in scaling.model_dump(exclude_none=True).items():
            if name != "type":
                params[ROPE_KEYS.get(name, name)] = value
    fraction = attrs.rotary_fraction
    if fraction is not None:
        share = sympy.Rational(fraction.xreplace(binding.numeric()))
        if share != 1:
            params["partial_rotary_factor"] = float(Fraction(int(share.p), int(share.q)))
    return params
