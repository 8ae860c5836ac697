"""Rotary scaling (the spec's ``position.scaling``): each scheme's config fields and docstring paragraph; its lines
of the ``Rotary`` class are a region of ``templates/rotary.py``, as transformers 5 computes them
(``modeling_rope_utils.py``, ``_compute_<type>_parameters``).

Each scheme changes the frequencies (``inv_freq``) the tables are built from and may multiply cos and sin by an
attention factor; the numbers become config fields. The tables stay computed in forward, so a scheme that
depends on the sequence length (``dynamic``, ``longrope``) reads it there: ``start + T``, the tokens so far.
DeepSeek's latent attention also multiplies its score scale by YaRN's mscale squared (:func:`score_mscale`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import sympy

from archcalc.codegen.errors import UnsupportedError

if TYPE_CHECKING:
    from archcalc.codegen.emitter import Emitter
    from archcalc.spec.components import RopeScaling

#: What each scheme needs from the spec (``scaling: yarn`` alone records the scheme for counting only).
NEEDS = {
    "linear": ("factor",),
    "dynamic": ("factor", "original_context"),
    "llama3": ("factor", "low_freq_factor", "high_freq_factor", "original_context"),
    "yarn": ("factor", "original_context"),
    "longrope": ("short_factor", "long_factor", "original_context"),
    "proportional": ("fraction",),
}


@dataclass
class Scheme:
    """A scheme's part of the Rotary class: its docstring paragraph, its kind (the region of ``templates/rotary.py``
    that holds its __init__ and frequency lines), whether cos and sin are multiplied by ``self.attention_factor``,
    whether its frequencies follow the sequence length (computed in forward from the exponents: ``own_frequencies``)
    and, for YaRN, whether the ramp's bounds are rounded outwards (``truncate``)."""

    doc: list[str]
    kind: str
    attention_factor: bool = False
    own_frequencies: bool = False  # the frequencies follow the length: computed in forward, no buffer
    truncate: bool = True


def scaling_scheme(em: Emitter, scaling: RopeScaling, width: int) -> Scheme:
    """Declare the scheme's config fields and return its lines, for tables ``width`` features wide."""
    kind = scaling.type
    if kind not in NEEDS:
        raise UnsupportedError(f"codegen does not generate rotary scaling {kind!r}; it generates {', '.join(NEEDS)}")
    missing = [name for name in NEEDS[kind] if getattr(scaling, name) is None]
    if missing:
        raise UnsupportedError(f"rotary scaling {kind!r} needs its numbers to be generated: {', '.join(missing)} "
                               f"(e.g. scaling: {{type: {kind}, {', '.join(f'{n}: ...' for n in missing)}}}); a bare name "
                               "records the scheme for counting only")
    for name in ("factor", "low_freq_factor", "high_freq_factor", "beta_fast", "beta_slow"):
        value = getattr(scaling, name)
        if value is not None and not value > 0:
            raise UnsupportedError(f"rotary scaling {kind!r}: {name} must be above 0, got {value}")
    if scaling.original_context is not None and scaling.original_context < 2:
        raise UnsupportedError(f"rotary scaling {kind!r}: original_context must be at least 2, got {scaling.original_context}")
    if scaling.original_context is not None:
        em.field("rotary_original_context", sympy.Integer(scaling.original_context),
                 "max_position_embeddings (dynamic: the length the base starts growing at)" if kind == "dynamic" else
                 "original_max_position_embeddings: the context the model was trained on")
    if kind not in ("longrope", "proportional"):
        em.field("rotary_factor", float(scaling.factor), f"{kind} rotary scaling factor")
    schemes = {"linear": _linear, "dynamic": _dynamic, "llama3": _llama3, "yarn": _yarn, "longrope": _longrope,
               "proportional": _proportional}
    return schemes[kind](em, scaling, width)


