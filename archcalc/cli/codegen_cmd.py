"""``archcalc generate``, ``verify`` and ``run``: the PyTorch backend on the command line.

``generate`` needs no torch (emission is text); ``verify`` and ``run`` import it, lazily.
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

from archcalc.errors import UsageError


def register(sub) -> None:
    from archcalc.cli import add_size_options

    gen = sub.add_parser(
        "generate", help="write a self-contained PyTorch module for one size",
        description=(
            "Write one readable Python file that defines the model of one size with PyTorch: a Config "
            "dataclass, one class per component, and build(device=None, dtype=None). Parameter names "
            "are archcalc's tensor paths. The file is written atomically; an existing file is only "
            "replaced if archcalc generated it, or with --force."
        ),
    )
    add_size_options(gen, json_flag=False)
    gen.add_argument("-o", "--output", metavar="FILE.py", required=True, help="where to write the module ('-' prints it)")
    gen.add_argument("--force", action="store_true", help="overwrite FILE.py even if archcalc did not generate it")
    _add_fuse_option(gen)
    gen.set_defaults(run=run_generate)

    ver = sub.add_parser(
        "verify", help="build the generated module and check it against the symbolic count",
        description=(
            "Generate the module for each size, build it (on the meta device by default, which "
            "allocates nothing) and compare every parameter name and shape, and the total, with the "
            "IR. Exit status 1 with a list of differences on any mismatch. Needs torch."
        ),
    )
    add_size_options(ver, json_flag=True)
    ver.add_argument("--device", default="meta", help="where to build the module (default: meta; e.g. cpu, cuda)")
    _add_fuse_option(ver)
    ver.set_defaults(run=run_verify)

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
    run.add_argument("--batch", type=_positive, default=4, metavar="B", help="sequences per step (default 4)")
    run.add_argument("--seq-len", type=_positive, default=None, metavar="T",
                     help="tokens per sequence (default: 128, capped by a learned position table)")
    run.add_argument("--steps", type=_positive, default=10, metavar="N", help="optimizer steps (default 10; the first 2 are not timed)")
    run.add_argument("--compile", action="store_true", help="run the model through torch.compile")
    run.add_argument("--checkpoint", action="store_true",
                     help="activation checkpointing per block: keep each block's input, recompute the rest in backward")
    run.add_argument("--peak", type=float, default=None, metavar="TFLOPS",
                     help="the device's peak dense bf16 TFLOP/s for MFU (default: from a table: H100/H200 989, A100 312)")
    _add_fuse_option(run)
    run.set_defaults(run=run_train)


def _add_fuse_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--fuse-projections", action="store_true",
        help="one qkv projection instead of q, k, v and one gate_up instead of gate and up (one wide matmul: faster "
             "on GPUs; same parameters, FLOPs and outputs). Parameter names follow: blocks.{i}.attn.qkv.weight; "
             "load_hf_state_dict stacks transformers' separate tensors",
    )


def _codegen_spec(args: argparse.Namespace):
    """The spec of SPEC or --hf, with fused projections if --fuse-projections."""
    from archcalc.cli import spec_from_args
    from archcalc.spec.transform import fuse_projections

    spec = spec_from_args(args)
    return fuse_projections(spec) if args.fuse_projections else spec


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


def _one_size(args: argparse.Namespace):
    """The spec and the lowered IR of the single size a codegen command works on."""
    from archcalc.ir import lower
    from archcalc.spec.bind import bind, parse_overrides

    spec = _codegen_spec(args)
    overrides = parse_overrides(spec, args.overrides)
    sizes = args.size or []
    if len(sizes) > 1:
        raise UsageError(f"{args.command} works on one size; got --size {' --size '.join(sizes)}")
    if not sizes and len(spec.sizes) > 1:
        raise UsageError(f"{spec.name} has several sizes; pick one with --size ({', '.join(spec.sizes)})")
    size = sizes[0] if sizes else next(iter(spec.sizes), None)
    return spec, lower(bind(spec, size, overrides)), overrides


def _regenerate_command(spec, lowered, overrides, hf: str | None = None, fused: bool = False) -> str:
    """The command that writes this file again, from validated names and numbers only (and a plain --hf path)."""
    import re

    shown = hf if hf is not None and re.fullmatch(r"[A-Za-z0-9._/-]{1,200}", hf) else "CONFIG.json"
    parts = ["archcalc generate", f"--hf {shown}" if hf is not None else spec.name, "--size", lowered.binding.size]
    for name in overrides:
        value = lowered.binding.values[name]
        parts += ["--set", f"{name}={str(value).lower() if isinstance(value, bool) else value}"]
    if fused:
        parts.append("--fuse-projections")
    return " ".join(parts) + " -o FILE.py"


def run_generate(args: argparse.Namespace) -> int:
    from codegen.emit import MARKER, emit

    spec, lowered, overrides = _one_size(args)
    source = emit(lowered, _regenerate_command(spec, lowered, overrides, args.hf, args.fuse_projections))
    if args.output == "-":
        print(source, end="")
        return 0
    target = Path(args.output)
    write_output(target, source, MARKER, args.force, "generated by archcalc")
    print(f"wrote {target} ({spec.name} {lowered.binding.size}, {len(source.splitlines())} lines)")
    return 0


def write_output(target: Path, text: str, marker: str, force: bool, what: str) -> None:
    """Write ``text`` atomically, refusing to replace a file whose first lines lack ``marker`` unless ``force``."""
    if target.exists() and not force:
        if not target.is_file():
            raise UsageError(f"{target}: exists and is not a regular file")
        head = target.read_text(encoding="utf-8", errors="replace")[:4000]
        if marker not in head:
            raise UsageError(f"{target}: exists and was not {what}; pass --force to overwrite it")
    write_atomically(target, text)


def write_atomically(target: Path, text: str) -> None:
    """Write ``text`` to a temporary file beside ``target``, then rename it over ``target``."""
    folder = target.parent if str(target.parent) else Path(".")
    if not folder.is_dir():
        raise UsageError(f"{target}: folder {folder} does not exist")
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _need_torch():
    try:
        import torch
    except ImportError:
        raise UsageError("this command needs torch: pip install 'archcalc[torch]'") from None
    return torch


def run_verify(args: argparse.Namespace) -> int:
    import json

    from archcalc.ir import lower
    from archcalc.spec.bind import bind, parse_overrides

    _need_torch()
    from codegen.verify import verify

    spec = _codegen_spec(args)
    overrides = parse_overrides(spec, args.overrides)
    sizes = args.size or list(spec.sizes) or [None]
    failed, results = False, []
    for size in sizes:
        lowered = lower(bind(spec, size, overrides))
        report = _build_errors(lambda low=lowered: verify(low, device=args.device))
        failed |= not report.ok
        results.append({"size": lowered.binding.size, "ok": report.ok, "ir_total": report.ir_total,
                        "module_total": report.module_total, "ir_tensors": report.ir_tensors,
                        "module_tensors": report.module_tensors, "missing": report.missing, "extra": report.extra,
                        "shape_mismatches": report.shape_mismatches, "tie_mismatches": report.tie_mismatches})
        if not args.json:
            verdict = "ok: names and shapes match" if report.ok else "MISMATCH"
            print(f"{spec.name} {lowered.binding.size}: IR {report.ir_total:,} parameters in {report.ir_tensors:,} tensors; "
                  f"module on {args.device} {report.module_total:,} in {report.module_tensors:,} — {verdict}")
            for label, items in (("missing from the module", report.missing), ("not in the IR", report.extra),
                                 ("shape differs", report.shape_mismatches), ("tie broken", report.tie_mismatches)):
                for item in items[:20]:
                    print(f"  {label}: {item}")
                if len(items) > 20:
                    print(f"  ... and {len(items) - 20} more {label}")
    if args.json:
        print(json.dumps({"command": "verify", "spec": spec.name, "device": args.device, "results": results}, indent=2))
    return 1 if failed else 0


def _build_errors(fn):
    """Run ``fn``, turning torch's complaints about devices into one-line usage errors."""
    try:
        return fn()
    except (RuntimeError, ValueError) as e:
        text = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        if "device" in text.lower() or "cuda" in text.lower():
            raise UsageError(f"cannot build the module: {text}") from None
        raise


def run_train(args: argparse.Namespace) -> int:
    import json

    torch = _need_torch()
    from codegen.emit import emit
    from codegen.load import load_source
    from codegen.train import train

    spec, lowered, overrides = _one_size(args)
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
