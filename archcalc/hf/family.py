"""A model type as data: its bundled spec's ``model:`` and the ``hf.keys`` table that fills it from a config.

:class:`Family` is read from ``spec/<name>.yaml`` (see :mod:`archcalc.spec.hf_origin` for the table's keys).
:class:`Draft` is the spec being assembled: the bundled hyperparameter declarations, the imported size's values
and a copy of the bundled ``model:`` whose settings (norm epsilon, activation, biases, rotary base, windows) the
config's keys overwrite at the paths the table names. Hooks (:mod:`archcalc.hf.hooks`) do what a table cannot.

>>> family = load_family("llama")
>>> family.spec_name, family.hf_class, family.origin.keys["num_key_value_heads"].fallback.text
('llama', 'LlamaForCausalLM', 'H')
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass, field
from fractions import Fraction
from functools import cache
from typing import Any

from archcalc.errors import SpecError, Where
from archcalc.hf.reader import MISSING, Reader
from archcalc.spec.hf_origin import HFKey, HFOrigin
from archcalc.spec.schema import Spec


@dataclass(frozen=True)
class Family:
    """One supported model type: the bundled spec that describes it and its ``hf:`` section."""

    spec_name: str
    spec: Spec
    origin: HFOrigin

    @property
    def model_type(self) -> str:
        return self.origin.model_type

    @property
    def hf_class(self) -> str:
        return (self.origin.architectures or [f"{self.model_type} model"])[0]

    @property
    def keys(self) -> dict[str, HFKey]:
        return self.origin.keys

    def defaults(self) -> dict[str, Any]:
        """Each key's class default (null where the table gives none, as where the class's is None)."""
        return {k: e.default for k, e in self.keys.items()}

    def raw(self, section: str) -> Any:
        """The bundled spec's ``section`` as written (plain YAML data, copied: the caller may change it)."""
        return copy.deepcopy(self.spec._source.data[section])

    def where(self, loc: tuple) -> Where:
        return self.spec._source.where(("hf",) + loc)

    def known(self) -> set[str]:
        """Every key the family reads or knowingly ignores (hooks' reads are added as they happen)."""
        known = set(self.keys)
        if self.origin.rope is not None:
            rope = self.origin.rope
            known |= {"rope_parameters", "rope_scaling", "rope_theta", "partial_rotary_factor", rope.theta_key,
                      rope.fraction_key, "max_position_embeddings"} | ({rope.local_theta_key} if rope.local_theta and rope.local_theta_keyed else set())
        return known


@cache
def load_family(spec_name: str) -> Family:
    """The family described by the bundled spec ``spec_name`` (loaded once per process)."""
    from archcalc.spec import load_spec

    spec = load_spec(spec_name)
    if spec.hf is None:
        raise SpecError(f"bundled spec {spec_name!r} has no hf: section", spec_name)
    return Family(spec_name, spec, spec.hf)


@dataclass
class Draft:
    """The spec being assembled from a config: declarations, the size's values, the model's data."""

    family: Family
    decls: dict[str, dict[str, Any]]
    model: dict[str, Any]
    size: dict[str, Any] = field(default_factory=dict)
    values: dict[str, Any] = field(default_factory=dict)  # every hyperparameter's value, derived ones included
    places: dict[str, Where] = field(default_factory=dict)

    @classmethod
    def of(cls, family: Family) -> Draft:
        decls = {name: dict(decl) if isinstance(decl, dict) else {"default": decl}
                 for name, decl in family.raw("hyperparameters").items()}
        return cls(family, decls, family.raw("model"))

    def set(self, name: str, value: Any, place: Where | None = None, doc: str | None = None, kind: str = "int") -> None:
        """Give the hyperparameter ``name`` the value ``value`` in the imported size (declaring it if the bundled
        spec does not: a hook may add one, such as DeepSeek's ``L_dense``)."""
        decl = self.decls.setdefault(name, {"doc": doc or name})
        if kind == "bool":
            decl["type"] = "bool"
        self.size[name] = value
        self.values[name] = value
        if place is not None:
            self.places[name] = place

    def put(self, path: str, value: Any, where: Where | None = None) -> None:
        """Set the model setting at ``path`` (``block.norm.eps``; ``*`` in a list means every item); None drops it."""
        parts = path.split(".")
        for node, last in _walk(self.model, parts[:-1], path, where):
            if isinstance(node, dict):
                if value is None:
                    node.pop(last, None)
                else:
                    node[last] = copy.deepcopy(value)

    def get(self, path: str) -> Any:
        """The model data at ``path`` (the first match of a ``*``), or MISSING."""
        node: Any = self.model
        for part in path.split("."):
            if isinstance(node, list) and (part == "*" or part.isdigit()):
                index = 0 if part == "*" else int(part)
                node = node[index] if index < len(node) else MISSING
            elif isinstance(node, dict) and part in node:
                node = node[part]
            else:
                return MISSING
        return node


def _walk(node: Any, parts: list[str], path: str, where: Where | None):
    """Yield (the mapping that holds the path's last part, that part) for each match of ``parts`` in ``node``."""
    last = path.split(".")[-1]
    if not parts:
        yield node, last
        return
    head, rest = parts[0], parts[1:]
    if isinstance(node, list) and (head == "*" or head.isdigit()):
        items = node if head == "*" else node[int(head):int(head) + 1]
        for item in items:
            yield from _walk(item, rest, path, where)
        return
    if not isinstance(node, dict):
        raise SpecError.at(where or Where("<spec>", 1, 1), f"{path}: expected a mapping at {head!r} in the bundled model")
    child = node.get(head)
    if isinstance(child, str):  # a shorthand such as norm: layernorm, expanded to set one of its fields
        child = node[head] = {"kind": child}
    elif child is None:
        child = node[head] = {}
    yield from _walk(child, rest, path, where)


