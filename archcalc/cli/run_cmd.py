"""``archcalc run``: train the generated module for a few steps on random tokens and time it. Needs torch."""

from __future__ import annotations

import argparse
import os

from archcalc.cli.codegen_cmd import add_fuse_option, need_torch, one_size
from archcalc.cli.output import positive_int
from archcalc.errors import UsageError


def register(sub) -> None:
    from archcalc.cli import add_size_options

    run = sub.add_parser(
        "run", help="train the generated module for a few steps on random tokens and time it",
        description=(
            "Build the generated module for one size on a device and run forward, backward and an "
            "AdamW step on a fixed batch of random tokens; report the loss, tokens/s and peak memory. "
            "On cuda the forward pass runs under bf16 autocast. Needs torch."
        ),
    )
    add_size_options(run, json_flag=True)
    run.add_argument("--device", default=None, help="cpu or cuda (default: cuda when available, else cpu)")
    run.add_argument("--batch", type=positive_int, default=4, metavar="B", help="sequences per step (default 4)")
    run.add_argument("--seq-len", type=positive_int, default=None, metavar="T",
                     help="tokens per sequence (default: 128, capped by a learned position table)")
    run.add_argument("--steps", type=positive_int, default=10, metavar="N", help="optimizer steps (default 10; the first 2 are not timed)")
    run.add_argument("--compile", action="store_true", help="run the model through torch.compile")
    run.add_argument("--checkpoint", action="store_true",
                     help="activation checkpointing per block: keep each block's input, recompute the rest in backward")
    run.add_argument("--peak", type=float, default=None, metavar="TFLOPS",
                     help="the device's peak dense bf16 TFLOP/s for MFU (default: from a table: H100/H200 989, A100 312)")
    add_fuse_option(run)
    run.set_defaults(run=run_train)


def run_train(args: argparse.Namespace) -> int:
    import json

    torch = need_torch()
    from codegen.emit import emit
    from codegen.load import load_source
    from codegen.train import train

    spec, lowered, overrides = one_size(args)
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise UsageError("--device cuda: no CUDA device is available here; use --device cpu")
    if device not in ("cpu",) and not device.startswith("cuda"):
        raise UsageError(f"--device {device}: expected cpu or cuda")
    from archcalc.backends.count import count

    result = count(lowered.binding)
    _check_fits(result.total, device, torch)
    root = lowered.root
    context = next((leaf.tensor.shape[0] for leaf in result.leaves if leaf.path == "embed.position.weight"), None)
    limit = int(context.xreplace(lowered.binding.numeric())) if context is not None else None
    seq_len = args.seq_len or min(128, limit or 128)
    if limit is not None and seq_len > limit:
        raise UsageError(f"--seq-len {seq_len} is longer than the learned position table ({limit})")
    module = load_source(emit(lowered, "archcalc run"))
    model = module.build(device=device)
    if args.checkpoint:
        if not hasattr(model, "checkpointing"):
            raise UsageError("--checkpoint: this generated module has no per-block checkpointing switch")
        model.checkpointing = True
    vocab = int(root.attrs["vocab"].xreplace(lowered.binding.numeric()))
    report = train(model, vocab, device=device, batch=args.batch, seq_len=seq_len, steps=args.steps,
                   compile=args.compile, progress=args.steps > 3 and not args.json)
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
    if args.json:
        print(json.dumps({"command": "run", "spec": spec.name, "results": [payload]}, indent=2))
    else:
        print(f"{spec.name} {lowered.binding.size} on {report.device_name}: {result.total:,} parameters, "
              f"batch {report.batch} × {report.seq_len} tokens{', compiled' if report.compiled else ''}")
        print(f"loss {report.losses[0]:.4f} -> {report.losses[-1]:.4f} over {report.steps} steps")
        print(f"{report.tokens_per_second:,.0f} tokens/s (median of {len(report.step_seconds)} timed steps); "
              f"peak memory {report.peak_bytes / 2**20:,.0f} MiB ({report.peak_kind})")
        mfu = f"MFU {100 * achieved / peak:.1f}% of {peak:,.0f} TFLOP/s" if peak else "MFU: no peak rate known for this device (--peak)"
        print(f"{achieved:,.3f} TFLOP/s achieved ({step_flops:,} matmul FLOPs a step, train_step_matmul); {mfu}")
    return 0


PEAK_BF16_TFLOPS = {"H200": 989.0, "H100": 989.0, "A100": 312.0}  # dense bf16, SXM parts


def peak_tflops(device_name: str) -> float | None:
    """The dense bf16 peak of a known GPU, from its name; None for CPUs and unknown devices."""
    for key, value in PEAK_BF16_TFLOPS.items():
        if key in device_name:
            return value
    return None


def _check_fits(parameters: int, device: str, torch) -> None:
    """Refuse a run whose weights, gradients and AdamW state (16 bytes a parameter) cannot fit."""
    need = 16 * parameters
    if device.startswith("cuda"):
        have = torch.cuda.get_device_properties(torch.device(device)).total_memory
    else:
        have = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    if need > have:
        raise UsageError(f"{parameters:,} parameters need at least {need / 2**30:,.1f} GiB for weights, gradients and "
                         f"AdamW state; {device} has {have / 2**30:,.1f} GiB. Pick a smaller size or --set smaller values")
