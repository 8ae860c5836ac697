"""Source templates shared by the component kinds: activations, norms, embeddings.

Each template function reads an IR component, declares the config fields it needs on the emitter, and
returns the source of one class (or an expression). Only numbers, validated identifiers and ``repr()``
strings are interpolated. The other kinds live beside this module: ``codegen.attention`` (attention and
rotary positions), ``codegen.mlp`` (dense, gated and mixture-of-experts MLPs), ``codegen.blocks``
(blocks and the model) and ``codegen.hf`` (transformers weight names).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import sympy

from archcalc.ir import Component
from archcalc.ir.attrs import Embeddings, Norm
from codegen.errors import UnsupportedError

if TYPE_CHECKING:
    from codegen.emitter import Emitter

ACTIVATIONS = {
    "gelu": ("F.gelu({x})", "GELU"),
    "gelu_tanh": ('F.gelu({x}, approximate="tanh")', "GELU (tanh approximation)"),
    "relu": ("F.relu({x})", "ReLU"),
    "silu": ("F.silu({x})", "SiLU"),
}

OFFSET_RMSNORM = '''class OffsetRMSNorm(nn.Module):
    """RMSNorm that scales by (1 + weight), as Gemma does (the weight starts at zero); computed in float32."""

    def __init__(self, width: int, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.zeros(width))

    def reset_parameters(self) -> None:
        nn.init.zeros_(self.weight)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x.float()
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
        return (h * (1.0 + self.weight.float())).type_as(x)'''

HEAD_NORM = '''class HeadNorm(nn.Module):
    """A LayerNorm (or RMSNorm) over each head's features with weights of its own for every head (StableLM's
    per-head QK-norms): x is (B, heads, T, width); weight and bias hold head h's at h * width .. (h + 1) * width - 1."""

    def __init__(self, heads: int, width: int, eps: float, bias: bool, rms: bool = False):
        super().__init__()
        self.heads, self.width, self.eps, self.rms = heads, width, eps, rms
        self.weight = nn.Parameter(torch.ones(heads * width))
        self.bias = nn.Parameter(torch.zeros(heads * width)) if bias else None

    def reset_parameters(self) -> None:
        nn.init.ones_(self.weight)
        if self.bias is not None:
            nn.init.zeros_(self.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shape = (self.width,)
        y = F.rms_norm(x, shape, eps=self.eps) if self.rms else F.layer_norm(x, shape, eps=self.eps)
        y = y * self.weight.view(self.heads, 1, self.width)  # each head's own weights
        return y if self.bias is None else y + self.bias.view(self.heads, 1, self.width)'''


def norm_expr(em: Emitter, norm: Component, width: str | None = None, own: tuple[str, ...] = ("norm_eps",),
              groups: str | None = None) -> str:
    """The constructor call of a LayerNorm or RMSNorm (``width``: the source of its width, default the model's; for a
    norm in groups, ``groups``: the source of their number, and ``width`` that of one group's).

    The epsilon is ``cfg.norm_eps`` where that has the same value, else the first of the field names
    ``own`` that is free or has the same value.
    """
    a = norm.attrs
    assert isinstance(a, Norm)
    value = float(a.eps)
    taken = lambda n: em.fields[n][0] if n in em.fields else value  # noqa: E731
    name = "norm_eps" if "norm_eps" in em.fields and taken("norm_eps") == value else next((n for n in own if taken(n) == value), None)
    if name is None:
        raise UnsupportedError(f"codegen: norms with several epsilons ({own[-1]} = {taken(own[-1])}, and {value})")
    eps = em.field(name, value, "normalisation epsilon")
    width = width or _width(em, a.width)
    if a.groups is not None:
        if a.unit_offset or groups is None:
            raise UnsupportedError("codegen: a norm in groups is generated for QK-norms without (1 + weight) scaling only")
        em.add(HEAD_NORM, helper=True)
        return f"HeadNorm({groups}, {width}, eps={eps}, bias={a.bias}, rms={norm.kind == 'rmsnorm'})"
    if a.unit_offset:
        if norm.kind != "rmsnorm":
            raise UnsupportedError("codegen does not generate (1 + weight) LayerNorms yet; only RMSNorm (Gemma)")
        em.add(OFFSET_RMSNORM, helper=True)
        return f"OffsetRMSNorm({width}, eps={eps})"
    if norm.kind == "rmsnorm":
        return f"nn.RMSNorm({width}, eps={eps})"
    return f"nn.LayerNorm({width}, eps={eps}, bias={a.bias})"


def _width(em: Emitter, expr) -> str:
    """``cfg.width`` when ``expr`` is the model width, else a literal field of its own."""
    if expr == em.lowered.root.attrs.width:
        return "cfg.width"
    return em.field("norm_width", expr)


def embeddings_class(em: Emitter, embed: Component, start: bool = False) -> str:
    """The Embeddings class; ``start``: forward takes the position of the first token (generation with a cache)."""
    kids = {c.name: c for c in embed.children}
    a = embed.attrs
    assert isinstance(a, Embeddings)
    position = a.position
    if position not in ("learned", "none", "rotary", "relative-bias", "sinusoidal", "alibi"):
        raise UnsupportedError(f"codegen does not generate {position} positions yet")
    scale = a.scale
    doc = "Token embeddings" + (" plus learned absolute positions" if "position" in kids else "")
    doc += (" and token types (segments)" if "token_type" in kids else "") + (", normalised" if "norm" in kids else "")
    doc += ", scaled by sqrt(width)" if scale else ""
    lines = [
        "class Embeddings(nn.Module):",
        f'    """{doc}."""',
        "",
        "    def __init__(self, cfg: Config):",
        "        super().__init__()",
        "        self.token = nn.Embedding(cfg.vocab, cfg.width)",
    ]
    terms = ["self.token(input_ids)"]
    if "project_in" in kids:  # OPT-350m: a narrower token table, projected up before the positions are added
        width = em.field("token_width", kids["token"].tensors[0].shape[1], "width of the token table (projected to and from cfg.width)")
        lines[-1] = f"        self.token = nn.Embedding(cfg.vocab, {width})"
        lines.append(f"        self.project_in = nn.Linear({width}, cfg.width, bias=False)")
        terms = ["self.project_in(self.token(input_ids))"]
        doc = doc.replace("Token embeddings", "Token embeddings projected up to the model width", 1)
    signature = "input_ids: torch.Tensor"
    if start:
        signature += ", start: int = 0"
    body = []
    if "token_type" in kids:
        types = em.field("token_types", kids["token_type"].tensors[0].shape[0], "token types (segments)")
        lines.append(f"        self.token_type = nn.Embedding({types}, cfg.width)")
        signature += ", token_type_ids: torch.Tensor | None = None"
        body.append("        types = token_type_ids if token_type_ids is not None else torch.zeros_like(input_ids)  # (B, T)")
        terms.append("self.token_type(types)")
    if "position" in kids:
        length, offset = kids["position"].tensors[0].shape[0], a.position_offset
        context = em.field("context", length - offset, f"{length - offset}: learned position table length" + (" past the offset" if offset else ""))
        rows = context
        if offset:  # rows before position 0's (OPT's 2): the table is longer than the context it covers
            rows = f"{context} + {em.field('position_offset', sympy.Integer(offset), 'rows of the position table before position 0')}"
            lines.append(f"        self.offset = {rows.split(' + ')[1]}  # position p reads row p + offset")
        lines.append(f"        self.position = nn.Embedding({rows}, cfg.width)")
        first = "start" if start else "0"
        body.append(f"        positions = torch.arange({first}, {first} + input_ids.shape[1], device=input_ids.device)  # (T,)".replace("0, 0 + ", ""))
        if offset:
            body.append("        positions = positions + self.offset")
        terms.append("self.position(positions)")
    total = " + ".join(terms)
    if position == "sinusoidal":  # the 2017 Transformer: sqrt(d)-scaled tokens plus fixed sin/cos positions
        if len(terms) > 1 or "norm" in kids:
            raise UnsupportedError("codegen: sinusoidal positions with other embeddings or an embedding norm are not generated yet")
        doc = doc.replace(", scaled by sqrt(width)", ", scaled by sqrt(width), plus sinusoidal positions (no parameters)")
        lines[1] = f'    """{doc}."""'
        body += ["        T, d = input_ids.shape[1], self.token.embedding_dim",
                 f"        position = torch.arange({'start, start + T' if start else 'T'}, device=input_ids.device, dtype=torch.float32)[:, None]  # (T, 1)",
                 "        angles = position / 10000.0 ** (torch.arange(0, d, 2, device=input_ids.device) / d)  # (T, ceil(d / 2))",
                 "        table = torch.stack((angles.sin(), angles.cos()), dim=-1).flatten(-2)[:, :d]  # sin on even features, cos on odd",
                 ]
        if scale:
            lines.append("        self.scale = cfg.width**0.5  # the token embeddings are multiplied by sqrt(d)")
        return "\n".join(lines + ["", f"    def forward(self, {signature}) -> torch.Tensor:", *body,
                                   f"        return {total}{' * self.scale' if scale else ''} + table.to(self.token.weight.dtype)  # (B, T, d)"])
    if "norm" in kids:
        lines.append(f"        self.norm = {norm_expr(em, kids['norm'], own=('norm_eps', 'embed_norm_eps'))}")
    if scale:
        lines.append("        self.scale = cfg.width**0.5  # Gemma multiplies the embeddings by sqrt(d)")
        total = f"({total}) * self.scale" if len(terms) > 1 else f"{total} * self.scale"
    if a.multiplier is not None:
        multiplier = em.field("embedding_multiplier", a.multiplier, "the token embeddings are multiplied by this")
        lines.append(f"        self.multiplier = {multiplier}  # Granite's embedding_multiplier")
        total = f"({total}) * self.multiplier" if " + " in total else f"{total} * self.multiplier"
    if "norm" in kids:
        total = f"self.norm({total})"
    lines += ["", f"    def forward(self, {signature}) -> torch.Tensor:", *body, f"        return {total}  # (B, T, d)"]
    return "\n".join(lines)


def camel(prefix: str) -> str:
    return "".join(part.capitalize() for part in prefix.split("_") if part)
