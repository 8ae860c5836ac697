"""The architecture of a model as an SVG block diagram, drawn from the IR of one size.

Top to bottom: the embeddings, each stack of blocks in a frame marked with its repeat count (its
norms, attention and MLP or mixture of experts in the order the residual arrangement runs them,
with the residual paths to each ⊕), the final norm, and the head. Every box gives the parameters of
one copy; a frame gives the stack's total. Labels name the spec's symbols, so the legend beside the
diagram (``symbols_legend``) explains every letter.

>>> from archcalc.spec import load_spec
>>> from archcalc.spec.bind import bind
>>> from archcalc.ir import lower
>>> svg = architecture_svg(lower(bind(load_spec("gpt2"), "small")))
>>> svg.startswith("<svg") and "blocks × L = 12" in svg and "85,054,464 parameters in all" in svg
True
"""

from __future__ import annotations

from dataclasses import dataclass, field
from html import escape

import sympy

from archcalc.backends.count import pretty
from archcalc.ir import Component, Lowered, leaves
from archcalc.ir.attrs import (
    MLP,
    Attention,
    Block,
    Embeddings,
    GatedDeltaNet,
    Head,
    LatentAttention,
    LayerNorm,
    Mamba,
    Mamba2,
    MoE,
    Norm,
    Pooler,
    RelativeBias,
    RMSNorm,
    ShortConv,
    StateMixer,
    Table,
    Tower,
)

WIDTH, LEFT, RIGHT, RAIL = 360, 40, 350, 20
CENTER = (LEFT + RIGHT) / 2
COLORS = {"embed": "#e8eef9", "norm": "#f3f3f3", "attention": "#fdebd3", "mlp": "#e3f1e4", "head": "#f7e1e0", "other": "#ece6f4"}
NORM_NAMES = {LayerNorm: "LayerNorm", RMSNorm: "RMSNorm"}


@dataclass
class Box:
    title: str
    lines: list[str] = field(default_factory=list)
    count: int | None = None
    color: str = "other"
    dashed: bool = False


@dataclass
class _Canvas:
    numeric: dict
    parts: list[str] = field(default_factory=list)
    y: float = 12.0
    encoder_out: float | None = None  # where an encoder's output leaves (its last box), for cross-attention's edge

    def value(self, e: sympy.Expr) -> int:
        return int(e.xreplace(self.numeric))

    def params(self, c: Component, per_copy: bool = False) -> int:
        total = sum(int(leaf.count.xreplace(self.numeric)) for leaf in leaves(c))
        return total // self.value(c.repeat) if per_copy else total

    def sv(self, e: sympy.Expr) -> str:
        """A symbol with its value at this size: ``d_head = 64`` (a plain number stays a number)."""
        text, value = pretty(e), self.value(e)
        return f"{value:,}" if text == str(value) else f"{text} = {value:,}"

    def dims(self, rows: sympy.Expr, cols: sympy.Expr) -> str:
        """``V × d = 50,257 × 768``."""
        return f"{pretty(rows)} × {pretty(cols)} = {self.value(rows):,} × {self.value(cols):,}"

    def link(self, gap: float = 12) -> None:
        self.parts.append(f'<line x1="{CENTER}" y1="{self.y}" x2="{CENTER}" y2="{self.y + gap}" class="a-flow"/>')
        self.y += gap

    def box(self, b: Box, x0: float = LEFT, x1: float = RIGHT) -> tuple[float, float]:
        lines = [b.title, *b.lines] + ([f"{b.count:,} parameters" if b.count else "no parameters of its own"] if b.count is not None else [])
        height = 8 + 15 * len(lines)
        dash = ' stroke-dasharray="4 3"' if b.dashed else ""
        self.parts.append(f'<rect x="{x0}" y="{self.y}" width="{x1 - x0}" height="{height}" rx="5" fill="{COLORS[b.color]}" '
                          f'class="a-box"{dash}/>')
        for i, text in enumerate(lines):
            weight = ' font-weight="bold"' if i == 0 else ""
            self.parts.append(f'<text x="{(x0 + x1) / 2}" y="{self.y + 17 + 15 * i}" text-anchor="middle"{weight}>{escape(text)}</text>')
        top = self.y
        self.y += height
        return top, self.y

    def cross_edge(self, y: float) -> None:
        """The encoder's output, from its last box down the right margin into a cross-attention box at height ``y``:
        its keys and values."""
        edge = WIDTH - 3
        self.parts.append(f'<path d="M{RIGHT},{self.encoder_out} H{edge} V{y} H{RIGHT + 6}" class="a-cross"/>'
                          f'<path d="M{RIGHT},{y} l7,-4 v8 z" class="a-arrow"/>')

    def add(self, branch: float) -> None:
        """A ⊕ joining the residual stream that left the main line at ``branch``."""
        self.link(8)
        cy = self.y + 9
        self.parts.append(f'<path d="M{CENTER},{branch} H{RAIL} V{cy} H{CENTER - 9}" class="a-skip"/>'
                          f'<circle cx="{CENTER}" cy="{cy}" r="9" class="a-add"/>'
                          f'<text x="{CENTER}" y="{cy + 4.5}" text-anchor="middle" font-size="14">+</text>')
        self.y += 18


