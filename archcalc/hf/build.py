"""Assembling a spec from a config: the bundled spec of its model type, filled with the config's values.

For ``model_type: llama`` the bundled ``spec/llama.yaml`` gives the hyperparameters and the ``model:``; its
``hf.keys`` table says which config key fills which hyperparameter or setting (with transformers' class defaults);
named hooks do the rest. The spec keeps, for each hyperparameter, the place in the config file it came from, so an
error found while binding or lowering (a head width that does not divide, a bad GQA ratio) still points at the JSON
key that caused it.
"""

from __future__ import annotations

import re
from pathlib import Path

from archcalc.errors import SpecError, Where
from archcalc.hf.family import Draft, Family, bundled_values, check_divides, load_family, prune, read_settings, read_symbols
from archcalc.hf.hooks import HOOKS
from archcalc.hf.jsonfile import ConfigFile
from archcalc.hf.reader import GENERIC_KEYS, MISSING, NOTED, ROPE_CONFIG_KEYS, TOKEN_KEYS, Reader
from archcalc.hf.refused import refusal
from archcalc.hf.registry import MODEL_TYPES, bundled_spec, closest, unmodelled_kind
from archcalc.hf.rope import read_rope
from archcalc.spec.fields import FieldError
from archcalc.spec.hf_origin import json_value
from archcalc.spec.loader import spec_from_source
from archcalc.spec.schema import Spec
from archcalc.spec.source import Source


def family_of(model_type: str) -> Family | None:
    """The family that reads ``model_type`` configs (None: not supported)."""
    name = bundled_spec(model_type)
    return load_family(name) if name is not None else None


def build(cf: ConfigFile) -> Spec:
    """The spec of the model the config ``cf`` describes, with one size named after the file (of a multimodal wrapper,
    its text model's)."""
    cf, wrapper = text_model(cf)
    family, unnamed = _family(cf)
    r = Reader(cf, family.model_type, family.origin.aliases, family.defaults())
    r.notes += [note for note in (wrapper, unnamed) if note is not None]
    for key, entry in family.keys.items():
        if entry.allowed is not None:
            r.require(key, tuple(entry.allowed), entry.why)
    _always(family, cf, r)
    draft = Draft.of(family)
    read_symbols(r, draft)
    bundled_values(draft)
    check_divides(r, draft)
    read_settings(r, draft)
    if family.origin.rope is not None:
        read_rope(r, draft)
    for name in family.origin.hooks:
        if name not in HOOKS:
            raise SpecError.at(family.where(("hooks",)), f"hf.hooks: no hook {name!r}; archcalc/hf/hooks.py has: {', '.join(HOOKS)}")
        HOOKS[name](r, draft)
    unread: dict[str, list[str]] = {}  # reason -> the keys present for it
    for key, entry in family.keys.items():
        if entry.noted is not None and r.get(key) is not MISSING:
            unread.setdefault(entry.noted, []).append(key)
    if unread:
        listed = "; ".join(f"{', '.join(keys)} ({why})" for why, keys in unread.items())
        r.notes.append(f"Not read by transformers' {family.hf_class}, so changing nothing counted: {listed}")
    classes = r.get("architectures")
    if isinstance(classes, list) and classes and family.hf_class not in classes:
        shown = ", ".join(str(c)[:60] for c in classes[:3])
        r.notes.append(f"architectures lists {shown}; counted as {family.hf_class}, the class archcalc models for {family.model_type}")
    r.check_known(family.known())
    prune(draft)
    return _assemble(family, cf, r, draft)


WRAPPER_NOTE = "is a multimodal model: its text model"  # how an imported spec's notes say it was wrapped
# wrappers whose tie_word_embeddings alone ties the head, and its class default: transformers' Mistral3ForConditionalGeneration
# ties by Mistral3Config's (default true) even where its text config's says false
WRAPPER_TIES = {"mistral3": True}


