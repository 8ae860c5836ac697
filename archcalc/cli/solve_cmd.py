"""``archcalc solve``: hyperparameters from a target size, a compute budget or a memory budget."""

from __future__ import annotations

import argparse
import json

from archcalc.cli.table import num, table
from archcalc.errors import UsageError

DESCRIPTION = """\
Find the whole-number shapes whose exact parameter count is nearest a target, best first.

Free: the integer hyperparameters with no default, or whose default every size overrides (the sizes'
proportion is kept), less those --fix gives; or exactly those --free names (the others keep their defaults,
or the nearest size's value where they have none, stated as assumptions).

One free hyperparameter that changes the count (fix the rest with --fix): its exact symbolic solution and
the grid values nearest it. Two (e.g. L and d, or d and d_ff): their ratio, named larger over smaller in
the family (d/L, d_ff/d), is bounded by the range of the family's sizes widened by 10% (or --range); the
first row is the nearest shape in that box, the rest the Pareto front of error against the family's own
ratio. More than two: the rest are filled from the family's proportions at the size nearest the target
and stated as assumptions (--fix overrides them); heads and other values that do not change the count are
completed to keep the family's head width while keeping every value whole. Constraints the architecture
needs (H divides d when d_head = d/H, KV divides H, even rotary widths) are kept and listed.

--target-flops C turns a compute budget into a parameter target (C = 6·N·D, with --tokens D or
--tokens-per-param R, Chinchilla's 20 by default); each candidate then shows its tokens, training FLOPs and
memory. --memory BYTES checks each candidate against a device (--memory-for inference: weights + KV cache;
training: AdamW states + activations); alone, it lists which of the family's sizes fit.
"""

EPILOG = """\
examples:
  archcalc solve gpt3 --target-params 100T --fix L=512
  archcalc solve llama --target-params 7B --fix L=32 --fix H=32 --fix KV=8
  archcalc solve llama --target-params 70B --range d/L=96:128
  archcalc solve gpt3 --target-params 7B --free d,d_ff --range d_ff/d=2.5:4
  archcalc solve llama --target-flops 1e24 --memory 80G --memory-for training --seq-len 4096
"""


