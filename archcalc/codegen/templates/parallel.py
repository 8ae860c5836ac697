"""Template of ``parallelize`` (archcalc.codegen.parallel fills it): FSDP2 over the dp ranks and,
where the model allows it, tensor and sequence parallelism over the tp ranks (region ``tp``),
pipeline stages over the pp ranks (region ``pp``: ``Pipeline``) and the routed experts over the ep
ranks (region ``ep``: ``place_experts``); ``Elsewhere`` stands in for what another rank holds."""

import torch
import torch.nn.functional as F
from torch import nn

from archcalc.codegen.templates.names import (
    ATTENTIONS,
    PP_UNSUPPORTED,
    SP_PLAN,
    SP_UNSUPPORTED,
    STACKS,
    TP_PLAN,
    TP_UNSUPPORTED,
    SharedBlock,
)


class Elsewhere(nn.Module):
    """Stands in for a module that another rank holds: the final norm or the head of an earlier
    pipeline stage passes its input through; the embeddings of a later stage give back the hidden
    states the previous stage sent (Pipeline.forward puts them in `received`); another rank's
    expert is never called (the tokens go to that rank)."""

    def __init__(self):
        super().__init__()
        self.received: torch.Tensor | None = None

    def forward(self, x: torch.Tensor, *args: object) -> torch.Tensor:
        return x if self.received is None else self.received