def architecture_svg(lowered: Lowered) -> str:
    """The block diagram of ``lowered`` (one bound size) as inline SVG."""
    canvas = _Canvas(lowered.binding.numeric())
    root = lowered.root
    for child in root.children:
        if isinstance(child.attrs, Block) and root.attrs.layer_order and child is next(
                c for c in root.children if isinstance(c.attrs, Block)):
            canvas.link()
            canvas.box(_order_box(root.attrs.layer_order))
        _component(canvas, child, root)
    height = canvas.y + 10
    title = f"Architecture of {lowered.binding.spec.title or lowered.binding.spec.name}, size {lowered.binding.size}"
    return (f'<svg class="archcalc-diagram" role="img" aria-label="{escape(title)}" xmlns="http://www.w3.org/2000/svg" '
            f'width="{WIDTH}" height="{height:.0f}" viewBox="0 0 {WIDTH} {height:.0f}" font-size="12.5"><title>{escape(title)}</title>'
            + "".join(canvas.parts) + "</svg>")


def _component(canvas: _Canvas, c: Component, root: Component) -> None:
    a = c.attrs
    if isinstance(a, Tower) and canvas.encoder_out is not None:
        canvas.y += 12  # the decoder reads its own tokens' embeddings, not the encoder's output: no line between
    elif canvas.y > 12:
        canvas.link()
    if isinstance(a, Embeddings):
        canvas.box(_embedding_box(canvas, c))
    elif isinstance(a, Block):
        _stack(canvas, c)
    elif isinstance(a, Tower):
        canvas.box(Box(f"{c.name.capitalize()} ({'causal' if a.causal else 'bidirectional'})", color="other"))
        for kid in c.children:
            _component(canvas, kid, root)
        if not a.causal:
            canvas.encoder_out = canvas.y - 12
    elif isinstance(a, Norm):
        canvas.box(_norm_box(canvas, c, "final norm" if c.name == "final_norm" else c.name))
    elif isinstance(a, RelativeBias):
        w = c.tensors[0].shape
        canvas.box(Box("Relative position bias", [f"{canvas.dims(w[0], w[1])} (buckets × heads)", "one table for all layers"],
                       canvas.params(c), "embed"))
    elif isinstance(a, Pooler):
        canvas.box(Box("Pooler", ["dense d × d and tanh, on the first token"], canvas.params(c), "other"))
    elif isinstance(a, Head):
        canvas.box(_head_box(canvas, c, root))


def _embedding_box(canvas: _Canvas, c: Component) -> Box:
    lines = []
    for kid in c.children:
        if isinstance(kid.attrs, Table):
            rows, cols = kid.tensors[0].shape
            what = {"token": "tokens", "position": "positions", "token_type": "token types"}.get(kid.name, kid.name)
            lines.append(f"{what}: {canvas.dims(rows, cols)}")
        elif isinstance(kid.attrs, Norm):
            lines.append(f"then a {NORM_NAMES[type(kid.attrs)]}")
    position = c.attrs.position
    if position in ("rotary", "sinusoidal"):
        lines.append(f"{position} positions (computed, no parameters)")
    elif position == "alibi":
        lines.append("ALiBi: a linear bias on the scores (no parameters)")
    return Box("Embedding", lines, canvas.params(c), "embed")


