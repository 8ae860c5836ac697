"""The model pages' plots: parameters and FLOPs against L and d, memory against the context, and the roofline
with a hardware and a batch selector. Every plotted figure is exact, from the backends the commands use
(``archcalc count``, ``flops``, ``memory``, ``infer``), computed when the page is built; only the drawing
coordinates are floats. The SVG drawn here is complete without scripts; ``assets/charts.js`` redraws the
roofline when a reader picks another accelerator or batch, from the figures the page carries.

>>> ticks(Fraction(1), Fraction(1000))
[Fraction(1, 1), Fraction(10, 1), Fraction(100, 1), Fraction(1000, 1)]
>>> [si(t) for t in ticks(Fraction(500), Fraction(3000))]
['500', '1K', '2K']
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from fractions import Fraction
from html import escape

import sympy

from archcalc.backends.count import CountResult
from archcalc.backends.flops import SEQ, FlopsResult, flops
from archcalc.backends.infer import infer
from archcalc.backends.infer.hardware import table
from archcalc.backends.memory import bytes_of, dtype_bytes, kv_cache_elements, state_elements
from archcalc.ir import lower
from archcalc.spec.bind import Binding
from archcalc.spec.expr import symbol as hyper

WIDTH, HEIGHT = 400, 280
BATCHES = (1, 8, 32, 128)  # the roofline's batch selector
MEMORY_BATCHES = (1, 32)  # the memory chart's two lines (32: the inference table's larger batch)
CHAR = 6.3  # px a character of the 11 px labels takes, about: enough to keep labels apart
BLUE, ORANGE, GREEN, GREY = "#3b6fb6", "#d9731a", "#3f8a46", "#666"


@dataclass(frozen=True)
class LogAxes:
    """Log-log axes: data ranges (exact) mapped to the plot area of a WIDTH-wide viewBox."""

    x: tuple[Fraction, Fraction]
    y: tuple[Fraction, Fraction]
    height: int = HEIGHT
    left: int = 58
    top: int = 14
    right: int = 14
    bottom: int = 42

    def px(self, v) -> float:
        return self.left + (WIDTH - self.left - self.right) * _frac(v, self.x)

    def py(self, v) -> float:
        return self.height - self.bottom - (self.height - self.bottom - self.top) * _frac(v, self.y)

    def geometry(self) -> list[float]:
        """What the script needs to place a point: the ranges and the plot area."""
        return [float(self.x[0]), float(self.x[1]), float(self.y[0]), float(self.y[1]),
                self.left, self.top, WIDTH - self.right, self.height - self.bottom]


def _frac(v, span) -> float:
    lo, hi = math.log10(span[0]), math.log10(span[1])
    return (math.log10(v) - lo) / (hi - lo)


def decade_span(values) -> tuple[Fraction, Fraction]:
    """The decades around the values: 10^⌊log10 min⌋ to 10^⌈log10 max⌉ (exact powers of ten)."""
    lo, hi = min(values), max(values)
    a, b = _floor_log10(Fraction(lo)), -_floor_log10(1 / Fraction(hi))
    b = b if b > a else a + 1
    return Fraction(10) ** a, Fraction(10) ** b


def nice_span(values) -> tuple[Fraction, Fraction]:
    """A tighter span for a range within few decades: down and up to 1, 2 or 5 times a power of ten.

    >>> nice_span([512, 1024])
    (Fraction(500, 1), Fraction(2000, 1))
    """
    lo, hi = Fraction(min(values)), Fraction(max(values))
    k0, k1 = _floor_log10(lo), _floor_log10(hi)
    down = max(m * Fraction(10) ** k0 for m in (1, 2, 5) if m * Fraction(10) ** k0 <= lo)
    up = min(m * Fraction(10) ** k for k in (k1, k1 + 1) for m in (1, 2, 5) if m * Fraction(10) ** k >= hi)
    return (down, up) if up > down else (down, 2 * down)


def _floor_log10(v: Fraction) -> int:
    """⌊log10 v⌋ exactly (a float log can land on the wrong side of a power of ten)."""
    k = len(str(v.numerator)) - len(str(v.denominator))
    while Fraction(10) ** k > v:
        k -= 1
    while Fraction(10) ** (k + 1) <= v:
        k += 1
    return k


def ticks(lo: Fraction, hi: Fraction) -> list[Fraction]:
    """The tick values in [lo, hi]: the powers of ten; where fewer than three fall inside, 1, 2 and 5 times them."""
    k0, k1 = _floor_log10(lo), _floor_log10(hi)
    decades = [Fraction(10) ** k for k in range(k0, k1 + 1) if lo <= Fraction(10) ** k <= hi]
    if len(decades) >= 3:
        return decades
    return [m * Fraction(10) ** k for k in range(k0, k1 + 1) for m in (1, 2, 5) if lo <= m * Fraction(10) ** k <= hi]


def si(v: Fraction) -> str:
    """A tick's label: 1K, 10M, 2B, 1T (10^3, 10^6, 10^9, 10^12, 10^15: P); below 1 as a decimal (0.1)."""
    for unit, scale in (("P", 10**15), ("T", 10**12), ("B", 10**9), ("M", 10**6), ("K", 10**3)):
        if v >= scale:
            return f"{_plain(v / scale)}{unit}"
    return _plain(v)


