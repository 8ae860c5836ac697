"""``archcalc run --nproc N [--tp T]``: train the generated module sharded across N local processes (FSDP2 over the
data-parallel ranks, DTensor tensor parallelism over T), and set what each rank holds beside ``archcalc memory``'s
per-GPU figures for the same plan (``--precision fp32``: the run trains in fp32)."""

from __future__ import annotations

import argparse
import json

from archcalc.errors import UsageError


def add_options(run: argparse.ArgumentParser) -> None:
    from archcalc.cli.output import positive_int

    run.add_argument("--nproc", type=positive_int, default=None, metavar="N",
                     help="train sharded across N local processes (torch.distributed's elastic launcher, as torchrun; "
                          "gloo on the CPU, NCCL on CUDA): FSDP2 (ZeRO-3) over N / tp data-parallel ranks")
    run.add_argument("--tp", type=positive_int, default=1, metavar="T",
                     help="with --nproc: tensor-parallel degree (splits q, k, v, gate, up column-wise and out, down "
                          "row-wise; projections the spec fuses are generated separate)")
    run.add_argument("--sequence-parallel", action="store_true", help="with --tp: sequence-parallel norms")


def run_sharded(args: argparse.Namespace, spec, lowered, seq_len: int) -> int:
    from archcalc.backends.memory import memory
    from archcalc.backends.parallel_plan import Plan, states_by_stage
    from archcalc.backends.sharding import sequence_parallel_plan, tensor_parallel_plan
    from archcalc.codegen.device import check_processes
    from archcalc.codegen.emit import emit
    from archcalc.ir import lower
    from archcalc.spec.bind import bind
    from archcalc.spec.transform import separate_projections

    nproc, tp = args.nproc, args.tp
    device = args.device or "cpu"
    if nproc % tp:
        raise UsageError(f"--tp {tp} does not divide --nproc {nproc}")
    check_processes(nproc, device)  # the machine bounds --nproc before a plan is made for that many ranks
    dp = nproc // tp
    if args.batch % dp:
        raise UsageError(f"--batch {args.batch} does not split evenly over {dp} data-parallel ranks (--nproc / --tp)")
    if args.compile or args.checkpoint:
        raise UsageError("--nproc trains without --compile and --checkpoint (one process's run has them)")
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
    plan = Plan(dp=dp, zero=3, tp=tp, sp=args.sequence_parallel, precision="fp32")
    # heads, KV heads and MLP widths must divide by tp (memory() checks); each rank's bytes, before any is started
    per_rank = memory(lowered.binding, seq_len, args.batch // dp, dtype="float32", plan=plan).per_gpu()
    _check_fits(lowered, per_rank["total_bytes"], nproc, device, args.batch // dp, seq_len)
    from archcalc.codegen.distributed import launch_isolated

    vocab = int(lowered.root.attrs.vocab.xreplace(lowered.binding.numeric()))
    try:
        reports = launch_isolated(source=emit(lowered, "archcalc run --nproc"), nproc=nproc, tp=tp, steps=args.steps,
                                  batch=args.batch, seq_len=seq_len, vocab=vocab, device=device,
                                  sequence_parallel=args.sequence_parallel, progress=not args.json)
    except RuntimeError as e:  # a rank failed (every rank has ended): its message, one line
        raise UsageError(f"the sharded run failed: {e}") from None
    rows = []
    for r in reports:
        expected = states_by_stage(lowered, plan, tp_rank=r.rank % tp, dp_rank=r.rank // tp)[0]
        rows.append({"rank": r.rank, "losses": r.losses,
                     "measured": {"weights_bytes": r.parameter_bytes, "gradients_bytes": r.gradient_bytes,
                                  "optimizer_bytes": r.optimizer_bytes},
                     "archcalc": dict(zip(("weights_bytes", "gradients_bytes", "optimizer_bytes"), expected)),
                     "equal": [r.parameter_bytes, r.gradient_bytes, r.optimizer_bytes] == expected})
    if args.json:
        payload = {"size": lowered.binding.size, "nproc": nproc, "tensor_parallel": tp, "data_parallel": dp, "zero_stage": 3,
                   "precision": "fp32", "device": device, "ranks": rows, "conventions": plan.conventions()}
        print(json.dumps({"command": "run", "spec": spec.name, "results": [payload]}, indent=2))
        return 0
    print(f"{spec.name} {lowered.binding.size}: {nproc} processes on {device}, tensor parallel {tp} x data parallel {dp} "
          f"(FSDP2), {args.batch} x {seq_len} tokens a step, fp32")
    print(f"loss {reports[0].losses[0]:.4f} -> {reports[0].losses[-1]:.4f} over {args.steps} steps (mean over the ranks)")
    print("rank  weights (measured / archcalc)   gradients                  AdamW state")
    for row in rows:
        m, a = row["measured"], row["archcalc"]
        cells = [f"{m[k]:>11,} / {a[k]:<11,}" for k in ("weights_bytes", "gradients_bytes", "optimizer_bytes")]
        print(f"{row['rank']:>4}  " + "  ".join(cells) + ("" if row["equal"] else "  DIFFERENT"))
    return 0 if all(row["equal"] for row in rows) else 1


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
