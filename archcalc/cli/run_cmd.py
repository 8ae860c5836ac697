"""``archcalc run``: train the generated module for a few steps on random tokens and time it. Needs torch."""

from __future__ import annotations

import argparse
import math
import sys

from archcalc.cli.codegen_cmd import add_fuse_option, add_mtp_option, need_torch, one_size
from archcalc.cli.output import positive_int, positive_real
from archcalc.errors import UsageError, one_line


def register(sub) -> None:
    from archcalc.cli.args import add_size_options

    run = sub.add_parser(
        "run", help="train the generated module for a few steps on random tokens and time it",
        description=(
            "Build the generated module for one size on a device and run forward, backward and an "
            "AdamW step on a fixed batch of random tokens; report the loss, tokens/s and peak memory. "
            "On cuda the forward pass runs under bf16 autocast. Needs torch. Progress goes to stderr while it trains (a bar "
            "on a terminal, else about ten lines); the results go to stdout once it is done (--json: one JSON object)."
        ),
    )
    add_size_options(run, json_flag=True, one_size=True)
    run.add_argument("--device", default=None, help="cpu or cuda (default: cuda when available, else cpu; with --nproc: cpu)")
    run.add_argument("--batch", type=positive_int, default=4, metavar="B", help="sequences per step (default 4)")
    run.add_argument("--seq-len", type=positive_int, default=None, metavar="T",
                     help="tokens per sequence (default: 128, capped by a learned position table)")
    run.add_argument("--steps", type=positive_int, default=10, metavar="N", help="optimizer steps (default 10; the first 2 are not timed)")
    run.add_argument("--compile", action="store_true", help="run the model through torch.compile")
    run.add_argument("--checkpoint", action="store_true",
                     help="activation checkpointing per block: keep each block's input, recompute the rest in backward")
    run.add_argument("--peak", type=positive_real, default=None, metavar="TFLOPS",
                     help="the device's peak dense bf16 TFLOP/s for MFU (default: from a table: H100/H200 989, A100 312)")
    add_fuse_option(run)
    add_mtp_option(run)
    from archcalc.cli.run_sharded import add_options

    add_options(run)
    run.set_defaults(run=run_train)


