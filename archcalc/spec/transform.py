"""Rewrites of a validated spec that change how a model is parameterised, not what it computes.

``fuse_projections`` turns separate query/key/value projections into one ``qkv`` and separate gate/up
projections into one ``gate_up``: one wide matmul instead of three (or two) narrow ones, the same
parameters and FLOPs, the same function (the fused weight is the separate ones stacked along the output
dimension). The rewritten spec is a spec like any other, so the IR stays the single source of truth: the
generated module's ``state_dict`` names are the new IR paths (``blocks.{i}.attn.qkv.weight``), and
``load_hf_state_dict`` stacks transformers' separate tensors into them through the weight maps.

>>> from archcalc.spec import load_spec
>>> fused = fuse_projections(load_spec("llama"))
>>> fused.model.block.attention.layout, fused.model.block.mlp.layout
('fused', 'fused')
"""

from __future__ import annotations

from archcalc.spec.components import MLP, Attention, Block, Tower
from archcalc.spec.schema import Spec


def separate_projections(spec: Spec) -> Spec:
    """The inverse of :func:`fuse_projections`: q, k, v and gate, up as separate projections everywhere (what tensor
    parallelism splits: each of them column-wise). The same parameters, FLOPs and function.

    >>> from archcalc.spec import load_spec
    >>> separate_projections(load_spec("gpt2")).model.block.attention.layout
    'separate'
    """
    return _relayout(spec, "separate")


def fuse_projections(spec: Spec) -> Spec:
    """The same spec with every self-attention's q, k, v fused into qkv and every gated MLP's gate and up into
    gate_up (the experts and shared experts of a mixture of experts too).

    Left separate, because one product would not be the same computation or codegen does not fuse them:
    cross-attention (its queries and its keys/values read different inputs), latent attention (MLA has
    no q/k/v projections to stack), attention with a relative position bias (T5), whose fused form is
    not generated, attention with an output gate (Qwen3.5's), whose gate rides on q's projection, and attention
    whose values are its keys or whose keys and values are an earlier layer's (Gemma 4's k_eq_v, kv_shared).
    """
    return _relayout(spec, "fused")


def _relayout(spec: Spec, layout: str) -> Spec:
    model = spec.model
    relative = model.embedding.position.kind == "relative-bias"
    update: dict = {}
    if model.architecture == "encoder-decoder":
        update["encoder"] = _tower(model.encoder, relative, layout)
        update["decoder"] = _tower(model.decoder, relative, layout)
    elif model.block is not None:
        update["block"] = _block(model.block, relative, layout)
    else:
        update["blocks"] = [_block(b, relative, layout) for b in model.blocks or []]
    out = spec.model_copy(update={"model": model.model_copy(update=update)})
    out._source = spec._source  # error positions still point into the file the spec came from
    return out


def _tower(tower: Tower, relative: bool, layout: str) -> Tower:
    if tower.block is not None:
        return tower.model_copy(update={"block": _block(tower.block, relative, layout)})
    return tower.model_copy(update={"blocks": [_block(b, relative, layout) for b in tower.blocks or []]})


def _block(block: Block, relative: bool, layout: str) -> Block:
    update = {"attention": _attention(block.attention, relative, layout), "mlp": _mlp(block.mlp, layout),
              "moe_beside": _mlp(block.moe_beside, layout)}  # Gemma 4's experts beside the MLP alike
    if block.shared is not None:  # Zamba2's shared block: its attention and MLP alike
        update["shared"] = block.shared.model_copy(update={"attention": _attention(block.shared.attention, relative, layout),
                                                           "mlp": _mlp(block.shared.mlp, layout)})
    return block.model_copy(update=update)


def _attention(attention: Attention | None, relative: bool, layout: str) -> Attention | None:
    kept = attention is not None and (attention.output_gate or attention.k_eq_v or attention.kv_shared)  # Gemma 4's: no v
    if attention is None or attention.kind != "standard" or (layout == "fused" and (relative or kept)):
        return attention
    return attention.model_copy(update={"layout": layout})


def _mlp(mlp: MLP | None, layout: str) -> MLP | None:
    if mlp is None:
        return None
    gated = mlp.kind == "gated" or (mlp.kind == "moe" and mlp.expert_kind == "gated")
    return mlp.model_copy(update={"layout": layout}) if gated else mlp

