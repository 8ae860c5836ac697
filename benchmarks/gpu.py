"""Training-step speed of generated modules against transformers, side by side in one process.

For GPT-2 small, a Llama-style 1B, a GPT-3-XL-shaped 1.3B and a Mixtral-shaped 1.2B mixture of experts (8 experts,
top 2), the same config is built twice: the
module archcalc generates (from the config, through the HF importer, with fused q/k/v and gate/up
projections unless --separate) and the transformers model (attn_implementation="sdpa"), and the generated
one is given the transformers model's weights through its load_hf_state_dict: the two start as the same
function, and the first step's losses are compared before anything is timed. Each training step is forward with
the loss each model computes itself (under torch.compile, inside the compiled region), backward and a fused AdamW
step under bf16 autocast. Runs alternate (generated, transformers, generated, ...) so machine noise hits
both, eager and with torch.compile. Reported: tokens/s, achieved TFLOP/s from archcalc's exact
`train_step_matmul`, MFU against the device's dense bf16 peak, peak memory (the model's own parameters and
AdamW state, plus the most a training step allocates above what was resident: both models stay on the
device, so the raw allocator peak would count the other one too), and generated/transformers. With --profile,
the top CUDA kernels of a few steps of each model (torch.profiler), to see where a missed target goes.

    python benchmarks/gpu.py [--compile both|on|off] [--batch 8] [--seq-len 1024] [--steps 20] [--write docs/benchmarks.md]
    python benchmarks/gpu.py --tiny --device cpu      # the harness on the CPU (CI); figures are not recorded

GPU figures are only written with --write on a CUDA device, naming it; CPU runs never record figures.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import re
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _record import drop_section, record  # noqa: E402

NO_DROPOUT = {"resid_pdrop": 0.0, "embd_pdrop": 0.0, "attn_pdrop": 0.0}  # generated modules have none: the same work
MODELS = {
    "gpt2-small": {"model_type": "gpt2", "vocab_size": 50257, "n_positions": 1024, "n_embd": 768, "n_layer": 12, "n_head": 12,
                   **NO_DROPOUT},
    "llama-1b": {"model_type": "llama", "vocab_size": 32000, "hidden_size": 2048, "intermediate_size": 5632,
                 "num_hidden_layers": 22, "num_attention_heads": 32, "num_key_value_heads": 4, "max_position_embeddings": 2048},
    "gpt3-xl-1.3b": {"model_type": "gpt2", "vocab_size": 50257, "n_positions": 2048, "n_embd": 2048, "n_layer": 24, "n_head": 16,
                     **NO_DROPOUT},
    "mixtral-moe": {"model_type": "mixtral", "vocab_size": 32000, "hidden_size": 1024, "intermediate_size": 3584,
                    "num_hidden_layers": 12, "num_attention_heads": 16, "num_key_value_heads": 4, "num_local_experts": 8,
                    "num_experts_per_tok": 2, "max_position_embeddings": 2048},
}
DENSE_MFU_TARGET = 0.45  # the dense models compiled (issue 24)
TINY = {"gpt2": {"n_embd": 64, "n_layer": 2, "n_head": 4, "vocab_size": 128, "n_positions": 64},
        "llama": {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
                  "num_key_value_heads": 2, "vocab_size": 128, "max_position_embeddings": 64},
        "mixtral": {"hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2, "num_attention_heads": 4,
                    "num_key_value_heads": 2, "vocab_size": 128, "max_position_embeddings": 64, "num_local_experts": 4,
                    "num_experts_per_tok": 2}}


def build_pair(config: dict, device: str, fused: bool = True):
    """The generated module (with the transformers model's weights) and the transformers model of one config,
    and archcalc's FLOPs binding."""
    import transformers

    from archcalc.codegen.emit import emit
    from archcalc.codegen.load import load_source
    from archcalc.hf import spec_from_hf_config
    from archcalc.ir import lower
    from archcalc.spec.bind import bind
    from archcalc.spec.transform import fuse_projections

    spec = spec_from_hf_config(dict(config), "benchmark")
    spec = fuse_projections(spec) if fused else spec
    binding = bind(spec, next(iter(spec.sizes)))
    module = load_source(emit(lower(binding), "benchmark"))
    generated = module.build(device=device)
    hf_config = transformers.AutoConfig.for_model(**config)
    hf_config._attn_implementation = "sdpa"
    with torch.device(device):
        reference = transformers.AutoModelForCausalLM.from_config(hf_config, attn_implementation="sdpa")
    module.load_hf_state_dict(generated, reference.state_dict())  # the same function, to start with
    return generated, reference, binding


def step_fn(model, hf: bool, ids, targets, optimizer, device, autocast: bool = True, loss_in_model: bool = True):
    """One training step. ``loss_in_model``: the loss each model computes in its own forward (inside the compiled
    region under torch.compile), as a training loop calls it; else logits out, cross-entropy in eager PyTorch."""
    def step():
        with torch.autocast(device_type="cuda" if device.startswith("cuda") else "cpu", dtype=torch.bfloat16,
                            enabled=autocast and device.startswith("cuda")):
            if loss_in_model:  # transformers shifts labels itself unless given shift_labels
                loss = model(input_ids=ids, labels=targets, shift_labels=targets).loss if hf else model(ids, targets)[1]
            else:
                logits = model(input_ids=ids).logits if hf else model(ids)
                loss = F.cross_entropy(logits.float().view(-1, logits.shape[-1]), targets.reshape(-1))
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return loss.item()
    return step


def resident_bytes(model, optimizer) -> int:
    """What a model keeps between steps: its parameters and its optimizer's state (gradients are freed)."""
    tensors = list(model.parameters()) + [t for state in optimizer.state.values() for t in state.values() if torch.is_tensor(t)]
    return sum(t.numel() * t.element_size() for t in tensors)


def measure(step, steps: int, warmup: int, device: str) -> tuple[float, int]:
    """Median seconds per step after ``warmup`` steps, and the most memory the run allocated on top of what
    was allocated when it began (both models' weights and optimizer states live on the device throughout)."""
    cuda = device.startswith("cuda")
    baseline = 0
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        baseline = torch.cuda.memory_allocated()
    times = []
    for i in range(warmup + steps):
        start = time.perf_counter()
        step()
        if i >= warmup:
            times.append(time.perf_counter() - start)
    peak = torch.cuda.max_memory_allocated() - baseline if cuda else 0
    return statistics.median(times), peak


def run(name: str, config: dict, args) -> list[dict]:
    from archcalc.backends.flops import flops
    from archcalc.cli.run_cmd import peak_tflops

    generated, reference, binding = build_pair(config, args.device, fused=not args.separate)
    if args.weights == "bf16":  # bf16 weights and AdamW state, no autocast: every matmul in bf16 for both
        generated, reference = generated.to(torch.bfloat16), reference.to(torch.bfloat16)
    vocab = config["vocab_size"]
    ids = torch.randint(0, vocab, (args.batch, args.seq_len + 1), device=args.device)
    inputs, targets = ids[:, :-1].contiguous(), ids[:, 1:].contiguous()  # transformers views labels
    step_flops = flops(binding, args.seq_len, args.batch).train_step_matmul
    cuda = args.device.startswith("cuda")
    name_of_device = torch.cuda.get_device_name() if cuda else "CPU"
    peak = peak_tflops(name_of_device)
    rows = []
    for compiled in {"both": (False, True), "on": (True,), "off": (False,)}[args.compile]:
        steppers, resident = {}, {}
        for label, model, hf in (("generated", generated, False), ("transformers", reference, True)):
            runnable = torch.compile(model) if compiled else model
            optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=args.device.startswith("cuda"))
            steppers[label] = step_fn(runnable, hf, inputs, targets, optimizer, args.device,
                                      autocast=args.weights == "fp32", loss_in_model=args.loss == "model")
            resident[label] = (model, optimizer)
        first = {label: step() for label, step in steppers.items()}  # the same weights and batch: the same loss
        low_precision = args.device.startswith("cuda") or args.weights == "bf16"
        tolerance = 0.02 if low_precision else 1e-4  # bf16 (autocast on CUDA, or bf16 weights); fp32 on the CPU
        if not rows and abs(first["generated"] - first["transformers"]) > tolerance * abs(first["transformers"]):
            raise SystemExit(f"{name}: first losses differ: generated {first['generated']:.4f}, transformers {first['transformers']:.4f}")
        results = {label: [] for label in steppers}
        for _ in range(args.rounds):  # alternate: generated, transformers, generated, ...
            for label, step in steppers.items():
                results[label].append(measure(step, args.steps, args.warmup, args.device))
        row = {"model": name, "compiled": compiled, "device": name_of_device, "fused": not args.separate,
               "first_loss": first, "dense": "num_local_experts" not in config,
               "hf_experts": getattr(reference.config, "_experts_implementation", None) if "num_local_experts" in config else None}
        for label, runs in results.items():
            seconds = statistics.median(s for s, _ in runs)
            tflops = step_flops / seconds / 1e12
            row[label] = {"tokens_per_s": args.batch * args.seq_len / seconds, "tflops": tflops,
                          "mfu": tflops / peak if peak else None, "peak_bytes": resident_bytes(*resident[label]) + max(p for _, p in runs) if cuda else 0}
        row["speed_ratio"] = row["generated"]["tokens_per_s"] / row["transformers"]["tokens_per_s"]
        if row["transformers"]["peak_bytes"]:
            row["memory_ratio"] = row["generated"]["peak_bytes"] / row["transformers"]["peak_bytes"]
        rows.append(row)
        if args.profile:
            for label, step in steppers.items():
                print(f"top CUDA kernels, {name} {label} {'compiled' if compiled else 'eager'}, {args.profile} steps:")
                print(top_kernels(step, args.profile), flush=True)
    return rows


