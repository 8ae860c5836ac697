"""Charts as inline SVG, drawn at build time: the site needs no JavaScript to show them.

>>> svg = pie_chart([("mlp", 3), ("attention", 1)], "demo")
>>> svg.startswith("<svg") and svg.count("<path") == 2
True
"""

from __future__ import annotations

import math
from html import escape

COLORS = ["#3b6fb6", "#e3872d", "#4c9a52", "#c9423f", "#8a63b8", "#8c6d4f", "#d46fae", "#7f7f7f"]


def pie_chart(parts: list[tuple[str, int]], title: str, size: int = 180) -> str:
    """A pie of ``parts`` (label, value) above a legend giving each value and share (360 px wide: fits a phone)."""
    total = sum(v for _, v in parts) or 1
    width = 360
    r, cx, cy = size / 2 - 4, width / 2, size / 2
    shapes, legend, angle = [], [], -math.pi / 2
    for i, (label, value) in enumerate(parts):
        color = COLORS[i % len(COLORS)]
        sweep = 2 * math.pi * value / total
        if value and sweep >= 2 * math.pi - 1e-9:
            shapes.append(f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="{r:.1f}" fill="{color}"><title>{escape(label)}</title></circle>')
        elif value:
            x0, y0 = cx + r * math.cos(angle), cy + r * math.sin(angle)
            x1, y1 = cx + r * math.cos(angle + sweep), cy + r * math.sin(angle + sweep)
            large = 1 if sweep > math.pi else 0
            shapes.append(f'<path d="M{cx:.1f},{cy:.1f} L{x0:.2f},{y0:.2f} A{r:.1f},{r:.1f} 0 {large} 1 {x1:.2f},{y1:.2f} Z" '
                          f'fill="{color}" stroke="#fff" stroke-width="1"><title>{escape(label)}: {value:,}</title></path>')
        angle += sweep
        y = size + 22 + 21 * i
        legend.append(f'<rect x="60" y="{y - 11}" width="12" height="12" fill="{color}"/>'
                      f'<text x="78" y="{y}" font-size="13">{escape(label)}: {_short(value)} ({100 * value / total:.1f}%)</text>')
    height = size + 14 + 21 * len(parts)
    return (f'<svg class="archcalc-chart" role="img" aria-label="{escape(title)}" xmlns="http://www.w3.org/2000/svg" '
            f'width="{width}" height="{height}" viewBox="0 0 {width} {height}"><title>{escape(title)}</title>'
            + "".join(shapes) + "".join(legend) + "</svg>")


def stacked_bars(rows: list[tuple[str, list[tuple[str, int]]]], title: str, width: int = 360) -> str:
    """Horizontal 100% bars, one per row (label, [(part, value)]), under a shared legend (fits a phone)."""
    names = [name for name, _ in rows[0][1]] if rows else []
    per_row = 3
    bar_h, gap, left = 20, 7, 58
    top = 14 + 20 * ((len(names) + per_row - 1) // per_row)
    height = top + len(rows) * (bar_h + gap) + 6
    out = [f'<svg class="archcalc-chart" role="img" aria-label="{escape(title)}" xmlns="http://www.w3.org/2000/svg" '
           f'width="{width}" height="{height}" viewBox="0 0 {width} {height}"><title>{escape(title)}</title>']
    for i, name in enumerate(names):
        x, y = left + (i % per_row) * 100, 6 + 20 * (i // per_row)
        out.append(f'<rect x="{x}" y="{y}" width="12" height="12" fill="{COLORS[i % len(COLORS)]}"/>'
                   f'<text x="{x + 16}" y="{y + 10}" font-size="12">{escape(name)}</text>')
    span = width - left - 6
    for j, (label, parts) in enumerate(rows):
        y = top + j * (bar_h + gap)
        total = sum(v for _, v in parts) or 1
        x = float(left)
        out.append(f'<text x="{left - 5}" y="{y + 14}" font-size="12" text-anchor="end">{escape(label)}</text>')
        for i, (name, value) in enumerate(parts):
            w = span * value / total
            out.append(f'<rect x="{x:.2f}" y="{y}" width="{w:.2f}" height="{bar_h}" fill="{COLORS[i % len(COLORS)]}">'
                       f'<title>{escape(label)} {escape(name)}: {value:,} ({100 * value / total:.1f}%)</title></rect>')
            x += w
    out.append("</svg>")
    return "".join(out)


def _short(n: int) -> str:
    for unit, scale in (("T", 10**12), ("B", 10**9), ("M", 10**6), ("K", 10**3)):
        if n >= scale:
            return f"{n / scale:.1f}{unit}"
    return str(n)
