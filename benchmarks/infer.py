"""Decode speed of the generated module's generate() against archcalc infer's roofline bound (and transformers').

For the Llama-style 1B of benchmarks/gpu.py (GQA 32/4, 22 layers), bf16, the generated module (weights from a
transformers model of the same config) generates --new-tokens greedy tokens after a --prompt-token prompt at
batch 1 and 32; each run is timed after a warm-up, decode alone (the prefill is timed apart), and set beside
`archcalc infer`'s bound for the same settings on the device (its roofline, which ignores launch overhead and
any kernel below peak) and beside transformers' generate() with its static cache where it has one.

    python benchmarks/infer.py --hardware h100-sxm [--prompt 512] [--new-tokens 128] [--write docs/benchmarks.md]
    python benchmarks/infer.py --tiny --device cpu     # the harness on the CPU (CI); figures are not recorded

Figures are written with --write only from a CUDA device, naming it; CPU runs never record figures.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _record import record  # noqa: E402
from gpu import MODELS, TINY  # noqa: E402


def _time(fn, device: str, repeats: int = 3) -> float:
    """The median wall time of ``repeats`` calls."""
    times = []
    for _ in range(repeats):
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        start = time.perf_counter()
        fn()
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    return sorted(times)[len(times) // 2]


def _decode_rate(batch: int, steps: int, whole: float, prefill: float) -> float | None:
    """Tokens/s of the decode steps: the generation's time less its prefill's (None when noise swamps it)."""
    return batch * steps / (whole - prefill) if whole > prefill else None


def build_pair(config: dict, device: str, dtype: torch.dtype):
    """The generated module (with the transformers model's weights), the transformers model, and archcalc's binding;
    both models built on the device itself (no copy from the CPU), in eval mode."""
    import transformers

    from archcalc.codegen.emit import emit
    from archcalc.codegen.load import load_source
    from archcalc.hf import spec_from_hf_config
    from archcalc.ir import lower
    from archcalc.spec.bind import bind

    spec = spec_from_hf_config(config, "bench.json")
    binding = bind(spec, next(iter(spec.sizes)))
    module = load_source(emit(lower(binding), "benchmark"))
    hf_config = transformers.AutoConfig.for_model(**config)
    with torch.device(device):
        hf = transformers.AutoModelForCausalLM.from_config(hf_config, attn_implementation="sdpa", dtype=dtype).eval()
    model = module.build(device=device, dtype=dtype).eval()
    module.load_hf_state_dict(model, hf.state_dict())
    hf.generation_config.eos_token_id = None
    hf.generation_config.pad_token_id = 0
    return model, hf, binding


def measure(model, hf, vocab: int, device: str, batch: int, prompt: int, new_tokens: int) -> dict:
    """Decode tokens/s of the generated module and of transformers' generate (both greedy, same weights)."""
    ids = torch.randint(0, vocab, (batch, prompt), device=device)
    model.generate(ids, 2, temperature=0)  # warm-up
    prefill = _time(lambda: model.generate(ids, 1, temperature=0), device)
    whole = _time(lambda: model.generate(ids, new_tokens, temperature=0), device)
    ours = _decode_rate(batch, new_tokens - 1, whole, prefill)
    # the static cache, eager like the generated module's generate(): transformers would compile its forward for a
    # static cache on CUDA, once per cache length (every length timed here), which would time the compiler
    kwargs = {"cache_implementation": "static", "disable_compile": True} if device.startswith("cuda") else {}
    hf.generate(ids, do_sample=False, max_new_tokens=2, **kwargs)
    hf_prefill = _time(lambda: hf.generate(ids, do_sample=False, max_new_tokens=1, **kwargs), device)
    hf_whole = _time(lambda: hf.generate(ids, do_sample=False, max_new_tokens=new_tokens, **kwargs), device)
    theirs = _decode_rate(batch, new_tokens - 1, hf_whole, hf_prefill)
    return {"ours": ours, "transformers": theirs, "prefill_seconds": prefill}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--hardware", default="h100-sxm", help="archcalc's name of the device, for the bound")
    parser.add_argument("--prompt", type=int, default=512)
    parser.add_argument("--new-tokens", type=int, default=128)
    parser.add_argument("--batches", default="1,32")
    parser.add_argument("--tiny", action="store_true", help="a tiny model (the harness only)")
    parser.add_argument("--write", type=Path, help="record the figures in this markdown file (CUDA runs only)")
    args = parser.parse_args(argv)
    from archcalc.backends.infer import infer

    config = {"model_type": "llama", **TINY["llama"]} if args.tiny else MODELS["llama-1b"]
    prompt, new = (8, 6) if args.tiny else (args.prompt, args.new_tokens)
    dtype = torch.float32 if args.device == "cpu" else torch.bfloat16
    hf_how = " (static cache, eager)" if args.device.startswith("cuda") else ""
    lines = []
    model, hf, binding = build_pair(config, args.device, dtype)
    for batch in (int(b) for b in args.batches.split(",")):
        m = measure(model, hf, config["vocab_size"], args.device, batch, prompt, new)
        bound = infer(binding, args.hardware, batch, prompt, new, dtype="float32" if dtype == torch.float32 else "bfloat16")
        bound_tps = float(bound.tokens_per_second)
        show = lambda v: f"{v:,.1f}" if v is not None else "n/a (too short to time)"  # noqa: E731
        share = f" ({m['ours'] / bound_tps:.0%} of it)" if m["ours"] is not None and args.device.startswith("cuda") else ""
        line = (f"- batch {batch}: generated {show(m['ours'])} tokens/s, transformers {show(m['transformers'])} tokens/s{hf_how}, "
                f"{args.hardware} roofline bound {bound_tps:,.1f}{share}")
        print(line, flush=True)
        lines.append(line)
    if args.write and args.device.startswith("cuda"):
        import transformers

        name = torch.cuda.get_device_name()
        tag = args.hardware.split("-")[0]  # h100-sxm -> h100: a section per card
        record(args.write, f"infer-{tag}", f"Decode speed against the roofline bound ({name})",
               [f"- {name}, torch {torch.__version__}, transformers {transformers.__version__}, {time.strftime('%Y-%m-%d')}: `python benchmarks/infer.py --hardware "
                f"{args.hardware} --prompt {prompt} --new-tokens {new}`", *lines])
    elif args.write:
        print("not recorded: figures are written from CUDA runs only", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