def text_model(cf: ConfigFile) -> tuple[ConfigFile, str | None]:
    """A multimodal wrapper's text model (Qwen3.5's ``qwen3_5`` holds a ``qwen3_5_text`` in ``text_config``) where the
    wrapper's model type is not read and its text model's is: that part of the file, with the places of its keys, and a
    note saying so; else the config itself."""
    outer, inner = cf.data.get("model_type"), cf.data.get("text_config")
    if not isinstance(inner, dict) or not isinstance(outer, (str, type(None))) \
            or (isinstance(outer, str) and bundled_spec(outer) is not None) \
            or not isinstance(inner.get("model_type"), str) or bundled_spec(inner["model_type"]) is None:
        return cf, None
    sub = {table: {path[1:]: w for path, w in getattr(cf, table).items() if path[:1] == ("text_config",) and len(path) > 1}
           for table in ("keys", "values")}
    if outer in WRAPPER_TIES:  # its own flag ties the head (else its class default), whatever the text config says
        inner = {k: v for k, v in inner.items() if k != "tie_word_embeddings"}
        inner |= {} if "tie_word_embeddings" in cf.data else {"tie_word_embeddings": WRAPPER_TIES[outer]}
        for table in ("keys", "values"):
            sub[table].pop(("tie_word_embeddings",), None)
    if "tie_word_embeddings" in cf.data and "tie_word_embeddings" not in inner:  # the wrapper's head is tied as it says
        inner = {**inner, "tie_word_embeddings": cf.data["tie_word_embeddings"]}
        for table in ("keys", "values"):
            place = getattr(cf, table).get(("tie_word_embeddings",))
            if place is not None:
                sub[table][("tie_word_embeddings",)] = place
    note = (f"{str(outer)[:60]} {WRAPPER_NOTE} (text_config, model_type {inner['model_type']}) is imported; the rest (a "
            "vision tower, its projector) is not counted")
    return ConfigFile(cf.file, inner, sub["keys"], sub["values"]), note


def _family(cf: ConfigFile) -> tuple[Family, str | None]:
    """The family that reads ``cf``, and a note when the config names no model_type but its one class is a supported
    type's (LongCat-Flash-Chat's published config.json is the remote-code one: LongcatFlashForCausalLM and an
    auto_map, no model_type; transformers' own longcat_flash class reads the same keys)."""
    model_type = cf.data.get("model_type")
    if model_type is None:
        classes = cf.data.get("architectures")
        family = by_architecture(classes[0]) if isinstance(classes, list) and len(classes) == 1 and isinstance(classes[0], str) else None
        if family is None:
            raise SpecError.at(Where(cf.file, 1, 1), f"no 'model_type'; expected a transformers config.json with one of: {', '.join(MODEL_TYPES)}")
        return family, (f"The config names no model_type (a remote-code config: its own classes, auto_map); read as "
                        f"{family.model_type}, whose transformers class is its architectures' {family.hf_class}")
    family = family_of(model_type) if isinstance(model_type, str) else None
    if family is None:
        raise SpecError.at(cf.where(("model_type",)), _unsupported(model_type, cf.data))
    return family, None


def by_architecture(cls: str) -> Family | None:
    """The family whose transformers class is ``cls`` (LongcatFlashForCausalLM: longcat_flash), if exactly one is."""
    found = [family for family in map(family_of, MODEL_TYPES) if family is not None and cls in (family.origin.architectures or [])]
    return found[0] if len(found) == 1 else None


def _unsupported(model_type: object, data: dict) -> str:
    """Why ``model_type`` is refused: a kind of layer not modelled yet (Zamba2's, Falcon-H1's, LFM2's), the
    supported type it is plausibly a typo of, or else where the supported ones are listed (34 names do not fit on one
    line)."""
    shown = (model_type if isinstance(model_type, str) else str(model_type))[:60]
    why = refusal(model_type) if isinstance(model_type, str) else None
    if why is not None:  # a type refused on purpose: what it has that archcalc does not model
        return f"model_type: {shown!r}: {why}"
    listing = f"'archcalc import-hf --list' shows all {len(MODEL_TYPES)}"
    kind = unmodelled_kind(shown, data) if isinstance(model_type, str) else None
    if kind is not None:
        if kind.startswith("state-space"):  # the layers are, in a spec; this type's configs are not read yet
            return (f"model_type: {shown!r} is not supported: configs with {kind} layers are not modelled yet beyond "
                    f"Mamba's, Falcon Mamba's, Mamba2's, Bamba's and Jamba's (a spec can describe Mamba and Mamba2 "
                    f"layers: see docs/spec-language.md) ({listing})")
        return (f"model_type: {shown!r} is not supported: configs with {kind} layers are not modelled yet beyond "
                f"Qwen3.5's and Qwen3-Next's (a spec can describe Gated DeltaNet and short-convolution layers: see "
                f"docs/spec-language.md) ({listing})")
    near = closest(shown) if isinstance(model_type, str) else []
    if near:  # a typo, or a multimodal type's text model
        return f"model_type: {shown!r} is not supported; the closest supported: {', '.join(near)} ({listing})"
    return (f"model_type: {shown!r} is not supported, nor a near spelling of a model type that is; 'archcalc import-hf "
            f"--list' shows the {len(MODEL_TYPES)} that are")


