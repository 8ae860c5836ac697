"""Small IR builders shared by the lowering: linear layers, norms, projections, feed-forward nets.

>>> import sympy
>>> d = sympy.Symbol("d")
>>> [(t.name, t.shape) for t in linear("up", 4 * d, d, True, "mlp").tensors]
[('weight', (4*d, d)), ('bias', (4*d,))]
"""

from __future__ import annotations

import sympy

from archcalc.ir.attrs import Conv, LayerNorm, Linear, RMSNorm
from archcalc.ir.nodes import ONE, Component, Tensor


def linear(name: str, out, inp, bias: bool, role: str, active: sympy.Expr = ONE) -> Component:
    """A Linear layer: weight (out × in, torch's layout) and optionally a bias (out)."""
    tensors = [Tensor("weight", (out, inp), role, active)]
    if bias:
        tensors.append(Tensor("bias", (out,), role, active))
    return Component(name, Linear(in_features=inp, out_features=out, bias=bias), tuple(tensors))


def conv(name: str, channels, taps, bias: bool) -> Component:
    """A depthwise causal conv1d (each channel its own ``taps``-wide filter): weight (channels × 1 × taps, torch's
    Conv1d layout with groups = channels) and optionally a bias (channels)."""
    tensors = [Tensor("weight", (channels, ONE, taps), "mixer")]
    if bias:
        tensors.append(Tensor("bias", (channels,), "mixer"))
    return Component(name, Conv(channels, taps, bias), tuple(tensors))


def norm(name: str, kind: str, width, bias: bool, eps: float, unit_offset: bool = False, groups=None) -> Component:
    """A LayerNorm (weight, optional bias) or RMSNorm (weight) over ``width`` features (``groups``: in that many groups,
    each normalised on its own)."""
    settings = {"layernorm": LayerNorm, "rmsnorm": RMSNorm}[kind]
    tensors = [Tensor("weight", (width,), "norm")]
    if bias and settings is LayerNorm:
        tensors.append(Tensor("bias", (width,), "norm"))
    return Component(name, settings(width, eps, unit_offset, bias and settings is LayerNorm, groups), tuple(tensors))


def projections(d, heads, kv, dh, dv, bias: bool, layout: str, gate: bool = False) -> list[Component]:
    """Query, key and value projections: one fused ``qkv`` or separate ``q``, ``k``, ``v``; with an output ``gate``,
    ``q`` yields the gate too (each head's query, then its gate)."""
    if layout == "fused":
        return [linear("qkv", heads * dh + kv * dh + kv * dv, d, bias, "attention")]
    return [linear("q", (2 if gate else 1) * heads * dh, d, bias, "attention"),
            linear("k", kv * dh, d, bias, "attention"),
            linear("v", kv * dv, d, bias, "attention")]


def ffn(kind: str, d, hidden, bias: bool, layout: str, active: sympy.Expr = ONE) -> list[Component]:
    """A dense (up, down) or gated (gate and up, or fused gate_up; then down) feed-forward net."""
    if kind == "dense":
        return [linear("up", hidden, d, bias, "mlp", active), linear("down", d, hidden, bias, "mlp", active)]
    if layout == "fused":
        ins = [linear("gate_up", 2 * hidden, d, bias, "mlp", active)]
    else:
        ins = [linear("gate", hidden, d, bias, "mlp", active), linear("up", hidden, d, bias, "mlp", active)]
    return ins + [linear("down", d, hidden, bias, "mlp", active)]


#: Activations with learnable parameters of their own: xIELU's two scalars (Apertus), alpha_p and alpha_n, one each
LEARNED_ACTIVATIONS = {"xielu": ("alpha_p", "alpha_n")}


def activation_scalars(activation: str) -> tuple[Tensor, ...]:
    """An MLP's own tensors for its activation (``LEARNED_ACTIVATIONS``): one element each, role mlp."""
    return tuple(Tensor(name, (ONE,), "mlp") for name in LEARNED_ACTIVATIONS.get(activation, ()))


def layer_cycle(pattern, layers: int) -> tuple:
    """The shortest cycle that gives ``pattern`` repeated over ``layers`` layers: a pattern of six with two layers is
    its first two (one, if they are alike), so two specs that build the same layers lower alike.

    Linear in the pattern's length (the prefix function of Knuth, Morris and Pratt): the shortest period of a
    sequence of n items is n minus its longest proper border, and when every layer of the pattern is built the cycle
    must divide n, which (by Fine and Wilf's theorem) only that shortest period can do, or n itself.

    >>> layer_cycle(("local", "global") * 3, 6), layer_cycle(("local", "global", "local"), 3), layer_cycle("aab", 2)
    (('local', 'global'), ('local', 'global', 'local'), ('a',))
    """
    seen = [pattern[i % len(pattern)] for i in range(min(layers, len(pattern)))]
    n = len(seen)
    if n == 0:
        return ()
    border = [0] * n  # border[i]: length of the longest proper border of seen[: i + 1]
    for i in range(1, n):
        k = border[i - 1]
        while k and seen[i] != seen[k]:
            k = border[k - 1]
        border[i] = k + 1 if seen[i] == seen[k] else 0
    period = n - border[-1]
    if len(seen) == len(pattern) and n % period:  # every layer of the pattern is built: a cycle must divide it
        period = n
    return tuple(seen[:period])
