"""CPU speed of generated modules against transformers: a training step and KV-cache decoding, fp32, one thread.

For a Mixtral-shaped mixture of experts (8 experts, top 2), a dense Llama-shaped model and a small GPT-2, each
small enough to run in seconds, the same config is built twice: the module archcalc generates (from the
config, through the HF importer, with fused q/k/v and gate/up projections unless --separate) and the
transformers model (attn_implementation="sdpa", its default experts implementation), and the generated one
is given the transformers model's weights through its load_hf_state_dict. Measured, on one thread
(torch.set_num_threads(1)) in float32, the two models alternated (generated, transformers, generated, ...)
so that a busy machine slows both alike:

- training step: forward, cross-entropy, backward and an AdamW step on --batch x --seq-len tokens; the
  first step's losses must agree (same weights, same batch) before anything is timed;
- decode at batch 1 and 8: greedy generation of --new-tokens tokens after a --prompt-token prompt with a KV
  cache (the generated module's generate(), transformers' generate(do_sample=False)); the generated tokens
  must be equal. Decode tokens/s counts the tokens after the first: the time of the whole generation less
  that of the prompt alone (a generation of one token), as benchmarks/infer.py does.

Reported: the median tokens/s of each and the ratio generated/transformers, with the targets (issue 27):
the mixture of experts at least 1.0x transformers in all three, the dense models at least 0.95x.

    python benchmarks/cpu_speed.py [--models ...] [--repeats 9] [--write docs/benchmarks.md]
    python benchmarks/cpu_speed.py --quick             # a smoke run: fewer repeats, shorter runs, not recorded
    python benchmarks/cpu_speed.py --profile 3         # also the top ops (torch.profiler) of 3 calls of each
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _record import machine_line, record  # noqa: E402
from gpu import step_fn  # noqa: E402

NO_DROPOUT = {"resid_pdrop": 0.0, "embd_pdrop": 0.0, "attn_pdrop": 0.0}  # generated modules have none: the same work
MODELS = {  # Mixtral's and Llama 3's proportions (hidden 3.5 x d, 4 query heads a key/value head), scaled down
    "mixtral-moe": {"model_type": "mixtral", "vocab_size": 4096, "hidden_size": 256, "intermediate_size": 896,
                    "num_hidden_layers": 4, "num_attention_heads": 8, "num_key_value_heads": 2, "num_local_experts": 8,
                    "num_experts_per_tok": 2, "max_position_embeddings": 512},
    "llama-dense": {"model_type": "llama", "vocab_size": 4096, "hidden_size": 256, "intermediate_size": 896,
                    "num_hidden_layers": 4, "num_attention_heads": 8, "num_key_value_heads": 2, "max_position_embeddings": 512},
    "gpt2-mini": {"model_type": "gpt2", "vocab_size": 4096, "n_positions": 512, "n_embd": 256, "n_layer": 4, "n_head": 8,
                  "bos_token_id": 0, "eos_token_id": 0, **NO_DROPOUT},
}
TARGETS = {"mixtral-moe": 1.0, "llama-dense": 0.95, "gpt2-mini": 0.95}  # generated/transformers, tokens/s
DECODE_BATCHES = (1, 8)


def describe_config(config: dict) -> str:
    """A model's shape in a few words."""
    c = config
    if c["model_type"] == "gpt2":
        return f"GPT-2, d {c['n_embd']}, {c['n_layer']} layers, {c['n_head']} heads, vocab {c['vocab_size']:,}"
    shape = (f"d {c['hidden_size']}, {c['num_hidden_layers']} layers, {c['num_attention_heads']}/{c['num_key_value_heads']} "
             f"heads (GQA), vocab {c['vocab_size']:,}")
    if "num_local_experts" in c:
        return (f"Mixtral, {shape}, {c['num_local_experts']} experts top-{c['num_experts_per_tok']} of hidden "
                f"{c['intermediate_size']}")
    return f"Llama, {shape}, SwiGLU hidden {c['intermediate_size']}"


def build_pair(config: dict, fused: bool = True):
    """The generated module (with the transformers model's weights) and the transformers model, on the CPU in fp32."""
    import transformers

    from archcalc.codegen.emit import emit
    from archcalc.codegen.load import load_source
    from archcalc.hf import spec_from_hf_config
    from archcalc.ir import lower
    from archcalc.spec.bind import bind
    from archcalc.spec.transform import fuse_projections

    torch.manual_seed(0)
    spec = spec_from_hf_config(dict(config), "benchmark")
    spec = fuse_projections(spec) if fused else spec
    module = load_source(emit(lower(bind(spec, next(iter(spec.sizes)))), "benchmark"))
    generated = module.build()
    hf_config = transformers.AutoConfig.for_model(**config)
    reference = transformers.AutoModelForCausalLM.from_config(hf_config, attn_implementation="sdpa")
    module.load_hf_state_dict(generated, reference.state_dict())  # the same function, to start with
    reference.generation_config.eos_token_id = None  # generate every token asked for
    reference.generation_config.pad_token_id = 0
    return generated, reference


