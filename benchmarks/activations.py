"""Activation memory: archcalc's estimate against a measurement of the generated module.

The measurement (archcalc.codegen.measure.saved_activation_bytes) totals the distinct storages autograd saves
for backward during a real forward pass on the CPU in fp32, parameters excluded. Target (FLOPs and
memory issue): within 15% of the estimate for GPT-2 small.

    python benchmarks/activations.py [--write docs/benchmarks.md]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _record import machine_line, record  # noqa: E402

from archcalc.backends.activations import activations  # noqa: E402
from archcalc.codegen.emit import emit  # noqa: E402
from archcalc.codegen.load import load_source  # noqa: E402
from archcalc.codegen.measure import saved_activation_bytes  # noqa: E402
from archcalc.ir import lower  # noqa: E402
from archcalc.spec import load_spec  # noqa: E402
from archcalc.spec.bind import bind  # noqa: E402

CASES = [("gpt2", "small", 1, 256), ("gpt2", "small", 2, 512), ("gpt2", "small", 1, 1024)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--write", metavar="FILE", help="record the results in this markdown file")
    args = parser.parse_args()
    lines, worst = [], 0.0
    for spec, size, batch, seq in CASES:
        low = lower(bind(load_spec(spec), size))
        model = load_source(emit(low, "bench")).build()
        vocab = int(low.root.attrs.vocab.xreplace(low.binding.numeric()))
        ids = torch.randint(0, vocab, (batch, seq))

        def step(model=model, ids=ids):
            logits = model(ids)
            return F.cross_entropy(logits.float().view(-1, logits.shape[-1]), ids.reshape(-1))

        measured = saved_activation_bytes(step, model.parameters())
        estimate = activations(low, seq, batch, mixed=False).total_bytes()
        error = (estimate - measured) / measured
        worst = max(worst, abs(error))
        lines.append(f"- {spec} {size}, batch {batch} × {seq} tokens, fp32 on the CPU: measured {measured:,} bytes saved for "
                     f"backward, estimated {estimate:,} ({100 * error:+.3f}%)")
    lines.append(f"- largest difference {100 * worst:.3f}% — target within 15%: {'met' if worst < 0.15 else 'MISSED'}")
    lines.append(machine_line())
    print("\n".join(lines))
    if args.write:
        record(Path(args.write), "activations", "Activation memory: estimate vs. measured saved tensors", lines)
    return 0 if worst < 0.15 else 1


if __name__ == "__main__":
    sys.exit(main())
