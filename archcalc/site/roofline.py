"""A model page's inference section: ``archcalc infer``'s figures for one default setting, and a roofline chart
(inline SVG, drawn at build time) with the prefill and the decode steps placed on it.

>>> from archcalc.spec import load_spec
>>> lines = roofline_section(load_spec("gpt2"))
>>> lines[0], any("<svg" in line for line in lines)
('## Inference', True)
"""

from __future__ import annotations

from html import escape

from archcalc.backends.infer import infer
from archcalc.site.charts import roofline
from archcalc.spec import Spec
from archcalc.spec.bind import bind

HARDWARE, PROMPT, NEW, BATCHES = "h100-sxm", 512, 128, (1, 32)


def roofline_section(spec: Spec) -> list[str]:
    """The section's markdown lines for the spec's first size: a table for batches 1 and 32, then the chart (decoders
    only: the analysis is of generation)."""
    if spec.model.architecture != "decoder":
        return []
    size = next(iter(spec.sizes), None)  # the first (smallest) size
    binding = bind(spec, size)
    runs = [_fitting(binding, b) for b in BATCHES]
    hw = runs[0].hardware
    out = ["## Inference", "",
           f"`archcalc infer {spec.name} --size {binding.size} --hardware {HARDWARE} --batch B --prompt {PROMPT} "
           f"--new-tokens {NEW} [--tp N]`: bf16 weights and KV cache on {escape(hw.name)}s ({hw.peak('bfloat16') / 1e12:,.0f} "
           f"TFLOP/s dense bf16, {hw.bandwidth / 1e12:,.2f} TB/s each), as few as hold the weights and the KV cache "
           "(tensor parallel, up to 8). Roofline bounds: each phase at best takes max(FLOPs / peak, bytes / bandwidth); "
           "real runs are slower (launch overhead, kernels below peak, the all-reduces of tensor parallelism; see "
           "[inference](../inference.md)).", "",
           "| batch | GPUs | time to first token | decode tokens/s | decode is | weights + KV cache a GPU |",
           "|---:|---:|---:|---:|---|---:|"]
    for r in runs:
        needed = f"{float(r.needed_bytes_per_gpu) / 2**30:,.1f} GiB"
        if r.needed_bytes_per_gpu > r.capacity:  # not even 8 GPUs hold it: no time to quote
            out.append(f"| {r.batch} | — | — | — | does not fit on 8 | {needed} |")
            continue
        tps = f"{float(r.tokens_per_second):,.0f}" if r.tokens_per_second is not None else "—"
        out.append(f"| {r.batch} | {r.tp} | {float(r.prefill.seconds) * 1e3:,.1f} ms | {tps} | {r.decode.bound}-bound | {needed} |")
    crossover = runs[0].compute_bound_batch
    out += ["", (f"Decode turns compute-bound from batch {crossover:,} on." if crossover else
                 "Decode never turns compute-bound at this context: each sequence's KV cache read outlasts its FLOPs."), "",
            "The roofline of the accelerator (pick another, or another batch: the points are each batch's exact FLOPs and "
            "bytes from `archcalc infer`):", "", roofline(binding, PROMPT, NEW, HARDWARE, {r.batch: r for r in runs}), ""]
    return out


def _fitting(binding, batch: int):
    """The run on the fewest GPUs (1, 2, 4, 8; tensor parallel) whose memory holds it, else on the most."""
    from archcalc.errors import UsageError

    for tp in (1, 2, 4, 8):
        try:  # must_fit: refused before any FLOPs are counted
            return infer(binding, HARDWARE, batch, PROMPT, NEW, tp=tp, must_fit=True)
        except UsageError:  # does not fit, or a degree that does not divide the heads
            continue
    for tp in (8, 4, 2):  # what the most GPUs would each need
        try:
            return infer(binding, HARDWARE, batch, PROMPT, NEW, tp=tp)
        except UsageError:
            continue
    return infer(binding, HARDWARE, batch, PROMPT, NEW)