def _norm_box(canvas: _Canvas, c: Component, label: str) -> Box:
    return Box(f"{NORM_NAMES[type(c.attrs)]}{f' ({label})' if label else ''} · {canvas.params(c):,}", color="norm")


def _head_box(canvas: _Canvas, c: Component, root: Component) -> Box:
    weight = c.tensors[0]
    rows, cols = weight.shape
    if weight.tied_to:
        return Box("LM head", [canvas.dims(rows, cols), "tied: it is the token embedding"], 0, "head", dashed=True)
    return Box("LM head", [canvas.dims(rows, cols) + (" and a bias" if len(c.tensors) > 1 else "")], canvas.params(c), "head")


def _stack(canvas: _Canvas, block: Component) -> None:
    """A stack of blocks: a frame, and inside it one block in its residual order."""
    top = canvas.y
    repeat = canvas.value(block.repeat)
    canvas.parts.append("")  # the frame goes here, behind the boxes, once its height is known
    frame_at = len(canvas.parts) - 1
    canvas.y += 36
    kids = {k.name: k for k in block.children}
    residual = block.attrs.residual
    sublayers = [("mixer", "mixer_norm", None), ("attn", "attn_norm", "attn_post_norm"), ("cross_attn", "cross_norm", None),
                 ("mlp", "mlp_norm", "mlp_post_norm")]
    sublayers = [s for s in sublayers if s[0] in kids]  # a state-mixer layer, or an MLP alone, has only some
    canvas.link(8)
    if residual == "parallel":
        branch = canvas.y
        for name in ("norm", "attn_norm"):
            if name in kids:
                canvas.box(_norm_box(canvas, kids[name], "shared" if name == "norm" else ""))
                canvas.link(8)
        start, ends = canvas.y, []
        for part, (x0, x1) in zip((kids["attn"], kids["mlp"]), ((LEFT, CENTER - 4), (CENTER + 4, RIGHT))):
            canvas.y = start
            ends.append(canvas.box(_layer_box(canvas, part, short=True), x0, x1)[1])
        canvas.y = max(ends)
        canvas.add(branch)
    else:
        for layer, pre, post in sublayers:
            branch = canvas.y
            if residual in ("pre-norm", "sandwich") and pre in kids:
                canvas.box(_norm_box(canvas, kids[pre], ""))
                canvas.link(8)
            box_top, box_bottom = canvas.box(_layer_box(canvas, kids[layer]))
            if layer == "cross_attn" and canvas.encoder_out is not None:
                canvas.cross_edge((box_top + box_bottom) / 2)
            if residual in ("sandwich", "reordered") and post and post in kids:
                canvas.link(8)
                canvas.box(_norm_box(canvas, kids[post], "after"))
            canvas.add(branch)
            if residual == "post-norm" and pre in kids:
                canvas.link(8)
                canvas.box(_norm_box(canvas, kids[pre], "after the sum"))
            if layer != sublayers[-1][0]:
                canvas.link(8)
    canvas.y += 8
    times = _sym(block.repeat) if block.repeat.is_Atom else f"({_sym(block.repeat)})"
    label = f"{block.name} × {times}" + (f" = {repeat:,}" if times != str(repeat) else "")
    canvas.parts[frame_at] = (f'<rect x="{RAIL - 12}" y="{top}" width="{RIGHT + 6 - RAIL + 12}" height="{canvas.y - top}" rx="7" '
                              f'class="a-frame"/><text x="{RAIL - 4}" y="{top + 15}" font-weight="bold">{escape(label)}</text>'
                              f'<text x="{RAIL - 4}" y="{top + 30}">{canvas.params(block):,} parameters in all</text>')


def _layer_box(canvas: _Canvas, c: Component, short: bool = False) -> Box:
    a = c.attrs
    if isinstance(a, Attention):
        return _attention_box(canvas, c, a, short)
    if isinstance(a, StateMixer):
        return _mixer_box(canvas, c, a)
    if isinstance(a, MoE):
        lines = [f"{canvas.sv(a.experts)} experts, {canvas.sv(a.top_k)} per token", f"{a.activation}, hidden {canvas.sv(a.hidden)}"]
        shared = next((k for k in c.children if k.name == "shared"), None)
        if shared is not None:
            lines.append(f"+ shared, hidden {canvas.sv(shared.attrs.hidden)}")
        return Box("Mixture of experts", lines, canvas.params(c), "mlp")
    assert isinstance(a, MLP)
    kind = "Gated MLP" if a.gated else "MLP"
    if short:
        return Box(kind, [f"{a.activation}, {canvas.value(a.hidden):,}"], canvas.params(c), "mlp")
    return Box(kind, [f"{a.activation}, hidden {canvas.sv(a.hidden)}"], canvas.params(c), "mlp")


