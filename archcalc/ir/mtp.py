"""Lowering of multi-token prediction modules (``model.mtp``), counted only where ``mtp.include`` says so.

DeepSeek-V3's module k (the checkpoint's ``model.layers.{61 + k}``): the next token's embedding through an RMSNorm
(enorm), the previous depth's hidden state through another (hnorm), both concatenated and projected 2d -> d
(eh_proj), one block of the model's kind, a norm (shared_head.norm), and the model's head. The embedding and the head
are the model's (tied here: no parameters), unless ``include: stored``: the checkpoint keeps copies of its own
(embed_tokens, shared_head.head), and so does this count. Every tensor of the module has the role ``mtp``.

>>> from archcalc.spec import load_spec
>>> from archcalc.spec.bind import bind
>>> from archcalc.ir import lower
>>> spec = with_mtp(load_spec("deepseek_v3"), "shared")
>>> [c.name for c in lower(bind(spec, "671b")).root.find("mtp").children]
['embed', 'enorm', 'hnorm', 'eh_proj', 'block', 'norm', 'head']
"""

from __future__ import annotations

from dataclasses import replace

import sympy

from archcalc.errors import SpecError, UsageError
from archcalc.ir import attrs, parts
from archcalc.ir.nodes import Component, Tensor
from archcalc.spec import components as sc
from archcalc.spec.loader import where

ZERO = sympy.Integer(0)


def with_mtp(spec, include: str):
    """``spec`` with its MTP modules counted (``include``: shared or stored); a UsageError if it has none."""
    model = spec.model
    if model.mtp is None:
        raise UsageError(f"archcalc: --with-mtp: spec {spec.name!r} has no multi-token prediction modules (no model.mtp section)")
    out = spec.model_copy(update={"model": model.model_copy(update={"mtp": model.mtp.model_copy(update={"include": include})})})
    out._source = spec._source  # errors still point into the spec's file
    return out


def lower_mtp(low, m: sc.Model, d, token, vocab, head: Component | None, loc: tuple) -> list[Component]:
    """The ``mtp`` component (``modules`` copies), or nothing where it is off or has no module. ``low``: the Lowerer."""
    mtp = m.mtp
    if mtp is None or mtp.include == "off":
        return []
    loc = loc + ("mtp",)
    if low.value(low.symbolic(mtp.modules, loc + ("modules",), "MTP modules")) == 0:
        return []
    modules = low.width(mtp.modules, loc + ("modules",), "MTP modules")
    layers = low.width(mtp.layers, loc + ("layers",), "MTP layers") if mtp.layers is not None else sympy.Integer(1)
    stacks = m.stacks()
    index = next((i for i, b in enumerate(stacks) if b.name == mtp.block), len(stacks) - 1)  # absent: the last stack
    if head is None or token is not d:
        raise SpecError.at(where(low.spec, loc), "multi-token prediction needs a head and a token table as wide as the model")
    spot = ("model", "block") if m.block is not None else ("model", "blocks", index)
    block = low.block(stacks[index], d, spot, causal=True, cross=False)
    kids = [_shared("embed", attrs.Table(), (Tensor("weight", (vocab, token), "mtp", ZERO),), "embed.token", mtp.include),
            low.norm("enorm", mtp.norm, d, loc + ("norm",)), low.norm("hnorm", mtp.norm, d, loc + ("norm",)),
            parts.linear("eh_proj", d, 2 * d, False, "mtp"),
            replace(block, name="block", repeat=layers),
            low.norm("norm", mtp.norm, d, loc + ("norm",)),
            _shared("head", head.attrs, head.tensors, "head", mtp.include)]
    low.warnings.append(f"{low.value(modules)} multi-token prediction module(s) counted (role mtp"
                        f"{', with their stored copies of the embedding and head' if mtp.include == 'stored' else ''}); "
                        "transformers' model and the spec's reported figures leave them out")
    return [Component("mtp", attrs.MTP(layers, mtp.include == "stored"), children=tuple(_retag(k) for k in kids), repeat=modules)]


def _shared(name: str, settings, tensors, owner: str, include: str) -> Component:
    """The model's embedding or head as the module uses it: tied to the model's tensor, or a stored copy."""
    if include == "stored":
        return Component(name, settings, tuple(replace(t, tied_to=None) for t in tensors))
    return Component(name, settings, tuple(replace(t, tied_to=t.tied_to or f"{owner}.{t.name}") for t in tensors))


def _retag(node: Component) -> Component:
    """``node`` with every tensor's role ``mtp``: the module is one role of the count."""
    return replace(node, tensors=tuple(replace(t, role="mtp") for t in node.tensors),
                   children=tuple(_retag(c) for c in node.children))


def mtp_layers(root: Component) -> sympy.Expr:
    """Blocks in all the MTP modules of ``root`` (0 where none is counted)."""
    node = root.find("mtp")
    return node.repeat * node.attrs.layers if node is not None and isinstance(node.attrs, attrs.MTP) else ZERO


def mtp_activations(root: Component, tokens: int, compute: int, value) -> tuple[int, list[tuple[str, int, bool]]]:
    """What the MTP modules add to the activation estimate: blocks beyond the one the walk of the stacks finds, and
    each module's inputs (the 2d concatenation, the head's input: ``compute`` bytes) and its log-softmax (fp32)."""
    node = root.find("mtp")
    if node is None or not isinstance(node.attrs, attrs.MTP):
        return 0, []
    modules, width, vocab = value(node.repeat), value(root.attrs.width), value(root.attrs.vocab)
    return (modules - 1) * value(node.attrs.layers), [
        ("MTP modules: the concatenated input (2d) and the head input", modules * tokens * 3 * width * compute, False),
        ("MTP modules: log-softmax of the logits (fp32)", modules * tokens * vocab * 4, False)]