# -- the table's hyperparameters ---------------------------------------------------------------------------------
def read_symbols(r: Reader, draft: Draft) -> None:
    """Each ``symbol`` key into its hyperparameter; keys with a fallback last, so it can use the others."""
    family = draft.family
    entries = [(k, e) for k, e in family.keys.items() if e.symbol is not None]
    for key, entry in sorted(entries, key=lambda item: item[1].fallback is not None):
        name = entry.symbol
        kind = "bool" if family.spec.hyperparameters[name].type == "bool" else "int"
        place = r.where(key, value=True)
        if kind == "bool":
            draft.set(name, r.bool(key, entry.default), place, kind="bool")
            continue
        value = r.int(key, entry.default, minimum=entry.min, nullable=entry.fallback is not None or entry.default is None)
        if value is None and entry.fallback is not None:
            derived = entry.fallback.evaluate(draft.values)
            if isinstance(derived, Fraction) and derived.denominator != 1:
                value = derived.numerator // derived.denominator  # transformers' floor division
            else:  # a relation that holds: keep it as the default, so --set follows it
                draft.decls[name]["default"] = entry.fallback.text
                draft.size.pop(name, None)
                draft.values[name], draft.places[name] = int(derived), place
                continue
        if value is None:
            raise r.fail(key, f"expected an integer, got null ({family.model_type} needs a value)")
        draft.set(name, value, place)


def bundled_values(draft: Draft) -> None:
    """The values of the hyperparameters no key sets, from the bundled spec's defaults (GPT-2's d_head = d / H)."""
    hps = draft.family.spec.hyperparameters
    pending = [n for n in draft.decls if n not in draft.values and n in hps and hps[n].default is not None]
    while pending:
        ready = [n for n in pending if hps[n].default.names <= set(draft.values)]
        if not ready:
            return
        for name in ready:
            value = hps[name].default.evaluate(draft.values)
            draft.values[name] = int(value) if isinstance(value, Fraction) and value.denominator == 1 else value
            pending.remove(name)


def check_divides(r: Reader, draft: Draft) -> None:
    """transformers' own checks: a key marked ``divides: X`` must divide X's value (heads divide the width...)."""
    family = draft.family
    for key, entry in family.keys.items():
        if entry.divides is None or entry.symbol not in draft.values or entry.divides not in draft.values:
            continue
        value, whole = draft.values[entry.symbol], draft.values[entry.divides]
        if isinstance(value, int) and isinstance(whole, int) and whole % value:
            whole_key = next((k for k, e in family.keys.items() if e.symbol == entry.divides), entry.divides)
            given = "" if r.get(key) is not MISSING else f" (the default of {family.model_type}'s config class)"
            raise r.fail(key, f"{value}{given} does not divide {whole_key} = {whole}; transformers' {family.hf_class} needs it to")


# -- the table's model settings ----------------------------------------------------------------------------------
def read_settings(r: Reader, draft: Draft) -> None:
    """Each ``sets`` key: its value (mapped, converted) at every path it names in the model."""
    for key, entry in draft.family.keys.items():
        if entry.sets is None:
            continue
        value = read_setting(r, key, entry)
        for i, path in enumerate(entry.sets):
            draft.put(path, value, draft.family.where(("keys", key, "sets", i)))


def read_setting(r: Reader, key: str, entry: HFKey) -> Any:
    kind = entry.type or _kind_of(entry.default)
    raw = r.get(key)
    for before, after in entry.map or ():  # the given value, or the default when none is given
        seen = entry.default if raw is MISSING else raw
        if type(seen) is type(before) and seen == before:
            return after
    if raw is None and entry.nullable:
        return None
    if kind == "activation":
        return r.activation(key, entry.default)
    if kind == "bool":
        return r.bool(key, entry.default, nullable=entry.nullable)
    if kind == "int":
        return r.int(key, entry.default, minimum=entry.min, nullable=entry.nullable)
    if kind == "string":
        return r.string(key, entry.default)
    value = r.real(key, entry.default, nullable=entry.nullable)
    if kind in ("inverse_sqrt", "inverse") and value is not None:
        if value <= 0:
            raise r.fail(key, f"expected a positive number, got {value}")
        return value ** -0.5 if kind == "inverse_sqrt" else 1.0 / value  # Granite divides its logits by logits_scaling
    return value


def _kind_of(default: Any) -> str:
    if isinstance(default, bool):
        return "bool"
    if isinstance(default, int):
        return "int"
    if isinstance(default, str):
        return "activation"
    return "real"


# -- what the imported spec keeps --------------------------------------------------------------------------------
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def prune(draft: Draft) -> None:
    """Drop the hyperparameters the filled model no longer uses (Mistral's window when the config has none)."""
    used: set[str] = set()
    _names_in(draft.model, used)
    frontier = set(used)
    while frontier:
        name = frontier.pop()
        mentioned: set[str] = set()
        _names_in(draft.decls.get(name, {}).get("default"), mentioned)
        frontier |= (mentioned & set(draft.decls)) - used
        used |= mentioned
    for name in [n for n in draft.decls if n not in used]:
        del draft.decls[name]
        draft.size.pop(name, None)


def _names_in(node: Any, out: set[str]) -> None:
    if isinstance(node, dict):
        for value in node.values():
            _names_in(value, out)
    elif isinstance(node, list):
        for value in node:
            _names_in(value, out)
    elif isinstance(node, str):
        out.update(_NAME.findall(node))
