"""``archcalc plan``: how long a training run takes on N GPUs, under which parallel plan, at what cost."""

from __future__ import annotations

import argparse
import json
from fractions import Fraction

from archcalc.cli.table import table
from archcalc.errors import UsageError

DEFAULT_BATCH_TOKENS = 4 * 2**20  # a global batch of about 4M tokens when none is given
DEFAULT_MFU = Fraction(2, 5)
MAX_GPUS = 2**24  # a bound on the plans to try (divisors are found by trial division up to the square root)

EPILOG = """\
examples:
  archcalc plan llama --size 3.1-405b --gpus 16384 --hardware h100-sxm --tokens 15.6T --seq-len 8192 --mfu 0.40
  archcalc plan gpt3 --size 175b --gpus 1024 --hardware a100-80gb --tokens 300B --seq-len 2048 --price 2.50
  archcalc plan llama --size 3-8b --gpus 8 --hardware h100 --tokens 1T --calibrate run.json   (run.json: archcalc run --json)
"""


def register(sub) -> None:
    from archcalc.cli.args import add_size_options
    from archcalc.cli.output import positive_int

    p = sub.add_parser(
        "plan", help="a training plan: the parallel layouts that fit N GPUs, ranked, with time, GPU-hours and cost",
        description=(
            "Enumerate the parallel plans for --gpus N of --hardware (data, tensor, pipeline, context and expert "
            "parallel; ZeRO-1 or ZeRO-3; micro-batch size; full activation recomputation or none), keep those whose "
            "fullest GPU fits its memory (archcalc memory's per-GPU figures), and time each: the exact matmul FLOPs "
            "of a step at a matmul efficiency, the 1F1B pipeline bubble, and the exact bytes each collective sends "
            "over NVLink or the network (ring algorithms; data- and context-parallel traffic hidden behind compute). "
            "--mfu (a published run's end-to-end MFU) is met by the best plan; --calibrate takes the efficiency of a "
            "measured 'archcalc run --json'. Times, rates and costs are estimates of this model; FLOPs and bytes are "
            "exact."),
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_size_options(p, one_size=True)
    p.add_argument("--gpus", type=positive_int, required=True, metavar="N", help="GPUs (accelerators) in the run")
    p.add_argument("--hardware", required=True, metavar="NAME", help="the accelerator, from 'archcalc infer --list-hardware'")
    p.add_argument("--tokens", required=True, metavar="D", help="tokens to train on: 15.6T, 300B, 2e12")
    p.add_argument("--seq-len", type=positive_int, default=4096, metavar="T", help="tokens per sequence (default 4096)")
    p.add_argument("--global-batch", metavar="TOKENS",
                   help="tokens a step, in whole sequences (default about 4M: 4,194,304 tokens), e.g. 16777216 or 4M")
    how = p.add_mutually_exclusive_group()
    how.add_argument("--mfu", metavar="F", help="the best plan's end-to-end model FLOPs utilization (default 0.40), e.g. 0.4 or 40%%")
    how.add_argument("--calibrate", metavar="RUN.json",
                     help="the output of 'archcalc run --json' on the device: its achieved share of the peak sets the "
                          "matmul efficiency")
    p.add_argument("--price", metavar="USD", help="price of one GPU-hour in US dollars, for the cost")
    p.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float16", "float8"],
                   help="the peak the matmuls run at (default bfloat16)")
    p.add_argument("--gpus-per-node", type=positive_int, metavar="N", help="GPUs in one server (default: the table's, else 8)")
    p.add_argument("--link-gb-s", metavar="GB/S", help="bytes/s (GB) a GPU sends within a server, one direction (default: the table's)")
    p.add_argument("--network-gb-s", metavar="GB/S", help="bytes/s (GB) a GPU sends to other servers (default: the table's)")
    p.add_argument("--memory-reserve", default="0.1", metavar="F",
                   help="share of each GPU's memory left free for the CUDA context, NCCL buffers and fragmentation (default 0.1)")
    p.add_argument("--attention-flops", choices=["full", "causal"], default="full",
                   help="attention in the model FLOPs: over the full T x T (PaLM's and Megatron-LM's MFU, the default) or "
                        "the causal triangle (the generated file's flops_per_token; fewer FLOPs, a lower MFU for the same time)")
    p.add_argument("--top", type=positive_int, default=8, metavar="K", help="plans to list beside the best (default 8)")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from archcalc.backends.infer.hardware import hardware
    from archcalc.backends.training_plan import Cluster, Job, plan_training
    from archcalc.cli.args import fraction, one_size
    from archcalc.cli.solve_cmd import _count

    if args.gpus > MAX_GPUS:
        raise UsageError(f"--gpus {args.gpus:,}: at most {MAX_GPUS:,}")
    spec, lowered, _ = one_size(args)
    hw = hardware(args.hardware)
    tokens = _count(args.tokens, "--tokens")
    batch_tokens = _count(args.global_batch, "--global-batch") if args.global_batch else DEFAULT_BATCH_TOKENS
    sequences = max(1, batch_tokens // args.seq_len)
    link, network = (fraction(v, flag) for v, flag in ((args.link_gb_s, "--link-gb-s"), (args.network_gb_s, "--network-gb-s")))
    cluster = Cluster(hw, args.gpus, args.gpus_per_node or hw.per_node or 8,
                      int(link * 10**9) if link else hw.link, int(network * 10**9) if network else hw.network, args.dtype)
    cluster.peak  # noqa: B018 - refuses a dtype the table has no peak for, before any work
    job = Job(lowered, args.seq_len, sequences, tokens, fraction(args.memory_reserve, "--memory-reserve", high=Fraction(9, 10)),
              causal=args.attention_flops == "causal")
    efficiency, source = calibrated(args.calibrate, hw) if args.calibrate else (None, "")
    mfu = None if efficiency is not None else fraction(args.mfu, "--mfu", high=Fraction(1)) or DEFAULT_MFU
    if mfu is not None and mfu < Fraction(1, 1000):
        raise UsageError(f"--mfu {args.mfu}: expected at least 0.001 (0.1%); no training run is slower")
    result = plan_training(job, cluster, mfu=mfu, efficiency=efficiency, efficiency_from=source)
    price = fraction(args.price, "--price", high=Fraction(10**6))
    if batch_tokens % args.seq_len:
        result.notes.insert(0, f"--global-batch {batch_tokens:,} tokens is not a whole number of {args.seq_len:,}-token "
                               f"sequences: {sequences:,} sequences ({sequences * args.seq_len:,} tokens) a step")
    if args.mfu is None and args.calibrate is None:
        result.notes.insert(0, f"no --mfu or --calibrate: the best plan's MFU is assumed to be {float(DEFAULT_MFU):.0%}")
    name = f"{spec.name} {lowered.binding.size}"
    if args.json:
        print(json.dumps({"command": "plan", "spec": spec.name, "size": lowered.binding.size,
                          **payload(result, price, args.top)}, indent=2))
    else:
        show(name, result, price, args.top)
    return 0


def calibrated(path: str, hw) -> tuple[Fraction, str]:
    """The matmul efficiency a measured ``archcalc run --json`` reached (achieved / peak TFLOP/s)."""
    from pathlib import Path

    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        run = data["results"][0]
        achieved, peak = Fraction(str(run["achieved_tflops"])), Fraction(str(run["peak_tflops"]))
    except OSError as e:
        raise UsageError(f"--calibrate {path}: cannot read it ({e.strerror or e})") from None
    except (ValueError, KeyError, IndexError, TypeError):
        raise UsageError(f"{path}:1:1: expected the output of 'archcalc run --json' (results[0] with achieved_tflops "
                         "and peak_tflops)") from None
    if not 0 < achieved <= peak:
        raise UsageError(f"{path}:1:1: achieved_tflops {float(achieved):g} is not within (0, peak_tflops {float(peak):g}]")
    device = str(run.get("device_name", "the measured device"))
    return achieved / peak, f"measured: {float(achieved / peak):.1%} of the peak on {device} (--calibrate {path})"


def payload(result, price: Fraction | None, top: int) -> dict:
    best = result.best
    out = {
        "gpus": result.cluster.gpus, "hardware": result.cluster.hardware.key, "dtype": result.cluster.dtype,
        "peak_flops_per_gpu": result.cluster.peak, "seq_len": result.job.seq_len,
        "global_batch_sequences": result.job.global_batch, "global_batch_tokens": result.job.global_batch * result.job.seq_len,
        "tokens": result.job.tokens, "steps": result.job.steps, "model_flops_per_step": result.model_flops,
        "model_flops_total": result.model_flops * result.job.steps,
        "attention_flops": "causal" if result.job.causal else "full",
        "matmul_efficiency": result.efficiency, "matmul_efficiency_from": result.efficiency_from,
        "best": plan_json(best),
        "train_seconds": result.train_seconds, "train_days": result.train_seconds / 86400,
        "gpu_hours": result.gpu_hours(), "tokens_per_second": result.tokens_per_second(),
        "cost_usd": float(price) * result.gpu_hours() if price else None,
        "plans_fitting": len(result.ranked), "plans_not_fitting": len(result.rejected),
        "others": [plan_json(c) for c in result.ranked[1:top + 1]],
        "not_fitting": [plan_json(c) for c in result.rejected[:3]],
        "notes": result.notes, "conventions": CONVENTIONS,
        "estimates": "times, rates, MFU and cost are estimates of the stated model; FLOPs and bytes are exact",
    }
    return out


def plan_json(c) -> dict:
    p = c.plan
    return {"data_parallel": p.dp, "tensor_parallel": p.tp, "sequence_parallel": p.sp, "pipeline_parallel": p.pp,
            "context_parallel": p.cp, "expert_parallel": p.ep, "zero_stage": p.zero, "micro_batch": c.micro_batch,
            "microbatches": p.microbatches, "recompute": c.recompute, "fits": c.fits, "memory_per_gpu": c.memory,
            "step_seconds": c.step_seconds, "step_parts_seconds": c.parts, "mfu": c.mfu,
            "pipeline_bubble": str(c.bubble), "communication_per_gpu": c.comm, "why_slower": c.why or None}


CONVENTIONS = [
    "MFU: model FLOPs (exact matmul FLOPs of forward + backward, no recomputation, attention over the full T x T; "
    "--attention-flops causal: the causal triangle) over the GPUs' dense peak",
    "compute: the step's matmul FLOPs (recomputation adds a forward) over the GPUs at the matmul efficiency; the "
    "fullest pipeline stage sets the pace; 1F1B bubble (p - 1) / (M + p - 1)",
    "communication: ring collectives (all-reduce 2(n-1)/n of the buffer, all-gather and reduce-scatter (n-1)/n), bf16; "
    "ranks ordered tp, cp, dp, pp from the innermost; within a server at the NVLink bandwidth, across servers at the "
    "GPU's network bandwidth; no latency term",
    "overlap: data- and context-parallel traffic hidden behind compute (only the excess shows); tensor, pipeline and "
    "expert traffic on the critical path",
    "tried: tensor parallel within a server dividing heads and widths; context parallel while a rank keeps >= 4,096 "
    "tokens; ZeRO-1 and ZeRO-3 (FSDP, also under pipeline parallelism); micro-batches of 1, 2, 4, 8, 16 sequences; sequence "
    "parallelism with every tp > 1; under expert parallelism the routed experts' weights and gradients go over the "
    "data-parallel ranks that hold the same experts",
]


def show(name: str, result, price: Fraction | None, top: int) -> None:
    best, job, cluster = result.best, result.job, result.cluster
    print(f"{name}: training {job.tokens:,} tokens on {cluster.gpus:,} x {cluster.hardware.name} "
          f"({cluster.dtype} peak {cluster.peak / 1e12:,.1f} TFLOP/s)")
    print(f"global batch {job.global_batch:,} sequence{'s' if job.global_batch != 1 else ''} x {job.seq_len:,} tokens, "
          f"{job.steps:,} step{'s' if job.steps != 1 else ''}; "
          f"{result.model_flops * job.steps:.3e} model FLOPs in all (exact: {result.model_flops:,} a step)")
    print(f"matmul efficiency {result.efficiency:.1%}: {result.efficiency_from}")
    print(f"\nbest plan: {best.label()}")
    parts = ", ".join(f"{k} {v:,.2f} s" for k, v in best.parts.items() if v)
    print(f"  step {best.step_seconds:,.2f} s ({parts}); pipeline bubble {float(best.bubble):.1%}")
    print(f"  {result.tokens_per_second():,.0f} tokens/s, MFU {best.mfu:.1%}")
    m, usable = best.memory, cluster.hardware.memory * (1 - job.reserve)
    print(f"  memory per GPU {gib(m['total_bytes'])} of {gib(usable)} usable: weights {gib(m['weights_bytes'])}, "
          f"gradients {gib(m['gradients_bytes'])}, optimizer {gib(m['optimizer_bytes'])}, activations {gib(m['activations_bytes'])}")
    for what, v in best.comm.items():
        where = "within a server" if v["span"] <= cluster.per_node else "across servers"
        timed = f"{v['seconds']:,.2f} s" if v.get("seconds") is not None else "not timed"
        print(f"  {what}: {v['bytes']:,} B a step per GPU, {where}, {timed} ({v['what']})")
    cost = f"; ${float(price) * result.gpu_hours():,.0f} at ${float(price):,.2f} a GPU-hour" if price else ""
    print(f"  to train: {result.train_seconds / 86400:,.1f} days, {result.gpu_hours():,.0f} GPU-hours{cost}")
    rows = [[c.label(), f"{c.step_seconds:,.2f}", f"{c.mfu:.1%}", gib(c.memory["total_bytes"]), c.why]
            for c in result.ranked[1:top + 1]]
    if rows:
        print(f"\nother plans ({len(result.ranked):,} fit, {len(result.rejected):,} do not), fastest first:")
        print(table(["plan", "step s", "MFU", "memory", "why slower"], rows))
    for note in result.notes:
        print(f"note: {note}")
    print("estimates: times, rates, MFU and cost follow the model below; FLOPs and bytes are exact")
    for line in CONVENTIONS:
        print(f"  - {line}")


def gib(n: float) -> str:
    return f"{float(n) / 2**30:,.1f} GiB"