def run_train(args: argparse.Namespace) -> int:
    import json

    torch = need_torch()
    from archcalc.codegen.device import check_device, check_tensor_count, is_out_of_memory
    from archcalc.codegen.emit import emit
    from archcalc.codegen.load import load_source
    from archcalc.codegen.train import train

    spec, lowered, overrides = one_size(args)
    device = check_device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"), torch, meta=False)
    from archcalc.backends.count import count

    result = count(lowered.binding)
    root = lowered.root
    context = next((leaf.tensor.shape[0] for leaf in result.leaves if leaf.path == "embed.position.weight"), None)
    limit = int(context.xreplace(lowered.binding.numeric())) if context is not None else None
    seq_len = args.seq_len or min(128, limit or 128)
    if limit is not None and seq_len > limit:
        raise UsageError(f"--seq-len {seq_len} is longer than the learned position table ({limit})")
    what = f"{spec.name} {lowered.binding.size}"
    check_tensor_count(sum(int(leaf.repeat.xreplace(lowered.binding.numeric())) for leaf in result.leaves), what)
    if args.nproc is not None:
        from archcalc.cli.run_sharded import run_sharded

        return run_sharded(args, spec, lowered, seq_len)
    if args.tp > 1 or args.sequence_parallel or args.pp > 1 or args.microbatches or args.ep > 1:
        raise UsageError("--tp, --sequence-parallel, --pp, --microbatches and --ep shard a run across processes: give "
                         "--nproc too")
    _check_fits(lowered, result.total, device, args.batch, seq_len, args.checkpoint, torch)
    module = load_source(emit(lowered, "archcalc run"))
    vocab = int(root.attrs.vocab.xreplace(lowered.binding.numeric()))
    try:
        model = module.build(device=device)
        if args.checkpoint:
            if not hasattr(model, "checkpointing"):
                raise UsageError("--checkpoint: this generated module has no per-block checkpointing switch")
            model.checkpointing = True
        report = train(model, vocab, device=device, batch=args.batch, seq_len=seq_len, steps=args.steps,
                       compile=args.compile, progress=args.steps > 3 and not args.json)
    except Exception as e:  # noqa: BLE001 - only an allocation failure or a compiler's is turned into a message
        if args.compile and _compiler_failed(e):
            raise UsageError(f"{what}: torch.compile failed on this model ({type(e).__name__}: {one_line(e, 160)}); "
                             "it runs without --compile") from None
        if not is_out_of_memory(e):
            raise
        raise UsageError(f"{what}: training {args.batch} × {seq_len} tokens ran out of memory on {device}; "
                         "try a smaller --batch or --seq-len, --checkpoint, or a smaller size") from None
    from archcalc.backends.flops import flops

    step_flops = flops(lowered.binding, seq_len, args.batch, recompute=args.checkpoint, lowered=lowered,
                       counted=result).train_step_matmul  # with checkpointing the forward runs twice
    median = sorted(report.step_seconds)[len(report.step_seconds) // 2]
    achieved = step_flops / median / 1e12
    peak = args.peak if args.peak is not None else peak_tflops(report.device_name)
    payload = {"size": lowered.binding.size, "device": report.device, "device_name": report.device_name,
               "batch": report.batch, "seq_len": report.seq_len, "steps": report.steps, "compiled": report.compiled,
               "parameters": result.total, "first_loss": report.losses[0], "last_loss": report.losses[-1],
               "tokens_per_second": report.tokens_per_second, "median_step_seconds": median,
               "peak_memory_bytes": report.peak_bytes, "peak_memory_kind": report.peak_kind,
               "train_step_matmul": step_flops, "achieved_tflops": achieved, "peak_tflops": peak,
               "mfu": achieved / peak if peak else None}
    sys.stderr.flush()  # the progress is all out before the results
    if args.json:
        print(json.dumps({"command": "run", "spec": spec.name, "results": [payload]}, indent=2))
    else:
        print(f"{spec.name} {lowered.binding.size} on {report.device_name}: {result.total:,} parameters, "
              f"batch {report.batch} × {report.seq_len} tokens{', compiled' if report.compiled else ''}")
        _show(report, payload)
    return 0


def _show(report, payload: dict) -> None:
    """The run's loss, throughput, memory and MFU as text (after the line that names the model and the device)."""
    achieved, peak, step_flops = payload["achieved_tflops"], payload["peak_tflops"], payload["train_step_matmul"]
    print(f"loss {report.losses[0]:.4f} -> {report.losses[-1]:.4f} over {report.steps} steps")
    print(f"{figure(report.tokens_per_second)} tokens/s (median of {len(report.step_seconds)} timed steps); "
          f"peak memory {report.peak_bytes / 2**20:,.0f} MiB ({report.peak_kind})")
    mfu = f"MFU {figure(100 * achieved / peak)}% of {peak:,.0f} TFLOP/s" if peak else "MFU: no peak rate known for this device (--peak)"
    print(f"{flop_rate(achieved * 1e12)} achieved ({step_flops:,} matmul FLOPs a step, train_step_matmul); {mfu}")


def figure(x: float) -> str:
    """A measured rate as people read it: whole numbers with thousands separators from 100 up, else 3 significant
    digits (0.000123, 1.23, 45.6), never a 0 that hides a small rate.

    >>> figure(123456.7), figure(45.61), figure(0.0001234), figure(0.0)
    ('123,457', '45.6', '0.000123', '0')
    """
    if x >= 99.95 or x == 0:
        return f"{x:,.0f}"
    x = float(f"{x:.3g}")  # rounded first: 9.996 is 10.0, not 10.00
    return f"{x:.{max(0, 2 - math.floor(math.log10(abs(x))))}f}"


FLOP_UNITS = (("PFLOP/s", 1e15), ("TFLOP/s", 1e12), ("GFLOP/s", 1e9), ("MFLOP/s", 1e6), ("kFLOP/s", 1e3))


def flop_rate(flops_per_second: float) -> str:
    """FLOP/s in the unit that gives 1 to 999, to 3 significant digits.

    >>> flop_rate(2.345e14), flop_rate(9.9996e11), flop_rate(4.2e9), flop_rate(12.0)
    ('234 TFLOP/s', '1.00 TFLOP/s', '4.20 GFLOP/s', '12.0 FLOP/s')
    """
    for unit, scale in FLOP_UNITS:
        if flops_per_second >= 0.9995 * scale:
            value = flops_per_second / scale
            return f"{value:.{0 if value >= 99.95 else 1 if value >= 9.995 else 2}f} {unit}"
    return f"{figure(flops_per_second)} FLOP/s"


PEAK_BF16_TFLOPS = {"H200": 989.0, "H100": 989.0, "A100": 312.0}  # dense bf16, SXM parts


def peak_tflops(device_name: str) -> float | None:
    """The dense bf16 peak of a known GPU, from its name; None for CPUs and unknown devices."""
    for key, value in PEAK_BF16_TFLOPS.items():
        if key in device_name:
            return value
    return None


def _check_fits(lowered, parameters: int, device: str, batch: int, seq_len: int, checkpoint: bool, torch) -> None:
    """Refuse a run that cannot fit: weights, gradients and AdamW state (16 bytes a parameter, fp32 here) plus the
    activations the backward pass keeps (archcalc memory's estimate, which errs low), before anything is allocated."""
    from archcalc.backends.activations import activations
    from archcalc.codegen.device import check_fits

    acts = activations(lowered, seq_len, batch, mixed=device.startswith("cuda"))
    saved = acts.recompute_bytes() if checkpoint else acts.total_bytes()
    state = 16 * parameters
    check_fits(state + saved, f"{parameters:,} parameters (weights, gradients, AdamW state: {state / 2**30:,.1f} GiB) "
                              f"and the activations of {batch} × {seq_len} tokens ({saved / 2**30:,.1f} GiB)",
               device, "try a smaller --batch or --seq-len, --checkpoint, or a smaller size", torch)


def _compiler_failed(e: BaseException) -> bool:
    """Whether ``e`` came out of torch.compile (Dynamo or Inductor), not out of the model or the run."""
    return type(e).__module__.startswith(("torch._dynamo", "torch._inductor"))
