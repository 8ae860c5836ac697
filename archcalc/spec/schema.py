"""The top of a spec: hyperparameters (the symbols), the model, and named sizes.

>>> from archcalc.spec import load_spec
>>> spec = load_spec("gpt2")
>>> spec.hyperparameters["d_head"].default.text, sorted(spec.sizes)[:2]
('d / H', ['large', 'medium'])
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, PrivateAttr, StrictInt, ValidationInfo, field_validator, model_serializer, model_validator

from archcalc.quantity import parse_count
from archcalc.spec.components import Model, RopeScaling
from archcalc.spec.expr import FUNCTIONS, KEYWORDS, Expr
from archcalc.spec.fields import IDENTIFIER, FieldError, Identifier, PositiveReal, Strict, dump_expr, parse_field, split_hint
from archcalc.spec.hf_origin import HFOrigin, JSONValue
from archcalc.spec.limits import first_excess
from archcalc.spec.suggest import did_you_mean

MAX_VALUE = 10**18  # no hyperparameter of a real or hypothetical model comes near this
MAX_HYPERPARAMETERS = 128  # bounds the chains of defaults (recursion) and the formula's substitutions
MAX_SIZES = 64  # each size is counted in turn: keeps a spec (and an error in its last size) fast


class PositionOverride(Strict):
    """A size's own rotary base and scaling (Llama 3 uses base 500,000 where Llama 2 uses 10,000)."""

    base: PositiveReal | None = None
    scaling: RopeScaling | None = None


class Hyperparameter(Strict):
    """A symbol of the spec: an integer (a width, a count) or a boolean (a switch)."""

    doc: str = Field("", max_length=500, description="what it is, in a few words (pages and --help show it)")
    type: Literal["int", "bool"] = Field("int", description="int (a width, a count) or bool (a switch)")
    default: Any = Field(None, description="its value where a size gives none: a number, true/false, or an expression "
                                           "over other hyperparameters (4 * d)")  # parsed below
    min: StrictInt = Field(1, description="the smallest value an int may take (widths and counts are positive)")
    max: StrictInt | None = Field(None, description="the largest value an int may take")
    multiple_of: StrictInt | None = Field(None, description="values the family allows, e.g. 64 (the solver keeps to them)")

    @model_validator(mode="after")
    def _parse_default(self, info: ValidationInfo) -> Hyperparameter:
        if self.default is not None and not isinstance(self.default, Expr):
            object.__setattr__(self, "default", _parse_sub(self.default, info, self.type, ("default",)))
        if self.type == "bool" and (self.min != 1 or self.max is not None or self.multiple_of is not None):
            raise FieldError("min, max and multiple_of only apply to int hyperparameters")
        if self.multiple_of is not None and self.multiple_of < 1:
            raise FieldError("multiple_of must be at least 1", sub=("multiple_of",))
        return self

    @model_serializer(mode="wrap")
    def _dump(self, handler) -> dict[str, Any]:
        data = handler(self)
        if isinstance(self.default, Expr):
            data["default"] = _plain(self.default)
        return data


class Size(Strict):
    """A named size: a value for some hyperparameters, and optionally the figure its authors reported."""

    values: dict[str, Expr] = Field({}, description="a hyperparameter's name, its value for this size (written "
                                                     "beside the keys below: small: {L: 12, d: 768})")
    reported: StrictInt | None = Field(None, description="the parameter count its authors published (1.3B, 175e9), "
                                                         "set beside the exact one")
    doc: str = Field("", max_length=500, description="a line about this size (a checkpoint's name, a caveat)")
    position: PositionOverride | None = Field(None, description="this size's rotary base and scaling, where they "
                                                                "differ from the model's")
    hf: dict[str, JSONValue] = Field(default_factory=dict, max_length=64,
                                     description="config.json keys of this size, for export-hf")

    model_config = {"arbitrary_types_allowed": True}

    @classmethod
    def _preprocess(cls, data: Any, info: ValidationInfo) -> Any:
        """Split ``{L: 12, d: 768, reported: 1.3B}`` into hyperparameter values and the rest."""
        if isinstance(data, Size):
            return data
        if not isinstance(data, dict):
            raise FieldError(f"expected a mapping of hyperparameter values such as {{L: 12, d: 768}}, got {data!r:.40}")
        kinds: dict[str, str] = (info.context or {}).get("kinds", {})
        values: dict[str, Expr] = {}
        out: dict[str, Any] = {"values": values}
        for key in data:  # before any value: an expression split at its comma leaves a key such as "256)"
            if split_hint(key):
                raise FieldError(f"unknown hyperparameter {key!r}{split_hint(key)}", sub=(key,), key=True)
        for key, value in data.items():
            if key in ("doc", "position", "hf"):
                out[key] = value
            elif key == "reported":
                try:
                    out["reported"] = parse_count(value)
                except ValueError as e:
                    raise FieldError(str(e), sub=("reported",)) from None
            elif key not in kinds:
                choices = sorted(kinds) + ["reported", "doc"]
                raise FieldError(
                    f"unknown hyperparameter {key!r}{did_you_mean(key, choices)}; expected one of: {', '.join(choices)}",
                    sub=(key,), key=True,
                )
            else:
                values[key] = _parse_sub(value, info, kinds[key], (key,))
        return out

    @model_serializer(mode="plain")
    def _dump(self) -> dict[str, Any]:
        data: dict[str, Any] = {k: _plain(v) for k, v in self.values.items()}
        if self.reported is not None:
            data["reported"] = self.reported
        if self.doc:
            data["doc"] = self.doc
        if self.position is not None:
            data["position"] = self.position.model_dump(mode="json", exclude_none=True)
        if self.hf:
            data["hf"] = self.hf
        return data


