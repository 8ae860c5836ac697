"""Hooks for the config keys of state-space mixers that a family's ``hf.keys`` table cannot check (named in a spec's
``hf.hooks``; see :mod:`archcalc.hf.hooks`).

- ``ssm_head_dim``: transformers' Mamba2 config refuses ``num_heads × head_dim ≠ expand × hidden_size``; the spec's
  heads are ``inner / heads`` wide, so ``head_dim`` shapes nothing of its own and is only checked.
- ``unclamped_time_step``: ``time_step_limit`` clamps each step size (after its softplus) into ``[low, high]``;
  archcalc's Mamba2 mixer does not clamp, which is the class default ``(0.0, inf)``: a step size is never below 0.
- ``falcon_h1_mixer``: Falcon-H1's ``mamba_d_head`` (checked against its own inner width, ``mamba_d_ssm``) and its
  lists of multipliers (``ssm_multipliers``, ``mlp_multipliers``), which a table's scalar keys cannot set.
- ``unused_time_step_rank``: Mamba2 has no dt projection, so ``time_step_rank`` shapes nothing, but transformers'
  Mamba2 mixer takes ``int()`` of it: what that cannot read is refused, not counted.

The keys are read by their config names, and the hyperparameters they are compared with are found through the
family's table (the hyperparameter that ``hidden_size`` fills), not by their names in the spec.
"""

from __future__ import annotations

import math

from archcalc.hf.family import Draft
from archcalc.hf.reader import MISSING, Reader


def _value_of(draft: Draft, key: str) -> int:
    """The value of the hyperparameter that the config key ``key`` fills (read already by the table)."""
    return draft.values[draft.family.keys[key].symbol]


#: the config keys of a Mamba2 mixer's head width, heads and expansion, as Mamba2Config and BambaConfig name them
SSM_KEYS = (("head_dim", "num_heads", "expand"), ("mamba_d_head", "mamba_n_heads", "mamba_expand"))


def ssm_head_dim(r: Reader, draft: Draft) -> None:
    """``head_dim`` must be ``expand × hidden_size / num_heads``, as transformers' Mamba2Config checks (Bamba's mixer
    reshapes by it, so a head width of another size fails there); BambaConfig's ``auto`` is that width."""
    dim_key, heads_key, expand_key = next(keys for keys in SSM_KEYS if keys[0] in draft.family.keys)
    heads, width, expand = (_value_of(draft, k) for k in (heads_key, "hidden_size", expand_key))
    if (r.get(dim_key) if r.get(dim_key) is not MISSING else r.defaults[dim_key]) == "auto":  # as the class computes it
        return
    head_dim = r.int(dim_key, r.defaults[dim_key])
    if heads * head_dim != expand * width:
        given = "" if r.get(dim_key) is not MISSING else f" (the default of {draft.family.model_type}'s config class)"
        raise r.fail(dim_key, f"{head_dim}{given}: {heads_key} × {dim_key} = {heads} × {head_dim} = {heads * head_dim} is "
                              f"not {expand_key} × hidden_size = {expand} × {width} = {expand * width}; transformers' "
                              f"{draft.family.hf_class} needs them equal")


#: How transformers 5 writes a number JSON cannot hold (``{"__float__": "Infinity"}``; older versions wrote Infinity).
_TAGGED = {"Infinity": math.inf, "-Infinity": -math.inf}


def unclamped_time_step(r: Reader, draft: Draft) -> None:
    """``time_step_limit`` absent, or ``[low, Infinity]`` with ``low ≤ 0`` (no clamp: the class default is [0.0,
    Infinity]); any other limit changes the model's outputs and is refused. Infinity as JSON's ``Infinity`` or as
    transformers 5 saves it, ``{"__float__": "Infinity"}``."""
    value = r.get("time_step_limit")
    if value is MISSING:
        return
    if isinstance(value, list):
        value = [_TAGGED.get(v["__float__"], v) if isinstance(v, dict) and set(v) == {"__float__"}
                 and isinstance(v["__float__"], str) else v for v in value]
    numbers = isinstance(value, list) and len(value) == 2 and all(
        isinstance(v, (int, float)) and not isinstance(v, bool) and not math.isnan(v) for v in value)
    if numbers and value[0] <= 0 and value[1] == math.inf:
        return
    shown = f"[{', '.join(_number(v) for v in value)}]" if numbers else "null" if value is None else f"{type(value).__name__} {value!r:.40}"
    raise r.fail("time_step_limit", f"{shown} is not modelled (a clamp on the step sizes); archcalc supports [0.0, Infinity], "
                                    "the class default, which clamps nothing")


def _number(value: float) -> str:
    return "Infinity" if value == math.inf else "-Infinity" if value == -math.inf else repr(value)


def unused_time_step_rank(r: Reader, draft: Draft) -> None:
    """``time_step_rank``: ``auto`` or a positive integer (it shapes nothing; transformers fails on anything else)."""
    value = r.get("time_step_rank")
    if value is MISSING or (isinstance(value, str) and value == "auto"):
        return
    r.int("time_step_rank", None)


def falcon_h1_mixer(r: Reader, draft: Draft) -> None:
    """Falcon-H1's keys that a table cannot read: ``mamba_d_head`` (``auto``, or the inner width ``mamba_d_ssm`` (else
    ``mamba_expand × hidden_size``) over ``mamba_n_heads``, as FalconH1Config checks), and its two lists of multipliers:
    ``ssm_multipliers``, five factors on in_proj's z, x, B, C and dt (transformers' fixed ``mup_vector``), and
    ``mlp_multipliers``, the gate's and the down projection's (null: ones, the class default). Ones leave the model
    as it is; other factors go into the model's mixer and MLP."""
    heads = _value_of(draft, "mamba_n_heads")
    inner = draft.values[draft.family.keys["mamba_d_ssm"].symbol]
    head_dim = r.get("mamba_d_head")
    if head_dim is not MISSING and head_dim != "auto":
        head_dim = r.int("mamba_d_head", None)
        if heads * head_dim != inner:
            raise r.fail("mamba_d_head", f"{head_dim}: mamba_n_heads × mamba_d_head = {heads} × {head_dim} = "
                                         f"{heads * head_dim} is not the mixer's inner width {inner} (mamba_d_ssm, else "
                                         "mamba_expand × hidden_size); transformers' FalconH1Config needs them equal")
    for key, count in (("ssm_multipliers", 5), ("mlp_multipliers", 2)):
        value = r.get(key)
        if value is MISSING or value is None:
            continue
        if not isinstance(value, list) or len(value) != count:
            raise r.fail(key, f"expected a list of {count} numbers, got {value!r:.60}")
        factors = [_factor(r, key, i, v) for i, v in enumerate(value)]
        if all(f == 1.0 for f in factors):
            continue
        if key == "ssm_multipliers":
            draft.put("block.mixer.in_proj_multipliers", factors, r.where(key, value=True))
        else:
            draft.put("block.mlp.gate_multiplier", factors[0], r.where(key, value=True))
            draft.put("block.mlp.down_multiplier", factors[1], r.where(key, value=True))


def _factor(r: Reader, key: str, i: int, value: object) -> float:
    """One factor of a list of multipliers: a number above 0."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise r.fail(key, f"item {i}: expected a number above 0, got {value!r:.40}")
    return float(value)
