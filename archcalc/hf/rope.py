"""Rotary scaling from an HF config: transformers' ``rope_parameters`` (or the legacy ``rope_scaling``) as the
spec's ``position.scaling``, with the numbers transformers fills in when the config leaves them out.

transformers 5 reads the keys of each ``rope_type`` in ``modeling_rope_utils.py`` (``_compute_<type>_parameters``;
``_validate_<type>_rope_parameters`` refuses a config without the required ones). The spec records every number
the generated module needs, so nothing depends on a transformers default later:

- ``dynamic`` grows the base past ``max_position_embeddings`` (not ``original_max_position_embeddings``):
  that is its ``original_context``;
- ``yarn``, ``longrope`` and ``llama3`` take ``original_max_position_embeddings`` (default: ``max_position_embeddings``;
  Phi-3's own top-level key overrides it); ``yarn``'s ``factor: null`` and ``longrope``'s missing ``factor`` are
  ``max_position_embeddings / original_max_position_embeddings``; ``yarn``'s ``beta_fast``/``beta_slow`` default
  to 32 and 1 (``or``: a zero is the default too), its ``truncate`` to true (``null`` is false).

>>> from archcalc.hf.jsonfile import parse_text
>>> from archcalc.hf.reader import MISSING, Reader
>>> cf = parse_text('{"rope_parameters": {"rope_type": "linear", "factor": 4}}', "c.json")
>>> r = Reader(cf, "llama")
>>> read_scaling(r, ("rope_parameters",), cf.data["rope_parameters"], 2048, None, {}, 64)
{'type': 'linear', 'factor': 4.0}
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

from archcalc.hf.reader import MISSING, Reader

#: The scalings the generated module computes: rope_type -> the keys transformers requires (beside the
#: original context, which it always fills in).
REQUIRED = {
    "linear": ("factor",),
    "dynamic": ("factor",),
    "llama3": ("factor", "low_freq_factor", "high_freq_factor"),
    "yarn": ("factor",),
    "longrope": ("short_factor", "long_factor"),
    "proportional": (),  # Gemma 4's: partial_rotary_factor of the pairs rotate, at frequencies of the whole head's
}


#: A family's alias of a rope_type to this name (``hf.rope.aliases``) says that its config class refuses that type
#: (Phi3Config.validate_rope accepts default and longrope only, su and yarn read as longrope).
REFUSED = "refused"

LAYER_TYPES = ("full_attention", "attention", "sliding_attention", "chunked_attention")  # keys of per-layer parameters


def read_rope(r: Reader, draft) -> None:
    """The rotary base, the rotated share of a head and the scaling, from ``rope_parameters`` or the legacy keys,
    into ``model.embedding.position`` (``draft``: an :class:`archcalc.hf.family.Draft`; ``hf.rope``: the defaults).

    As transformers' ``convert_rope_params_to_dict``: a non-empty legacy ``rope_scaling`` replaces ``rope_parameters``;
    the top-level ``rope_theta``/``partial_rotary_factor`` fill in what they lack."""
    rope = draft.family.origin.rope
    if rope.local_theta is not None:
        return _per_layer_type(r, draft, rope)
    legacy, params = r.get("rope_scaling"), r.get("rope_parameters")
    key: tuple = ("rope_scaling",) if legacy not in (MISSING, None, {}) else ("rope_parameters",)
    params = legacy if key == ("rope_scaling",) else params
    if params is MISSING or params is None:
        params = dict(rope.parameters or {})
    if not isinstance(params, dict):
        raise r.fail(key, "expected an object such as {\"rope_type\": \"default\", \"rope_theta\": 10000.0}")
    per_layer = sorted(set(params) & set(LAYER_TYPES))
    if per_layer:
        raise r.fail(key + (per_layer[0],), "rope parameters per layer type are not modelled; expected one set for every layer")
    theta_key = key + ("rope_theta",) if "rope_theta" in params else (rope.theta_key,)
    fraction_key = key + ("partial_rotary_factor",) if "partial_rotary_factor" in params else (rope.fraction_key,)
    theta = r.real(theta_key, rope.theta)
    if theta is None or theta <= 0:
        raise r.fail(theta_key, f"expected a positive rotary base, got {theta}")
    fraction = r.real(fraction_key, rope.fraction, nullable=True)
    d_head = draft.values["d_head"]
    if not applies_share(draft.family):
        fraction = unapplied_share(r, draft, fraction_key, fraction, params)
    for generic, own in (("rope_theta", rope.theta_key), ("partial_rotary_factor", rope.fraction_key)):
        if own != generic and r.get(generic) not in (MISSING, None):  # GPT-NeoX reads rotary_emb_base and rotary_pct
            r.notes.append(f"{generic} is not read by transformers' {draft.family.hf_class}, which reads {own} and rope_parameters")
    dims = draft.values["d_rope"] if "d_rope" in draft.values else int(d_head * (1 if fraction is None else fraction))
    original = r.int("original_max_position_embeddings", r.defaults["original_max_position_embeddings"]) \
        if rope.own_original_context else None
    context = r.int("max_position_embeddings", r.defaults["max_position_embeddings"])
    draft.put("embedding.position.base", theta)
    draft.put("embedding.position.scaling", read_scaling(r, key, params, context, original, rope.aliases, dims))
    draft.put("embedding.position.rotary_fraction", None)
    if fraction is not None and fraction != 1:
        rotary_share(r, draft, int(d_head * fraction), fraction_key)


def applies_share(family) -> bool:
    """Does transformers' class rotate only ``partial_rotary_factor`` of each head? Not where the family's table marks
    the share's key ``ignored``: Llama's default rotary embedding (and its descendants') takes the whole head."""
    entry = family.keys.get(family.origin.rope.fraction_key)
    return entry is None or entry.ignored is None


def unapplied_share(r: Reader, draft, key: tuple, fraction: float | None, params: dict[str, Any]) -> None:
    """A share of the head that the family's class does not apply: noted (in one line) when it is below a whole head,
    refused with a scaled rope_type, whose frequencies transformers computes for the share only while it rotates the
    whole head (its forward fails on the mismatch). Returns None: the whole head rotates."""
    d_head = draft.values.get("d_rope", draft.values["d_head"])
    if fraction is None or int(d_head * fraction) == d_head:
        return None
    rope_type = params.get("rope_type", params.get("type", "default"))
    label = ".".join(map(str, key))
    if rope_type not in (None, "default"):
        raise r.fail(key, f"{fraction:g} with rope_type {str(rope_type)[:40]!r} is not modelled: transformers' "
                          f"{draft.family.hf_class} computes frequencies for {int(d_head * fraction)} of each head's {d_head} "
                          "features but rotates all of them (its forward fails)")
    if not any(label in note for note in r.notes):
        r.notes.append(f"{label} {fraction:g} is not applied: transformers' {draft.family.hf_class} rotates the whole head "
                       "(its default rotary embedding ignores the share), and so does the generated module")
    return None


def _per_layer_type(r: Reader, draft, rope) -> None:
    """Gemma 3: a set of rope parameters for the full-attention layers (``position``) and one for the sliding ones
    (``position.local``), as transformers' ``convert_rope_params_to_dict`` fills them in: a legacy ``rope_scaling``
    updates the full layers' set; ``rope_theta`` and ``rope_local_base_freq`` give the bases a set lacks."""
    params, legacy = r.get("rope_parameters"), r.get("rope_scaling")
    params = dict(rope.parameters or {}) if params in (MISSING, None) else params  # the class's own sets (Gemma 4)
    if not isinstance(params, dict):
        raise r.fail("rope_parameters", "expected an object with the full_attention and sliding_attention layers' "
                                        "parameters, e.g. {\"full_attention\": {\"rope_type\": \"default\"}, ...}")
    _both_sets(r, draft, rope, params, legacy)
    other = sorted(set(params) - {"full_attention", "sliding_attention"})
    if other:  # transformers keeps them beside the two sets and reads neither
        r.notes.append(f"rope_parameters' {', '.join(map(str, other))[:120]} are not read by transformers' {draft.family.hf_class}, "
                       "which reads the full_attention and sliding_attention sets")
    context = r.int("max_position_embeddings", r.defaults["max_position_embeddings"])
    if legacy not in (MISSING, None) and r.get("rope_parameters") not in (MISSING, None) and params.get("full_attention") is None:
        raise r.fail("rope_scaling", "is not modelled beside a rope_parameters without a full_attention set: transformers' "
                                     f"{draft.family.hf_class} updates that set with it, and fails")
    sets = []
    for kind, theta_key, default in (("full_attention", rope.theta_key, rope.theta),
                                     ("sliding_attention", rope.local_theta_key if rope.local_theta_keyed else None,
                                      rope.local_theta)):
        key: tuple = ("rope_parameters", kind)
        own = params.get(kind, None)
        own = {"rope_type": "default"} if own is None else own  # the set transformers fills in for a missing one
        if not isinstance(own, dict):
            raise r.fail(key, "expected an object such as {\"rope_type\": \"default\", \"rope_theta\": 10000.0}")
        own, share_key = dict(own), key + ("partial_rotary_factor",) if "partial_rotary_factor" in own else ("partial_rotary_factor",)
        if kind == "full_attention" and legacy not in (MISSING, None, {}):
            if not isinstance(legacy, dict):
                raise r.fail("rope_scaling", "expected an object such as {\"rope_type\": \"linear\", \"factor\": 8.0}")
            if "type" in legacy and "rope_type" not in legacy and "rope_type" in own:
                r.notes.append(f"rope_scaling's type {str(legacy['type'])[:40]!r} is not read by transformers' {draft.family.hf_class}, "
                               f"which keeps the full_attention layers' rope_type {str(own['rope_type'])[:40]!r} (its key is rope_type)")
            own, key = own | legacy, ("rope_scaling",)
            share_key = ("rope_scaling", "partial_rotary_factor") if "partial_rotary_factor" in legacy else share_key
        if own.get("rope_type") != "proportional":  # proportional reads its share itself (Gemma 4)
            unapplied_share(r, draft, share_key, r.real(share_key, None, nullable=True), own)
        sets.append((_set_base(r, key, own, theta_key, default), read_scaling(r, key, own, context, None, rope.aliases, draft.values["d_head"])))
    (base, scaling), (local_base, local_scaling) = sets
    draft.put("embedding.position.base", base)
    draft.put("embedding.position.scaling", scaling)
    draft.put("embedding.position.rotary_fraction", None)
    local = {"base": local_base} | ({"scaling": local_scaling} if local_scaling is not None else {})
    draft.put("embedding.position.local", None if (local_base, local_scaling) == (base, scaling) else local)


def _set_base(r: Reader, key: tuple, own: dict[str, Any], theta_key: str | None, default: float) -> float:
    """One layer type's rotary base: its set's rope_theta, else the top-level key (none: the class default alone)."""
    theta = own["rope_theta"] if "rope_theta" in own else r.real(theta_key, default) if theta_key else default
    if isinstance(theta, bool) or not isinstance(theta, (int, float)) or not theta > 0:
        raise r.fail(key + ("rope_theta",) if "rope_theta" in own else theta_key, f"expected a positive rotary base, got {theta!r:.40}")
    return float(theta)


def _both_sets(r: Reader, draft, rope, params: dict[str, Any], legacy: Any) -> None:
    """A class whose own defaults are one set per layer type (Gemma 4) reads those two sets only, and fails without
    them or with a legacy rope_scaling."""
    if set(rope.parameters or {}) >= {"full_attention", "sliding_attention"}:
        if legacy not in (MISSING, None, {}):
            raise r.fail("rope_scaling", f"is not modelled: transformers' {draft.family.hf_class} reads rope_parameters "
                                         "per layer type only, and fails with a rope_scaling")
        for kind in ("full_attention", "sliding_attention"):
            if not isinstance(params.get(kind), dict):
                raise r.fail("rope_parameters", f"expected the {kind} layers' set (an object): transformers' "
                                                f"{draft.family.hf_class} reads one set per layer type, and fails without it")


def rotary_share(r: Reader, draft, dims: int, key: Any) -> None:
    """Rotate ``dims`` of each head's width (transformers truncates ``d_head * factor``; more than a head is a head)."""
    d_head = draft.values["d_head"]
    if dims < 0:
        raise r.fail(key, f"rotates {dims} dimensions of a head; expected a share from 0 to 1")
    share = Fraction(min(dims, d_head), d_head)
    draft.put("embedding.position.rotary_fraction", None if share == 1 else f"{share.numerator}/{share.denominator}")


def read_scaling(r: Reader, key: tuple, params: dict[str, Any], context: int, original: int | None,
                 aliases: dict[str, str], rotary_dims: int | None) -> dict[str, Any] | None:
    """The spec's ``scaling`` of the rope parameters ``params`` found at ``key`` (None: no scaling).

    ``context``: max_position_embeddings; ``original``: a family's own original_max_position_embeddings, which
    replaces the one in ``params`` (Phi-3); ``aliases``: a family's other names of a type (Phi-3: su, yarn ->
    longrope); ``rotary_dims``: the rotated features of a head (longrope has one factor per pair of them)."""
    rope_type = _scaling_type(r, key, params, aliases)
    if rope_type is None:
        return None
    out: dict[str, Any] = {"type": rope_type}
    if rope_type == "dynamic":  # transformers: the base grows once a sequence passes max_position_embeddings
        return out | {"factor": _needed(r, key, params, "factor"), "original_context": context}
    if rope_type == "linear":
        return out | {"factor": _needed(r, key, params, "factor")}
    if rope_type == "proportional":  # transformers: factor and partial_rotary_factor default to 1
        fraction = _real(r, key, params, "partial_rotary_factor")
        factor = _real(r, key, params, "factor")
        return out | ({"factor": factor} if factor not in (None, 1.0) else {}) | \
            ({"fraction": fraction} if fraction not in (None, 1.0) else {})
    if original is None:
        original = params.get("original_max_position_embeddings", context)
        if isinstance(original, bool) or not isinstance(original, int) or original < 1:
            raise r.fail(key + ("original_max_position_embeddings",), f"expected a positive integer, got {original!r:.40}")
    out["original_context"] = original
    if rope_type == "llama3":
        low, high = (_needed(r, key, params, name) for name in ("low_freq_factor", "high_freq_factor"))
        return out | {"factor": _needed(r, key, params, "factor"), "low_freq_factor": low, "high_freq_factor": high}
    factor = _real(r, key, params, "factor")
    out["factor"] = factor if factor is not None else context / original
    attention_factor = _real(r, key, params, "attention_factor", positive=False)
    if attention_factor is not None:
        out["attention_factor"] = attention_factor
    if rope_type == "yarn":
        return out | _yarn(r, key, params)
    for name in ("short_factor", "long_factor"):  # longrope: one factor per rotated pair of features
        out[name] = _factors(r, key + (name,), params[name], rotary_dims)
    return out


def _scaling_type(r: Reader, key: tuple, params: dict[str, Any], aliases: dict[str, str]) -> str | None:
    """The rope_type of ``params`` as the spec names it (a family's alias resolved; None: the default, no scaling),
    refused where the family's class refuses it or archcalc does not model it, or where a required key is missing."""
    type_key = "rope_type" if "rope_type" in params else "type"
    rope_type = params.get(type_key, "default")
    if rope_type in (None, "default"):
        return None
    if not isinstance(rope_type, str):
        raise r.fail(key + (type_key,), f"expected a rope_type name such as 'yarn', got {rope_type!r:.40}")
    if aliases.get(rope_type) == REFUSED:
        accepted = sorted({"default"} | {t for t in REQUIRED if aliases.get(t) != REFUSED} | {a for a, t in aliases.items() if t != REFUSED})
        raise r.fail(key + (type_key,), f"{rope_type!r} is refused by transformers' {r.model_type} config class, which takes "
                                        f"the rope_type {', '.join(accepted)}")
    rope_type = aliases.get(rope_type, rope_type)
    if rope_type not in REQUIRED:
        raise r.fail(key + (type_key,), f"{rope_type[:40]!r} is not modelled; archcalc reads the rope_type default, "
                                        f"{', '.join(REQUIRED)}")
    for name in REQUIRED[rope_type]:
        if name not in params:
            raise r.fail(key, f"rope_type {rope_type!r} needs {name!r} (transformers refuses the config without it)")
    return rope_type


def _yarn(r: Reader, key: tuple, params: dict[str, Any]) -> dict[str, Any]:
    """YaRN's betas (transformers: ``or 32``, ``or 1``: a zero is the default too), its mscales where given, and
    ``truncate`` (default true; transformers tests its truth: null does not truncate)."""
    out: dict[str, Any] = {}
    for name, default in (("beta_fast", 32.0), ("beta_slow", 1.0)):
        value = _real(r, key, params, name, positive=False)
        if value is not None and value < 0:
            raise r.fail(key + (name,), f"expected a positive number, got {value!r}")
        out[name] = value or default
    for name in ("mscale", "mscale_all_dim"):
        if (value := _real(r, key, params, name, positive=False)) is not None:
            out[name] = value
    truncate = params.get("truncate", True)
    if truncate is not None and not isinstance(truncate, bool):
        raise r.fail(key + ("truncate",), f"expected true or false, got {truncate!r:.40}")
    out["truncate"] = bool(truncate)
    return out


def _real(r: Reader, key: tuple, params: dict[str, Any], name: str, positive: bool = True) -> float | None:
    """``params[name]`` as a finite (``positive``: above zero) number; None where absent or null."""
    value = params.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or (positive and value <= 0):
        raise r.fail(key + (name,), f"expected a {'positive' if positive else 'finite'} number, got {value!r:.40}")
    return float(value)


def _needed(r: Reader, key: tuple, params: dict[str, Any], name: str) -> float:
    """``params[name]``, a positive number transformers needs (null refused)."""
    value = _real(r, key, params, name)
    if value is None:
        raise r.fail(key + (name,), f"expected a positive number, got null (transformers needs {name})")
    return value


def _factors(r: Reader, key: tuple, value: Any, rotary_dims: int | None) -> list[float]:
    pairs = rotary_dims // 2 if rotary_dims is not None else None
    if not isinstance(value, list) or not value or len(value) > 4096:
        raise r.fail(key, "expected a list of positive numbers, one per rotated pair of features")
    for i, item in enumerate(value):
        if isinstance(item, bool) or not isinstance(item, (int, float)) or not math.isfinite(item) or item <= 0:
            raise r.fail(key + (i,), f"expected a positive number, got {item!r:.40}")
    if pairs is not None and len(value) != pairs:
        raise r.fail(key, f"expected {pairs} factors (one per rotated pair of the head's {rotary_dims} rotary features), "
                          f"got {len(value)}")
    return [float(item) for item in value]
