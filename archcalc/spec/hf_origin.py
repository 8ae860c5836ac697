"""A spec's ``hf:`` section: the transformers model it describes, both ways (``import-hf`` and ``export-hf``).

One description per family: the spec's ``model:`` says what the model is; ``hf.keys`` says, for each key of
transformers' config class, which hyperparameter (``symbol``) or model setting (``sets``, paths into ``model:``)
it fills, the class default, the fallback where the class leaves it null, and the keys transformers ignores or
refuses. ``import-hf`` copies the bundled spec's ``model:`` and fills it from a config.json with this table;
``export-hf`` writes the symbols back (plus ``symbols``: export-only expressions, ``config``: constant keys, and
each size's own ``hf:`` keys). See docs/adding-a-model-type.md.

>>> from archcalc.spec import load_spec
>>> keys = load_spec("llama").hf.keys
>>> keys["head_dim"].symbol, keys["head_dim"].default, keys["head_dim"].fallback.text
('d_head', None, 'd / H')
>>> keys["rms_norm_eps"].sets
['block.norm.eps', 'final_norm.eps']
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import Field, PlainValidator, PrivateAttr, StrictBool, StrictInt, ValidationInfo, model_serializer, model_validator

from archcalc.spec.expr import Expr
from archcalc.spec.fields import FieldError, Identifier, PositiveReal, Real, Strict, dump_expr, parse_field

MODEL_TYPE = re.compile(r"[a-z][a-z0-9_-]{0,39}", re.ASCII)  # these three: fullmatch only
CLASS_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,79}", re.ASCII)
CONFIG_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,79}", re.ASCII)
MODEL_PATH = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,39}(?:\.(?:[A-Za-z_][A-Za-z0-9_]{0,39}|[0-9]{1,3}|\*)){0,8}", re.ASCII)


def _json_value(value: Any, depth: int = 0) -> Any:
    """A plain JSON value for config.json (numbers finite, strings short, nesting shallow)."""
    if depth > 4:
        raise FieldError("config values nest at most 4 deep")
    if value is None or isinstance(value, (bool, int, str)):
        if isinstance(value, str) and len(value) > 200:
            raise FieldError(f"config strings are at most 200 characters, got {len(value)}")
        if isinstance(value, int) and not isinstance(value, bool) and abs(value) > 10**30:
            raise FieldError(f"config integers are at most 10^30 in size, got {value:.3e}")
        return value
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise FieldError(f"expected a finite number, got {value!r}")
        return value
    if isinstance(value, list):
        if len(value) > 4096:
            raise FieldError("config lists hold at most 4096 items")
        return [_json_value(v, depth + 1) for v in value]
    if isinstance(value, dict):
        for k in value:
            if not isinstance(k, str) or not CONFIG_KEY.fullmatch(k):
                raise FieldError(f"config keys are identifiers, got {k!r:.40}")
        return {k: _json_value(v, depth + 1) for k, v in value.items()}
    raise FieldError(f"expected a JSON value (number, string, true/false, null, list, mapping), got {type(value).__name__}")


JSONValue = Annotated[Any, PlainValidator(_json_value)]
json_value = _json_value  # the same check, for the importer's kept keys (archcalc.hf.build)


def _class_name(value: Any) -> str:
    if not isinstance(value, str) or not CLASS_NAME.fullmatch(value):
        raise FieldError(f"expected a transformers class name such as 'LlamaForCausalLM', got {value!r:.40}")
    return value


def _model_type(value: Any) -> str:
    if not isinstance(value, str) or not MODEL_TYPE.fullmatch(value):
        raise FieldError(f"expected a transformers model_type such as 'llama' or 'gpt_neox' (lowercase letters, digits, '_', '-'), got {value!r:.40}")
    return value


def _layout(value: Any) -> str:
    from archcalc.hf.weights import LAYOUTS  # the layouts are data of their own (no imports), read here at validation

    if not isinstance(value, str) or value not in LAYOUTS:
        raise FieldError(f"expected a weight-name layout of archcalc/hf/weights.py ({', '.join(LAYOUTS)}), got {value!r:.40}")
    return value


def _config_key(value: Any) -> str:
    if not isinstance(value, str) or not CONFIG_KEY.fullmatch(value):
        raise FieldError(f"expected a config.json key (letters, digits, '_'), got {value!r:.40}")
    return value


def _model_path(value: Any) -> str:
    if not isinstance(value, str) or not MODEL_PATH.fullmatch(value):
        raise FieldError(f"expected a path into model:, such as 'block.norm.eps' or 'blocks.*.mlp.bias', got {value!r:.60}")
    return value


ConfigKey = Annotated[str, PlainValidator(_config_key)]
ModelPath = Annotated[str, PlainValidator(_model_path)]


def _parse_sub(value: Any, info: ValidationInfo, want: str, sub: tuple) -> Expr:
    try:
        return parse_field(value, info, want)
    except FieldError as e:
        raise FieldError(str(e), sub=sub + e.sub, offset=e.offset) from None


class HFKey(Strict):
    """One key of transformers' config class, as ``import-hf`` reads it (``hf.keys.<key>``).

    Its role is one of: ``symbol`` (a hyperparameter, written back by ``export-hf``), ``sets`` (model settings: the
    value goes to each path in ``model:``; null drops the setting), ``allowed`` (any other value would change the
    model: refused, with ``why``), ``ignored`` (changes no architecture), ``noted`` (transformers does not read it;
    the imported spec's notes say so), or none: a key a named hook or the rotary reader reads with this default."""

    symbol: Identifier | None = None
    sets: list[ModelPath] | None = Field(None, min_length=1, max_length=16)
    default: JSONValue = None  # transformers' config-class default (null: the class leaves it None)
    fallback: Any = None  # symbol: where the value is null, this expression (head_dim: d / H); parsed below
    min: StrictInt = 1  # smallest integer accepted
    type: Literal["int", "real", "bool", "activation", "string", "inverse_sqrt", "inverse"] | None = None  # sets: default's type
    nullable: StrictBool = False  # sets: null is a value (it drops the setting), not an error
    map: list[list[JSONValue]] | None = Field(None, max_length=16)  # sets: [[config value, model value], ...]
    divides: Identifier | None = None  # symbol: transformers refuses a config where this value does not divide that
    allowed: list[JSONValue] | None = Field(None, min_length=1, max_length=8)
    why: str = Field("", max_length=200)  # allowed: what another value would mean
    ignored: str | None = Field(None, max_length=200)
    noted: str | None = Field(None, max_length=200)
    always: StrictBool = False  # every config.json transformers saves for this type has it: absent, another type

    @model_validator(mode="after")
    def _one_role(self, info: ValidationInfo) -> HFKey:
        roles = [r for r in ("symbol", "sets", "allowed", "ignored", "noted") if getattr(self, r) is not None]
        if len(roles) > 1:
            raise FieldError(f"a key has one role; got {' and '.join(roles)}", sub=(roles[1],), key=True)
        kinds: dict[str, str] = (info.context or {}).get("kinds", {})
        if self.symbol is not None and kinds and self.symbol not in kinds:
            raise FieldError(f"symbol {self.symbol!r} is not a declared hyperparameter", sub=("symbol",))
        for name, role in (("fallback", "symbol"), ("divides", "symbol"), ("map", "sets"), ("type", "sets"),
                           ("nullable", "sets"), ("why", "allowed")):
            if name in self.model_fields_set and getattr(self, role) is None:
                raise FieldError(f"{name} goes with {role}", sub=(name,), key=True)
        if self.allowed is not None and not self.why:
            raise FieldError("allowed needs why: what another value would mean", sub=("allowed",), key=True)
        for i, pair in enumerate(self.map or ()):
            if len(pair) != 2:
                raise FieldError("expected [config value, model value]", sub=("map", i))
        if self.fallback is not None and not isinstance(self.fallback, Expr):
            object.__setattr__(self, "fallback", _parse_sub(self.fallback, info, "int", ("fallback",)))
        if self.divides is not None and kinds and self.divides not in kinds:
            raise FieldError(f"divides {self.divides!r}: not a declared hyperparameter", sub=("divides",))
        return self

    @model_serializer(mode="wrap")
    def _dump(self, handler) -> dict[str, Any]:
        data = {k: v for k, v in handler(self).items() if k in self.model_fields_set and v is not None}  # as written
        if isinstance(self.fallback, Expr):
            data["fallback"] = dump_expr(self.fallback)
        return data


class HFRope(Strict):
    """How the config class holds rotary positions: the defaults of its ``rope_parameters`` (import-hf reads them
    into ``model.embedding.position``; export-hf writes them from the lowered model)."""

    theta: PositiveReal  # rope_theta's class default
    fraction: Real | None = None  # partial_rotary_factor's class default (GPT-NeoX: 0.25); none: the whole head
    theta_key: ConfigKey = "rope_theta"  # the top-level keys read when rope_parameters lacks them (NeoX's
    fraction_key: ConfigKey = "partial_rotary_factor"  # rotary_emb_base and rotary_pct)
    own_original_context: StrictBool = False  # Phi-3: its top-level original_max_position_embeddings (default in keys)
    # replaces the one in the rope parameters
    aliases: dict[str, str] = Field(default_factory=dict, max_length=8)  # other names of a rope_type (Phi-3: su)
    parameters: dict[str, JSONValue] | None = None  # the class's rope parameters when a config gives none (gpt-oss)
    # the sliding layers' own rotary base (Gemma 3's rope_local_base_freq, class default 10,000): rope_parameters then
    # holds one set per layer type, full_attention and sliding_attention, read into position and position.local
    local_theta: PositiveReal | None = None
    local_theta_key: ConfigKey = "rope_local_base_freq"
    # false: no key gives it, the class default alone (OLMo 3: a top-level rope_theta fills in the full layers' set only)
    local_theta_keyed: StrictBool = True


class HFOrigin(Strict):
    """The transformers model a spec describes: ``model_type`` (config.json's) and ``weights``, the layout of its
    weight names (:data:`archcalc.hf.weights.LAYOUTS`) that ``archcalc generate`` loads and saves through.

    ``keys``: transformers' config class key by key (:class:`HFKey`; import-hf reads them, export-hf writes the
    ``symbol`` ones); ``aliases``: the class's attribute_map; ``rope``: its rotary defaults; ``hooks``: named
    functions (archcalc/hf/hooks.py) for what a table cannot say. ``symbols``: export-only keys whose values are
    expressions over the hyperparameters (``rotary_dim: d_head / 4``); ``config``: keys with the same value at every
    size (``hidden_act: silu``). A size adds its own keys (``hf:`` in the size). ``export-hf`` writes the symbols,
    these keys and the rotary base and scaling of the size.
    """

    model_type: Annotated[str, PlainValidator(_model_type)]
    # other config model_type values read as this one's: configs of a model type transformers has no class of its own
    # for, whose architectures name this type's class (Kimi K2's kimi_k2 configs are DeepseekV3ForCausalLM)
    also_types: list[Annotated[str, PlainValidator(_model_type)]] = Field(default_factory=list, max_length=8)
    # transformers' weight names: a layout of archcalc/hf/weights.py (none: the bundled spec's of this model type)
    weights: Annotated[str, PlainValidator(_layout)] | None = None
    architectures: list[Annotated[str, PlainValidator(_class_name)]] | None = Field(None, max_length=4)
    symbols: dict[str, Any] = Field(default_factory=dict, max_length=64)  # parsed into expressions by the spec
    config: dict[str, JSONValue] = Field(default_factory=dict, max_length=128)
    keys: dict[ConfigKey, HFKey] = Field(default_factory=dict, max_length=200)
    aliases: dict[ConfigKey, ConfigKey] = Field(default_factory=dict, max_length=16)
    rope: HFRope | None = None
    hooks: list[Identifier] = Field(default_factory=list, max_length=8)
    _key_symbols: dict[str, Expr] = PrivateAttr(default_factory=dict)

    @model_validator(mode="after")
    def _parse_symbols(self, info: ValidationInfo) -> HFOrigin:
        parsed: dict[str, Expr] = {}
        for key, value in self.symbols.items():
            if not isinstance(key, str) or not CONFIG_KEY.fullmatch(key):
                raise FieldError(f"config keys are identifiers, got {key!r:.40}", sub=("symbols", key), key=True)
            if isinstance(value, Expr):
                parsed[key] = value
                continue
            is_bool = isinstance(value, bool) or (isinstance(value, str) and (info.context or {}).get("kinds", {}).get(value.strip()) == "bool")
            parsed[key] = _parse_sub(value, info, "bool" if is_bool else "int", ("symbols", key))
        object.__setattr__(self, "symbols", parsed)
        kinds = (info.context or {}).get("kinds", {})
        for key, entry in self.keys.items():
            if entry.symbol is None:
                continue
            if key in parsed:
                raise FieldError(f"{key!r} is written from keys.{key}.symbol; give it once", sub=("symbols", key), key=True)
            self._key_symbols[key] = _parse_sub(entry.symbol, info, kinds.get(entry.symbol, "int"), ("keys", key, "symbol"))
        return self

    def key_symbols(self) -> dict[str, Expr]:
        """The config keys that hold a hyperparameter (``hidden_size: {symbol: d}``), as expressions."""
        return dict(self._key_symbols)

    def exported_symbols(self) -> dict[str, Expr]:
        """Every config key export-hf computes from the hyperparameters: the keys' symbols, then ``symbols``."""
        return dict(self._key_symbols) | self.symbols

    @model_serializer(mode="wrap")
    def _dump(self, handler) -> dict[str, Any]:
        data = handler(self)
        data["symbols"] = {k: dump_expr(v) for k, v in self.symbols.items()}
        return data