def register(sub) -> None:
    from archcalc.backends.memory import DTYPES
    from archcalc.cli.args import add_spec_argument

    p = sub.add_parser("solve", help="hyperparameters that hit a target parameter count, compute or memory budget",
                       description=DESCRIPTION, epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_spec_argument(p, "a spec file or a bundled spec name (e.g. gpt3)")
    goal = p.add_mutually_exclusive_group()
    goal.add_argument("--target-params", metavar="N", help="parameter count to hit: 100e12, 100T, 7B, 124439808")
    goal.add_argument("--target-flops", metavar="C", help="training compute in FLOPs (e.g. 1e24): N from C = 6·N·D")
    p.add_argument("--fix", metavar="NAME=VALUE", action="append", default=[],
                   help="hold a hyperparameter at a value (repeatable), e.g. --fix L=512 or --fix tie_embeddings=true")
    p.add_argument("--free", metavar="NAMES", action="append", default=[],
                   help="exactly the hyperparameters that vary, e.g. --free d,d_ff (repeatable); the others keep their "
                        "defaults, or the nearest size's value where they have none (default: those with no default, "
                        "or whose default every size overrides)")
    p.add_argument("--range", metavar="RATIO=MIN:MAX", action="append", default=[], dest="ranges",
                   help="bound a ratio: of the two solved hyperparameters (e.g. d/L=64:160, d_ff/d=2.5:4) or of a "
                        "filled one to the width (default: the family's sizes, widened by 10%%)")
    p.add_argument("--aspect", metavar="MIN:MAX",
                   help="the range of the two solved hyperparameters' ratio, whichever they are (named in the output)")
    p.add_argument("--multiple-of", metavar="M or NAME=M", action="append", default=[],
                   help="grid of the solved and filled widths (hyperparameters of 256 or more that do not count "
                        "blocks), or of one (d_ff=256); default: from the family (see the description)")
    p.add_argument("--tokens", metavar="D", help="training tokens for --target-flops (N = C / (6·D))")
    p.add_argument("--tokens-per-param", metavar="R", help="tokens per parameter for --target-flops (default 20, Chinchilla)")
    p.add_argument("--memory", metavar="BYTES", help="a device's memory (e.g. 80e9 or 80G): mark which candidates fit")
    p.add_argument("--memory-for", choices=["inference", "training"], default="inference",
                   help="inference: weights + KV cache (default); training: AdamW states (16 bytes a parameter) + activations")
    p.add_argument("--seq-len", metavar="T", help="tokens per sequence for memory and FLOPs (default: the spec's T, else 2048)")
    p.add_argument("--batch", metavar="B", default="1", help="sequences for memory (default 1)")
    p.add_argument("--dtype", default="bfloat16", choices=sorted(DTYPES), metavar="DTYPE",
                   help=f"dtype of weights, KV cache and activations (default bfloat16; one of {', '.join(DTYPES)})")
    p.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    p.set_defaults(run=run)


def _count(text: str, what: str, low: int = 1) -> int:
    from archcalc.quantity import parse_count

    if text.strip().startswith("-"):
        raise UsageError(f"{what} {text[:60]!r}: expected a positive number, e.g. {what} 3B")
    try:
        value = parse_count(text.replace("G", "B").replace("g", "B"))
    except ValueError as e:
        raise UsageError(f"{what} {text[:60]!r}: {e}") from None
    if value < low:
        raise UsageError(f"{what} {text[:60]!r}: expected at least {low}")
    return value


def run(args: argparse.Namespace) -> int:
    from archcalc.backends.solve import solve
    from archcalc.backends.solve.inputs import parse_aspect, parse_decimal, parse_fixed, parse_free, parse_multiple_of, parse_ranges
    from archcalc.backends.solve.plan import Plan, params_from_flops
    from archcalc.cli.args import spec_from_args
    from archcalc.cli.solve_show import payload, show
    from archcalc.spec.schema import MAX_VALUE

    spec = spec_from_args(args)
    if not args.target_params and not args.target_flops:
        if args.memory:
            unused = [flag for flag, given in (("--fix", args.fix), ("--free", args.free), ("--range", args.ranges),
                                               ("--aspect", args.aspect), ("--multiple-of", args.multiple_of)) if given]
            if unused:
                raise UsageError(f"{unused[0]} goes with --target-params or --target-flops; --memory alone lists "
                                 "which of the family's sizes fit")
            return _fit_memory(spec, args)
        raise UsageError("archcalc solve: give --target-params N, --target-flops C or --memory BYTES (see --help)")
    if (args.tokens or args.tokens_per_param) and not args.target_flops:
        raise UsageError("--tokens and --tokens-per-param go with --target-flops")
    if args.tokens and args.tokens_per_param:
        raise UsageError("give --tokens D or --tokens-per-param R, not both")
    fixed = parse_fixed(spec, args.fix)
    ranges = parse_ranges(args.ranges)
    free = parse_free(args.free)
    aspect = parse_aspect(args.aspect) if args.aspect else None
    tokens = _count(args.tokens, "--tokens") if args.tokens else None
    ratio = parse_decimal(args.tokens_per_param, "--tokens-per-param") if args.tokens_per_param else None
    seq_len = _count(args.seq_len, "--seq-len") if args.seq_len else None
    batch = _count(args.batch, "--batch")
    budget = _count(args.memory, "--memory") if args.memory else None
    if max(seq_len or 0, batch) > MAX_VALUE:
        raise UsageError(f"--seq-len and --batch: expected at most {MAX_VALUE:.0e}")
    if args.target_flops:
        compute = _count(args.target_flops, "--target-flops")
        target = params_from_flops(compute, tokens, ratio)
    else:
        compute, target = None, _count(args.target_params, "--target-params")
    solution = solve(spec, target, fixed, aspect, parse_multiple_of(args.multiple_of), ranges=ranges, free=free)
    plan = Plan(seq_len=seq_len or _default_seq_len(spec, solution), batch=batch, dtype=args.dtype, tokens=tokens,
                tokens_per_param=ratio, memory_budget=budget, memory_for=args.memory_for, flops=compute is not None)
    out = payload(spec, solution, plan, compute, _given(args))
    if args.json:
        print(json.dumps(out, indent=2))
    else:
        print(show(spec, solution, plan, out))
    return 0


def _given(args: argparse.Namespace) -> list[str]:
    """The SPEC argument as the user gave it (a path, a bundled name, or --hf CONFIG.json), for follow-up commands."""
    return ["--hf", args.hf] if getattr(args, "hf", None) else [args.spec]


def _default_seq_len(spec, solution) -> int:
    values = solution.candidates[0].values if solution.candidates else {}
    from archcalc.backends.solve.problem import overrides
    from archcalc.spec.bind import bind

    bound = bind(spec, None, overrides(spec, values)).values if values else {}
    t = bound.get("T")
    return t if isinstance(t, int) and not isinstance(t, bool) and t > 0 else 2048


def _fit_memory(spec, args) -> int:
    """``--memory`` alone: which of the family's sizes fit for inference (weights + KV cache)."""
    from archcalc.backends.memory import memory
    from archcalc.spec.bind import bind

    budget = _count(args.memory, "--memory")
    if not args.seq_len:
        raise UsageError("--memory needs --seq-len T (the context the KV cache holds)")
    seq_len, batch = _count(args.seq_len, "--seq-len"), _count(args.batch, "--batch")
    rows, fits = [], []
    for size in spec.sizes:
        m = memory(bind(spec, size), seq_len, batch, args.dtype)
        need = m.weights_bytes + m.kv_cache_bytes
        rows.append({"size": size, "parameters": m.parameters, "weights_bytes": m.weights_bytes,
                     "kv_cache_bytes": m.kv_cache_bytes, "total_bytes": need, "fits": need <= budget})
        if need <= budget:
            fits.append((m.parameters, size))
    best = max(fits)[1] if fits else None
    smallest = min(rows, key=lambda r: r["total_bytes"]) if rows else None
    if args.json:
        print(json.dumps({"command": "solve", "spec": spec.name, "memory_budget": budget, "largest_that_fits": best,
                          "results": rows}, indent=2))
        return 0
    print(f"{spec.title or spec.name}: inference at {args.dtype}, {batch} × {seq_len} tokens, budget {budget:,} bytes")
    print(table(["size", "parameters", "weights", "KV cache", "total", "fits"],
                [[r["size"], num(r["parameters"]), num(r["weights_bytes"]), num(r["kv_cache_bytes"]), num(r["total_bytes"]),
                  "yes" if r["fits"] else "no"] for r in rows]))
    if best:
        print(f"\nlargest that fits: {best}")
    elif smallest:
        print(f"\nnothing fits; the smallest size, {smallest['size']}, needs {smallest['total_bytes']:,} bytes")
    return 0