def _plain(v: Fraction) -> str:
    return f"{v.numerator // v.denominator:,}" if v.denominator == 1 else f"{float(v):g}"


def gb(v: Fraction) -> str:
    """A byte tick in decimal units (the hardware table's GB = 10^9 bytes)."""
    for unit, scale in (("TB", 10**12), ("GB", 10**9), ("MB", 10**6)):
        if v >= scale:
            return f"{_plain(v / scale)} {unit}"
    return f"{_plain(v)} B"


def frame(ax: LogAxes, xlabel: str, ylabel: str, xfmt=si, yfmt=si) -> str:
    """The grid, the tick labels at ``ticks`` and the two axis titles."""
    x0, x1, y0, y1 = ax.left, WIDTH - ax.right, ax.top, ax.height - ax.bottom
    out = [f'<rect x="{x0}" y="{y0}" width="{x1 - x0}" height="{y1 - y0}" fill="none" stroke="#999"/>']
    for t in ticks(*ax.x):
        x = ax.px(t)
        out.append(f'<line class="archcalc-grid" x1="{x:.1f}" y1="{y0}" x2="{x:.1f}" y2="{y1}" stroke="#000" stroke-opacity="0.12"/>'
                   f'<text class="archcalc-tick-x" x="{x:.1f}" y="{y1 + 14}" font-size="11" text-anchor="middle">{xfmt(t)}</text>')
    for t in ticks(*ax.y):
        y = ax.py(t)
        out.append(f'<line class="archcalc-grid" x1="{x0}" y1="{y:.1f}" x2="{x1}" y2="{y:.1f}" stroke="#000" stroke-opacity="0.12"/>'
                   f'<text class="archcalc-tick-y" x="{x0 - 4}" y="{y + 4:.1f}" font-size="11" text-anchor="end">{yfmt(t)}</text>')
    mid = (y0 + y1) / 2
    out.append(f'<text x="{(x0 + x1) / 2:.0f}" y="{ax.height - 8}" font-size="12" text-anchor="middle">{escape(xlabel)}</text>'
               f'<text x="13" y="{mid:.0f}" font-size="12" text-anchor="middle" transform="rotate(-90 13 {mid:.0f})">{escape(ylabel)}</text>')
    return "".join(out)


def svg_open(title: str, height: int, attrs: str = "") -> str:
    """An SVG that scales to its column (viewBox, width 100%): a 390 px phone shrinks it, never scrolls for it."""
    return (f'<svg class="archcalc-chart" role="img" aria-label="{escape(title)}" xmlns="http://www.w3.org/2000/svg" '
            f'viewBox="0 0 {WIDTH} {height}" width="100%" style="max-width:560px"{attrs}><title>{escape(title)}</title>')


def place(labels: list[tuple[float, float, str]], right: float) -> list[tuple[float, float, str]]:
    """Where each label (its point's x and y, its text) goes: right of its point (left of it near the right edge),
    moved down past every label placed before it that it would overlap. Returns (x, y, anchor); the script's
    ``place`` is the same rule, so a redrawn chart keeps its labels apart too."""
    boxes: list[tuple[float, float, float]] = []
    out = []
    for px, py, text in labels:
        w = CHAR * len(text)
        x, anchor = (px + 8, "start") if px + 8 + w <= right else (px - 8, "end")
        x0, y = (x if anchor == "start" else x - w), py + 4
        while any(abs(y - by) < 12 and x0 < b1 and b0 < x0 + w for b0, by, b1 in boxes):
            y += 12
        boxes.append((x0, y, x0 + w))
        out.append((x, y, anchor))
    return out


