"""The exported config.json read back with archcalc's own importer: the model it describes must be the spec's, the
same count and the same IR, settings included; else one line with the first difference and how to fix it.

>>> from archcalc.spec import load_spec
>>> from archcalc.hf.export import export_config
>>> _ = export_config(load_spec("llama"), "2-7b")  # the check passes: the config describes Llama 2 7B
"""

from __future__ import annotations

import json
import math
from dataclasses import fields
from typing import Any

import sympy
from pydantic import BaseModel

from archcalc.errors import SpecError
from archcalc.ir import Lowered, lower
from archcalc.ir.attrs import Attention, LatentAttention
from archcalc.spec.bind import bind
from archcalc.spec.loader import where
from archcalc.spec.schema import Spec
from archcalc.spec.transform import fuse_projections


def check_same_model(spec: Spec, size: str | None, overrides, lowered: Lowered, text: str,
                     unwritten: list[str] | None = None) -> None:
    """Read the config.json ``text`` back with the importer: the model it describes must be the spec's (count, then
    IR). The error
    names the first difference and how to fix it: ``unwritten`` (keys the table writes from hyperparameters the spec
    lacks), or the config key that sets a differing setting."""
    from archcalc.backends.count import count
    from archcalc.hf import spec_from_hf_config

    label = spec.name + (f" size {size}" if size else "") + "".join(f" --set {k}={e.text}" for k, e in (overrides or {}).items())
    try:
        config = json.loads(text)
        theirs_spec = spec_from_hf_config(config, "<exported config.json>")
    except SpecError as e:  # a key or value the importer refuses: the spec's hf: section is wrong
        raise SpecError.at(where(spec, ("hf",)), f"hf: the config.json exported for {label} is not one archcalc reads "
                                                 f"back ({e.message})") from None
    theirs = lower(bind(theirs_spec, next(iter(theirs_spec.sizes))))
    ours_total, theirs_total = count(lowered.binding).total, count(theirs.binding).total
    cls = config["architectures"][0]
    ours = lower(bind(fuse_projections(spec), size, overrides))  # fused on both sides: layouts compare alike
    theirs = lower(bind(fuse_projections(theirs_spec), next(iter(theirs_spec.sizes))))
    difference = first_difference(ours, theirs)
    if ours_total == theirs_total and difference is None:
        return
    assert difference is not None  # the totals differ, so the models do
    path, name, mine, its = difference
    at = where(spec, ("hf",))
    keys = [key for key in _keys_setting(spec, name) if key not in config]  # a key already written cannot say both values
    if keys:  # a setting a config key holds (LlamaConfig's rms_norm_eps defaults to 1e-6; the spec's norms say 1e-5)
        raise SpecError.at(at, f"hf: {path} {name} is {_show(mine)} in the spec but {_show(its)} in {cls} built from the exported "
                               f"config: give it in hf.config, e.g. config: {{{keys[0]}: {_show(mine)}}}")
    if unwritten:  # a spec of one's own whose hyperparameters are named otherwise than the table it borrows
        shown = ", ".join(unwritten[:3]) + (f" and {len(unwritten) - 3} more" if len(unwritten) > 3 else "")
        raise SpecError.at(at, f"hf: {shown} come from hyperparameters {spec.name} lacks (named as in spec/{config['model_type']}"
                               f".yaml), so {cls} gets its defaults ({path or 'the model'}: {name} {_show(its)}, not "
                               f"{_show(mine)}): rename them, or give the keys in hf.config")
    total = f"{theirs_total:,} parameters, not {ours_total:,}; " if ours_total != theirs_total else ""
    raise SpecError.at(at, f"hf: the config exported for {label} describes another model ({total}{path or 'the model'}: {name} is "
                           f"{_show(mine)} in the spec but {_show(its)} in {cls}'s); transformers cannot express this variant")


def _keys_setting(spec: Spec, setting: str) -> list[str]:
    """The config keys of the spec's model type that set a model setting named ``setting`` (rms_norm_eps sets eps)."""
    from archcalc.hf.build import family_of

    family = family_of(spec.hf.model_type) if spec.hf is not None else None
    return [key for key, entry in (family.keys.items() if family else []) if any(p.rsplit(".", 1)[-1] == setting for p in entry.sets or [])]


def first_difference(ours: Lowered, theirs: Lowered) -> tuple[str, str, Any, Any] | None:
    """The first setting or tensor in which two lowered models differ: (component path, setting, ours, theirs), a
    value absent on one side as ``_ABSENT``; None if they are the same."""
    a, b = _flatten(ours), _flatten(theirs)
    for key in list(a) + [k for k in b if k not in a]:
        if not _same(a.get(key, _ABSENT), b.get(key, _ABSENT)):
            return (*key, a.get(key, _ABSENT), b.get(key, _ABSENT))
    return None


_ABSENT = type("Absent", (), {"__repr__": lambda self: "absent"})()


def _flatten(lowered: Lowered) -> dict[tuple[str, str], Any]:
    numeric = lowered.binding.numeric()

    def value(v: Any) -> Any:
        if isinstance(v, sympy.Basic):
            v = v.xreplace(numeric)
            return int(v) if v.is_Integer else v
        return tuple(value(x) for x in v) if isinstance(v, (list, tuple)) else v

    out: dict[tuple[str, str], Any] = {}
    for path, c in lowered.root.walk():
        out[(path, "kind")], out[(path, "repeat")] = c.kind, value(c.repeat)
        for k, v in ((f.name, getattr(c.attrs, f.name)) for f in fields(c.attrs)):
            if v is None:  # an unset optional setting: absent (a difference reads "absent, not ...")
                continue
            if isinstance(v, BaseModel):  # a rope scaling, an init scheme: field by field, to name the one that differs
                out[(path, k)] = type(v).__name__
                out.update({(path, f"{k}.{f}"): value(fv) for f, fv in v.model_dump().items()})
            else:
                out[(path, k)] = value(v)
        attrs = c.attrs
        if isinstance(attrs, Attention) and not isinstance(attrs, LatentAttention) and attrs.scale is None:
            out[(path, "scale")] = value(attrs.head_width) ** -0.5  # the default: 1/sqrt(head width)
        for t in c.tensors:
            out[(path, t.name)] = (value(t.shape), t.role, t.tied_to)
    order = getattr(lowered.root.attrs, "layer_order", None)
    if order:  # the layers' order, not the cycle that gives it: a cycle of 28 and one of 10 agree over 10 layers
        layers = sum(value(c.repeat) for c in lowered.root.children if c.kind == "block")
        out[(lowered.root.name, "layer_order")] = tuple(order[i % len(order)] for i in range(layers))
    return out


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return math.isclose(a, b, rel_tol=1e-12)
    return a == b


def _show(value: Any) -> str:
    if isinstance(value, tuple) and len(value) == 3 and isinstance(value[0], tuple):
        article = "an" if str(value[1])[:1] in "aeiou" else "a"
        return f"{article} {value[1]} tensor of shape {tuple(value[0])}" + (f" tied to {value[2]}" if value[2] else "")
    text = repr(value)
    return text if len(text) <= 80 else text[:79] + "…"