def alternate(fns: dict, repeats: int) -> dict[str, float]:
    """The median seconds of each callable over ``repeats`` calls, the callables taking turns."""
    times: dict[str, list[float]] = {label: [] for label in fns}
    for _ in range(repeats):
        for label, fn in fns.items():
            start = time.perf_counter()
            fn()
            times[label].append(time.perf_counter() - start)
    return {label: statistics.median(t) for label, t in times.items()}


def top_ops(fn, calls: int, rows: int = 15) -> str:
    """torch.profiler's table of the ops that took the most CPU time (self) over ``calls`` calls."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(calls):
            fn()
    return prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=rows, max_name_column_width=50)


def training(generated, reference, vocab: int, args) -> dict:
    """Tokens/s of a training step of each (forward with its own loss, backward, AdamW), after the first losses agree."""
    ids = torch.randint(0, vocab, (args.batch, args.seq_len + 1), generator=torch.Generator().manual_seed(1))
    inputs, targets = ids[:, :-1].contiguous(), ids[:, 1:].contiguous()  # transformers views labels

    def stepper(model, hf: bool):  # the GPU benchmark's training step, on the CPU without autocast
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
        return step_fn(model, hf, inputs, targets, optimizer, "cpu", autocast=False)

    generated.train(), reference.train()
    steps = {"generated": stepper(generated, False), "transformers": stepper(reference, True)}
    first = {label: step() for label, step in steps.items()}  # the same weights and batch: the same loss
    if abs(first["generated"] - first["transformers"]) > 1e-4 * abs(first["transformers"]):
        raise SystemExit(f"first losses differ: generated {first['generated']:.6f}, transformers {first['transformers']:.6f}")
    alternate(steps, 1)  # warm-up
    seconds = alternate(steps, args.repeats)
    if args.profile:
        for label, step in steps.items():
            print(f"top ops, training step, {label}, {args.profile} steps:\n{top_ops(step, args.profile)}", flush=True)
    tokens = args.batch * args.seq_len
    return {label: tokens / s for label, s in seconds.items()}


def decode(generated, reference, vocab: int, batch: int, args) -> dict:
    """Decode tokens/s of each (greedy, same prompt, KV cache), after checking that they generate the same tokens."""
    ids = torch.randint(0, vocab, (batch, args.prompt), generator=torch.Generator().manual_seed(2))
    mask = torch.ones_like(ids)
    generated.eval(), reference.eval()

    def ours(n: int):
        return lambda: generated.generate(ids, n, temperature=0)

    def theirs(n: int):
        return lambda: reference.generate(ids, attention_mask=mask, do_sample=False, max_new_tokens=n)

    mine, hf = ours(args.new_tokens)(), theirs(args.new_tokens)()
    if not torch.equal(mine, hf):
        where = (mine != hf).nonzero()[0].tolist()
        raise SystemExit(f"batch {batch}: the generated tokens differ from transformers' (first at row {where[0]}, "
                         f"position {where[1]})")
    whole = alternate({"generated": ours(args.new_tokens), "transformers": theirs(args.new_tokens)}, args.repeats)
    prompt = alternate({"generated": ours(1), "transformers": theirs(1)}, args.repeats)
    if args.profile:
        for label, fn in (("generated", ours(args.new_tokens)), ("transformers", theirs(args.new_tokens))):
            print(f"top ops, decode batch {batch}, {label}, {args.profile} generations:\n{top_ops(fn, args.profile)}", flush=True)
    new = batch * (args.new_tokens - 1)  # the tokens after the first, which the prompt's forward gives
    return {label: new / max(whole[label] - prompt[label], 1e-9) for label in whole}


def run(name: str, args) -> list[dict]:
    """One model's three measurements: [{"what", "generated", "transformers", "ratio"}]."""
    config = MODELS[name]
    generated, reference = build_pair(config, fused=not args.separate)
    rows = []
    with torch.no_grad():
        for batch in DECODE_BATCHES:
            rows.append({"what": f"decode, batch {batch}", **decode(generated, reference, config["vocab_size"], batch, args)})
    rows.insert(0, {"what": f"training step, {args.batch} × {args.seq_len} tokens",
                    **training(generated, reference, config["vocab_size"], args)})
    for row in rows:
        row["ratio"] = row["generated"] / row["transformers"]
    experts = getattr(reference.config, "_experts_implementation", None) if "num_local_experts" in config else None
    rows[0]["experts"] = experts
    return rows


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    import platform

    return platform.processor() or platform.machine()


