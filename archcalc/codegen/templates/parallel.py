"""Template of ``parallelize`` (archcalc.codegen.parallel fills it): FSDP2 over the dp ranks and,
where the model allows it (region ``tp``), tensor and sequence parallelism over the tp ranks."""

from torch import nn

from archcalc.codegen.templates.names import (
    ATTENTIONS,
    SP_PLAN,
    SP_UNSUPPORTED,
    STACKS,
    TP_PLAN,
    TP_UNSUPPORTED,
)


def parallelize(
    model: nn.Module,
    tp: int = 1,
    dp: int = 1,
    device_type: str = "cuda",
    sequence_parallel: bool = False,
) -> nn.Module:
    """DOC"""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    mesh = init_device_mesh(device_type, (dp, tp), mesh_dim_names=("dp", "tp"))
    if tp > 1:
        if TP_UNSUPPORTED:
            raise ValueError(f"this model is not tensor-parallel: {TP_UNSUPPORTED}")
        # region: tp
        from torch.distributed.tensor import Replicate, Shard
        from torch.distributed.tensor.parallel import (
            ColwiseParallel,
            PrepareModuleInput,
            RowwiseParallel,
            SequenceParallel,
            parallelize_module,
        )

        attention_classes = ATTENTIONS
        for attention in (m for m in model.modules() if isinstance(m, attention_classes)):
            # every rank runs its share of the heads (and caches its share)
            for name in ("heads", "kv_heads"):
                if hasattr(attention, name):
                    if getattr(attention, name) % tp:
                        heads, kind = getattr(attention, name), type(attention).__name__
                        raise ValueError(f"tp = {tp} does not divide the {heads} {name} of {kind}")
                    setattr(attention, name, getattr(attention, name) // tp)
        styles = {  # the plans' words as torch.distributed.tensor.parallel styles
            "colwise": ColwiseParallel(),
            "rowwise": RowwiseParallel(),
            # an embedding split by rows
            "vocab": RowwiseParallel(input_layouts=Replicate(), output_layouts=Replicate()),
            # the head split by vocabulary, the logits gathered
            "vocab_gather": ColwiseParallel(output_layouts=Replicate()),
            # sequence parallelism: between blocks the residual stream is split along the sequence
            "vocab_to_sequence": RowwiseParallel(
                input_layouts=Replicate(), output_layouts=Shard(1), use_local_output=False
            ),
            "sequence": SequenceParallel(),  # a norm on this rank's tokens
            "gather_sequence_1": PrepareModuleInput(
                input_layouts=(Shard(1),), desired_input_layouts=(Replicate(),)
            ),
            "gather_sequence_2": PrepareModuleInput(
                input_layouts=(Shard(1), None), desired_input_layouts=(Replicate(), None)
            ),
            "gather_sequence_3": PrepareModuleInput(
                input_layouts=(Shard(1), None, None),
                desired_input_layouts=(Replicate(), None, None),
            ),
            "rowwise_to_sequence": RowwiseParallel(output_layouts=Shard(1), use_local_output=False),
            "sequence_to_vocab_gather": ColwiseParallel(
                input_layouts=Shard(1), output_layouts=Replicate()
            ),
        }
        plan = TP_PLAN
        if sequence_parallel:
            if SP_UNSUPPORTED:
                raise ValueError(f"this model is not sequence-parallel: {SP_UNSUPPORTED}")
            plan = {**TP_PLAN, **SP_PLAN}
        parallelize_module(model, mesh["tp"], {name: styles[style] for name, style in plan.items()})
        # region: tied
        # tied again: both are split by vocabulary rows
        model.head.weight = model.embed.token.weight
        # endregion
        # endregion
    if dp > 1:  # FSDP2: each block's parameters (and gradients, optimizer state) sharded over dp
        for stack in STACKS:
            for block in model.get_submodule(stack):
                fully_shard(block, mesh=mesh["dp"])
        fully_shard(model, mesh=mesh["dp"])
    return model
