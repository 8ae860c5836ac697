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

if TYPE_CHECKING:
    from codegen.emitter import Emitter

STYLES = '''        styles = {  # the plans' words as torch.distributed.tensor.parallel styles
            "colwise": ColwiseParallel(),
            "rowwise": RowwiseParallel(),
            "vocab": RowwiseParallel(input_layouts=Replicate(), output_layouts=Replicate()),  # an embedding split by rows
            "vocab_gather": ColwiseParallel(output_layouts=Replicate()),  # the head split by vocabulary, logits gathered
            # sequence parallelism: between blocks the residual stream is split along the sequence (dim 1)
            "vocab_to_sequence": RowwiseParallel(input_layouts=Replicate(), output_layouts=Shard(1), use_local_output=False),
            "sequence": SequenceParallel(),  # a norm on this rank's tokens
            "gather_sequence_1": PrepareModuleInput(input_layouts=(Shard(1),), desired_input_layouts=(Replicate(),)),
            "gather_sequence_2": PrepareModuleInput(input_layouts=(Shard(1), None), desired_input_layouts=(Replicate(), None)),
            "gather_sequence_3": PrepareModuleInput(input_layouts=(Shard(1), None, None), desired_input_layouts=(Replicate(), None, None)),
            "rowwise_to_sequence": RowwiseParallel(output_layouts=Shard(1), use_local_output=False),
            "sequence_to_vocab_gather": ColwiseParallel(input_layouts=Shard(1), output_layouts=Replicate()),
        }'''


def parallel_sources(em: Emitter) -> str:
    """``TP_PLAN``, ``TP_UNSUPPORTED`` and ``parallelize``."""
    plan, reasons = tensor_parallel_plan(em.lowered.root)
    sp_plan, sp_reasons = sequence_parallel_plan(em.lowered.root)
    sp = {k: v for k, v in sp_plan.items() if plan.get(k) != v}
    root = em.lowered.root
    stacks = [f"{t}.blocks" for t in ("encoder", "decoder")] if root.attrs.architecture == "encoder-decoder" \
        else [c.name for c in root.children if c.kind == "block"]
    tied = any(t.tied_to for c in root.children if c.name == "head" for t in c.tensors)
    names = [source.split("(", 1)[0][6:] for source in em.classes if source.startswith("class ")]
    attentions = "(" + ", ".join(n for n in names if n.endswith("Attention")) + ",)"
    lines = [
        "# Tensor parallelism: how each split module is cut across the tp ranks (colwise: its outputs; rowwise: its inputs,",
        "# the outputs all-reduced; vocab: an embedding's rows; vocab_gather: the head's rows, the logits gathered).",
        "TP_PLAN = {",
        *(f"    {k!r}: {v!r}," for k, v in plan.items()),
        "}",
        f"TP_UNSUPPORTED = {'; '.join(reasons)!r}  # what keeps this model from tensor parallelism ('' : nothing)",
        "# Sequence parallelism (with tensor parallelism): norms on a slice of the tokens, the residual stream split along",
        "# the sequence between blocks; these entries replace TP_PLAN's.",
        "SP_PLAN = {",
        *(f"    {k!r}: {v!r}," for k, v in sp.items()),
        "}",
        f"SP_UNSUPPORTED = {'; '.join(sp_reasons)!r}",
        "",
        "",
        'def parallelize(model: nn.Module, tp: int = 1, dp: int = 1, device_type: str = "cuda", sequence_parallel: bool = False) -> nn.Module:',
        '    """Shard `model` over tp x dp processes of an initialised torch.distributed group (world size tp * dp):',
        "    tensor parallelism inside each block (TP_PLAN; with sequence_parallel, SP_PLAN too) across tp ranks, then",
        "    FSDP2 over the dp ranks (fully_shard per block and the root). Build on the meta device, parallelize, then",
        "    model.to_empty(device=...) and model.reset_parameters(); or parallelize a built model (tensor parallelism",
        '    keeps rank 0\'s weights)."""',
        "    from torch.distributed.device_mesh import init_device_mesh",
        "    from torch.distributed.fsdp import fully_shard",
        "    from torch.distributed.tensor import Replicate, Shard",
        "    from torch.distributed.tensor.parallel import (",
        "        ColwiseParallel,",
        "        PrepareModuleInput,",
        "        RowwiseParallel,",
        "        SequenceParallel,",
        "        parallelize_module,",
        "    )",
        "",
        "    mesh = init_device_mesh(device_type, (dp, tp), mesh_dim_names=(\"dp\", \"tp\"))",
        "    if tp > 1:",
        "        if TP_UNSUPPORTED:",
        '            raise ValueError(f"this model is not tensor-parallel: {TP_UNSUPPORTED}")',
        f"        for attention in (m for m in model.modules() if isinstance(m, {attentions})):",
        '            for name in ("heads", "kv_heads"):  # every rank runs its share of the heads (and caches its share)',
        "                if hasattr(attention, name):",
        "                    if getattr(attention, name) % tp:",
        '                        raise ValueError(f"tp = {tp} does not divide the {getattr(attention, name)} {name} of {type(attention).__name__}")',
        "                    setattr(attention, name, getattr(attention, name) // tp)",
        STYLES,
        "        plan = TP_PLAN",
        "        if sequence_parallel:",
        "            if SP_UNSUPPORTED:",
        '                raise ValueError(f"this model is not sequence-parallel: {SP_UNSUPPORTED}")',
        "            plan = {**TP_PLAN, **SP_PLAN}",
        "        parallelize_module(model, mesh[\"tp\"], {name: styles[style] for name, style in plan.items()})",
    ]
    if tied:
        lines.append("        model.head.weight = model.embed.token.weight  # tied again: both are split by vocabulary rows")
    lines += [
        "    if dp > 1:  # FSDP2: each block's parameters (and gradients, optimizer state) sharded over the dp ranks",
        f"        for stack in {tuple(stacks)!r}:",
        "            for block in model.get_submodule(stack):",
        "                fully_shard(block, mesh=mesh[\"dp\"])",
        "        fully_shard(model, mesh=mesh[\"dp\"])",
        "    return model",
    ]
    return "\n".join(lines)
