"""Zamba2's hybrid layers (``templates/shared.py``): a transformer block shared across depth, run on concat(x, the token
embeddings) with the layer's own low-rank adapters beside its projections, then a linear d -> d of the layer's own
whose output joins the layer's input before its Mamba2 layer's norm.

The model builds ``cfg.shared_blocks`` blocks and hands hybrid layer i block ``i % shared_blocks``: one module, so its
parameters are held once (``named_parameters`` lists them under the first layer that runs it, ``state_dict`` under
every one, as transformers' tied blocks). Each hybrid layer keeps a KVCache of its own for its use of the shared
attention, beside its Mamba2 state (a ``ParallelCache``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from archcalc.codegen.attention import attention_class, check_attention
from archcalc.codegen.errors import UnsupportedError
from archcalc.codegen.literal import fitted
from archcalc.codegen.mlp import check_mlp, mlp_class
from archcalc.codegen.parts import camel, docstring, norm_expr
from archcalc.codegen.template import unit
from archcalc.ir import Component, leaves

if TYPE_CHECKING:
    from archcalc.codegen.emitter import Emitter

ADAPTER = unit("shared", "Adapter")


def hybrid_block_class(em: Emitter, stack: Component, p: str, mixer: str, mixer_norm: str, rotary: bool) -> str:
    """The shared block's classes (its attention, its MLP, ``SharedBlock``) and the hybrid layer's block class of the
    stack (``p``: its config fields' prefix); the block class's name."""
    kids = {c.name: c for c in stack.children}
    block = {c.name: c for c in kids["shared"].children}
    _check(stack, kids, block)
    adapters = "q_adapter" in kids
    attn = attention_class(em, block["attn"], "shared_", rotary, concat=True, adapters=adapters)
    mlp = mlp_class(em, block["mlp"], "shared_", adapter=True)
    em.field("shared_blocks", kids["shared"].attrs.copies, "distinct shared blocks: hybrid layer i runs i % shared_blocks")
    rank = next(c for c in kids["mlp_adapter"].children if c.name == "down").tensors[0].shape[0]
    em.field("adapter_rank", rank, "rank of the hybrid layers' adapters")
    own = ("norm_eps", f"{p}block_norm_eps")
    flags = {"rotary": rotary, "attention_adapters": adapters}
    drop = ({"rope"} if not rotary else set()) | ({"attn_adapters"} if not adapters else set())
    what = "q, k, v and " if adapters else ""
    doc = (f"A transformer block that several hybrid layers run (shared weights): RMSNorm of concat(x, token "
           f"embeddings), attention from 2d to d, RMSNorm, gated MLP; beside its {what}gate_up projections the calling "
           "layer's own adapters. No residual: the layer adds the output where it wants it.")
    names = {"SharedAttention": attn, "SharedMLP": mlp, "DOC": docstring(doc, 4),
             "ATTN_NORM": fitted(norm_expr(em, block["attn_norm"], "2 * cfg.width", own), len("        self.attn_norm = "), 8),
             "MLP_NORM": fitted(norm_expr(em, block["mlp_norm"], None, own), len("        self.mlp_norm = "), 8)}
    em.add(ADAPTER)
    em.add(unit("shared", "SharedBlock", flags, names, drop))
    name = f"{camel(p)}Block"
    doc = ("A hybrid layer: the shared block on concat(x, token embeddings) with this layer's adapters, projected by "
           "proj; then Mamba2 on norm(x + that), its output added to x." + (" Given the rotary tables for the shared "
                                                                           "attention." if rotary else ""))
    names = {"HybridBlock": name, "Mamba2": mixer, "DOC": docstring(doc, 4),
             "MIXER_NORM": fitted(mixer_norm, len("        self.mixer_norm = "), 8)}
    em.add(unit("shared", "HybridBlock", flags, names, drop))
    return name


def _check(stack: Component, kids: dict[str, Component], block: dict[str, Component]) -> None:
    """Refuse what the templates do not generate: transformers' untied blocks (each hybrid layer a block of its own,
    with the adapters of every layer of its block), another arrangement of the layer."""
    problems = check_attention(block["attn"]) + check_mlp(block["mlp"])
    if problems:
        raise UnsupportedError(f"codegen does not generate {', '.join(problems)} in a shared block yet")
    held = {leaf.tensor.owned for leaf in leaves(stack) if not leaf.path.split(".")[1] == "shared"}
    if held != {1} or stack.attrs.residual_multiplier is not None or {"attn", "mlp"} & set(kids):
        raise UnsupportedError("codegen generates Zamba2's shared blocks tied only (transformers unties them, and copies "
                               "every layer's adapters, where tie_word_embeddings is false), in layers of a shared block "
                               "and Mamba2 only")
