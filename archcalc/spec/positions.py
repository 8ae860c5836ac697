"""How positions enter a model (the spec's ``embedding.position``): a learned table, sinusoidal, rotary (with its
base, the rotated share of a head and a scaling scheme for long contexts), T5's relative bias, ALiBi's linear
biases (no parameters), or none.

>>> Position.model_validate({"kind": "rotary", "scaling": "yarn"}).scaling.type
'yarn'
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import Field, PlainValidator, StrictBool, StrictInt, model_validator

from archcalc.spec.fields import FieldError, IntExpr, PositiveReal, Real, Strict, constant, shorthand

ROPE_TYPE = re.compile(r"[a-z][a-z0-9_]{0,31}", re.ASCII)


def _rope_type(value: Any) -> str:
    """A rotary scaling scheme's name, as transformers' ``rope_type`` spells it (parameter-free: counts ignore it)."""
    if not isinstance(value, str) or not ROPE_TYPE.fullmatch(value):
        raise FieldError(f"expected a rotary scaling name such as 'yarn' or 'llama3', got {value!r:.40}")
    return value



class RopeScaling(Strict):
    """Rotary frequency scaling for contexts longer than the one trained on, as transformers' ``rope_parameters``
    name it (``type`` is its ``rope_type``). Changes no parameter; the generated module applies it.

    - ``linear``: positions divided by ``factor``;
    - ``dynamic``: NTK-aware base growth once a sequence passes ``original_context`` (``factor``);
    - ``llama3``: Llama 3.1's per-frequency rescaling (``factor``, ``low_freq_factor``, ``high_freq_factor``,
      ``original_context``);
    - ``yarn``: YaRN (``factor``, ``original_context``, ``beta_fast``, ``beta_slow``, ``mscale``, ``mscale_all_dim``,
      ``attention_factor``, ``truncate``);
    - ``longrope``: Phi-3's per-frequency ``short_factor``/``long_factor`` lists (``original_context``, ``attention_factor``).

    A bare name (``scaling: yarn``) records the scheme without its numbers: counts are unaffected, but code is not
    generated for it.
    """

    type: Annotated[str, PlainValidator(lambda v: _rope_type(v))]
    factor: PositiveReal | None = None
    original_context: Annotated[StrictInt, Field(ge=1)] | None = None  # original_max_position_embeddings
    low_freq_factor: Real | None = None
    high_freq_factor: Real | None = None
    beta_fast: Real | None = None
    beta_slow: Real | None = None
    mscale: Real | None = None
    mscale_all_dim: Real | None = None
    attention_factor: Real | None = None
    truncate: StrictBool | None = None
    # proportional (Gemma 4's global layers): the first fraction of a head's frequency pairs rotate at base^(-2i / width)
    # (i counted over the whole head), the others not at all (frequency zero)
    fraction: PositiveReal | None = None
    short_factor: list[Real] | None = Field(None, max_length=4096)
    long_factor: list[Real] | None = Field(None, max_length=4096)

    @classmethod
    def _preprocess(cls, data: Any, info: Any) -> Any:
        return {"type": data} if isinstance(data, str) else data


class LocalRotary(Strict):
    """The rotary tables of the sliding-window ('local') layers where they differ from the others' (Gemma 3: base
    10,000 and no scaling on local layers; 1,000,000 and linear scaling on global ones). No parameters."""

    base: PositiveReal
    scaling: RopeScaling | None = None  # none: the local layers' tables are not scaled


class Position(Strict):
    """How positions enter: ``learned`` table, ``sinusoidal``, ``rotary`` (buffers only), ``relative-bias``, ``alibi``
    (Press et al. 2022: head h adds slope_h · (j - i) to the score of query i over key j; no parameters), ``none``.
    ``pairing`` (rotary), ``form`` (ALiBi) and ``longrope_rerun`` change no parameter: the generated module reads them."""

    kind: Literal["learned", "sinusoidal", "rotary", "relative-bias", "alibi", "none"] = "none"
    length: IntExpr | None = None  # table length for learned positions
    rotary_fraction: IntExpr | None = None  # share of each head's width that is rotated (e.g. 1/4); default all
    base: PositiveReal = 10000.0  # rotary base (theta); its powers set the frequencies
    buckets: IntExpr | None = None  # relative-bias buckets (T5: 32)
    max_distance: IntExpr | None = None
    scaling: RopeScaling | None = None  # rotary frequency scaling for long contexts (transformers' rope_type)
    local: LocalRotary | None = None  # the sliding-window layers' own rotary base and scaling (default: these)
    # alibi: the slopes are 2^(-max_bias * k / n), k = 1..n, for n heads a power of two (ALiBi's, BLOOM's and MPT's 8)
    max_bias: PositiveReal | None = None
    # learned: rows of the table before position 0's (OPT's 2: position p reads row p + offset; length counts them too)
    offset: Annotated[StrictInt, Field(ge=0, le=1024)] = 0
    # rotary: which features of a head rotate together: ``half`` (j with j + width / 2: Llama, GPT-NeoX, ...),
    # ``interleaved`` (2j with 2j + 1: GPT-J, Cohere, Llama 4) or ``deinterleaved`` (2j with 2j + 1, written out as j and
    # j + width / 2: DeepSeek); none: half, or deinterleaved for latent attention
    pairing: Literal["half", "interleaved", "deinterleaved"] | None = None
    # alibi: ``relative`` adds slope_h * (j - i) (BLOOM, MPT); ``bfloat16_scaled`` rounds the slopes and slope_h * j to
    # bfloat16 and divides the bias by sqrt(head width), as transformers' Falcon (Falcon-RW) computes it
    form: Literal["relative", "bfloat16_scaled"] = "relative"
    # rotary with longrope scaling: generation runs the whole sequence again once it outgrows the scaling's
    # original_context, so that every cached key gets the long factors (transformers' Phi-3)
    longrope_rerun: StrictBool = False

    @classmethod
    def _preprocess(cls, data: Any, info: Any) -> Any:
        return shorthand(data)

    @model_validator(mode="after")
    def _needs(self) -> Position:
        if self.kind == "learned" and self.length is None:
            raise FieldError("learned positions need 'length' (the context length, e.g. T)")
        if self.kind == "relative-bias" and self.buckets is None:
            raise FieldError("relative-bias positions need 'buckets' (T5: 32)")
        if self.offset and self.kind != "learned":
            raise FieldError("offset only applies to 'kind: learned'", sub=("offset",), key=True)
        if self.max_bias is not None and self.kind != "alibi":
            raise FieldError("max_bias only applies to 'kind: alibi'", sub=("max_bias",), key=True)
        for name, kind, default in (("form", "alibi", "relative"), ("pairing", "rotary", None), ("longrope_rerun", "rotary", False)):
            if getattr(self, name) != default and self.kind != kind:
                raise FieldError(f"{name} only applies to 'kind: {kind}'", sub=(name,), key=True)
        share = constant(self.rotary_fraction)
        if share is not None and not 0 < share <= 1:
            raise FieldError(f"rotary_fraction = {self.rotary_fraction}; expected a share of each head above 0 and at most 1 "
                             "(e.g. 1/4)", sub=("rotary_fraction",))
        return self
