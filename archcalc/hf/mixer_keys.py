"""Hooks for the config keys of state-space mixers that a family's ``hf.keys`` table cannot check (named in a spec's
``hf.hooks``; see :mod:`archcalc.hf.hooks`).

- ``ssm_head_dim``: transformers' Mamba2 config refuses ``num_heads × head_dim ≠ expand × hidden_size``; the spec's
  heads are ``inner / heads`` wide, so ``head_dim`` shapes nothing of its own and is only checked.
- ``unclamped_time_step``: ``time_step_limit`` clamps each step size (after its softplus) into ``[low, high]``;
  archcalc's Mamba2 mixer does not clamp, which is the class default ``(0.0, inf)``: a step size is never below 0.
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
    if r.get(dim_key) == "auto":
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
