"""``archcalc flops``: exact matmul FLOPs, and the common approximations with their ratios."""

from __future__ import annotations

import argparse
import json

from archcalc.cli.table import num, table


def register(sub) -> None:
    from archcalc.cli.args import add_size_options
    from archcalc.cli.mtp_args import add_mtp_options
    from archcalc.cli.output import positive_int as _positive

    p = sub.add_parser(
        "flops", help="exact matmul FLOPs of a forward pass and a training step, with the usual approximations",
        description=(
            "Count the matmul FLOPs (2 per multiply-accumulate) of one forward pass over --batch sequences "
            "of --seq-len tokens: forward_matmul counts every matmul including the LM head and both attention "
            "products over the full S×S square (what torch's FlopCounterMode reports); forward_matmul_causal "
            "counts only the causal triangle (the band for sliding-window layers). A training step is forward + "
            "2 × forward for the backward pass (+1 forward with --recompute). Beside them: 6N, Kaplan, "
            "Chinchilla and PaLM, each with its ratio to the exact training step. Non-matmul work (softmax, "
            "norms, activations) is reported apart, as an estimate."
        ),
    )
    add_size_options(p)
    add_mtp_options(p)
    p.add_argument("--seq-len", type=_positive, required=True, metavar="T", help="tokens per sequence")
    p.add_argument("--batch", type=_positive, default=1, metavar="B", help="sequences (default 1)")
    p.add_argument("--recompute", action="store_true",
                   help="activation recomputation: the training step runs the forward pass twice")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from archcalc.backends.flops import MIXING_JSON, flops
    from archcalc.cli.args import spec_from_args
    from archcalc.spec.bind import bind, parse_overrides

    spec = spec_from_args(args)
    overrides = parse_overrides(spec, args.overrides)
    sizes = args.size or list(spec.sizes) or [None]
    results = [flops(bind(spec, size, overrides), args.seq_len, args.batch, args.recompute) for size in sizes]
    if args.json:
        print(json.dumps({"command": "flops", "spec": spec.name, "results": [r.to_json() for r in results]},
                         indent=2, ensure_ascii=False))
        return 0
    title = spec.title or spec.name
    print(f"{title}: matmul FLOPs for {args.batch} × {args.seq_len} tokens (2 FLOPs per multiply-accumulate)")
    first = results[0].to_json()
    print(f"forward per sequence = {first['forward_formula']}   (S = tokens per sequence)")
    print(f"causal               = {first['forward_causal_formula']}")
    print()
    rows = [[r.binding.size, num(r.forward_matmul), num(r.forward_matmul_causal), num(r.train_step_matmul),
             f"{r.train_step_matmul / r.tokens:,.0f}"] for r in results]
    print(table(["size", "forward", "forward (causal)", "train step", "train / token"], rows))
    print()
    names = [n for n in ("6N", "kaplan", "chinchilla", "palm") if n in results[0].approximations]
    rows = [[r.binding.size] + [f"{num(r.approximations[n]['train_step'])} ({r.approximations[n]['ratio']:.3f}×)" for n in names]
            for r in results]
    print("approximations of the training step (ratio to the exact train step):")
    print(table(["size", *names], rows))
    if len(results) == 1:
        r = results[0]
        print()
        print(table(["role", "forward FLOPs", "share"],
                    [[role, num(n), f"{100 * n / r.forward_matmul:.2f}%"] for role, n in r.by_role.items()]))
        if r.mixer_by_kind:
            kinds = r.mixer_by_kind
            parts = [f"conv {num(kinds.get('conv', 0))}"]
            parts += [f"{what} {num(kinds[kind])}" for kind, (_, what) in MIXING_JSON.items() if kind in kinds]
            print(f"\nstate-mixer layers, forward, in the totals above: {', '.join(parts)} FLOPs (role mixer: these and "
                  f"the projections)")
            if "scan" in kinds:
                print(f"Mamba's state update, element operations in no matmul total: {num(3 * kinds['scan'] // 2)}")
        print(f"\nnon-matmul work (softmax, norms, activations, residuals), an estimate: {num(r.non_matmul_forward)} "
              f"FLOPs forward ({100 * r.non_matmul_forward / r.forward_matmul:.2f}% of the matmuls)")
    return 0