class Spec(Strict):
    """A whole spec file, validated: every expression parsed, every name declared, no default cycles."""

    name: Identifier = Field(description="the spec's name: letters, digits and _ (archcalc count NAME finds a bundled one)")
    title: str = Field("", max_length=200, description="the model's name as people write it")
    source: str = Field("", max_length=1000, description="where the architecture and the sizes come from (papers as "
                                                         "arXiv:ID become links)")
    notes: str = Field("", max_length=20_000, description="anything a reader should know: conventions, caveats")
    hyperparameters: dict[str, Hyperparameter] = Field(description="the symbols, each with the keys below")
    model: Model = Field(description="the architecture, with the keys below")
    sizes: dict[str, Size] = Field({}, description="named sizes, each binding some hyperparameters")
    hf: HFOrigin | None = Field(None, description="how transformers names this family (config keys, weight names): "
                                                  "see below")  # lets codegen emit load_hf_state_dict
    _source: Any = PrivateAttr(default=None)  # the parsed file, for error positions

    @field_validator("hyperparameters", mode="before")
    @classmethod
    def _names(cls, value: Any) -> Any:
        if isinstance(value, dict):
            for i, name in enumerate(value):
                if i == MAX_HYPERPARAMETERS:
                    raise FieldError(f"more than {MAX_HYPERPARAMETERS} hyperparameters; expected a smaller spec", sub=(name,), key=True)
                if not IDENTIFIER.fullmatch(str(name)) or name in KEYWORDS or name in FUNCTIONS:
                    raise FieldError(
                        f"hyperparameter name {name!r} must be an identifier (letters, digits, '_'; at most 32) "
                        "and not a keyword or function name",
                        sub=(name,), key=True,
                    )
        return value

    @field_validator("sizes", mode="before")
    @classmethod
    def _size_names(cls, value: Any) -> Any:
        if isinstance(value, dict):
            for i, name in enumerate(value):
                if i == MAX_SIZES:
                    raise FieldError(f"more than {MAX_SIZES} sizes; expected a smaller spec", sub=(name,), key=True)
                if not isinstance(name, str) or not 0 < len(name) <= 32 or not name.replace(".", "").replace("-", "").replace("_", "").isalnum():
                    raise FieldError(f"size name {name!r} must be letters, digits, '.', '-' or '_'", sub=(name,), key=True)
        return value

    @model_validator(mode="after")
    def _no_cycles(self) -> Spec:
        graph = {
            name: sorted(hp.default.names) if isinstance(hp.default, Expr) else []
            for name, hp in self.hyperparameters.items()
        }
        state: dict[str, int] = {}

        def visit(node: str, trail: list[str]) -> None:
            state[node] = 1
            for nxt in graph.get(node, []):
                if state.get(nxt) == 1:
                    cycle = trail[trail.index(nxt):] + [nxt] if nxt in trail else [node, nxt]
                    raise FieldError(
                        f"cycle among defaults: {' -> '.join(cycle)}; give one of them a value or a default that does not refer back",
                        sub=("hyperparameters", cycle[0], "default"),
                    )
                if state.get(nxt) is None:
                    visit(nxt, trail + [nxt])
            state[node] = 2

        for name in graph:
            if name not in state:
                visit(name, [name])
        self._bound_degrees(graph)
        return self

    def _bound_degrees(self, graph: dict[str, list[str]]) -> None:
        """Defaults substitute into each other (d_ff = 4*d_head, d_head = d/H) and into the model's fields: bound
        what they grow to (degree, nodes, min/max operations), so no formula built from them is costly."""
        defaults = {n: hp.default for n, hp in self.hyperparameters.items() if isinstance(hp.default, Expr)}
        substituted = {n for n, e in defaults.items() if self.hyperparameters[n].type == "int" and not e.constant}
        excess = first_excess(defaults, substituted, self.model)
        if excess is not None:
            loc, why = excess
            sub = ("hyperparameters", loc[0], "default") if len(loc) == 1 else loc
            raise FieldError(f"{defaults[loc[0]].text if len(loc) == 1 else 'this value'} {why}", sub=sub)

    def kinds(self) -> dict[str, str]:
        return {name: hp.type for name, hp in self.hyperparameters.items()}


def _parse_sub(value: Any, info: ValidationInfo, want: str, sub: tuple) -> Expr:
    try:
        return parse_field(value, info, want)
    except FieldError as e:
        raise FieldError(str(e), sub=sub + e.sub, offset=e.offset) from None


_plain = dump_expr