def exact(v: Fraction | int) -> int | str:
    """A figure for the page's data: an integer, or "numerator/denominator" (JSON has no exact fractions)."""
    v = Fraction(v)
    return v.numerator if v.denominator == 1 else f"{v.numerator}/{v.denominator}"


def figure(kind: str, data: dict | None, svg: str, caption: str) -> str:
    """One line of HTML (a raw block for Markdown): the chart, its caption and, for the script, its data."""
    attr = f' data-{kind}="{escape(json.dumps(data, separators=(",", ":")))}"' if data is not None else ""
    return (f'<div class="archcalc-plot"{attr}>{svg}<p class="archcalc-plot__caption">{caption}</p></div>')


# --- parameters and FLOPs against L and d ---------------------------------------------------------------------------

def scaling_section(results: list[CountResult], seq: int, seq_text: str, counted: list[FlopsResult] | None = None) -> list[str]:
    """Two charts: the parameter count and the training step's FLOPs per token as L varies, then as d varies
    (``counted``: each size's ``flops`` at ``seq``, shared with the page's FLOPs table)."""
    held = results[0]
    counted = counted or [flops(r.binding, seq, 1, counted=r) for r in results]  # once for both sweeps
    reduced = _in_l_and_d(held, counted[0], seq)
    sweeps = [scaling_data(results, seq, name, counted, reduced) for name in ("L", "d")]
    sweeps = [s for s in sweeps if s is not None]
    if not sweeps:
        return []
    out = ["## Scaling L and d", "",
           f"The count and the training step's matmul FLOPs per token (forward and backward, full S × S attention, as in "
           f"the FLOPs table; {seq_text}) as one hyperparameter varies, the others held at size {held.size}'s values "
           "(a default written in terms of it follows it: d_head = d / H). Each bundled size is marked at its own "
           "figures. Log axes; every point is `archcalc count` / `archcalc flops --set` exactly.", ""]
    for s in sweeps:
        out += [scaling_chart(s), ""]
    return out


def scaling_data(results: list[CountResult], seq: int, name: str, counted: list[FlopsResult] | None = None,
                 reduced: tuple | None = None) -> dict | None:
    """The sweep of hyperparameter ``name`` (None where the formula has no such symbol): the line's points
    ``(value, parameters, training FLOPs per token)`` at the held size, and each size's own (``counted``: each
    size's ``flops`` at ``seq``, ``reduced``: :func:`_in_l_and_d`'s, if the caller has them)."""
    held = results[0]
    symbol = hyper(name)
    if symbol not in held.formula.free_symbols:
        return None
    counted = counted or [flops(r.binding, seq, 1, counted=r) for r in results]
    params_at, train_at, follows_at = reduced or _in_l_and_d(held, counted[0], seq)
    line = []
    for v in sweep_values(held.binding.values[name], [r.binding.values[name] for r in results]):
        at = tuple(v if x == name else held.binding.values[x] for x in ("L", "d"))
        params, train = params_at(at), train_at(at)
        # a default that follows (d_head = d / H) must come out whole, as `--set` demands; and the count positive
        whole = all(f(at) is not None and f(at).denominator == 1 for f in follows_at)
        if whole and params is not None and params.denominator == 1 and params > 0 and train is not None and train > 0:
            line.append((v, params.numerator, train))
    sizes = [(r.size, r.binding.values[name], r.total, Fraction(f.train_step_matmul, seq)) for r, f in zip(results, counted)]
    return {"name": name, "held": held.size, "line": line, "sizes": sizes}


