"""``archcalc memory``: weights, KV cache, training state and activations, and the split over GPUs."""

from __future__ import annotations

import argparse
import json
import sys

from archcalc.cli.table import table


def register(sub) -> None:
    from archcalc.backends.memory import DTYPES
    from archcalc.cli.args import add_size_options
    from archcalc.cli.mtp_args import add_mtp_options
    from archcalc.cli.output import positive_int as _positive

    p = sub.add_parser(
        "memory", help="memory for inference (weights, KV cache) and training (state, activations), per GPU",
        description=(
            "Plan memory for --batch sequences of --seq-len tokens: the weights at --dtype; the KV cache of "
            "inference (GQA/MQA and latent attention aware, capped by sliding windows); for training with "
            "mixed-precision AdamW, 16 bytes a parameter (weights, gradients, optimizer state) and the "
            "activations the backward pass keeps (flash attention; also with full recomputation). "
            "--dp/--zero/--tp split it per GPU."
        ),
    )
    add_size_options(p)
    add_mtp_options(p)
    p.add_argument("--seq-len", type=_positive, required=True, metavar="T", help="tokens per sequence")
    p.add_argument("--batch", type=_positive, required=True, metavar="B", help="sequences (per GPU for the split)")
    p.add_argument("--dtype", default="bfloat16", choices=sorted(DTYPES), metavar="DTYPE",
                   help=f"weights, KV cache and activations dtype (default bfloat16; one of {', '.join(DTYPES)})")
    p.add_argument("--dp", type=_positive, default=1, metavar="N", help="data-parallel degree (default 1)")
    p.add_argument("--zero", type=int, default=0, choices=[0, 1, 2, 3],
                   help="ZeRO stage for the data-parallel split: 1 optimizer state, 2 + gradients, 3 + weights (default 0)")
    p.add_argument("--tp", type=_positive, default=1, metavar="N", help="tensor-parallel degree (default 1)")
    p.add_argument("--sp", action="store_true", help="sequence parallelism with --tp: activations between attention and MLP split too")
    p.add_argument("--pp", type=_positive, default=1, metavar="N", help="pipeline stages (default 1)")
    p.add_argument("--microbatches", type=_positive, default=1, metavar="M",
                   help="micro-batches of the batch (1F1B: stage s keeps min(pp - s, M) of them in flight; default 1)")
    p.add_argument("--cp", type=_positive, default=1, metavar="N", help="context-parallel degree: each sequence's tokens split (default 1)")
    p.add_argument("--ep", type=_positive, default=1, metavar="N",
                   help="expert-parallel degree: routed experts spread over N of the data-parallel ranks (default 1)")
    p.add_argument("--precision", choices=["mixed", "fp32"], default="mixed",
                   help="training state: mixed (bf16 weights/gradients, fp32 master and AdamW: 2 + 2 + 12 B) or fp32 (4 + 4 + 8 B)")
    p.add_argument("--padded", action="store_true", help="count FSDP2's padded shards (ceil(n / dp) rows) instead of the rows a rank holds")
    p.set_defaults(run=run)


def gib(n: int | float) -> str:
    return f"{n / 2**30:,.2f} GiB"


def run(args: argparse.Namespace) -> int:
    from archcalc.backends.memory import bytes_of, dtype_bytes, memory
    from archcalc.cli.args import spec_from_args
    from archcalc.spec.bind import bind, parse_overrides

    spec = spec_from_args(args)
    overrides = parse_overrides(spec, args.overrides)
    sizes = args.size or list(spec.sizes) or [None]
    from archcalc.backends.parallel_plan import Plan

    plan = Plan(dp=args.dp, zero=args.zero, tp=args.tp, sp=args.sp, pp=args.pp, microbatches=args.microbatches, cp=args.cp,
                ep=args.ep, precision=args.precision, padded=args.padded)
    if args.batch % args.microbatches:
        from archcalc.errors import UsageError

        raise UsageError(f"--microbatches {args.microbatches} does not divide --batch {args.batch}")
    results = [memory(bind(spec, s, overrides), args.seq_len, args.batch, args.dtype, plan=plan) for s in sizes]
    for note in dict.fromkeys(n for r in results for n in r.notes):  # each once, whatever the number of sizes
        print(f"note: {note}", file=sys.stderr)
    if args.json:
        print(json.dumps({"command": "memory", "spec": spec.name, "results": [r.to_json() for r in results]}, indent=2))
        return 0
    print(f"{spec.title or spec.name}: memory for {args.batch} × {args.seq_len} tokens, {args.dtype}")
    rows = []
    for r in results:  # (not to_json(), which works out the per-GPU split too)
        rows.append([r.binding.size, gib(r.weights_bytes), gib(r.kv_cache_bytes), gib(r.states_bytes),
                     gib(r.acts.total_bytes()), gib(r.acts.recompute_bytes())])
    print(table(["size", "weights", "KV cache", "train state (16 B/param)", "activations", "with recompute"], rows))
    if plan != Plan():  # any plan flag given: the split (one GPU's figures for a plan of one GPU, e.g. --precision fp32)
        print(f"\nper GPU (the fullest): {plan.summary(args.batch)}; {args.precision} precision")
        rows = []
        for r in results:
            g = r.per_gpu()
            rows.append([r.binding.size, gib(g["weights_bytes"]), gib(g["gradients_bytes"]), gib(g["optimizer_bytes"]),
                         gib(g["activations_bytes"]), gib(g["total_bytes"]), gib(g["kv_cache_bytes"])])
        print(table(["size", "weights", "gradients", "optimizer", "activations", "training total", "KV cache (inference)"], rows))
        print("conventions: " + "; ".join(results[0].plan.conventions()[1:]))
    for r in results:
        if r.state_layers:  # state-space layers: a recurrent state in place of a KV cache
            layers = sum(n for _, n, _ in r.state_layers)
            kinds = ", ".join(f"{path}: {n} layers x {bytes_of(e * r.batch, dtype_bytes(r.dtype)):,} B"
                              for path, n, e in r.state_layers)
            print(f"\n{r.binding.size}: recurrent state (inference, {layers} {r.state_labels()} layers, constant in the context length): "
                  f"{r.state_bytes:,} B = {gib(r.state_bytes)} ({kinds}); KV cache of the attention layers: "
                  f"{r.kv_cache_bytes:,} B; inference cache in all (KV cache + state): "
                  f"{r.state_bytes + r.kv_cache_bytes:,} B = {gib(r.state_bytes + r.kv_cache_bytes)}")
    print("\nactivations: tensors the generated module saves for backward (flash attention); see docs/conventions.md")
    return 0