KERNEL_KINDS = (  # (kind, substrings of a CUDA kernel's name), first match wins: attention before matmul
    ("attention", ("flash", "fmha", "sdpa", "attention", "cudnn")),
    ("matmul", ("gemm", "nvjet", "cutlass", "xmma", "cublas")),
    ("optimizer", ("adam",)),
    ("fused by inductor (Triton)", ("triton",)),
    ("ATen elementwise and reductions", ("elementwise", "reduce", "vectorized", "softmax", "nll", "cat", "index", "scatter")),
    ("memory copies", ("memcpy", "memset")),
)


def kernel_kind(name: str) -> str:
    """What a CUDA kernel does, from its name (the groups of ``KERNEL_KINDS``; "other" if none)."""
    lowered = name.lower()
    return next((kind for kind, marks in KERNEL_KINDS if any(mark in lowered for mark in marks)), "other")


def kernel_summary(kernels: list[tuple[str, float]], steps: int, step_ms: float, rows: int = 20) -> str:
    """Device time per step by kind of kernel and the top ``rows`` kernels, from (kernel name, device
    microseconds over ``steps`` steps) pairs; ``step_ms``: the measured wall time of one step."""
    by_kind: dict[str, float] = {}
    for name, micros in kernels:
        kind = kernel_kind(name)
        by_kind[kind] = by_kind.get(kind, 0.0) + micros / 1000 / steps
    busy = sum(by_kind.values())
    lines = [f"device time per step by kind of kernel (wall {step_ms:.1f} ms a step; kernels busy {busy:.1f} ms):"]
    lines += [f"  {kind:34s} {ms:8.2f} ms  {100 * ms / step_ms:5.1f}% of the step"
              for kind, ms in sorted(by_kind.items(), key=lambda item: -item[1])]
    lines.append(f"top {rows} kernels (ms per step):")
    lines += [f"  {micros / 1000 / steps:8.2f}  {kernel_kind(name):12.12s}  {name[:110]}"
              for name, micros in sorted(kernels, key=lambda item: -item[1])[:rows]]
    return "\n".join(lines)


