"""``archcalc serve``: how many sequences a paged server fits on a GPU, at which context, and the inverse questions."""

from __future__ import annotations

import argparse
import json
from fractions import Fraction

from archcalc.cli.table import table
from archcalc.errors import UsageError

LADDER = (2048, 8192, 32768, 131072)  # contexts shown when none is given (up to the model's own)
EPILOG = """\
examples:
  archcalc serve llama --size 3-8b --hardware h100                  sequences that fit at 2k .. 128k tokens
  archcalc serve llama --size 3-70b --hardware h100 --tp 4 --context 8192 --concurrency 64
  archcalc serve gpt_oss --size 120b --hardware h100 --weights-format mxfp4 --context 32768
  archcalc serve llama --size 3-70b --hardware h100 --context 8192 --concurrency 32 --compare
"""


def register(sub) -> None:
    from archcalc.backends.formats import FORMATS
    from archcalc.cli.args import add_size_options
    from archcalc.cli.output import positive_int

    p = sub.add_parser(
        "serve", help="a serving plan: paged KV blocks, how many sequences fit at a context, the longest context",
        description=(
            "Size a paged-attention server (vLLM, SGLang) on one accelerator type: the weights (optionally in a "
            "block-scaled format), the activation peak of a prefill chunk (an estimate) and a runtime reserve come "
            "off --gpu-memory-utilization of each GPU's memory; the rest holds KV blocks of --block-size tokens "
            "(sliding-window layers keep only their window's blocks; latent attention its latent; state-space layers "
            "a fixed state a sequence). Prints the blocks, the sequences that fit at each context, the longest "
            "context for --concurrency, and with --compare the other weight formats and tensor-parallel degrees."),
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_size_options(p, one_size=True)
    p.add_argument("--hardware", required=True, metavar="NAME", help="the accelerator (archcalc infer --list-hardware)")
    p.add_argument("--tp", type=positive_int, default=1, metavar="N", help="tensor-parallel GPUs (default 1)")
    p.add_argument("--context", type=positive_int, action="append", metavar="T",
                   help="tokens a sequence holds, prompt and output (repeatable; default 2k, 8k, 32k, 128k up to the model's)")
    p.add_argument("--concurrency", type=positive_int, metavar="N", help="sequences at once: the longest context they fit")
    p.add_argument("--gpu-memory-utilization", default="0.9", metavar="U", help="share of each GPU's memory to use (default 0.9)")
    p.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float16", "float32"],
                   help="weights (outside --weights-format) and activations (default bfloat16)")
    p.add_argument("--kv-dtype", choices=["bfloat16", "float16", "float32", "float8"], help="the KV cache (default: --dtype)")
    p.add_argument("--weights-format", metavar="FORMAT",
                   help=f"the linear layers' matrices: {', '.join(FORMATS)}, or int4-gN / int8-gN (default: --dtype)")
    p.add_argument("--block-size", type=positive_int, default=16, metavar="TOKENS", help="tokens a KV block (default 16)")
    p.add_argument("--prefill-chunk", type=positive_int, default=8192, metavar="TOKENS",
                   help="tokens of the largest prefill chunk, for the activation peak (default 8192)")
    p.add_argument("--max-seqs", type=positive_int, default=256, metavar="N", help="sequences a step samples (default 256)")
    p.add_argument("--reserve", default="0", metavar="BYTES", help="runtime memory kept aside: CUDA graphs, context (e.g. 2G)")
    p.add_argument("--prompt", type=positive_int, metavar="P", help="with --output: a request's prompt tokens, for latency bounds")
    p.add_argument("--output", type=positive_int, metavar="N", help="with --prompt: tokens a request generates")
    p.add_argument("--shared-prefix", type=positive_int, default=0, metavar="S",
                   help="tokens every sequence starts with, cached once (prefix caching): the blocks it saves")
    p.add_argument("--draft", metavar="SPEC", help="with --prompt/--output: a draft model for speculative decoding (a spec "
                   "or bundled name; its size with --draft-size), on the same GPUs: its weights and KV cache counted too")
    p.add_argument("--draft-size", metavar="NAME", help="the draft spec's size (needed when it has several)")
    p.add_argument("--draft-tokens", type=positive_int, default=4, metavar="K", help="tokens the draft proposes a step (default 4)")
    p.add_argument("--acceptance", default="0.8", metavar="ALPHA", help="chance each drafted token is accepted, in [0, 1) (default 0.8)")
    p.add_argument("--compare", action="store_true", help="also every weight format and tensor-parallel degree at the first context")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from archcalc.backends.formats import weight_format
    from archcalc.backends.infer import dtype_bytes
    from archcalc.backends.infer.hardware import hardware
    from archcalc.cli.args import fraction, one_size
    from archcalc.cli.solve_cmd import _count

    spec, lowered, _ = one_size(args)
    hw = hardware(args.hardware)
    utilization = fraction(args.gpu_memory_utilization, "--gpu-memory-utilization", high=Fraction(1))
    reserve = _count(args.reserve, "--reserve", low=0) if args.reserve.strip() not in ("0", "") else 0
    fmt = weight_format(args.weights_format) if args.weights_format else None
    settings = dict(tp=args.tp, utilization=utilization, dtype_width=dtype_bytes(args.dtype),
                    kv_width=dtype_bytes(args.kv_dtype or args.dtype), block_size=args.block_size,
                    prefill_chunk=args.prefill_chunk, max_seqs=args.max_seqs, reserve=reserve)
    if (args.prompt is None) != (args.output is None):
        raise UsageError("--prompt and --output go together: a request's prompt and the tokens it generates")
    from archcalc.backends.serving import plan_serving

    draft = _draft(args, lowered) if args.draft else None
    plan = plan_serving(lowered, hw, weight_format=fmt, shared_prefix=args.shared_prefix, draft=draft, **settings)
    contexts = args.context or [t for t in LADDER if t <= plan.max_context] or [plan.max_context]
    if args.shared_prefix >= min(contexts):
        raise UsageError(f"--shared-prefix {args.shared_prefix:,}: expected fewer tokens than every context ({min(contexts):,}); "
                         "a sequence holds at least its own last tokens")
    rows = [{"context": t, "bytes_per_sequence": plan.per_sequence(t), "sequences": plan.concurrency(t)} for t in contexts]
    longest = plan.largest_context(args.concurrency) if args.concurrency else None
    compare = _compare(lowered, hw, settings, contexts[0]) if args.compare else None
    bounds = None
    if args.prompt is not None:
        from archcalc.backends.serving import latency

        sequences = args.concurrency or max(1, plan.concurrency(args.prompt + args.output))
        bounds = latency(lowered.binding, hw.key, sequences, args.prompt, args.output, args.dtype,
                         args.kv_dtype or args.dtype, args.weights_format, args.tp)
    speculation = None
    if draft is not None:
        from archcalc.backends.infer.speculative import parse_alpha, with_draft_model

        speculation = with_draft_model(lowered.binding, draft.binding, args.draft_tokens, parse_alpha(args.acceptance),
                                       dict(hardware_name=hw.key, batch=bounds.sequences, prompt=args.prompt,
                                            new_tokens=args.output, dtype=args.dtype, kv_dtype=args.kv_dtype or args.dtype,
                                            tp=args.tp))
    name = f"{spec.name} {lowered.binding.size}"
    if args.json:
        print(json.dumps({**payload(spec.name, lowered.binding.size, plan, rows, args, longest, compare, fmt),
                          "latency": latency_json(bounds),
                          "speculative": speculation.to_json() if speculation else None}, indent=2))
    else:
        show(name, plan, rows, args, longest, compare, fmt)
        if bounds is not None:
            show_latency(bounds, hw)
        if speculation is not None:
            print(speculation.render())
    return 0