def _mixer_box(canvas: _Canvas, c: Component, a: StateMixer) -> Box:
    """A state mixer: its kind, its widths, and the fixed-size state it keeps instead of a KV cache."""
    if isinstance(a, GatedDeltaNet):
        lines = [f"{canvas.sv(a.heads)} value heads × {canvas.sv(a.value_width)}, "
                 f"{canvas.sv(a.key_heads)} key heads × {canvas.sv(a.key_width)}"]
    elif isinstance(a, ShortConv):
        lines = [f"gates B, C on {canvas.sv(a.width)} channels"]
    elif isinstance(a, Mamba2):
        lines = [f"inner {canvas.sv(a.inner)}", f"{canvas.sv(a.heads)} heads, state {canvas.sv(a.state)}"]
    else:
        assert isinstance(a, Mamba)
        lines = [f"inner {canvas.sv(a.inner)}, state {canvas.sv(a.state)}"]
    lines.append(f"conv {canvas.sv(a.conv)} taps; state {canvas.value(a.state_elements):,} per sequence")
    return Box(a.label[0].upper() + a.label[1:], lines, canvas.params(c), "attention")


def _order_box(order: tuple[str, ...]) -> Box:
    """The cycle of stacks the layers follow (``layer_order``), runs of one stack counted."""
    runs: list[list] = []
    for name in order:
        if runs and runs[-1][0] == name:
            runs[-1][1] += 1
        else:
            runs.append([name, 1])
    text = ", ".join(f"{n} × {name}" if n > 1 else name for name, n in runs)
    lines = [text[i:i + 48] for i in range(0, min(len(text), 192), 48)] + (["…"] if len(text) > 192 else [])
    return Box(f"Layer order (a cycle of {len(order)}, repeated)", lines, None, "other")


def _attention_box(canvas: _Canvas, c: Component, a: Attention, short: bool) -> Box:
    heads, kv = canvas.value(a.heads), canvas.value(a.kv_heads)
    if isinstance(a, LatentAttention):
        title = "Latent attention (MLA)"
    elif a.cross:
        title = "Cross-attention"
    elif short or heads == kv:
        title = "Attention"
    else:
        title = "Multi-query attention" if kv == 1 else "Grouped-query attention"
    if short:  # half a box wide: numbers only (the legend names the symbols)
        return Box(title, [f"{heads} heads × {canvas.value(a.head_width):,}"], canvas.params(c), "attention")
    lines = [f"{canvas.sv(a.heads)} heads × {canvas.sv(a.head_width)}"]
    if heads != kv:
        lines.append(f"{canvas.sv(a.kv_heads)} key/value heads")
    extras = _attention_notes(canvas, c, a)
    if extras:
        lines.append(", ".join(extras))
    return Box(title, lines, canvas.params(c), "attention")


def _attention_notes(canvas: _Canvas, c: Component, a: Attention) -> list[str]:
    """What the attention box says after its heads: causal or cross, its window or chunks, its extras."""
    extras = ["causal"] if a.causal and not a.cross else []
    if a.cross:
        extras.append("keys and values from the encoder")
    if a.window is not None:  # "window = 4,096" when the symbol says it already, else "window 4,096"
        window = canvas.sv(a.window)
        window = window if window.split(" ")[0] == "window" else f"window {window}"
        extras.append(window + ("" if set(a.pattern) == {"local"} else f" ({'/'.join(a.pattern)})"))
    if a.chunked and a.chunk is not None:  # Llama 4: most layers see only their own block, not every earlier token
        chunked = sum(kind == "chunked" for kind in a.pattern)
        extras.append(f"chunked by {canvas.sv(a.chunk)} on {chunked} of {len(a.pattern)} layers")
    if any(k.name == "q_norm" for k in c.children):
        extras.append("QK-norm")
    extras += [word for word, on in (("sinks", a.sinks), ("output gate", a.output_gate)) if on]
    return extras


def _sym(e: sympy.Expr) -> str:
    return pretty(e)