def _linear(em: Emitter, s: RopeScaling, width: int) -> Scheme:
    return Scheme(
        ["Linear scaling (position interpolation; transformers'",
         "_compute_linear_scaling_rope_parameters): every frequency divided by rotary_factor, as if the",
         "positions were."],
        "linear")


def _dynamic(em: Emitter, s: RopeScaling, width: int) -> Scheme:
    if width <= 2:
        raise UnsupportedError(f"rotary scaling 'dynamic' needs a rotary width above 2 (it raises the base to width / (width - 2)), got {width}")
    return Scheme(
        ["Dynamic NTK scaling (transformers' _compute_dynamic_ntk_parameters): once the sequence is longer",
         "than rotary_original_context, the base grows with its length so the slowest frequency still turns",
         "less than once. The length is start + T, the tokens so far: generating with a KV cache, each new",
         "token gets the frequencies of the sequence up to it and the cached keys keep the ones they were",
         "rotated with, as in transformers' generate() (which recomputes its frequencies as the sequence",
         "grows and keeps its cache). transformers' module also keeps the longest length it has seen until a",
         "sequence within the original context resets it; this one keeps no state."],
        "dynamic", own_frequencies=True)


def _proportional(em: Emitter, s: RopeScaling, width: int) -> Scheme:
    if s.factor not in (None, 1):
        raise UnsupportedError(f"codegen generates proportional rotary positions without a factor, got {s.factor}")
    # transformers: int(partial_rotary_factor * head_dim // 2) pairs turn
    em.field("rotary_pairs", sympy.Integer(int(float(s.fraction) * width // 2)), "pairs of features that turn (the rest: frequency 0)")
    return Scheme(
        ["Proportional positions (Gemma 4's global layers; transformers'",
         "_compute_proportional_rope_parameters): the tables span the whole head, but only the first",
         "rotary_pairs frequencies (at the whole head's exponents) turn; the others are 0, so those pairs",
         "of features keep no position."],
        "proportional")


def _llama3(em: Emitter, s: RopeScaling, width: int) -> Scheme:
    # equal factors (Llama 4 Scout's 1.0 and 1.0) leave no band between: smooth is then inf or nan, but torch.where
    # picks it for no frequency, as in transformers
    em.field("rotary_low_freq_factor", float(s.low_freq_factor), "wavelengths above original_context / this are divided by factor")
    em.field("rotary_high_freq_factor", float(s.high_freq_factor), "wavelengths below original_context / this are kept")
    return Scheme(
        ["Llama 3.1 scaling (transformers' _compute_llama3_parameters): frequencies whose wavelength is",
         "longer than original_context / low_freq_factor are divided by factor, those shorter than",
         "original_context / high_freq_factor are kept, and those between blend the two."],
        "llama3")


def _yarn(em: Emitter, s: RopeScaling, width: int) -> Scheme:
    em.field("rotary_beta_fast", float(s.beta_fast or 32.0), "frequencies turning more often than this over the original context are kept")
    em.field("rotary_beta_slow", float(s.beta_slow or 1.0), "frequencies turning less often than this are divided by factor")
    _attention_factor(em, yarn_attention_factor(s), s.attention_factor is not None,
                      "0.1 * mscale * ln(factor) + 1 over the same with mscale_all_dim" if s.mscale and s.mscale_all_dim else
                      "0.1 * ln(factor) + 1")
    return Scheme(
        ["YaRN scaling (Peng et al. 2023; transformers' _compute_yarn_parameters): frequencies that turn",
         "more than beta_fast times over the original context are kept, those that turn fewer than",
         "beta_slow times are divided by factor, with a linear ramp over the features between; cos and sin",
         "are multiplied by the attention factor."],
        "yarn", attention_factor=True, truncate=s.truncate is not False)


def _longrope(em: Emitter, s: RopeScaling, width: int) -> Scheme:
    for name in ("short_factor", "long_factor"):
        values = getattr(s, name)
        if len(values) != width // 2 or not all(v > 0 for v in values):
            raise UnsupportedError(f"rotary scaling 'longrope': {name} must hold {width // 2} positive factors "
                                   f"(one per pair of the {width} rotary features), got {len(values)}")
        _tuple_field(em, f"rotary_{name}", tuple(float(v) for v in values),
                     "longrope: each frequency's divisor " + ("while the sequence fits the original context" if name == "short_factor"
                                                                else "once the sequence outgrows the original context"))
    if s.attention_factor is None and s.factor is None:
        raise UnsupportedError("rotary scaling 'longrope' needs factor (max_position_embeddings / original_context) or attention_factor")
    _attention_factor(em, longrope_attention_factor(s), s.attention_factor is not None,
                      "sqrt(1 + ln(factor) / ln(original_context)), factor = " + repr(s.factor))
    return Scheme(
        ["LongRoPE scaling (Phi-3.5, Phi-4-mini; transformers' _compute_longrope_parameters): each",
         "frequency divided by its own factor, from rotary_short_factor while the sequence fits",
         "rotary_original_context and from rotary_long_factor once it is longer; cos and sin are multiplied",
         "by the attention factor. The sequence is start + T tokens, the tokens so far: generating with a KV",
         "cache, the cached keys keep the factors they were rotated with, as transformers' generate() does",
         "for most models (for Phi-3, generate() runs the whole sequence again once it first outgrows the",
         "original context, as transformers' Phi-3 does, so every key gets the long factors)."],
        "longrope", attention_factor=True, own_frequencies=True)


def yarn_attention_factor(s: RopeScaling) -> float:
    """transformers' ``_compute_yarn_parameters``: the given factor, else YaRN's mscale of ``factor``."""
    if s.attention_factor is not None:
        return float(s.attention_factor)
    if s.mscale and s.mscale_all_dim:
        return float(_mscale(s.factor, s.mscale) / _mscale(s.factor, s.mscale_all_dim))
    return _mscale(s.factor)


def longrope_attention_factor(s: RopeScaling) -> float:
    """transformers' ``_compute_longrope_parameters``: the given factor, else sqrt(1 + ln(factor) / ln(original))."""
    if s.attention_factor is not None:
        return float(s.attention_factor)
    if s.factor <= 1.0:
        return 1.0
    return math.sqrt(1 + math.log(s.factor) / math.log(s.original_context))


def _mscale(scale: float, mscale: float = 1.0) -> float:
    """YaRN's attention temperature (transformers' get_mscale / DeepSeek's yarn_get_mscale)."""
    return 1.0 if scale <= 1 else 0.1 * mscale * math.log(scale) + 1.0


def score_mscale(em: Emitter) -> str | None:
    """DeepSeek's latent attention (transformers' ``yarn_apply_mscale``): with rotary scaling that gives
    ``mscale_all_dim``, the score scale is multiplied by mscale(factor, mscale_all_dim) squared. The config field
    that holds that mscale, or None."""
    embed = next(c for c in em.lowered.root.children if c.name == "embed")
    s = embed.attrs.rotary_scaling
    if s is None or not s.mscale_all_dim:
        return None
    if s.factor is None:
        raise UnsupportedError(f"rotary scaling {s.type!r} with mscale_all_dim needs factor (DeepSeek scales its scores by it)")
    return em.field("attn_mscale", _mscale(s.factor, s.mscale_all_dim),
                    "DeepSeek: scores scaled by this squared, 0.1 * mscale_all_dim * ln(rotary factor) + 1")


def _attention_factor(em: Emitter, value: float, given: bool, formula: str) -> None:
    em.field("rotary_attention_factor", value, "scales cos and sin" + ("" if given else f": {formula}"))


def _tuple_field(em: Emitter, name: str, values: tuple[float, ...], comment: str) -> None:
    """A config field holding a tuple of floats (the Emitter's own ``field`` takes numbers only)."""
    if em.fields.get(name, (values,))[0] != values:
        raise UnsupportedError(f"codegen: two values for config field {name!r}")
    em.fields.setdefault(name, (values, comment))  # type: ignore[arg-type]
