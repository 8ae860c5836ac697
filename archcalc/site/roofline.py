"""A model page's inference section: ``archcalc infer``'s figures for one default setting, and a roofline chart
(inline SVG, drawn at build time) with the prefill and the decode steps placed on it.

>>> from archcalc.spec import load_spec
>>> lines = roofline_section(load_spec("gpt2"))
>>> lines[0], any("<svg" in line for line in lines)
('## Inference', True)
"""

from __future__ import annotations

import math
from html import escape

from archcalc.backends.infer import infer
from archcalc.spec import Spec
from archcalc.spec.bind import bind

HARDWARE, PROMPT, NEW, BATCHES = "h100-sxm", 512, 128, (1, 32)
WIDTH, HEIGHT, LEFT, BOTTOM, TOP, RIGHT = 360, 250, 52, 40, 12, 14


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
            chart(runs), ""]
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


def chart(runs) -> str:
    """The roofline of the device (log-log: FLOP/byte against TFLOP/s) with each run's prefill and mean decode step."""
    peak, bandwidth = runs[0].peak, runs[0].bandwidth
    points = []
    for r in runs:
        for phase, label in ((r.prefill, "prefill"), (r.decode, "decode")):
            if phase.bytes and phase.seconds:
                intensity = float(phase.flops / phase.bytes)
                points.append((f"{label}, batch {r.batch}", intensity, float(phase.flops / phase.seconds)))
    lo = min([0.5] + [p[1] / 2 for p in points])
    hi = max([peak / bandwidth * 8] + [p[1] * 2 for p in points])
    y_lo, y_hi = peak / 1000, peak * 2

    def x(v: float) -> float:
        return LEFT + (WIDTH - LEFT - RIGHT) * (math.log10(v) - math.log10(lo)) / (math.log10(hi) - math.log10(lo))

    def y(v: float) -> float:
        return HEIGHT - BOTTOM - (HEIGHT - BOTTOM - TOP) * (math.log10(v) - math.log10(y_lo)) / (math.log10(y_hi) - math.log10(y_lo))

    ridge = peak / bandwidth
    start = max(lo, y_lo / bandwidth)
    roof = (f'<polyline fill="none" stroke="#3b6fb6" stroke-width="2" points="{x(start):.1f},{y(start * bandwidth):.1f} '
            f'{x(ridge):.1f},{y(peak):.1f} {x(hi):.1f},{y(peak):.1f}"><title>roofline: min(peak, bandwidth × FLOP/byte)</title></polyline>')
    marks = []
    for i, (label, ix, attained) in enumerate(points):  # numbered markers, explained in the legend below the axes
        color = "#e3872d" if label.startswith("prefill") else "#4c9a52"
        cx, cy = x(ix), y(max(attained, y_lo))
        text = f"{escape(label)}: {ix:,.1f} FLOP/byte, {attained / 1e12:,.1f} TFLOP/s"
        marks.append(f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="7" fill="{color}"><title>{text}</title></circle>'
                     f'<text x="{cx:.1f}" y="{cy + 4:.1f}" font-size="10" fill="#fff" text-anchor="middle">{i + 1}</text>')
        row = HEIGHT + 20 * i + 6
        marks.append(f'<circle cx="{LEFT + 6}" cy="{row - 4}" r="7" fill="{color}"/>'
                     f'<text x="{LEFT + 6}" y="{row}" font-size="10" fill="#fff" text-anchor="middle">{i + 1}</text>'
                     f'<text x="{LEFT + 20}" y="{row}" font-size="12">{text}</text>')
    axes = (f'<line x1="{LEFT}" y1="{HEIGHT - BOTTOM}" x2="{WIDTH - RIGHT}" y2="{HEIGHT - BOTTOM}" stroke="#888"/>'
            f'<line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{HEIGHT - BOTTOM}" stroke="#888"/>'
            f'<text x="{(LEFT + WIDTH) / 2:.0f}" y="{HEIGHT - 8}" font-size="12" text-anchor="middle">FLOP per byte (log)</text>'
            f'<text x="14" y="{(HEIGHT - BOTTOM) / 2:.0f}" font-size="12" text-anchor="middle" '
            f'transform="rotate(-90 14 {(HEIGHT - BOTTOM) / 2:.0f})">TFLOP/s (log)</text>'
            f'<text x="{x(ridge):.1f}" y="{y(peak) - 4:.1f}" font-size="11">peak {peak / 1e12:,.0f}</text>')
    total = HEIGHT + 20 * len(points) + 4
    return (f'<svg class="archcalc-chart" role="img" aria-label="roofline" xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" '
            f'height="{total}" viewBox="0 0 {WIDTH} {total}"><title>Roofline: where prefill and decode sit</title>'
            + axes + roof + "".join(marks) + "</svg>")
