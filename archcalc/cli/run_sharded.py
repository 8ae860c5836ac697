"""``archcalc run --nproc N [--tp T] [--pp P [--microbatches M]] [--ep E]``: train the generated module sharded across N
local processes (FSDP2 over the data-parallel ranks, DTensor tensor parallelism over T, P pipeline stages under the
1F1B schedule, the routed experts over E of the data-parallel ranks; ranks in (pp, dp, tp) order), and set what each
rank holds beside ``archcalc memory``'s per-GPU figures for its place in the same plan (``--precision fp32``: the run
trains in fp32)."""

from __future__ import annotations

import argparse
import json

from archcalc.errors import UsageError


def add_options(run: argparse.ArgumentParser) -> None:
    from archcalc.cli.output import positive_int

    run.add_argument("--nproc", type=positive_int, default=None, metavar="N",
                     help="train sharded across N local processes (torch.distributed's elastic launcher, as torchrun; "
                          "gloo on the CPU, NCCL on CUDA): FSDP2 (ZeRO-3) over N / (tp x pp) data-parallel ranks")
    run.add_argument("--tp", type=positive_int, default=1, metavar="T",
                     help="with --nproc: tensor-parallel degree (splits q, k, v, gate, up column-wise and out, down "
                          "row-wise; projections the spec fuses are generated separate)")
    run.add_argument("--sequence-parallel", action="store_true", help="with --tp: sequence-parallel norms")
    run.add_argument("--pp", type=positive_int, default=1, metavar="P",
                     help="with --nproc: pipeline stages (the blocks in P pieces in order, the embeddings on the first "
                          "stage, the final norm and head on the last; torch.distributed.pipelining's 1F1B schedule)")
    run.add_argument("--microbatches", type=positive_int, default=None, metavar="M",
                     help="with --pp: micro-batches a step (at least P; default P)")
    run.add_argument("--ep", type=positive_int, default=1, metavar="E",
                     help="with --nproc: expert-parallel degree, dividing the data-parallel ranks (each layer's routed "
                          "experts in E pieces, the tokens sent to their experts' ranks by all-to-all)")


def _plan(args: argparse.Namespace, spec, lowered, device: str):
    """The run's plan (fp32, ZeRO-3 over the data-parallel ranks) and the model it trains (q, k, v apart under
    tensor parallelism); what cannot run is a UsageError, before any process starts."""
    from archcalc.backends.parallel_plan import Plan, stage_of
    from archcalc.backends.sharding import sequence_parallel_plan, tensor_parallel_plan
    from archcalc.codegen.device import check_processes
    from archcalc.codegen.parallel import pipeline_unsupported
    from archcalc.ir import lower
    from archcalc.spec.bind import bind
    from archcalc.spec.transform import separate_projections

    nproc, tp, pp = args.nproc, args.tp, args.pp
    if nproc % (tp * pp):
        raise UsageError(f"--tp {tp} does not divide --nproc {nproc}" if pp == 1 else
                         f"--tp {tp} x --pp {pp} does not divide --nproc {nproc}")
    check_processes(nproc, device)  # the machine bounds --nproc before a plan is made for that many ranks
    dp, microbatches = nproc // (tp * pp), args.microbatches or pp
    if pp == 1 and args.microbatches:
        raise UsageError("--microbatches needs --pp (micro-batches are what the pipeline stages pass along)")
    if microbatches < pp:
        raise UsageError(f"--microbatches {microbatches}: the 1F1B schedule needs at least one per stage (--pp {pp})")
    if args.batch % (dp * microbatches):
        raise UsageError(f"--batch {args.batch} does not split evenly over {dp} data-parallel ranks (--nproc / --tp"
                         + (f" / --pp) x {microbatches} micro-batches" if pp > 1 else ")"))
    _check_experts(args.ep, dp, lowered)
    if pp > 1:
        stage_of(lowered, pp)  # refuses more stages than blocks
        why = pipeline_unsupported(lowered.root) + (["sequence parallelism"] if args.sequence_parallel else [])
        if why:
            raise UsageError(f"{spec.name} {lowered.binding.size}: not pipeline-parallel: {'; '.join(why)}")
    if tp > 1:  # tensor parallelism splits q, k, v (gate, up) apart: a spec that fuses them is generated separate
        spec = separate_projections(spec)
        lowered = lower(bind(spec, lowered.binding.size if lowered.binding.size in spec.sizes else None,
                             lowered.binding.overrides))
        _, why = (sequence_parallel_plan if args.sequence_parallel else tensor_parallel_plan)(lowered.root)
        if why:
            raise UsageError(f"{spec.name} {lowered.binding.size}: not {'sequence' if args.sequence_parallel else 'tensor'}"
                             f"-parallel: {'; '.join(why)}")
    elif args.sequence_parallel:
        raise UsageError("--sequence-parallel needs --tp")
    if args.compile or args.checkpoint:
        raise UsageError("--nproc trains without --compile and --checkpoint (one process's run has them)")
    plan = Plan(dp=dp, zero=3, tp=tp, sp=args.sequence_parallel, pp=pp, microbatches=microbatches, ep=args.ep,
                precision="fp32")
    return spec, lowered, plan