def _in_l_and_d(held: CountResult, counted: FlopsResult, seq: int):
    """Evaluators (:func:`evaluator`) of the count, the training FLOPs per token and the defaults that follow L or d
    (d_head = d / H), every other value substituted: the sweeps' points then evaluate small expressions (the full formulas, substituted point
    by point, took a fifth of the site's build); the L and the d sweep share them."""
    fixed = {k: v for k, v in held.binding.numeric().items() if str(k) not in ("L", "d")}
    fixed[SEQ] = sympy.Integer(seq)
    xs = (hyper("L"), hyper("d"))
    follows = [e.xreplace(fixed) for e in held.binding.substitutions.values()]
    train = sympy.expand(counted.forward_sum.xreplace(fixed))  # expanded once the others are numbers: far smaller
    return (evaluator(held.formula.xreplace(fixed), xs), evaluator(3 * train / seq, xs),
            [evaluator(e, xs) for e in follows if e.free_symbols & set(xs)])


def evaluator(expr: sympy.Expr, xs: tuple[sympy.Symbol, ...]):
    """``values -> expr at xs = values`` as an exact Fraction (None where it is not a number): a sum over the terms of
    a polynomial in xs with Fraction coefficients, else sympy's substitution (about a millisecond a point: a hundred
    times the sum's).

    >>> from archcalc.spec.expr import symbol
    >>> L, d = symbol("L"), symbol("d")
    >>> evaluator(3 * L * d**2 + L / 2, (L, d))((4, 2)), evaluator(sympy.floor(L / 3), (L, d))((7, 1))
    (Fraction(50, 1), Fraction(2, 1))
    """
    # the polynomial terms summed in Python; the rest (floor(L / 8)·…, Min(…)) substituted: usually a few terms
    terms = sympy.Add.make_args(expr)
    poly = sympy.Add(*(t for t in terms if t.is_polynomial(*xs)))
    rest = sympy.Add(*(t for t in terms if not t.is_polynomial(*xs)))
    coeffs = sympy.Poly(poly, *xs).terms() if poly.free_symbols else [((0,) * len(xs), poly)]
    if not all(c.is_Rational for _, c in coeffs):  # a symbol left over: substitute the whole
        coeffs, rest = [], expr
    exact_terms = [(powers, Fraction(int(c.p), int(c.q))) for powers, c in coeffs]

    def at(values) -> Fraction | None:
        total = sum((c * math.prod(v**k for v, k in zip(values, powers)) for powers, c in exact_terms), Fraction(0))
        if rest == 0:
            return total
        out = rest.xreplace({x: sympy.Integer(v) for x, v in zip(xs, values)})
        return total + Fraction(int(out.p), int(out.q)) if out.is_Rational else None
    return at


def sweep_values(held: int, mine: list[int]) -> list[int]:
    """The held size's value times 2^k and 1.5·2^k (rounded), from half the smallest size's value to twice the
    largest's, and the sizes' own: scaled by powers of two, a width keeps its divisors (d / H stays whole).

    >>> sweep_values(768, [768, 1600])
    [384, 576, 768, 1152, 1536, 1600, 2304, 3072]
    """
    lo, hi = Fraction(min(mine), 2), 2 * max(mine)
    scaled = {round(held * m * Fraction(2) ** k) for k in range(-12, 13) for m in (1, Fraction(3, 2))}
    return sorted({v for v in scaled if lo <= v <= hi and v >= 1} | set(mine))


