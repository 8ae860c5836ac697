"""From parsed YAML to a validated :class:`Spec`, turning pydantic's errors into ``file:line:col`` lines."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from archcalc.errors import SpecError, Where
from archcalc.spec.expr import ExprError
from archcalc.spec.fields import FieldError
from archcalc.spec.schema import Spec
from archcalc.spec.source import Source
from archcalc.spec.suggest import did_you_mean

_TOP_KEYS = ("name", "title", "source", "notes", "hyperparameters", "model", "sizes", "hf")


def spec_from_source(source: Source) -> Spec:
    """Validate ``source.data`` as a spec; the returned spec remembers where each value came from."""
    _not_a_transformers_config(source)
    kinds = _declared_kinds(source.data)
    try:
        spec = Spec.model_validate(source.data, context={"kinds": kinds})
    except ValidationError as e:
        raise _translate(e, source) from None
    spec._source = source
    return spec


def _not_a_transformers_config(source: Source) -> None:
    """A transformers config.json given where a spec was expected: say so, and point at --hf."""
    data = source.data
    if isinstance(data, dict) and "model_type" in data and "model" not in data and "hyperparameters" not in data:
        raise SpecError.at(source.where(("model_type",), key=True),
                           f"this looks like a transformers config.json (model_type {str(data['model_type'])[:40]!r}), "
                           f"not an archcalc spec; give it with --hf, e.g. archcalc count --hf {source.file} "
                           f"(or turn it into a spec with: archcalc import-hf {source.file})")


def where(spec: Spec, loc: tuple, offset: int = 0) -> Where:
    """The place in the spec file of the value at ``loc`` (plus ``offset`` columns)."""
    source: Source | None = spec._source
    if source is None:
        return Where("<spec>", 1, 1)
    return source.where(loc).shifted(offset)


def _declared_kinds(data: Any) -> dict[str, str]:
    """Names and types of the declared hyperparameters, read before validation so expressions can be checked."""
    hps = data.get("hyperparameters") if isinstance(data, dict) else None
    if not isinstance(hps, dict):
        return {}
    return {
        str(name): ("bool" if isinstance(decl, dict) and decl.get("type") == "bool" else "int")
        for name, decl in hps.items()
    }


def _translate(error: ValidationError, source: Source) -> SpecError:
    """The first of pydantic's errors, as a SpecError pointing into the file."""
    errors = error.errors(include_url=False)
    # Prefer an error about a concrete value over a "missing key" one, and earlier places first.
    err = errors[0]
    loc = tuple(p for p in err["loc"] if not (isinstance(p, str) and ("[" in p or p.startswith("function-"))))
    cause = (err.get("ctx") or {}).get("error")
    offset, key = 0, False
    if isinstance(cause, FieldError):
        loc, offset, key, message = loc + cause.sub, cause.offset, cause.key, str(cause)
    elif isinstance(cause, ExprError):
        offset, message = cause.offset, str(cause)
    elif err["type"] == "missing":
        parent, missing = loc[:-1], loc[-1]
        if not parent:
            what = f"missing top-level key {missing!r}; a spec needs: name, hyperparameters, model (and usually sizes)"
        else:
            what = f"missing required key {missing!r} in {_dotted(parent)}"
        return SpecError.at(source.where(parent), what)
    elif err["type"] == "extra_forbidden":
        allowed = _TOP_KEYS if len(loc) == 1 else ()
        return SpecError.at(source.where(loc, key=True), f"unknown key {loc[-1]!r}{did_you_mean(loc[-1], allowed)}")
    else:
        message = _plain_message(err)
    place = source.where(loc, key=key)
    if offset and not key:
        place = place.shifted(offset)
    label = _dotted(loc)
    return SpecError.at(place, f"{label}: {message}" if label else message)


def _dotted(loc: tuple) -> str:
    return ".".join(f"[{p}]" if isinstance(p, int) else str(p) for p in loc).replace(".[", "[")


def _plain_message(err: dict) -> str:
    """Pydantic's message, reworded as what was expected."""
    kind, msg = err["type"], err["msg"]
    found = err.get("input")
    shown = f", got {found!r:.60}" if not isinstance(found, (dict, list)) else ""
    if kind == "literal_error":
        expected = (err.get("ctx") or {}).get("expected", "")
        choices = [c.strip(" '") for c in expected.replace(" or ", ",").split(",") if c.strip(" '")]
        hint = did_you_mean(found, choices) if isinstance(found, str) else ""
        return f"expected one of {expected}{shown}{hint}"
    if kind in ("dict_type", "model_type", "model_attributes_type"):
        return f"expected a mapping{shown}"
    if kind == "list_type":
        return f"expected a list{shown}"
    if kind in ("int_type", "int_parsing"):
        return f"expected an integer{shown}"
    if kind in ("bool_type", "bool_parsing"):
        return f"expected true or false{shown}"
    if kind in ("string_type",):
        return f"expected a string{shown}"
    if kind == "string_too_long":
        return f"text is too long: {msg}"
    return f"{msg[0].lower() + msg[1:]}{shown}"