def _check_experts(ep: int, dp: int, lowered) -> None:
    """Refuse an expert-parallel degree the run cannot use (more ranks than experts: ``memory`` refuses that)."""
    import sympy

    from archcalc.ir.attrs import MoE

    if ep == 1:
        return
    if dp % ep:
        raise UsageError(f"--ep {ep} does not divide the {dp} data-parallel ranks (--nproc / --tp / --pp): they hold "
                         "the experts")
    numeric = lowered.binding.numeric()
    experts = [int(sympy.sympify(node.attrs.experts).xreplace(numeric)) for _, node in lowered.root.walk()
               if isinstance(node.attrs, MoE)]
    if not experts:
        raise UsageError(f"--ep {ep}: {lowered.binding.spec.name} has no routed experts to place")
    for n in experts:  # torch.chunk's pieces: ceil(n / ep) experts a rank, the last ranks may get none
        if ep <= n and -(-n // ep) * (ep - 1) >= n:
            raise UsageError(f"--ep {ep}: pieces of {-(-n // ep)} of the {n} routed experts leave the last rank "
                             "without any (the run does not train such a plan)")


def run_sharded(args: argparse.Namespace, spec, lowered, seq_len: int) -> int:
    from archcalc.backends.memory import memory
    from archcalc.codegen.emit import emit

    if lowered.root.find("mtp") is not None:
        raise UsageError("--with-mtp: multi-token prediction modules train on one process (not with --nproc) yet")
    device = args.device or "cpu"
    spec, lowered, plan = _plan(args, spec, lowered, device)
    nproc, tp, dp, pp = args.nproc, plan.tp, plan.dp, plan.pp
    # heads, KV heads and MLP widths must divide by tp (memory() checks); each rank's bytes, before any is started
    per_rank = memory(lowered.binding, seq_len, args.batch // dp, dtype="float32", plan=plan).per_gpu()
    _check_fits(lowered, per_rank["total_bytes"], nproc, device, args.batch // dp, seq_len)
    from archcalc.codegen.distributed import launch_isolated

    vocab = int(lowered.root.attrs.vocab.xreplace(lowered.binding.numeric()))
    try:
        reports = launch_isolated(source=emit(lowered, "archcalc run --nproc"), nproc=nproc, tp=tp, pp=pp, ep=plan.ep,
                                  microbatches=plan.microbatches, steps=args.steps, batch=args.batch, seq_len=seq_len,
                                  vocab=vocab, device=device, sequence_parallel=args.sequence_parallel,
                                  progress=not args.json)
    except RuntimeError as e:  # a rank failed (every rank has ended): its message, one line
        raise UsageError(f"the sharded run failed: {e}") from None
    rows = [_row(r, lowered, plan) for r in reports]
    if args.json:
        payload = {"size": lowered.binding.size, "nproc": nproc, "tensor_parallel": tp, "data_parallel": dp,
                   "pipeline_parallel": pp, "microbatches": plan.microbatches, "expert_parallel": plan.ep,
                   "zero_stage": 3, "precision": "fp32", "device": device, "ranks": rows, "conventions": plan.conventions()}
        print(json.dumps({"command": "run", "spec": spec.name, "results": [payload]}, indent=2))
        return 0
    stages = f"pipeline {pp} ({plan.microbatches} micro-batches, 1F1B) x " if pp > 1 else ""
    experts = f" with expert parallel {plan.ep}" if plan.ep > 1 else ""
    print(f"{spec.name} {lowered.binding.size}: {nproc} processes on {device}, {stages}tensor parallel {tp} x data "
          f"parallel {dp} (FSDP2){experts}, {args.batch} x {seq_len} tokens a step, fp32")
    print(f"loss {reports[0].losses[0]:.4f} -> {reports[0].losses[-1]:.4f} over {args.steps} steps (mean over the ranks)")
    print("rank" + ("  stage" if pp > 1 else "") + "  weights (measured / archcalc)   gradients                  AdamW state")
    for row in rows:
        m, a = row["measured"], row["archcalc"]
        cells = [f"{m[k]:>11,} / {a[k]:<11,}" for k in ("weights_bytes", "gradients_bytes", "optimizer_bytes")]
        stage = f"  {row['stage']:>5}" if pp > 1 else ""
        print(f"{row['rank']:>4}{stage}  " + "  ".join(cells) + ("" if row["equal"] else "  DIFFERENT"))
    return 0 if all(row["equal"] for row in rows) else 1


def _row(report, lowered, plan) -> dict:
    """One rank's measured bytes beside parallel_plan's for its place in the (pp, dp, tp) mesh."""
    from archcalc.backends.parallel_plan import states_by_stage

    tp_rank, dp_rank, stage = report.rank % plan.tp, report.rank // plan.tp % plan.dp, report.rank // (plan.tp * plan.dp)
    expected = states_by_stage(lowered, plan, tp_rank=tp_rank, dp_rank=dp_rank)[stage]
    measured = [report.parameter_bytes, report.gradient_bytes, report.optimizer_bytes]
    keys = ("weights_bytes", "gradients_bytes", "optimizer_bytes")
    return {"rank": report.rank, "stage": stage, "losses": report.losses, "measured": dict(zip(keys, measured)),
            "archcalc": dict(zip(keys, expected)), "equal": measured == expected}


def _check_fits(lowered, training: int, nproc: int, device: str, batch: int, seq_len: int) -> None:
    """Refuse a sharded run that cannot fit, before any process starts. Each rank first builds the whole model in fp32
    (4 bytes a parameter) and shards it, then trains on its shard: weights, gradients and AdamW state, with the
    activations of its batch (``training``, archcalc memory's per-GPU figure for the plan, which errs low). On the CPU
    the ranks share the machine's memory; on CUDA rank r has cuda:r."""
    from archcalc.backends.count import count
    from archcalc.codegen.device import check_fits

    parameters = count(lowered.binding).total
    need = max(4 * parameters, training)
    each = (f"builds {parameters:,} fp32 parameters ({4 * parameters / 2**30:,.1f} GiB) before sharding them, then holds its "
            f"shard of weights, gradients and AdamW state and the activations of {batch} × {seq_len} tokens "
            f"({training / 2**30:,.1f} GiB)")
    advice = "try a smaller --nproc, --batch or --seq-len, or a smaller size"
    if device.startswith("cuda"):
        for rank in range(nproc):
            check_fits(need, f"rank {rank} (which {each})", f"cuda:{rank}", advice)
    else:
        check_fits(nproc * need, f"{nproc} processes (each {each})", device, advice)