def scaling_chart(s: dict) -> str:
    """Parameters (solid, circles) and FLOPs per token (dashed, squares) against L or d, sizes labelled."""
    name = s["name"]
    xs = [v for v, _, _ in s["line"]] + [v for _, v, _, _ in s["sizes"]]
    ys = [p for _, p, _ in s["line"]] + [t for _, _, t in s["line"]] + [p for _, _, p, _ in s["sizes"]] + [t for *_, t in s["sizes"]]
    ax = LogAxes(nice_span(xs), nice_span(ys), height=HEIGHT + 18, top=32)
    what = "blocks L" if name == "L" else "width d"
    title = f"Parameters and training FLOPs per token against {what} (size {s['held']}'s other values)"
    out = [svg_open(title, ax.height), frame(ax, f"{what} (log)", "parameters · FLOPs a token (log)", si, si), _legend(ax)]
    for series, color, dash in ((1, BLUE, ""), (2, ORANGE, ' stroke-dasharray="5 3"')):
        pts = " ".join(f"{ax.px(p[0]):.1f},{ax.py(p[series]):.1f}" for p in s["line"])
        out.append(f'<polyline fill="none" stroke="{color}" stroke-width="2"{dash} points="{pts}"/>')
    labels = []
    for size, v, params, train in s["sizes"]:
        x, yp, yt = ax.px(v), ax.py(params), ax.py(train)
        out.append(f'<circle cx="{x:.1f}" cy="{yp:.1f}" r="4" fill="{BLUE}"><title>{escape(size)}: {name} = {v:,}, '
                   f'{params:,} parameters</title></circle>'
                   f'<rect x="{x - 3.5:.1f}" y="{yt - 3.5:.1f}" width="7" height="7" fill="{ORANGE}"><title>{escape(size)}: '
                   f'{name} = {v:,}, {_flop(train)} training FLOPs a token</title></rect>')
        labels.append((x, yp, size))
    for (x, y, anchor), (_, _, text) in zip(place(sorted(labels, key=lambda t: t[1]), WIDTH - ax.right), sorted(labels, key=lambda t: t[1])):
        out.append(f'<text x="{x:.1f}" y="{y:.1f}" font-size="11" text-anchor="{anchor}">{escape(text)}</text>')
    out.append("</svg>")
    caption = (f"Solid: parameters; dashed: training FLOPs per token; marks: the bundled sizes at their own {name}. "
               f"Line: {name} from {s['line'][0][0]:,} to {s['line'][-1][0]:,}, size {escape(s['held'])}'s other values.")
    return figure("scaling", None, "".join(out), caption)


def _legend(ax: LogAxes) -> str:
    y = 14
    return (f'<line x1="{ax.left}" y1="{y}" x2="{ax.left + 22}" y2="{y}" stroke="{BLUE}" stroke-width="2"/>'
            f'<text x="{ax.left + 27}" y="{y + 4}" font-size="11">parameters</text>'
            f'<line x1="{ax.left + 110}" y1="{y}" x2="{ax.left + 132}" y2="{y}" stroke="{ORANGE}" stroke-width="2" stroke-dasharray="5 3"/>'
            f'<text x="{ax.left + 137}" y="{y + 4}" font-size="11">training FLOPs a token</text>')


def _flop(v: Fraction) -> str:
    return f"{v.numerator:,}" if v.denominator == 1 else f"{float(v):,.1f}"


# --- memory against the sequence length -----------------------------------------------------------------------------

def context_of_size(binding: Binding, context: int | None, default: int) -> int:
    """The context the memory chart runs to: the position table's, else the size's ``max_position_embeddings``
    (its config.json, or the hyperparameter), else the page's default."""
    hf = binding.spec.sizes[binding.size].hf if binding.size in binding.spec.sizes else {}
    for v in (context, hf.get("max_position_embeddings"), binding.values.get("max_position_embeddings")):
        if isinstance(v, int) and not isinstance(v, bool) and v > 0:
            return v
    return default


def memory_points(binding: Binding, total: int, context: int, batch: int) -> list[tuple[int, int]]:
    """(tokens, bytes) from 512 tokens to the context: bf16 weights + KV cache + recurrent state for ``batch``
    sequences, what ``archcalc memory --seq-len S --batch B`` gives as weights_bytes + kv_cache_bytes +
    recurrent_state_bytes (one GPU: no parallelism)."""
    lowered, width = lower(binding), dtype_bytes("bfloat16")
    weights = bytes_of(total, width)
    state = bytes_of(batch * sum(n * e for _, n, e in state_elements(lowered)), width)
    seqs = sorted({2**k for k in range(9, 40) if 2**k < context} | {context})
    return [(s, weights + bytes_of(kv_cache_elements(lowered.root, binding, s, batch), width) + state) for s in seqs]


