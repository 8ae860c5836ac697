"""Benchmark the PyTorch backend on the meta device.

1. Building the hypothetical 100T-parameter GPT-3 (`gpt3 --size 100t`) on the meta device: emit the
   source, import it and call build(device="meta"), in a fresh process; wall time and the process's
   peak RSS (ru_maxrss), beside the peak RSS of a process that only imports torch.
   Targets: under 10 s and under 1 GiB.
2. The rate of the symbols = numel property check: random GPT-2/GPT-3 configurations (as in
   tests/codegen/test_numel.py), each lowered, emitted, imported, built on meta and compared name by
   name. Target: at least 20 configurations a second.

    python benchmarks/meta_build.py [--configs 200] [--write docs/benchmarks.md]
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _record import machine_line, record  # noqa: E402

BUILD_100T = """
import json, resource, sys, time
start = time.perf_counter()
from archcalc.ir import lower
from archcalc.spec import load_spec
from archcalc.spec.bind import bind
from archcalc.codegen.emit import emit
from archcalc.codegen.load import load_source
t_import = time.perf_counter()
module = load_source(emit(lower(bind(load_spec("gpt3"), "100t")), "bench"))
t_emit = time.perf_counter()
model = module.build(device="meta")
n = sum(p.numel() for p in model.parameters())
t_build = time.perf_counter()
print(json.dumps({"params": n, "imports_s": t_import - start, "emit_s": t_emit - t_import, "build_s": t_build - t_emit,
                  "total_s": t_build - start, "peak_rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}))
"""
TORCH_ONLY = "import json, resource, torch; print(json.dumps({'peak_rss': resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}))"


def child(script: str) -> dict:
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def random_config(rng: random.Random) -> tuple[str, dict]:
    H = rng.randint(1, 16)
    values = {"V": rng.randint(1, 70_000), "T": rng.randint(1, 8192), "L": rng.randint(1, 6), "H": H,
              "d": H * rng.randint(1, 128), "qkv_bias": rng.random() < 0.5, "tie_embeddings": rng.random() < 0.5}
    if rng.random() < 0.5:
        values["d_head"] = rng.randint(1, 128)
    if rng.random() < 0.5:
        values["d_ff"] = rng.randint(1, 8192)
    return rng.choice(["gpt2", "gpt3"]), values


def property_rate(n: int) -> tuple[float, int]:
    from archcalc.codegen.verify import verify
    from archcalc.ir import lower
    from archcalc.spec import load_spec
    from archcalc.spec.bind import bind, parse_overrides

    specs = {name: load_spec(name) for name in ("gpt2", "gpt3")}
    rng = random.Random(0)
    configs = [random_config(rng) for _ in range(n)]
    verify(lower(bind(specs["gpt2"], "small")))  # warm: torch import, first module
    start = time.perf_counter()
    ok = 0
    for name, values in configs:
        spec = specs[name]
        overrides = parse_overrides(spec, [f"{k}={str(v).lower()}" for k, v in values.items()])
        ok += verify(lower(bind(spec, None, overrides)), device="meta").ok
    return n / (time.perf_counter() - start), ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--configs", type=int, default=200, help="random configurations for the rate (default 200)")
    parser.add_argument("--write", metavar="FILE", help="record the results in this markdown file")
    args = parser.parse_args()
    runs = [child(BUILD_100T) for _ in range(3)]
    best = min(runs, key=lambda r: r["total_s"])
    torch_rss = child(TORCH_ONLY)["peak_rss"]
    rate, ok = property_rate(args.configs)
    gib = 2**30
    all_runs = ", ".join(f"{r['total_s']:.2f}" for r in runs)
    lines = [
        f"- `gpt3 --size 100t` ({best['params']:,} parameters) on the meta device, fresh process, best of 3: "
        f"{best['total_s']:.2f} s in all (imports {best['imports_s']:.2f} s, emit, and import of torch and the module "
        f"{best['emit_s']:.2f} s, build {best['build_s']:.2f} s); all runs: {all_runs} s "
        f"— target under 10 s: {'met' if best['total_s'] < 10 else 'MISSED'}",
        f"- peak RSS of that process {max(r['peak_rss'] for r in runs) / gib:.3f} GiB (a process that only imports torch: "
        f"{torch_rss / gib:.3f} GiB) — target under 1 GiB: {'met' if max(r['peak_rss'] for r in runs) < gib else 'MISSED'}",
        f"- symbols = numel property check: {rate:.1f} random configurations a second over {args.configs} "
        f"({ok} verified) — target at least 20: {'met' if rate >= 20 else 'MISSED'}",
        machine_line(),
    ]
    print("\n".join(lines))
    if args.write:
        record(Path(args.write), "codegen", "Codegen on the meta device: the 100T build and the property-check rate", lines)
    met = best["total_s"] < 10 and max(r["peak_rss"] for r in runs) < gib and rate >= 20 and ok == args.configs
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