def _compare(lowered, hw, settings: dict, context: int) -> dict:
    """Sequences that fit at ``context`` under each weight format, and under each tensor-parallel degree."""
    from archcalc.backends.formats import FORMATS
    from archcalc.backends.serving import plan_serving

    formats = {"(none)": None, **FORMATS}
    by_format = {name: plan_serving(lowered, hw, weight_format=f, **settings) for name, f in formats.items()}
    by_tp = {}
    for tp in (1, 2, 4, 8):
        try:
            by_tp[tp] = plan_serving(lowered, hw, weight_format=None, **{**settings, "tp": tp})
        except UsageError:
            continue  # a degree that does not divide the key/value heads
    return {"formats": [{"format": k, "weights_bytes": exact(p.weights_bytes), "sequences": p.concurrency(context)}
                        for k, p in by_format.items()],
            "tensor_parallel": [{"tp": k, "weights_bytes_per_gpu": exact(p.weights_bytes), "sequences": p.concurrency(context)}
                                for k, p in by_tp.items()], "context": context}


def _draft(args: argparse.Namespace, target):
    """The draft model's lowered IR: another spec, the same vocabulary (it proposes the target's tokens)."""
    from archcalc.ir import lower
    from archcalc.spec import load_spec
    from archcalc.spec.bind import bind

    if args.prompt is None:
        raise UsageError("--draft: speculative decoding bounds need a request: give --prompt and --output too")
    spec = load_spec(args.draft)
    if args.draft_size is None and len(spec.sizes) > 1:
        raise UsageError(f"--draft {spec.name} has several sizes; pick one with --draft-size ({', '.join(spec.sizes)})")
    draft = lower(bind(spec, args.draft_size or next(iter(spec.sizes), None), {}))
    vocab = [int(m.root.attrs.vocab.xreplace(m.binding.numeric())) for m in (target, draft)]
    if vocab[0] != vocab[1]:
        raise UsageError(f"--draft {spec.name} {draft.binding.size}: its vocabulary ({vocab[1]:,}) is not the target's "
                         f"({vocab[0]:,}); a draft proposes the target's tokens")
    return draft


def latency_json(b) -> dict | None:
    if b is None:
        return None
    return {"sequences": b.sequences, "prompt": b.prompt, "output": b.output, "ttft_seconds": float(b.ttft),
            "inter_token_seconds": float(b.itl), "tokens_per_second_per_gpu": float(b.tokens_per_second),
            "compute_bound_batch": b.compute_bound_batch, "marginal_flops_per_byte": float(b.marginal_intensity),
            "ridge_flops_per_byte": float(b.ridge), "bound": "roofline: real runs are slower"}


