"""Typed, located access to the fields of an HF config, with the class defaults of transformers.

Every read goes through :class:`Reader`, which knows the model type's aliases (transformers'
``attribute_map``), checks the JSON type and range of each value, and remembers which keys the
import understood. A key that neither the model type nor transformers' base config knows is an
error: archcalc cannot tell whether it changes the architecture, so it does not guess.
"""

from __future__ import annotations

import math
from typing import Any

from archcalc.errors import SpecError, Where
from archcalc.hf.jsonfile import ConfigFile
from archcalc.spec.schema import MAX_VALUE
from archcalc.spec.suggest import did_you_mean

MISSING: Any = type("Missing", (), {"__repr__": lambda self: "MISSING"})()

#: Keys of transformers' base config, generation defaults and Hub metadata: none shapes a parameter.
GENERIC_KEYS = frozenset("""
    architectures chunk_size_feed_forward dtype torch_dtype id2label label2id num_labels _num_labels problem_type
    is_encoder_decoder output_hidden_states output_attentions return_dict use_return_dict transformers_version
    model_type _name_or_path name_or_path _commit_hash attn_implementation _attn_implementation
    _attn_implementation_internal experts_implementation _experts_implementation_internal finetuning_task
    task_specific_params tokenizer_class prefix bos_token_id eos_token_id pad_token_id sep_token_id
    decoder_start_token_id use_bfloat16 tf_legacy_loss initializer_range use_cache gradient_checkpointing
    auto_map custom_pipelines _from_model_config cross_attention_hidden_size output_past cache_implementation
    assistant_confidence_threshold assistant_lookbehind bad_words_ids begin_suppress_tokens diversity_penalty
    do_sample early_stopping encoder_no_repeat_ngram_size encoder_repetition_penalty epsilon_cutoff eta_cutoff
    exponential_decay_length_penalty forced_bos_token_id forced_eos_token_id length_penalty max_length
    min_length no_repeat_ngram_size num_assistant_tokens num_assistant_tokens_schedule num_beam_groups num_beams
    num_return_sequences output_scores remove_invalid_values repetition_penalty return_dict_in_generate
    suppress_tokens target_lookbehind temperature top_k top_p typical_p archcalc_exported
""".split())

#: The special token ids (export-hf nulls one past a smaller vocabulary; an imported spec keeps them).
TOKEN_KEYS = ("bos_token_id", "eos_token_id", "pad_token_id", "sep_token_id", "decoder_start_token_id")

#: Keys that carry the rotary base, scaling or share: export-hf writes rope_parameters from the lowered positions,
#: so an hf: key must not say something else beside it (nor an imported spec keep them).
ROPE_CONFIG_KEYS = frozenset({"rope_parameters", "rope_scaling", "rope_theta", "partial_rotary_factor", "rotary_emb_base",
                              "rotary_pct", "rope_local_base_freq"})

#: Keys older base configs wrote; harmless when false or empty, not modelled otherwise.
GENERIC_FALSY = {
    "add_cross_attention": "cross-attention layers",
    "is_decoder": "a decoder variant of this model type",
    "tie_encoder_decoder": "tying an encoder to a decoder",
    "pruned_heads": "pruned attention heads",
    "torchscript": "torchscript weight cloning",
    "attention_bias": "attention biases",
    "mlp_bias": "MLP biases",
    "use_sliding_window": "sliding-window attention",
    "sliding_window": "sliding-window attention",
}

#: Keys that do not change parameters but are worth a line in the spec's notes.
NOTED = {
    "quantization_config": "quantization_config is ignored: the count is of the unquantized model, as transformers' from_config builds it",
    "auto_map": "auto_map (remote code) is ignored: the count is of transformers' own implementation",
}

#: Real-valued keys transformers divides by or takes powers of: zero or below gives NaNs, not an error.
POSITIVE = frozenset("""
    rms_norm_eps layer_norm_eps layer_norm_epsilon norm_eps attn_logit_softcapping final_logit_softcapping
    swiglu_limit rope_theta rotary_emb_base initializer_range initializer_factor routed_scaling_factor factor
""".split())
#: The rotated share of a head: above 1, transformers builds rotary tables wider than the head.
SHARES = frozenset({"partial_rotary_factor", "rotary_pct"})

#: transformers' ACT2FN names → the spec's activations (the same function, not an approximation).
ACTIVATIONS = {
    "gelu": "gelu", "gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh", "gelu_fast": "gelu_tanh",
    "relu": "relu", "relu2": "relu2", "silu": "silu", "swish": "silu", "xielu": "xielu",
}


