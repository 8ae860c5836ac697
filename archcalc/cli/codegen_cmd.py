"""``archcalc generate`` and ``verify``: the PyTorch backend on the command line (``run`` is in run_cmd).

``generate`` needs no torch (emission is text); ``verify`` imports it, lazily.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from archcalc.cli.output import write_output
from archcalc.errors import UsageError

GENERATE_EPILOG = """\
examples:
  archcalc generate gpt2 --size small -o gpt2_small.py
  archcalc generate llama --size 3-8b --fuse-projections -o llama_8b.py
  archcalc generate --hf config.json -o model.py

then, in Python:
  from gpt2_small import build
  model = build()                                        # initialised as GPT-2 was
  logits, loss = model(tokens[:, :-1], targets=tokens[:, 1:])   # mean cross-entropy
  loss.backward()                                        # ... your optimizer step
  out = model.generate(prompt, max_new_tokens=50, temperature=0.8, top_k=200)  # KV cache; temperature=0: greedy

more: docs/training.md
"""


def register(sub) -> None:
    from archcalc.cli.args import add_size_options

    gen = sub.add_parser(
        "generate", help="write a self-contained PyTorch module for one size",
        description=(
            "Write one readable Python file that defines the model of one size with PyTorch: a Config\n"
            "dataclass, one class per component, build(device=None, dtype=None), the loss in forward,\n"
            "generate() with a KV cache, the family's initialisation, and (for a spec with a transformers\n"
            "model type) load_hf_state_dict / to_hf_state_dict. Parameter names are archcalc's tensor paths.\n"
            "The file is written atomically; an existing file is only replaced if archcalc generated it,\n"
            "or with --force."
        ),
        epilog=GENERATE_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_size_options(gen, json_flag=False, one_size=True)
    gen.add_argument("-o", "--output", metavar="FILE.py", required=True, help="where to write the module ('-' prints it)")
    gen.add_argument("--force", action="store_true", help="overwrite FILE.py even if archcalc did not generate it")
    add_fuse_option(gen)
    add_mtp_option(gen)
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
    add_fuse_option(ver)
    add_mtp_option(ver)
    ver.set_defaults(run=run_verify)


def add_mtp_option(p: argparse.ArgumentParser) -> None:
    """--with-mtp, as count, flops, memory and infer take it: the module gets the spec's multi-token prediction
    modules, trained by forward with targets (archcalc.codegen.mtp)."""
    from archcalc.cli.mtp_args import add_mtp_options

    add_mtp_options(p, copies=False)

def add_fuse_option(p: argparse.ArgumentParser) -> None:
    layout = p.add_mutually_exclusive_group()
    layout.add_argument(
        "--separate-projections", action="store_true",
        help="q, k, v and gate, up as separate projections, also where the spec fuses them (GPT-2's c_attn): what "
             "tensor parallelism splits (parallelize(model, tp=...)); the same parameters, FLOPs and outputs",
    )
    layout.add_argument(
        "--fuse-projections", action="store_true",
        help="one qkv projection instead of q, k, v and one gate_up instead of gate and up (one wide matmul: faster "
             "on GPUs; same parameters, FLOPs and outputs). Parameter names follow: blocks.{i}.attn.qkv.weight; "
             "load_hf_state_dict stacks transformers' separate tensors",
    )


def _codegen_spec(args: argparse.Namespace):
    """The spec of SPEC or --hf, with fused projections if --fuse-projections, separate ones if --separate-projections."""
    from archcalc.cli.args import spec_from_args
    from archcalc.spec.transform import fuse_projections, separate_projections

    spec = spec_from_args(args)
    if getattr(args, "separate_projections", False):
        return separate_projections(spec)
    return fuse_projections(spec) if args.fuse_projections else spec


def one_size(args: argparse.Namespace):
    """The spec (with the projection options applied) and the lowered IR of the single size a codegen command works on,
    and its overrides."""
    from archcalc.cli.args import one_size as bound_size

    return bound_size(args, _codegen_spec(args))


def _shown_path(given: str, fallback: str) -> str:
    """A spec argument or path as the user gave it, for a comment line of generated code: plain characters as they
    are, other printable text shell-quoted, anything else (a newline, a control character) replaced by ``fallback``."""
    import re
    import shlex

    if re.fullmatch(r"[A-Za-z0-9._/+-]{1,200}", given):
        return given
    if len(given) <= 200 and given.isprintable() and given.isascii():
        return shlex.quote(given)
    return fallback


def _regenerate_command(spec, lowered, overrides, hf: str | None = None, fused: bool = False, given: str | None = None,
                        mtp: bool = False) -> str:
    """The command that writes this file again, naming the spec as the user gave it (a bundled name or a path),
    from validated names and numbers otherwise."""
    source = f"--hf {_shown_path(hf, 'CONFIG.json')}" if hf is not None else _shown_path(given or spec.name, "SPEC.yaml")
    parts = ["archcalc generate", source, "--size", lowered.binding.size]
    for name in overrides:
        value = lowered.binding.values[name]
        parts += ["--set", f"{name}={str(value).lower() if isinstance(value, bool) else value}"]
    if fused:
        parts.append("--fuse-projections")
    if mtp:
        parts.append("--with-mtp")
    return " ".join(parts) + " -o FILE.py"


def run_generate(args: argparse.Namespace) -> int:
    from archcalc.codegen.emit import MARKER, emit

    spec, lowered, overrides = one_size(args)
    source = emit(lowered, _regenerate_command(spec, lowered, overrides, args.hf, args.fuse_projections, args.spec,
                                               args.with_mtp))
    if args.output == "-":
        print(source, end="")
        return 0
    target = Path(args.output)
    write_output(args.output, source, MARKER, args.force, "generated by archcalc")  # the text: "-o dir/" keeps its "/"
    print(f"wrote {target} ({spec.name} {lowered.binding.size}, {len(source.splitlines())} lines)")
    return 0


def need_torch():
    try:
        import torch
    except ImportError:
        raise UsageError("this command needs torch: pip install 'archcalc[torch]'") from None
    return torch


def run_verify(args: argparse.Namespace) -> int:
    import json

    from archcalc.ir import lower
    from archcalc.spec.bind import bind, parse_overrides

    need_torch()
    from archcalc.codegen.verify import verify

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
    note = _dtype_note(args.hf) if getattr(args, "hf", None) else None
    if args.json:
        print(json.dumps({"command": "verify", "spec": spec.name, "device": args.device, "results": results,
                          "notes": [note] if note else []}, indent=2))
    elif note:
        print(f"note: {note}")
    return 1 if failed else 0


def _dtype_note(config_path: str) -> str | None:
    """What to know before comparing logits with transformers when the config names a dtype other than float32:
    transformers 5 builds (from_config, from_pretrained) in that dtype, the generated module in float32."""
    import json

    try:
        data = json.loads(Path(config_path).read_text(encoding="utf-8"))
    except (OSError, ValueError):  # already read and validated by the importer: nothing to add
        return None
    dtype = data.get("dtype") or data.get("torch_dtype") if isinstance(data, dict) else None
    if not isinstance(dtype, str) or dtype in ("float32", "float"):
        return None
    return (f"the config's dtype is {dtype[:20]}: transformers builds this model in {dtype[:20]}, the generated module in "
            f"float32 (build(dtype=...) to match); compare logits after hf.float(), or expect {dtype[:20]} rounding")


def _build_errors(fn):
    """Run ``fn``, turning torch's complaints about devices into one-line usage errors."""
    try:
        return fn()
    except (RuntimeError, ValueError) as e:
        text = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        if "device" in text.lower() or "cuda" in text.lower():
            raise UsageError(f"cannot build the module: {text}") from None
        raise