def _always(family: Family, cf: ConfigFile, r: Reader) -> None:
    """A config transformers saved (it writes transformers_version) lacks keys every config of its type has: it is
    another model type's config relabelled (a Gemma 1 config called gemma2), and counting it would be wrong."""
    missing = [k for k, e in family.keys.items() if e.always and r.get(k) is MISSING]
    if not missing or "transformers_version" not in cf.data:
        return
    classes = cf.data.get("architectures")
    other = f"a {str(classes[0])[:60]} config" if isinstance(classes, list) and classes and family.hf_class not in classes \
        else "another model type's config"
    listed = ", ".join(missing[:-1]) + (" and " if len(missing) > 1 else "") + missing[-1]
    raise SpecError.at(cf.where(("model_type",), value=True),
                       f"model_type: {family.model_type!r}, but it lacks {listed}, which every saved {family.model_type} "
                       f"config has: {other} relabelled?")


def _names(file: str) -> tuple[str, str]:
    """The spec name (an identifier) and the size name (the file stem), both from the config's file name."""
    stem = Path(file).stem if file and not file.startswith("<") else ""
    if stem == "config":
        stem = Path(file).parent.name or stem  # a model folder: <name>/config.json
    size = re.sub(r"[^A-Za-z0-9._-]+", "-", stem).strip("-._")[:32] or "hf"
    ident = re.sub(r"[^A-Za-z0-9_]+", "_", stem).strip("_")[:29] or "hf"
    return (ident if ident[0].isalpha() else "hf_" + ident)[:32], size


def _assemble(family: Family, cf: ConfigFile, r: Reader, draft: Draft) -> Spec:
    name, size = _names(cf.file)
    shown = Path(cf.file).name if not cf.file.startswith("<") else cf.file
    given = cf.data.get("model_type")
    named = "none" if given is None else str(given)[:60]
    kind = family.model_type if given == family.model_type else f"{named}, read as {family.model_type}"
    notes = [f"Imported from {cf.file} (model_type {kind}, bundled spec {family.spec_name}). Counts what "
             f"transformers' {family.hf_class} instantiates from this config: every parameter tensor once, buffers "
             "(rotary tables, masks) excluded."]
    notes += [note + "." for note in r.notes]
    data = {
        "name": name,
        "title": f"{family.hf_class} ({shown})"[:200],
        "source": f"HF config {shown[:200]}, model_type {kind}; transformers {family.hf_class}",
        "notes": " ".join(notes),
        "hyperparameters": draft.decls,
        "model": draft.model,
        "sizes": {size: {n: draft.size[n] for n in draft.decls if n in draft.size}},  # in the declarations' order
        "hf": {"model_type": family.model_type, "config": kept_keys(family, cf, draft)},
    }
    source = Source(cf.file, data)
    source.values[()] = Where(cf.file, 1, 1)
    for hp, place in draft.places.items():
        source.values[("sizes", size, hp)] = place
        source.values[("hyperparameters", hp, "default")] = place
    spec = spec_from_source(source)
    from archcalc.ir import lower  # binding and lowering once finds widths that are not whole, located
    from archcalc.spec.bind import bind

    lower(bind(spec, size))
    return spec


#: Base-config keys an imported spec keeps although they shape no parameter: the token ids and the initial spread.
KEPT_GENERIC = {*TOKEN_KEYS, "initializer_range"}
MAX_KEPT = 128  # HFOrigin.config's bound


def kept_keys(family: Family, cf: ConfigFile, draft: Draft) -> dict:
    """The config's keys that export-hf cannot compute from the imported spec's hyperparameters (settings, the keys
    hooks read, a window that is null): kept in the spec's ``hf.config``, so ``export-hf`` writes the same model back,
    the computed keys from the size's values (``--set`` carries through) and these as they were. A value the spec
    cannot hold (a string over 200 characters) is left out; export then compares and refuses what it could not write."""
    aliases = family.origin.aliases  # either spelling of a key (hidden_size or n_embd) is one field
    computed = {aliases.get(key, key) for key, expr in family.origin.key_symbols().items() if expr.names <= set(draft.decls)}
    kept = {}
    for key, value in cf.data.items():
        if aliases.get(key, key) in computed or key in ROPE_CONFIG_KEYS or key in NOTED:
            continue  # export-hf writes these itself (the rotary ones from the lowered positions); quantisation, remote code
        if key in GENERIC_KEYS and key not in KEPT_GENERIC:
            continue  # metadata: architectures, model_type, dtype, transformers_version, ...
        try:
            kept[key] = json_value(value)
        except FieldError:
            continue
        if len(kept) == MAX_KEPT:
            break
    return kept
