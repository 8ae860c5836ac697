"""Source of the generated file's tensor-parallel plan and ``parallelize()`` (FSDP2 + DTensor tensor parallelism).

``TP_PLAN`` is data (derived from the IR by :func:`archcalc.backends.sharding.tensor_parallel_plan`, which
``archcalc memory`` uses too): for every module that tensor parallelism splits, a module-name pattern (``blocks.*.attn.q``)
and its style — ``colwise`` (the output features are split: q, k, v, gate, up, the experts' too), ``rowwise``
(the input features are split and the outputs all-reduced: attention's out, the MLP's down), ``vocab`` (the
embedding's rows, its lookups all-reduced) and ``vocab_gather`` (the head's rows, the logits gathered). Everything
else (norms, routers, position tables, the down-projections of latent attention) is replicated on every rank.
``parallelize(model, tp, dp)`` applies the plan on a (dp, tp) device mesh, gives each attention layer its share of
the heads, then shards every block and the root with FSDP2 over the dp ranks — the recipe of docs/training.md.

What the plan cannot split is said in ``TP_UNSUPPORTED`` (fused q/k/v or gate/up projections: generate with
``--separate-projections``; QK-norm over all heads; attention sinks; encoder-decoder models): ``parallelize`` then
refuses ``tp > 1`` with that reason, and data parallelism still works.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from archcalc.backends.sharding import sequence_parallel_plan, tensor_parallel_plan
from archcalc.codegen.literal import assign, flat
from archcalc.codegen.parts import docstring
from archcalc.codegen.template import unit

if TYPE_CHECKING:
    from archcalc.codegen.emitter import Emitter

PARALLELIZE_DOC = (
    "Shard `model` over tp x dp processes of an initialised torch.distributed group (world size tp * dp): "
    "tensor parallelism inside each block (TP_PLAN; with sequence_parallel, SP_PLAN too) across tp ranks, then FSDP2 "
    "over the dp ranks (fully_shard per block and the root). Build on the meta device, parallelize, then "
    "model.to_empty(device=...) and model.reset_parameters(); or parallelize a built model (tensor parallelism keeps "
    "rank 0's weights)."
)
FSDP_DOC = (
    "Shard `model` with FSDP2 over the dp processes of an initialised torch.distributed group (fully_shard per block "
    "and the root); tp > 1 is refused (TP_UNSUPPORTED). Build on the meta device, parallelize, then "
    "model.to_empty(device=...) and model.reset_parameters(); or parallelize a built model."
)


def parallel_sources(em: Emitter) -> str:
    """``TP_UNSUPPORTED`` and ``parallelize``, with ``TP_PLAN`` and ``SP_PLAN`` where the model is tensor-parallel."""
    root = em.lowered.root
    plan, reasons = tensor_parallel_plan(root)
    tp = not reasons
    stacks = [f"{t}.blocks" for t in ("encoder", "decoder")] if root.attrs.architecture == "encoder-decoder" \
        else [c.name for c in root.children if c.kind == "block"]
    tied = any(t.tied_to for c in root.children if c.name == "head" for t in c.tensors)
    classes = [source.split("(", 1)[0][6:] for source in em.classes if source.startswith("class ")]
    names = {"DOC": docstring(PARALLELIZE_DOC if tp else FSDP_DOC, 4), "STACKS": flat(tuple(stacks)),
             "ATTENTIONS": _names_tuple([n for n in classes if n.endswith("Attention")])}
    function = unit("parallel", "parallelize", {"tp": tp, "tied": tied}, names)
    unsupported = assign("TP_UNSUPPORTED", "; ".join(reasons))
    if not tp:
        return "\n".join(["# What keeps this model from tensor parallelism:", unsupported, "", "", function])
    sp_plan, sp_reasons = sequence_parallel_plan(root)
    return "\n".join([
        "# Tensor parallelism: how each split module is cut across the tp ranks (colwise: its outputs;",
        "# rowwise: its inputs, the outputs all-reduced; vocab: an embedding's rows; vocab_gather: the",
        "# head's rows, the logits gathered).",
        assign("TP_PLAN", plan),
        unsupported + "  # nothing keeps this model from tensor parallelism",
        "# Sequence parallelism (with tensor parallelism): norms on a slice of the tokens, the residual",
        "# stream split along the sequence between blocks; these entries replace TP_PLAN's.",
        assign("SP_PLAN", {k: v for k, v in sp_plan.items() if plan.get(k) != v}),
        assign("SP_UNSUPPORTED", "; ".join(sp_reasons)),
        "",
        "",
        function,
    ])




def _names_tuple(names: list[str]) -> str:
    """A tuple of class names as source: ``(Attention,)``, ``(LocalAttention, GlobalAttention)``."""
    return "(" + ", ".join(names) + ("," if len(names) == 1 else "") + ")"