def memory_chart(first: CountResult, context: int) -> list[str]:
    """The memory chart's lines for the page (decoders: the KV cache is generation's)."""
    if first.binding.spec.model.architecture != "decoder" or context <= 512:
        return []
    lines = {b: memory_points(first.binding, first.total, context, b) for b in MEMORY_BATCHES}
    h100 = table()["h100-sxm"]
    ys = [y for pts in lines.values() for _, y in pts] + [h100.memory]
    ax = LogAxes(nice_span([512, context]), nice_span(ys), height=HEIGHT + 18, top=32)
    title = f"Memory of size {first.size} against the sequence length: bf16 weights + KV cache, batch 1 and 32"
    out = [svg_open(title, ax.height), frame(ax, "tokens a sequence (log)", "bytes, one GPU (log)", si, gb)]
    cap = ax.py(h100.memory)
    out.append(f'<line x1="{ax.left}" y1="{cap:.1f}" x2="{WIDTH - ax.right}" y2="{cap:.1f}" stroke="{GREY}" stroke-dasharray="2 3"/>'
               f'<text x="{ax.left + 4}" y="{cap + 13:.1f}" font-size="11">H100: {h100.memory // 10**9} GB</text>')
    for i, (batch, pts) in enumerate(lines.items()):
        color, dash = (BLUE, "") if i == 0 else (ORANGE, ' stroke-dasharray="5 3"')
        out.append(f'<polyline fill="none" stroke="{color}" stroke-width="2"{dash} points="'
                   + " ".join(f"{ax.px(s):.1f},{ax.py(b):.1f}" for s, b in pts) + '"/>')
        out += [f'<circle cx="{ax.px(s):.1f}" cy="{ax.py(b):.1f}" r="2.5" fill="{color}"><title>batch {batch}, '
                f'{s:,} tokens: {b:,} bytes</title></circle>' for s, b in pts]
        x = ax.left + 8 + 150 * i
        out.append(f'<line x1="{x}" y1="14" x2="{x + 22}" y2="14" stroke="{color}" stroke-width="2"{dash}/>'
                   f'<text x="{x + 27}" y="18" font-size="11">batch {batch}</text>')
    out.append("</svg>")
    state = " + recurrent state" if state_elements(lower(first.binding)) else ""
    caption = (f"bf16 weights + KV cache{state} of size {escape(first.size)} on one GPU, from 512 tokens to the context "
               f"({context:,}): <code>archcalc memory {first.binding.spec.name} --size {first.size} --seq-len S --batch B</code> "
               "exactly (hover a point for its bytes). Dotted: an H100's memory.")
    return ["Memory against the sequence length:", "", figure("memory", None, "".join(out), caption), ""]


# --- the roofline -----------------------------------------------------------------------------------------------------

def roofline_data(binding: Binding, prompt: int, new_tokens: int, default: str, known: dict | None = None) -> dict:
    """What the roofline draws, exact: each batch's prefill and decode FLOPs and bytes (``archcalc infer`` on one GPU:
    the intensity does not depend on the split) and each accelerator's bf16 peak and bandwidth. ``known``: runs the
    caller has already (batch: result, at any tensor-parallel degree), not counted twice: infer's time is most of
    the chart's build."""
    batches = {}
    for b in BATCHES:
        r = (known or {}).get(b) or infer(binding, default, b, prompt, new_tokens)
        # infer gives the prefill per GPU (its FLOPs and bytes split tp ways) and the decode steps whole: one GPU's
        # figures are the prefill's times tp
        batches[str(b)] = {"prefill": [exact(r.prefill.flops * r.tp), exact(r.prefill.bytes * r.tp)],
                           "decode": [exact(r.decode.flops), exact(r.decode.bytes)]}
    hardware = {key: {"name": hw.name, "peak": hw.peaks["bfloat16"], "bandwidth": hw.bandwidth}
                for key, hw in table().items() if key == hw.key and "bfloat16" in hw.peaks}
    return {"default": [default, str(BATCHES[0])], "batches": batches, "hardware": hardware}


def _intensity(pair) -> Fraction:
    f, b = (Fraction(v) for v in pair)
    return f / b


def attainable(hw: dict, intensity: Fraction) -> Fraction:
    """The roof at an intensity: min(peak, bandwidth × FLOP/byte), FLOP/s."""
    return min(Fraction(hw["peak"]), hw["bandwidth"] * intensity)


