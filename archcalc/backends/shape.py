"""The headline shape of a model (layers, width, heads...) read off the IR, for approximations.

Models with several stacks or towers sum their layers and take the widths of the first stack.

>>> from archcalc.spec import load_spec
>>> from archcalc.spec.bind import bind
>>> from archcalc.ir import lower
>>> model_shape(lower(bind(load_spec("gpt2"), "small")))
Shape(layers=12, width=768, vocab=50257, heads=12, kv_heads=12, head_width=64, value_width=64, attention_width=768, mlp_hidden=3072)
"""

from __future__ import annotations

from dataclasses import dataclass

from archcalc.ir import Lowered
from archcalc.ir.attrs import Attention, Block, Model


@dataclass(frozen=True)
class Shape:
    layers: int
    width: int
    vocab: int
    heads: int
    kv_heads: int
    head_width: int
    value_width: int
    attention_width: int  # heads × head width: d_attn in Kaplan et al.
    mlp_hidden: int


def model_shape(lowered: Lowered) -> Shape:
    numeric = lowered.binding.numeric()
    value = lambda e: int(e.xreplace(numeric))  # noqa: E731
    stacks = [c for _, c in lowered.root.walk() if isinstance(c.attrs, Block)]
    layers = sum(value(s.repeat) for s in stacks)
    first = stacks[0]
    attn = next(c for c in first.children if isinstance(c.attrs, Attention))
    mlp = next(c for c in first.children if c.name == "mlp")
    a, model = attn.attrs, lowered.root.attrs
    assert isinstance(a, Attention) and isinstance(model, Model)
    return Shape(
        layers=layers,
        width=value(model.width),
        vocab=value(model.vocab),
        heads=value(a.heads),
        kv_heads=value(a.kv_heads),
        head_width=value(a.head_width),
        value_width=value(a.value_width),
        attention_width=value(a.heads * a.head_width),
        mlp_hidden=value(mlp.attrs.hidden),
    )
