"""HF import: a transformers ``config.json`` becomes a spec with one size, counted exactly as
transformers instantiates it (decoders as ``…ForCausalLM``, BERT as ``BertModel``, T5 as
``T5ForConditionalGeneration``).

This package needs neither torch nor transformers: each supported model type is a bundled spec whose
``hf:`` section lists the config keys it reads, the defaults of transformers' config class and the
hyperparameter or model setting each fills (see :mod:`archcalc.hf.family`); the import fills that
spec's ``model:`` with the config's values. A field that would change the architecture in a way the
spec does not model is an error at its line and column in the config file, never a silently wrong count.

>>> spec = spec_from_hf_config({"model_type": "llama", "num_hidden_layers": 2, "hidden_size": 64,
...                             "num_attention_heads": 4, "intermediate_size": 96, "vocab_size": 100})
>>> from archcalc.backends.count import count_size
>>> count_size(spec, "hf").total
82752
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from archcalc.hf.build import build
from archcalc.hf.jsonfile import ConfigFile, read_file
from archcalc.hf.registry import MODEL_TYPES
from archcalc.spec.schema import Spec

__all__ = ["MODEL_TYPES", "spec_from_hf_config", "spec_from_hf_file", "spec_to_yaml", "YAML_MARKER"]

YAML_MARKER = "# Imported by archcalc import-hf"


def spec_from_hf_config(config: dict[str, Any], file: str = "<config>") -> Spec:
    """The spec for a config given as a dict (errors name ``file``; without the text, at line 1)."""
    if not isinstance(config, dict):
        from archcalc.errors import SpecError

        raise SpecError(f"expected a config dict (a transformers config), got {type(config).__name__}", file)
    return build(ConfigFile(file, config))


def spec_from_hf_file(path: str | Path, display: str | None = None) -> Spec:
    """The spec for the config file at ``path``; errors say ``FILE:LINE:COL`` of the offending key."""
    return build(read_file(path, display))


class _Dumper(yaml.SafeDumper):
    def ignore_aliases(self, data: Any) -> bool:  # spec files may not use anchors and aliases
        return True


def spec_to_yaml(spec: Spec) -> str:
    """The spec as a YAML file that ``archcalc count`` loads back to the same counts."""
    source = spec._source
    data = source.data if source is not None else spec.model_dump(mode="json", exclude_defaults=True)
    origin = re.sub(r"[^\x20-\x7e]", "?", source.file if source is not None else spec.name)  # one comment line
    head = f"{YAML_MARKER} from {origin}; edit freely (import-hf -o then keeps your edits unless --force).\n"
    body = yaml.dump(data, Dumper=_Dumper, sort_keys=False, default_flow_style=None, width=110, allow_unicode=True)
    return head + body