def roofline(binding: Binding, prompt: int, new_tokens: int, default: str, known: dict | None = None) -> str:
    """The roofline chart (log-log, fixed axes for every accelerator and batch) drawn for the default accelerator
    and batch 1, with the data the selectors redraw it from."""
    data = roofline_data(binding, prompt, new_tokens, default, known)
    points = [_intensity(p) for b in data["batches"].values() for p in b.values()]
    ridges = [Fraction(h["peak"], h["bandwidth"]) for h in data["hardware"].values()]
    lows = [attainable(h, min(points)) for h in data["hardware"].values()]
    peaks = [Fraction(h["peak"]) for h in data["hardware"].values()]
    # a margin of at least 2× around every point and roof, so none sits on the frame
    ax = LogAxes(decade_span([min(points) / 2, 2 * max(points + ridges)]), decade_span([min(lows) / 2, 2 * max(peaks)]),
                 height=HEIGHT + 10)
    data["axes"] = ax.geometry()
    hw, batch = data["hardware"][default], data["batches"][data["default"][1]]
    title = "Roofline: where prefill and decode sit, arithmetic intensity against attainable TFLOP/s"
    tflops = lambda v: si(v / 10**12)  # noqa: E731
    out = [svg_open(title, ax.height), frame(ax, "arithmetic intensity (FLOP/byte)", "TFLOP/s", si, tflops),
           _roof(ax, hw), _points(ax, hw, batch), "</svg>"]
    controls = _controls(data)
    return figure("roofline", data, controls + "".join(out), roof_caption(hw, data["default"][1], batch))


def _roof(ax: LogAxes, hw: dict) -> str:
    ridge = Fraction(hw["peak"], hw["bandwidth"])
    start = max(ax.x[0], ax.y[0] / hw["bandwidth"])
    pts = f"{ax.px(start):.1f},{ax.py(start * hw['bandwidth']):.1f} {ax.px(ridge):.1f},{ax.py(hw['peak']):.1f} " \
          f"{ax.px(ax.x[1]):.1f},{ax.py(hw['peak']):.1f}"
    return (f'<polyline data-roof fill="none" stroke="{BLUE}" stroke-width="2" points="{pts}">'
            "<title>roof: min(peak, bandwidth × FLOP/byte)</title></polyline>")


def _points(ax: LogAxes, hw: dict, batch: dict) -> str:
    out, labels = [], []
    for phase, color in (("decode", GREEN), ("prefill", ORANGE)):
        i = _intensity(batch[phase])
        x, y = ax.px(i), ax.py(attainable(hw, i))
        out.append(f'<circle data-point="{phase}" cx="{x:.1f}" cy="{y:.1f}" r="5" fill="{color}"/>')
        labels.append((x, y, phase))
    for (x, y, anchor), (_, _, phase) in zip(place(labels, WIDTH - ax.right), labels):
        out.append(f'<text data-label="{phase}" x="{x:.1f}" y="{y:.1f}" font-size="11" text-anchor="{anchor}">{phase}</text>')
    return "".join(out)


def roof_caption(hw: dict, batch: str, figures: dict) -> str:
    """The sentence under the roofline (the script writes the same one, with the same rounding)."""
    parts = []
    for phase in ("prefill", "decode"):
        i = _intensity(figures[phase])
        bound = "compute" if i * hw["bandwidth"] >= hw["peak"] else "memory"
        parts.append(f"{phase} {_one(i)} FLOP/byte, at most {_one(attainable(hw, i) / 10**12)} TFLOP/s ({bound}-bound)")
    return (f"{escape(hw['name'])} ({_two(Fraction(hw['peak'], 10**12))} TFLOP/s bf16, "
            f"{_two(Fraction(hw['bandwidth'], 10**12))} TB/s), batch {batch}: " + "; ".join(parts) + ".")


def _one(v: Fraction) -> str:
    """One decimal, thousands separated, as the script's toLocaleString writes it (half away from zero on exact ties
    is not a concern at this precision: the figure is a label)."""
    return f"{float(v):,.1f}"


def _two(v: Fraction) -> str:
    """A datasheet figure as the table gives it (3.35, 989.4, 2,250): at most two decimals."""
    return f"{float(v):,.2f}".rstrip("0").rstrip(".")


def _controls(data: dict) -> str:
    """The two selectors, hidden until the script runs (without it they would do nothing)."""
    hw = "".join(f'<option value="{k}"{" selected" if k == data["default"][0] else ""}>{escape(h["name"])}</option>'
                 for k, h in data["hardware"].items())
    batches = "".join(f'<option value="{b}"{" selected" if b == data["default"][1] else ""}>{b}</option>' for b in data["batches"])
    return (f'<div class="archcalc-plot__controls" hidden><label>accelerator <select data-select="hardware">{hw}</select></label> '
            f'<label>batch <select data-select="batch">{batches}</select></label></div>')
