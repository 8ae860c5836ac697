"""Source of the generated file's tensor-parallel plan and ``parallelize()`` (FSDP2 + DTensor tensor parallelism).

``TP_PLAN`` is data (derived from the IR by :func:`archcalc.backends.sharding.tensor_parallel_plan`, which
``archcalc memory`` uses too): for every module that tensor parallelism splits, a module-name pattern (``blocks.*.attn.q``)
and its style — ``colwise`` (the output features are split: q, k, v, gate, up, the experts' too), ``rowwise``
(the input features are split and the outputs all-reduced: attention's out, the MLP's down), ``vocab`` (the
embedding's rows, its lookups all-reduced) and ``vocab_gather`` (the head's rows, the logits gathered). Everything
else (norms, routers, position tables, the down-projections of latent attention) is replicated on every rank.
``parallelize(model, tp, dp)`` applies the plan on a (dp, tp) device mesh, gives each attention layer its share of
the heads, then shards every block and the root with FSDP2 over the dp ranks — the recipe of docs/training.md.

Pipeline parallelism (``parallelize(model, pp=P, microbatches=M)``, a (pp, dp, tp) mesh): ``Pipeline`` keeps this
rank's stage — the blocks in ``torch.chunk`` pieces in order, the embeddings on the first stage, the final norm and head
on the last, where :mod:`archcalc.backends.parallel_plan` counts them — with ``Elsewhere`` standing in for the modules
of other stages, so that the stage runs the model's own forward; ``Pipeline.step`` trains on a batch by
torch.distributed.pipelining's 1F1B schedule, the loss on the last stage. ``PP_UNSUPPORTED`` says what keeps a model
from it (a tied head, logits scaled after the head, encoder models...).

Expert parallelism (``ep``, dividing dp; models with routed experts): ``place_experts`` keeps each layer's routed
experts' ``torch.chunk`` piece on its rank of an ep group (consecutive data-parallel ranks, as parallel_plan counts
them) and replaces the layer's ``run_experts`` by ``run_experts_across``, which sends each token to its experts' rank
and the outputs back (``exchange``: an all-to-all that autograd differentiates); FSDP2 shards those experts over the
dp / ep ranks that hold the same ones.

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
from archcalc.ir.attrs import MoE, SharedBlock

if TYPE_CHECKING:
    from archcalc.codegen.emitter import Emitter

PARALLELIZE_DOC = (
    "Shard `model` over tp x dp processes of an initialised torch.distributed group (world size tp * dp): "
    "tensor parallelism inside each block (TP_PLAN; with sequence_parallel, SP_PLAN too) across tp ranks, then FSDP2 "
    "over the dp ranks (fully_shard per block and the root). Build on the meta device, parallelize, then "
    "model.to_empty(device=...) and model.reset_parameters(); or parallelize a built model (tensor parallelism keeps "
    "rank 0's weights). pp > 1 (world size pp * dp * tp; PP_UNSUPPORTED says when not): returns this rank's "
    "pipeline stage (Pipeline), which trains by stage.step(input_ids, targets) over `microbatches` micro-batches. "
    "ep > 1 (dividing dp; models with routed experts): each layer's routed experts in ep pieces across the "
    "data-parallel ranks, the tokens sent to their experts' ranks and back by all-to-all."
)
FSDP_DOC = (
    "Shard `model` with FSDP2 over the dp processes of an initialised torch.distributed group (fully_shard per block "
    "and the root); tp > 1 is refused (TP_UNSUPPORTED), so is pp > 1 where PP_UNSUPPORTED says why (else it "
    "returns this rank's pipeline stage, Pipeline, trained by stage.step(input_ids, targets)); ep > 1 (dividing dp) "
    "places each layer's routed experts in ep pieces across the data-parallel ranks (all-to-all dispatch). Build on "
    "the meta device, parallelize, then model.to_empty(device=...) and model.reset_parameters(); or parallelize a "
    "built model."
)


def parallel_sources(em: Emitter) -> str:
    """``TP_UNSUPPORTED`` and ``parallelize``, with ``TP_PLAN`` and ``SP_PLAN`` where the model is tensor-parallel."""
    root = em.lowered.root
    plan, reasons = tensor_parallel_plan(root)
    moes = [node.attrs for _, node in root.walk() if isinstance(node.attrs, MoE)]
    if any(a.zero_experts is not None for a in moes):  # an identity beside row-split experts: added tp times over
        reasons = [*reasons, "zero-compute experts (their output, the input itself, would be summed over the tp ranks "
                   "with the split experts' partial outputs)"]
    if root.find("mtp") is not None:  # --with-mtp: the plan splits the stacks' blocks only
        reasons = [*reasons, "multi-token prediction modules (generated with --with-mtp)"]
    tp = not reasons
    stacks = [f"{t}.blocks" for t in ("encoder", "decoder")] if root.attrs.architecture == "encoder-decoder" \
        else [c.name for c in root.children if c.kind == "block"]
    tied = any(t.tied_to for c in root.children if c.name == "head" for t in c.tensors)
    classes = [source.split("(", 1)[0][6:] for source in em.classes if source.startswith("class ")]
    names = {"DOC": docstring(PARALLELIZE_DOC if tp else FSDP_DOC, 4), "STACKS": flat(tuple(stacks)),
             "ATTENTIONS": _names_tuple([n for n in classes if n.endswith("Attention")])}
    pp_reasons = pipeline_unsupported(root)
    experts = any(isinstance(node.attrs, MoE) for _, node in root.walk())
    shared = any(isinstance(node.attrs, SharedBlock) for _, node in root.walk())  # Zamba2's: FSDP2 units of their own
    flags = {"tp": tp, "tied": tied, "pp": not pp_reasons, "ep": experts, "shared": shared}
    units = ["Elsewhere"] if experts or not pp_reasons else []
    units += ["Pipeline"] if not pp_reasons else []
    units += ["exchange", "run_experts_across", "place_experts"] if experts else []
    units += ["split_heads", "tensor_parallel"] if tp else []
    function = "\n\n\n".join(unit("parallel", u, flags, names) for u in [*units, "parallelize"])
    pipeline = ["# What keeps this model from pipeline parallelism (\"\": nothing):",
                assign("PP_UNSUPPORTED", "; ".join(pp_reasons))]
    unsupported = assign("TP_UNSUPPORTED", "; ".join(reasons))
    if not tp:
        return "\n".join(["# What keeps this model from tensor parallelism:", unsupported, *pipeline, "", "", function])
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
        *pipeline,
        "",
        "",
        function,
    ])




def pipeline_unsupported(root) -> list[str]:
    """Why ``Pipeline`` cannot cut this model into stages (none: it can). A stage runs the model's own forward with the
    modules of other stages stood in for (Elsewhere): what runs after the head, or around the blocks outside
    modules, or a head tied to the embeddings (its gradient would have to be summed across the first and last
    stages) keeps it from that."""
    if root.attrs.architecture != "decoder":
        return [f"{root.attrs.architecture} models (pipeline stages cut one decoder's blocks)"]
    if root.attrs.layer_order is not None:
        return ["interleaved stacks of blocks"]
    children = {c.name: c for c in root.children}
    out = []
    head = children.get("head")
    if head is None:
        out.append("no head (the last stage computes the loss from the logits)")
    elif head.attrs.scale_input or head.attrs.multiplier is not None or head.attrs.softcap is not None:
        out.append("the logits scaled or soft-capped around the head (outside a module a stage can stand in for)")
    if any(t.tied_to for c in root.children for t in c.tensors):
        out.append("a head tied to the token embeddings (the first and last stages would share its gradient)")
    others = set(children) - {"embed", "final_norm", "project_out", "head"} - {c.name for c in root.children if c.kind == "block"}
    if others:
        out.append(f"modules beside the blocks a stage cannot stand in for ({', '.join(sorted(others))})")
    return out


def _names_tuple(names: list[str]) -> str:
    """A tuple of class names as source: ``(Attention,)``, ``(LocalAttention, GlobalAttention)``."""
    return "(" + ", ".join(names) + ("," if len(names) == 1 else "") + ")"