def top_kernels(step, steps: int, rows: int = 12) -> str:
    """Where ``steps`` steps spend device time: torch.profiler's operator table, then the CUDA kernels by kind."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        start = time.perf_counter()
        for _ in range(steps):
            step()
        torch.cuda.synchronize()
        step_ms = (time.perf_counter() - start) * 1000 / steps
    averages = prof.key_averages()
    kernels = [(evt.key, evt.self_device_time_total) for evt in averages
               if evt.device_type == DeviceType.CUDA and evt.self_device_time_total > 0
               and "#" not in evt.key]  # not the annotations (Optimizer.step#AdamW.step): they span kernels
    table = averages.table(sort_by="cuda_time_total", row_limit=rows, max_name_column_width=70)
    return table + "\n" + kernel_summary(kernels, steps, step_ms)


def describe(name: str, row: dict, verdicts_too: bool) -> str:
    """One result line; ``verdicts_too`` (real GPU runs): with the targets, speed ratio >= 1, memory ratio <= 1.1 and
    MFU >= 45% for the dense models compiled."""
    g, t = row["generated"], row["transformers"]
    mfu = f", MFU {100 * g['mfu']:.1f}% vs {100 * t['mfu']:.1f}%" if g["mfu"] is not None else ""
    mem = f", peak memory {g['peak_bytes'] / 2**30:.2f} vs {t['peak_bytes'] / 2**30:.2f} GiB" if t["peak_bytes"] else ""
    verdicts = [f"speed {'met' if row['speed_ratio'] >= 1.0 else 'NOT met'}"]
    if "memory_ratio" in row:
        verdicts.append(f"memory {'met' if row['memory_ratio'] <= 1.1 else 'NOT met'} ({row['memory_ratio']:.3f})")
    if row["dense"] and row["compiled"] and g["mfu"] is not None:
        verdicts.append(f"MFU >= {DENSE_MFU_TARGET:.0%} {'met' if g['mfu'] >= DENSE_MFU_TARGET else 'NOT met'}")
    return (f"- {name}, {'compiled' if row['compiled'] else 'eager'}: generated {g['tokens_per_s']:,.0f} tokens/s "
            f"({g['tflops']:.1f} TFLOP/s) vs transformers {t['tokens_per_s']:,.0f} ({t['tflops']:.1f}); "
            f"ratio {row['speed_ratio']:.3f}{mfu}{mem}; first loss {row['first_loss']['generated']:.4f} vs "
            f"{row['first_loss']['transformers']:.4f}"
            + (f"; transformers' experts: {row['hf_experts']}" if row.get("hf_experts") else "")
            + (f"; targets: {', '.join(verdicts)}" if verdicts_too else ""))


def section(name: str, args) -> tuple[str, str]:
    """The docs/benchmarks.md section of one model's run: a key and a title naming the device and every setting
    that differs from the defaults, so a run with other settings or on another card keeps its own section."""
    device = torch.cuda.get_device_name()
    tag = next((card for card in ("h200", "h100", "a100", "b200") if card in device.lower()),
               "".join(c for c in device.lower() if c.isalnum()))
    settings = [label for label, differs in (
        ("bf16 weights", args.weights == "bf16"), (f"{args.batch} × {args.seq_len} tokens", (args.batch, args.seq_len) != (8, 1024)),
        ("loss outside the model", args.loss == "outside"),
        ("separate projections", args.separate)) if differs]
    key = "-".join(["gpu", name, *(re.sub(r"[^0-9a-z]+", "-", setting.lower()).strip("-") for setting in settings), tag])
    return key, f"Generated vs transformers on the GPU: {name}{' (' + ', '.join(settings) + ')' if settings else ''} ({device})"


def command_line(argv: list[str]) -> str:
    """The arguments that decide the figures (not where they are written)."""
    kept, args = [], iter(argv)
    for arg in args:
        if arg.split("=")[0] in ("--json", "--write", "--profile"):
            if "=" not in arg:
                next(args, None)  # its value
            continue
        kept.append(arg)
    return " ".join(kept)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--compile", choices=["both", "on", "off"], default="both")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--seq-len", type=int, default=1024)
    parser.add_argument("--steps", type=int, default=20, help="timed steps per run")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=3, help="alternating runs of each model")
    parser.add_argument("--tiny", action="store_true", help="tiny configs (to check the harness on a CPU)")
    parser.add_argument("--models", nargs="*", default=list(MODELS), choices=list(MODELS))
    parser.add_argument("--separate", action="store_true", help="keep the config's separate q/k/v and gate/up projections")
    parser.add_argument("--write", metavar="FILE", help="record GPU results in this markdown file (a section per model)")
    parser.add_argument("--json", metavar="FILE", help="also write every result row as JSON (rewritten after each model)")
    parser.add_argument("--weights", choices=["fp32", "bf16"], default="fp32",
                        help="fp32: fp32 weights and AdamW state under bf16 autocast on CUDA (mixed precision, the default); "
                             "bf16: bf16 weights and AdamW state, no autocast")
    parser.add_argument("--loss", choices=["model", "outside"], default="model",
                        help="model: the loss each model computes in its forward (inside the compiled region; the "
                             "default since 2026-11-26); outside: logits out, cross-entropy in eager PyTorch (before)")
    parser.add_argument("--profile", type=int, default=0, metavar="STEPS",
                        help="after timing, print the top CUDA kernels of STEPS steps of each model (CUDA only)")
    args = parser.parse_args()
    if args.tiny:
        args.batch, args.seq_len, args.steps, args.warmup, args.rounds = 2, 32, 2, 1, 2
    cuda = args.device.startswith("cuda")
    if args.profile and not cuda:
        parser.error("--profile needs a CUDA device")
    import transformers

    setup = (f"- {args.batch} × {args.seq_len} tokens, {'separate' if args.separate else 'fused'} projections, "
             f"{'bf16 autocast on CUDA' if args.weights == 'fp32' else 'bf16 weights, no autocast'}, "
             f"loss {'in each model' + chr(39) + 's forward' if args.loss == 'model' else 'outside the model, eager'}, "
             f"fused AdamW on CUDA, {args.rounds} alternating rounds of {args.steps} timed steps; device "
             f"{torch.cuda.get_device_name() if cuda else 'CPU'}, torch {torch.__version__}, transformers {transformers.__version__}, "
             f"{dt.date.today().isoformat()}; command: `python benchmarks/gpu.py {command_line(sys.argv[1:])}`")
    all_rows = []
    for name in args.models:  # each model is printed (and recorded) as soon as it is done: a later failure loses nothing
        config = dict(MODELS[name])
        if args.tiny:
            config.update(TINY[config["model_type"]])
        rows = run(name, config, args)
        all_rows += rows
        lines = [describe(name, row, cuda and not args.tiny) for row in rows] + [setup]
        print("\n".join(lines), flush=True)
        if args.json:
            Path(args.json).write_text(json.dumps(all_rows, indent=2), encoding="utf-8")
        if args.write and cuda and not args.tiny:
            key, title = section(name, args)
            record(Path(args.write), key, title, lines)
            drop_section(Path(args.write), "gpu")  # the "not measured yet" placeholder
    return 0


if __name__ == "__main__":
    sys.exit(main())
