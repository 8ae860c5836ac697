"""Which transformers model types archcalc reads: one per bundled spec with an ``hf:`` section.

The bundled specs are the registry: ``spec/<name>.yaml`` whose ``hf.model_type`` is ``llama`` makes ``llama``
importable, with that spec's ``model:`` and ``hf.keys`` (see :mod:`archcalc.hf.family`). Listing the model types
scans the files' text (the command-line help lists them, so it must not load every spec); importing one loads its
spec once per process.

Suggesting a supported type for one that is not is done only where it is plausibly a typo (``lama``, ``Qwen2``,
``deepseek-v3``) or the text model of a multimodal type (``llama4``); an unsupported state-space (Zamba, PLaMo 2,
hybrids) or linear-attention config is told that its kind of layer is not modelled yet, not pointed at a name that
happens to share letters with it. Model types with a bundled spec are read whatever their layers (Mamba's and
Mamba2's are).

>>> "bert" in MODEL_TYPES, bundled_spec("qwen2"), bundled_spec("no-such-type")
(True, 'qwen2_5', None)
>>> closest("gemma9")[0].startswith("gemma"), closest("lama"), closest("llama4"), closest("rwkv")
(True, ['llama'], ['llama4_text'], [])
>>> unmodelled_kind("plamo2", {}), unmodelled_kind("my_model", {"linear_num_key_heads": 16}), unmodelled_kind("gpt_neo", {})
('state-space (Mamba)', 'linear-attention or recurrent', None)
>>> unmodelled_kind("mamba2", {"state_size": 128}), unmodelled_kind("zamba", {})
(None, 'state-space (Mamba)')
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable
from functools import cache

from archcalc.spec.library import bundled_names, library_dir

# the model_type of a top-level hf: section, block style (hf:\n  model_type: x) or flow style (hf: {model_type: x})
_MODEL_TYPE = re.compile(r"^hf:[ \t]*(?:#.*)?\n(?:(?:[ \t].*)?\n)*?[ \t]+model_type:[ \t]*([a-z][a-z0-9_-]*)"
                         r"|^hf:[ \t]*\{[^}]*?\bmodel_type:[ \t]*([a-z][a-z0-9_-]*)", re.MULTILINE)


@cache
def model_types() -> dict[str, str]:
    """model_type -> the bundled spec that describes it, sorted by model type."""
    found: dict[str, str] = {}
    for name in bundled_names():
        m = _MODEL_TYPE.search((library_dir() / f"{name}.yaml").read_text(encoding="utf-8"))
        if m:
            found.setdefault(m.group(1) or m.group(2), name)
    return dict(sorted(found.items()))


MODEL_TYPES: tuple[str, ...] = tuple(model_types())

# an hf: section's also_types list, flow style, on one line: also_types: [kimi_k2]
_ALSO_TYPES = re.compile(r"^[ \t]+also_types:[ \t]*\[([a-z0-9_, \t-]*)\]", re.MULTILINE)


@cache
def also_types() -> dict[str, str]:
    """Other model_type values read as a bundled spec's (its ``hf.also_types``) -> that spec, sorted."""
    found: dict[str, str] = {}
    for name in model_types().values():
        for m in _ALSO_TYPES.finditer((library_dir() / f"{name}.yaml").read_text(encoding="utf-8")):
            for other in filter(None, (t.strip() for t in m.group(1).split(","))):
                found.setdefault(other, name)
    return dict(sorted(found.items()))


def bundled_spec(model_type: str) -> str | None:
    """The name of the bundled spec for ``model_type``, or for the type its configs are read as (None: not supported)."""
    return model_types().get(model_type) or also_types().get(model_type)


def weights_of(origin) -> str | None:
    """The weight-name layout of a spec's ``hf:`` section (``origin``): its ``weights``, else (a section that names only
    a model type, as an imported spec's) the bundled spec's of that model type; None where neither names one."""
    if origin is None:
        return None
    if origin.weights is not None:
        return origin.weights
    from archcalc.spec import load_spec

    name = bundled_spec(origin.model_type)
    return load_spec(name).hf.weights if name is not None else None


#: How alike (difflib's ratio) a name must be to a supported model type to be taken for a typo of it: 'lama' and
#: 'llama' are 0.89, 'gemma9' and 'gemma2' 0.83; 'mamba' and 'gemma' 0.4.
TYPO_RATIO = 0.8


def closest(model_type: str, n: int = 3) -> list[str]:
    """The supported model types ``model_type`` is plausibly a misspelling of (case, ``-`` or ``.`` for ``_``, a letter
    or two), nearest first, or the text model of it (``llama4`` -> ``llama4_text``); none when nothing is that close."""
    types = list(model_types())
    name = re.sub(r"[-. ]", "_", model_type.strip().lower())
    if name in types:
        return [name]
    text_models = [t for t in types if t.startswith(name + "_") and t.endswith("_text")]
    return text_models[:n] or difflib.get_close_matches(name, types, n=n, cutoff=TYPO_RATIO)


#: Model types (and their config keys) whose layers are not attention and MLPs alone: state-space (Mamba) and
#: linear-attention or recurrent layers, which archcalc does not read yet where no bundled spec describes the type (the
#: bundled specs' model types, Mamba's and Mamba2's among them, are read, and never called unmodelled).
_STATE_SPACE_TYPES = re.compile(r"mamba|^(zamba2?|bamba|plamo2)$")
_STATE_SPACE_KEYS = re.compile(r"mamba|(^|_)ssm_|^state_size$|^time_step_(rank|min|max)$")
_LINEAR_TYPES = re.compile(r"rwkv|xlstm|linear|hybrid|^(qwen3_next|qwen3_5(_moe)?(_text)?|minimax|recurrent_gemma|retnet)$")
_LINEAR_KEYS = re.compile(r"^linear_(num_|key_|value_|conv_|attn_)|^lru_width$|^conv1d_width$|^conv_L_cache$|^block_types$")


def unmodelled_kind(model_type: str, keys: Iterable[str]) -> str | None:
    """The kind of layer that keeps an unsupported ``model_type`` (with these config ``keys``) out of reach, where it
    is one archcalc does not model yet: ``'state-space (Mamba)'``, ``'linear-attention or recurrent'``, or None (also
    for a model type a bundled spec reads)."""
    if model_type in model_types():  # a bundled spec reads it, whatever its layers
        return None
    keys = [k for k in keys if isinstance(k, str)]
    if _STATE_SPACE_TYPES.search(model_type) or any(_STATE_SPACE_KEYS.search(k) for k in keys):
        return "state-space (Mamba)"
    if _LINEAR_TYPES.search(model_type) or any(_LINEAR_KEYS.search(k) for k in keys):
        return "linear-attention or recurrent"
    return None