def show_latency(b, hw) -> None:
    print(f"\nlatency, a roofline bound (real runs are slower): {b.sequences:,} request{'s' if b.sequences != 1 else ''} of "
          f"{b.prompt:,} + {b.output:,} tokens")
    print(f"  time to first token {1e3 * float(b.ttft):,.1f} ms (one request alone); inter-token {1e3 * float(b.itl):,.2f} ms "
          f"(the mean step); {float(b.tokens_per_second):,.0f} tokens/s a GPU "
          f"({float(b.tokens_per_second) * b.tp:,.0f} in all)")
    if b.compute_bound_batch is not None:
        print(f"  decode turns compute-bound at batch {b.compute_bound_batch:,}")
    else:
        print(f"  decode never turns compute-bound at this context: each added sequence brings "
              f"{float(b.marginal_intensity):,.1f} FLOPs per byte it moves (its KV cache read), below {hw.key}'s ridge of "
              f"{float(b.ridge):,.1f} FLOPs per byte (peak / bandwidth)")


def exact(x: Fraction) -> int | str:
    return x.numerator if x.denominator == 1 else f"{x.numerator}/{x.denominator}"


def payload(spec: str, size: str, plan, rows: list[dict], args, longest, compare, fmt) -> dict:
    return {
        "command": "serve", "spec": spec, "size": size, "hardware": plan.hardware.key, "tp": plan.tp,
        "gpu_memory_utilization": exact(plan.utilization), "memory_bytes": plan.hardware.memory,
        "weights_format": fmt.name if fmt else None, "weights_bytes_per_gpu": exact(plan.weights_bytes),
        "activation_peak_bytes_estimate": plan.activation_bytes, "reserve_bytes": plan.reserve_bytes,
        "kv_bytes_per_token": exact(plan.kv_bytes_per_token), "block_size": plan.block_size,
        "block_bytes": exact(plan.block_bytes), "recurrent_state_bytes_per_sequence": exact(plan.state_bytes_per_sequence),
        "kv_budget_bytes": exact(plan.budget), "kv_blocks": plan.blocks,
        "contexts": [{**r, "bytes_per_sequence": exact(r["bytes_per_sequence"])} for r in rows],
        "concurrency": args.concurrency, "longest_context": longest, "compare": compare,
        "shared_prefix": plan.shared_prefix,
        "layers_by_window": [{"layers": g.layers, "elements_per_token": g.elements, "window": g.window} for g in plan.groups],
    }


def show(name: str, plan, rows: list[dict], args, longest, compare, fmt) -> None:
    hw = plan.hardware
    gpus = f"{plan.tp} x " if plan.tp > 1 else ""
    print(f"{name} on {gpus}{hw.name}: {float(plan.utilization):.0%} of {hw.memory / 1e9:,.0f} GB a GPU")
    print(f"  weights {int(plan.weights_bytes):,} B a GPU ({fmt.name if fmt else args.dtype}); activation peak of a prefill "
          f"chunk of {args.prefill_chunk:,} tokens {plan.activation_bytes:,} B (an estimate); reserve {plan.reserve_bytes:,} B")
    print(f"  KV cache {int(plan.kv_bytes_per_token):,} B a token a GPU; a block of {plan.block_size} tokens "
          f"{int(plan.block_bytes):,} B; budget {int(plan.budget):,} B: {plan.blocks:,} blocks")
    if plan.state_bytes_per_sequence:
        print(f"  recurrent state {int(plan.state_bytes_per_sequence):,} B a sequence, whatever its length")
    if plan.budget <= 0:
        print("  nothing fits: the weights and activations alone exceed the budget (raise --tp, or a smaller --weights-format)")
    print(table(["context", "bytes a sequence", "sequences that fit"],
                [[f"{r['context']:,}", f"{int(r['bytes_per_sequence']):,}", f"{r['sequences']:,}"] for r in rows]))
    if longest is not None:
        print(f"{args.concurrency:,} sequence{'s' if args.concurrency != 1 else ''} at once: " +
              (f"the longest context that fits is {longest:,} tokens" if longest else "not even one token each fits"))
    if compare:
        print(f"\nat {compare['context']:,} tokens, by weight format:")
        print(table(["format", "weights", "sequences"], [[c["format"], f"{int(Fraction(c['weights_bytes'])):,}", f"{c['sequences']:,}"]
                                                         for c in compare["formats"]]))
        print("by tensor-parallel degree (weights split evenly):")
        print(table(["tp", "weights a GPU", "sequences"], [[str(c["tp"]), f"{int(Fraction(c['weights_bytes_per_gpu'])):,}",
                                                            f"{c['sequences']:,}"] for c in compare["tensor_parallel"]]))
    print("conventions: blocks rounded up per layer (sliding windows keep their window's blocks); weights split evenly over "
          "--tp; the activation peak is an estimate (see docs/inference.md)")