class Pipeline(nn.Module):
    """One pipeline stage of the model (parallelize(model, pp=...) returns it on each rank): the
    blocks in pp pieces in order (torch.chunk's: ceil(layers / pp) each, the last may hold fewer),
    the embeddings on the first stage, everything after the blocks (final norm, head) on the last.
    step(input_ids, targets) trains on a batch by the 1F1B schedule, micro-batch by micro-batch."""

    def __init__(self, model: nn.Module, stage: int, stages: int):
        super().__init__()
        layers = sum(len(model.get_submodule(stack)) for stack in STACKS)
        per_stage = -(-layers // stages)
        first = 0  # the first layer of the stack, counted over the whole model
        for stack in STACKS:
            blocks = model.get_submodule(stack)
            kept = [b for i, b in enumerate(blocks, start=first) if i // per_stage == stage]
            first += len(blocks)
            parent, _, name = stack.rpartition(".")
            setattr(model.get_submodule(parent), name, nn.ModuleList(kept))
        for name, child in list(model.named_children()):
            here = stage == 0 if name == "embed" else stage == stages - 1
            # parameter-free modules (rotary tables, ALiBi) stay: every stage computes them
            elsewhere = not here and any(True for _ in child.parameters())
            if elsewhere and name not in STACKS:
                setattr(model, name, Elsewhere())
        self.model, self.stage, self.stages = model, stage, stages

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Token ids (B, T) on the first stage, the previous stage's hidden states (B, T, d) on the
        others; out: hidden states (B, T, d), or the logits (B, T, V) on the last stage."""
        if self.stage == 0:
            return self.model(x)
        self.model.embed.received = x
        try:  # the model reads only the shape of the ids once its embeddings are elsewhere
            return self.model(torch.zeros(x.shape[:2], dtype=torch.long, device=x.device))
        finally:
            self.model.embed.received = None

    def reset_parameters(self) -> None:
        self.model.reset_parameters()

    def start(self, group: object, microbatches: int, device_type: str) -> None:
        """The 1F1B schedule between the stages of `group` (after sharding, FSDP2 being on)."""
        from torch.distributed.pipelining import PipelineStage, Schedule1F1B

        cuda = device_type == "cuda"
        device = (
            torch.device("cuda", torch.cuda.current_device()) if cuda else torch.device(device_type)
        )
        stage = PipelineStage(self, self.stage, self.stages, device, group=group)
        self.schedule = Schedule1F1B(stage, microbatches, loss_fn=self.loss)

    @staticmethod
    def loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """A micro-batch's mean cross-entropy over targets != -100 (the model's own loss)."""
        return F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten(), ignore_index=-100)

    def step(self, input_ids: torch.Tensor, targets: torch.Tensor) -> torch.Tensor | None:
        """Forward and backward of a batch (every stage gets the same rows), micro-batch by
        micro-batch: the gradients of the mean of the micro-batches' losses (the schedule divides
        their sum by their number). Returns that loss on the last stage, None on the others."""
        losses: list[torch.Tensor] = []
        inputs = (input_ids,) if self.stage == 0 else ()
        target = targets if self.stage == self.stages - 1 else None
        self.schedule.step(*inputs, target=target, losses=losses, return_outputs=False)
        return torch.stack(losses).mean() if losses else None


def exchange(x: torch.Tensor, send: list[int], receive: list[int], group: object) -> torch.Tensor:
    """All-to-all of rows across `group`: send[r] rows of x (in order) to rank r, receive[r] rows
    from it; the gradients go back the same way."""
    from torch.distributed._functional_collectives import all_to_all_single_autograd, wait_tensor

    return wait_tensor(all_to_all_single_autograd(x.contiguous(), receive, send, group))


def run_experts_across(
    moe: nn.Module, group: object, mine: range, routed: torch.Tensor, counts: list[int]
) -> torch.Tensor:
    """MoE.run_experts under expert parallelism: the tokens routed to each expert go to the rank of
    `group` that holds it (`mine`: this rank's experts, a torch.chunk piece), which runs its experts
    on the tokens of every rank and sends the outputs back, in `routed`'s order."""
    import torch.distributed as dist

    ranks = dist.get_world_size(group)
    piece = -(-len(counts) // ranks)  # experts a rank holds (the last may hold fewer)
    counts = counts + [0] * (ranks * piece - len(counts))
    # theirs[r, j]: the rows rank r routes to my j-th expert
    theirs = torch.empty(ranks * piece, dtype=torch.long, device=routed.device)
    dist.all_to_all_single(theirs, torch.tensor(counts, device=routed.device), group=group)
    theirs = theirs.view(ranks, piece)
    send = [sum(counts[r * piece : (r + 1) * piece]) for r in range(ranks)]
    receive = theirs.sum(dim=1).tolist()
    # what came, by rank then by expert: rows[r * piece + j] for my j-th expert from rank r
    rows = exchange(routed, send, receive, group).split(theirs.flatten().tolist())
    outs = []  # each of my experts' outputs, split again by the rank the rows came from
    for j, e in enumerate(mine):
        # every expert runs, on no rows too: its gradient (zeros) joins the others' reduction
        out = moe.experts[e](torch.cat([rows[r * piece + j] for r in range(ranks)]))
        outs.append(out.split(theirs[:, j].tolist()))
    back = [outs[j][r] for r in range(ranks) for j in range(len(mine))]
    return exchange(torch.cat(back), receive, send, group)  # in routed's order


def place_experts(model: nn.Module, group: object, rank: int, ranks: int) -> list[nn.Module]:
    """Expert parallelism: each mixture of experts keeps its routed experts' torch.chunk piece for
    this rank of `group` (Elsewhere stands in for the others) and runs them on the tokens that
    every rank of `group` routes to them. Returns the experts this rank holds."""
    from functools import partial

    held = []
    for moe in (m for m in model.modules() if hasattr(m, "run_experts")):
        piece = -(-len(moe.experts) // ranks)
        mine = range(rank * piece, min(len(moe.experts), (rank + 1) * piece))
        if not mine:
            raise ValueError(
                f"ep = {ranks} leaves a rank without any of {len(moe.experts)} experts"
            )
        for e in range(len(moe.experts)):
            if e not in mine:
                moe.experts[e] = Elsewhere()
        moe.run_experts = partial(run_experts_across, moe, group, mine)
        held += [moe.experts[e] for e in mine]
    return held


def split_heads(model: nn.Module, tp: int) -> None:
    """Every rank runs its share of each attention layer's heads (and caches its share)."""
    # named first: a long tuple of classes would not fit the line below
    attention_classes = ATTENTIONS
    for attention in (m for m in model.modules() if isinstance(m, attention_classes)):
        for name in ("heads", "kv_heads"):
            if hasattr(attention, name):
                if getattr(attention, name) % tp:
                    heads, kind = getattr(attention, name), type(attention).__name__
                    raise ValueError(f"tp = {tp} does not divide the {heads} {name} of {kind}")
                setattr(attention, name, getattr(attention, name) // tp)


def tensor_parallel(model: nn.Module, mesh: object, sequence_parallel: bool) -> None:
    """Tensor parallelism over `mesh`: TP_PLAN's modules split across its ranks (with
    sequence_parallel, SP_PLAN's too), every attention layer left with its share of the heads."""
    from torch.distributed.tensor import Replicate, Shard
    from torch.distributed.tensor.parallel import (
        ColwiseParallel,
        PrepareModuleInput,
        RowwiseParallel,
        SequenceParallel,
        parallelize_module,
    )

    split_heads(model, mesh.size())
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
    # region: pp
    # a pipeline stage splits only the modules it holds
    plan = {
        k: v
        for k, v in plan.items()
        if not isinstance(model.get_submodule(k.split(".")[0]), Elsewhere)
    }
    # endregion
    parallelize_module(model, mesh, {name: styles[style] for name, style in plan.items()})
    # region: tied
    # tied again: both are split by vocabulary rows
    model.head.weight = model.embed.token.weight
    # endregion


def parallelize(
    model: nn.Module,
    tp: int = 1,
    dp: int = 1,
    device_type: str = "cuda",
    sequence_parallel: bool = False,
    pp: int = 1,
    microbatches: int = 1,
    ep: int = 1,
) -> nn.Module:
    """DOC"""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    mesh = init_device_mesh(device_type, (pp, dp, tp), mesh_dim_names=("pp", "dp", "tp"))
    root = model  # what FSDP2 shards last (the pipeline stage with pp > 1)
    if pp > 1:
        if PP_UNSUPPORTED or sequence_parallel:
            why = PP_UNSUPPORTED or "sequence parallelism would pass DTensors between the stages"
            raise ValueError(f"this model is not pipeline-parallel: {why}")
        # region: pp
        root = Pipeline(model, mesh["pp"].get_local_rank(), pp)
        # endregion
    # region: ep
    experts: list[nn.Module] = []  # with ep > 1, this rank's routed experts
    # endregion
    if ep > 1:
        # region: !ep
        raise ValueError("this model has no routed experts to place on expert-parallel ranks")
        # endregion
        # region: ep
        if dp % ep:
            raise ValueError(
                f"ep = {ep} must divide dp = {dp}: the data-parallel ranks hold the experts"
            )
        # the dp ranks as (dp / ep) x ep: an ep group holds every expert once
        dims = ("pp", "expert_dp", "ep", "tp")
        expert_mesh = init_device_mesh(device_type, (pp, dp // ep, ep, tp), mesh_dim_names=dims)
        ep_mesh = expert_mesh["ep"]
        experts = place_experts(model, ep_mesh.get_group(), ep_mesh.get_local_rank(), ep)
        # endregion
    if tp > 1:
        if TP_UNSUPPORTED:
            raise ValueError(f"this model is not tensor-parallel: {TP_UNSUPPORTED}")
        # region: tp
        tensor_parallel(model, mesh["tp"], sequence_parallel)
        # endregion
    if dp > 1:  # FSDP2: each block's parameters (and gradients, optimizer state) sharded over dp
        # region: ep
        for expert in experts:  # sharded over the ranks that hold the same experts
            fully_shard(expert, mesh=expert_mesh["expert_dp"])
            # its gradient sums the tokens of the ep ranks too: divided by dp, as the others are
            expert.set_gradient_divide_factor(dp)
            expert.set_force_sum_reduction_for_comms(True)  # a sum, then divided: gloo has no other
        # endregion
        # region: shared
        # the shared blocks first, a unit of their own: the layers that run them hold them together
        fully_shard([m for m in model.modules() if isinstance(m, SharedBlock)], mesh=mesh["dp"])
        # endregion
        for stack in STACKS:
            for block in model.get_submodule(stack):
                fully_shard(block, mesh=mesh["dp"])
        fully_shard(root, mesh=mesh["dp"])
    # region: pp
    if pp > 1:
        root.start(mesh["pp"].get_group(), microbatches, device_type)
    # endregion
    return root