def command_line(argv: list[str]) -> str:
    """The arguments that decide the figures (not where they are written)."""
    kept, args = [], iter(argv)
    for arg in args:
        if arg.split("=")[0] in ("--write", "--profile"):
            if "=" not in arg:
                next(args, None)  # its value
            continue
        kept.append(arg)
    return " ".join(["python benchmarks/cpu_speed.py", *kept])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", nargs="*", default=list(MODELS), choices=list(MODELS))
    parser.add_argument("--batch", type=int, default=4, help="training batch (sequences)")
    parser.add_argument("--seq-len", type=int, default=128, help="training sequence length")
    parser.add_argument("--prompt", type=int, default=16, help="decode prompt tokens")
    parser.add_argument("--new-tokens", type=int, default=48, help="decode: tokens generated")
    parser.add_argument("--repeats", type=int, default=9, help="alternating runs of each model, per measurement")
    parser.add_argument("--separate", action="store_true", help="keep the config's separate q/k/v and gate/up projections")
    parser.add_argument("--quick", action="store_true", help="a smoke run: fewer repeats, shorter runs (never recorded)")
    parser.add_argument("--profile", type=int, default=0, metavar="CALLS",
                        help="after timing, print the top ops (torch.profiler, CPU self time) of CALLS calls of each")
    parser.add_argument("--write", metavar="FILE", help="record the figures in this markdown file (section cpu-speed)")
    args = parser.parse_args(argv)
    if args.quick:
        args.batch, args.seq_len, args.prompt, args.new_tokens, args.repeats = 2, 32, 8, 8, 2
    torch.set_num_threads(1)
    import transformers

    lines = [f"- {args.batch} × {args.seq_len} tokens a training step (each model's own loss in its forward, AdamW); decode: a {args.prompt}-token prompt, "
             f"{args.new_tokens} greedy tokens (the same as transformers'); {'separate' if args.separate else 'fused'} "
             f"projections; fp32, 1 thread, {args.repeats} alternating runs of each, medians",
             "",
             "| model | measurement | generated tokens/s | transformers tokens/s | generated/transformers | target |",
             "|---|---|---:|---:|---:|---|"]
    print("\n".join(lines), flush=True)
    notes, missed = [], []
    start, load = time.perf_counter(), os.getloadavg()[0]
    for name in args.models:
        rows = run(name, args)
        target = TARGETS[name]
        for row in rows:
            ok = row["ratio"] >= target
            if not ok:
                missed.append(f"{name} {row['what']}")
            line = (f"| {name} | {row['what']} | {row['generated']:,.0f} | {row['transformers']:,.0f} | "
                    f"{row['ratio']:.2f}× | ≥ {target:.2f}×: {'met' if ok else 'NOT met'} |")
            lines.append(line)
            print(line, flush=True)
        notes.append(f"- {name}: {describe_config(MODELS[name])}"
                     + (f"; transformers' experts: {rows[0]['experts']}" if rows[0].get("experts") else "")
                     + ("; at batch 8 nearly every expert gets a token each step, so both read every expert's weights: "
                        "decoding there is bound by memory bandwidth, the same for both" if name == "mixtral-moe" else ""))
    elapsed = time.perf_counter() - start
    lines += ["", *notes,
              "- targets (issue 27): the mixture of experts at least 1.0× transformers, the dense models at least 0.95×: "
              + ("all met" if not missed else "NOT met: " + "; ".join(missed)),
              f"- command: `{command_line(sys.argv[1:] if argv is None else argv)}` ({elapsed:.0f} s; load average "
              f"{load:.1f} at the start, {os.getloadavg()[0]:.1f} at the end); CPU {cpu_name()}, "
              f"torch {torch.__version__}, transformers {transformers.__version__}",
              machine_line()]
    print("\n".join(lines[-len(notes) - 3:]), flush=True)
    if args.write and args.quick:
        print("not recorded: --quick runs are smoke runs", file=sys.stderr)
    elif args.write:
        record(Path(args.write), "cpu-speed", "Generated vs transformers on the CPU: training step and decode", lines)
    return 0


if __name__ == "__main__":
    sys.exit(main())
