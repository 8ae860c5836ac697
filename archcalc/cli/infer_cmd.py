"""``archcalc infer``: exact generation FLOPs and bytes, and roofline bounds on an accelerator."""

from __future__ import annotations

import argparse
import json
from fractions import Fraction

from archcalc.errors import UsageError

EPILOG = """\
examples:
  archcalc infer llama --size 2-7b --hardware a100-80gb --batch 1 --prompt 512 --new-tokens 128
  archcalc infer llama --size 3-70b --hardware h100 --tp 8 --batch 32 --prompt 2048 --new-tokens 256 --weights-dtype fp8
  archcalc infer --hf config.json --hardware l4 --batch 4 --prompt 1000 --new-tokens 200 --weights-dtype int4 --json
  archcalc infer --list-hardware

The bounds ignore kernel launch overhead, communication time (tensor parallelism reports only the all-reduce
bytes), scheduling and any compute below the datasheet peak: real runs are slower (docs/inference.md).
"""


def register(sub) -> None:
    from archcalc.cli.args import add_size_options
    from archcalc.cli.mtp_args import add_mtp_options
    from archcalc.cli.output import positive_int

    p = sub.add_parser(
        "infer", help="generation FLOPs and bytes, and roofline latency and throughput on an accelerator",
        description=(
            "Generate --new-tokens tokens after a --prompt-token prompt for --batch sequences: the exact matmul FLOPs of\n"
            "the prefill and of every cached decode step (as the generated module's generate() runs them), the bytes\n"
            "they move (weights, KV cache, activations), and roofline bounds on --hardware: time to first token,\n"
            "decode tokens/s, the batch where decode turns compute-bound, and whether weights + KV cache fit."
        ),
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_size_options(p)
    add_mtp_options(p)
    p.add_argument("--hardware", metavar="NAME", help="the accelerator (see --list-hardware), e.g. h100, a100-80gb, l4")
    p.add_argument("--list-hardware", action="store_true", help="list the accelerators with their peaks and bandwidths")
    p.add_argument("--batch", type=positive_int, metavar="B", help="sequences generated together")
    p.add_argument("--prompt", type=positive_int, metavar="P", help="prompt tokens per sequence")
    p.add_argument("--new-tokens", type=positive_int, metavar="N", help="tokens generated per sequence")
    p.add_argument("--dtype", default="bfloat16", metavar="DTYPE", help="weights and activations (default bfloat16)")
    p.add_argument("--kv-dtype", metavar="DTYPE", help="the KV cache (default: --dtype)")
    p.add_argument("--weights-dtype", choices=["int8", "int4", "fp8"], help="quantized linear-layer weights, with their scales")
    p.add_argument("--tp", type=positive_int, default=1, metavar="N", help="tensor-parallel degree (default 1)")
    p.add_argument("--peak", metavar="FLOP/s", help="override the dense peak, e.g. 989e12 or 989T")
    p.add_argument("--bandwidth", metavar="BYTES/s", help="override the memory bandwidth, e.g. 3.35e12 or 3.35T")
    p.add_argument("--memory-capacity", metavar="BYTES", help="override the memory per GPU, e.g. 80e9 or 80G")
    p.add_argument("--mtp-draft", type=positive_int, metavar="K",
                   help="speculative decoding with the MTP modules as the draft: K draft tokens per target step "
                        "(the modules reused beyond their number); needs --mtp-acceptance")
    p.add_argument("--mtp-acceptance", metavar="ALPHA", help="the chance each drafted token is accepted, in [0, 1), e.g. 0.8")
    p.set_defaults(run=run)


def _count(option: str, text: str | None) -> int | None:
    from archcalc.quantity import parse_count

    if text is None:
        return None
    try:
        value = parse_count(text)
    except ValueError as e:
        raise UsageError(f"{option} {text!r}: {e}") from None
    if value < 1:
        raise UsageError(f"{option} {text!r}: expected a positive number")
    return value


def run(args: argparse.Namespace) -> int:
    from archcalc.backends.infer import infer
    from archcalc.backends.infer.hardware import table
    from archcalc.cli.args import spec_from_args
    from archcalc.cli.infer_show import render, to_json
    from archcalc.spec.bind import bind, parse_overrides

    if args.list_hardware:
        rows = {h.key: h for h in table().values()}
        for h in rows.values():
            peaks = ", ".join(f"{k} {v / 1e12:,.1f}" for k, v in h.peaks.items())
            print(f"{h.key:<15} {h.name:<34} {h.memory / 1e9:>5,.0f} GB  {h.bandwidth / 1e12:>5.2f} TB/s  TFLOP/s: {peaks}")
        return 0
    missing = [o for o, v in (("--hardware", args.hardware), ("--batch", args.batch), ("--prompt", args.prompt),
                              ("--new-tokens", args.new_tokens)) if v is None]
    if missing:
        raise UsageError(f"archcalc infer: missing {', '.join(missing)} (see archcalc infer --help)")
    spec = spec_from_args(args)
    overrides = parse_overrides(spec, args.overrides)
    results, drafts = [], []
    draft = _draft_options(args)
    for size in args.size or list(spec.sizes) or [None]:
        binding = bind(spec, size, overrides)
        r = infer(binding, args.hardware, args.batch, args.prompt, args.new_tokens, args.dtype,
                  args.kv_dtype, args.weights_dtype, args.tp, _count("--peak", args.peak), _count("--bandwidth", args.bandwidth),
                  _count("--memory-capacity", args.memory_capacity), must_fit=True)  # refused before any FLOPs if not
        results.append(r)
        drafts.append(_speculative(args, binding, draft) if draft else None)
    if args.json:
        items = [to_json(r) | ({"speculative": s.to_json()} if s else {}) for r, s in zip(results, drafts)]
        print(json.dumps({"command": "infer", "spec": spec.name, "results": items}, indent=2))
    else:
        for r, s in zip(results, drafts):
            print(render(spec, r) + (f"\n\n{s.render()}" if s else ""))
    return 0


def _draft_options(args: argparse.Namespace):
    """(k, alpha) from --mtp-draft and --mtp-acceptance (both or neither), or None."""
    from archcalc.backends.infer.speculative import parse_alpha

    if (args.mtp_draft is None) != (args.mtp_acceptance is None):
        raise UsageError("archcalc infer: --mtp-draft K and --mtp-acceptance ALPHA go together (see archcalc infer --help)")
    return (args.mtp_draft, parse_alpha(args.mtp_acceptance)) if args.mtp_draft is not None else None


def _speculative(args: argparse.Namespace, binding, draft):
    from archcalc.backends.infer.speculative import speculative

    run = {"hardware_name": args.hardware, "batch": args.batch, "prompt": args.prompt, "new_tokens": args.new_tokens,
           "dtype": args.dtype, "kv_dtype": args.kv_dtype, "weights_dtype": args.weights_dtype, "tp": args.tp,
           "peak": _count("--peak", args.peak), "bandwidth": _count("--bandwidth", args.bandwidth),
           "capacity": _count("--memory-capacity", args.memory_capacity)}
    return speculative(binding, draft[0], draft[1], run)


def exact(value: Fraction | int) -> int | str:
    """An exact number for JSON: an integer, or the fraction as a string ("1/2") when it is not whole."""
    value = Fraction(value)
    return value.numerator if value.denominator == 1 else f"{value.numerator}/{value.denominator}"