class Reader:
    """The fields of one config, read with the model type's defaults; errors point into the file."""

    def __init__(self, cf: ConfigFile, model_type: str, aliases: dict[str, str] | None = None,
                 defaults: dict[str, Any] | None = None):
        self.cf, self.model_type = cf, model_type
        self.aliases = dict(aliases or {})
        self.defaults: dict[str, Any] = dict(defaults or {})  # the config class's defaults, for hooks
        self.used: set[str] = set()
        self.notes: list[str] = []
        self.data: dict[str, Any] = {}
        self.origin: dict[str, str] = {}  # canonical key -> the key spelled in the file
        for key, value in cf.data.items():
            canonical = self.aliases.get(key, key)
            if canonical in self.data:
                if self.data[canonical] == value:  # the same value under both names (LFM2.5's intermediate_size and
                    continue                      # block_ff_dim): one field, nothing to choose between
                raise self.fail(key, f"{key!r} and {self.origin[canonical]!r} name the same field of {model_type}; give one of them")
            self.data[canonical], self.origin[canonical] = value, key

    # -- places and errors ------------------------------------------------------------------
    def where(self, key: str | tuple, value: bool = False) -> Where:
        path = (key,) if isinstance(key, str) else tuple(key)
        path = (self.origin.get(path[0], path[0]),) + path[1:]
        return self.cf.where(path, value)

    def fail(self, key: str | tuple, message: str) -> SpecError:
        """A located error about ``key``: ``FILE:LINE:COL: key: message``."""
        label = key if isinstance(key, str) else "".join(f"[{k}]" if isinstance(k, int) else f".{k}" for k in key).lstrip(".")
        return SpecError.at(self.where(key), f"{label}: {message}")

    # -- raw and typed reads ----------------------------------------------------------------
    def get(self, key: str | tuple) -> Any:
        """The value at ``key`` (a top-level name or a path), or MISSING; marks the key as understood."""
        path = (key,) if isinstance(key, str) else tuple(key)
        self.used.add(path[0])
        node: Any = self.data
        for part in path:
            if not isinstance(node, dict) or part not in node:
                return MISSING
            node = node[part]
        return node

    def int(self, key: str | tuple, default: Any, *, minimum: int = 1, nullable: bool = False) -> int | None:
        value = self.get(key)
        if value is MISSING:
            return default
        if value is None:
            if nullable:
                return None
            raise self.fail(key, f"expected an integer, got null ({self.model_type} has no default for it)")
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(key, f"expected an integer, got {_show(value)}")
        if value < minimum or value > MAX_VALUE:
            raise self.fail(key, f"expected an integer from {minimum} to {MAX_VALUE:.0e}, got {value}")
        return value

    def bool(self, key: str | tuple, default: Any, *, nullable: bool = False) -> bool | None:
        value = self.get(key)
        if value is MISSING or (value is None and nullable):
            return default if value is MISSING else None
        if not isinstance(value, bool):
            raise self.fail(key, f"expected true or false, got {_show(value)}")
        return value

    def real(self, key: str | tuple, default: Any, *, nullable: bool = False) -> float | None:
        value = self.get(key)
        if value is MISSING:
            return default
        if value is None and nullable:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise self.fail(key, f"expected a finite number, got {_show(value)}")
        name = key if isinstance(key, str) else key[-1]
        if name in SHARES and not 0 < value <= 1:
            raise self.fail(key, f"expected a share of each head above 0 and at most 1, got {_show(value)}")
        if name in POSITIVE and value <= 0:
            raise self.fail(key, f"expected a number above 0, got {_show(value)}")
        return float(value)

    def string(self, key: str | tuple, default: Any, choices: dict[str, Any] | None = None) -> Any:
        """A string; with ``choices``, the value it maps to (an unknown string is an error)."""
        value = self.get(key)
        if value is MISSING:
            value = default
        elif not isinstance(value, str):
            raise self.fail(key, f"expected a string, got {_show(value)}")
        if choices is None:
            return value
        if value not in choices:
            names = ", ".join(sorted(choices))
            raise self.fail(key, f"{_show(value)} is not modelled{did_you_mean(value[:60], choices)}; expected one of: {names}")
        return choices[value]

    def activation(self, key: str, default: str) -> str:
        return self.string(key, default, ACTIVATIONS)

    def require(self, key: str, allowed: tuple, what: str) -> None:
        """``key`` may be absent or hold one of ``allowed``; anything else is an unmodelled architecture."""
        value = self.get(key)
        if value is not MISSING and not any(value == a and type(value) is type(a) for a in allowed):
            shown = " or ".join(_show(a) for a in allowed)
            raise self.fail(key, f"{_show(value)} is not modelled ({what}); archcalc supports {shown} here")

    # -- the whole file ---------------------------------------------------------------------
    def check_known(self, known: set[str]) -> None:
        """Every key must be one the model type reads or ignores knowingly; note the noted ones."""
        for key, value in self.data.items():
            spelled = self.origin[key]
            if key in NOTED and value not in (None, {}, ""):
                self.notes.append(NOTED[key])
                continue
            if key in known or key in GENERIC_KEYS or key in self.used or key in NOTED:
                continue
            if key in GENERIC_FALSY:
                if value in (None, False, 0, {}, []):
                    continue
                raise self.fail(spelled, f"{_show(value)} is not modelled for {self.model_type} ({GENERIC_FALSY[key]})")
            choices = sorted(known | self.used)
            raise self.fail(
                spelled,
                f"unknown field for model type {self.model_type}{did_you_mean(spelled, choices)}; archcalc cannot tell "
                "whether it changes the architecture, so it does not guess (remove it if it does not)",
            )


def _show(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (dict, list)):
        return "an object" if isinstance(value, dict) else "a list" if value else "an empty list"
    text = repr(value)
    return text if len(text) <= 40 else text[:39] + "…"
