"""Source templates for rotary positions: the ``Rotary`` tables and the ``rotate`` function.

The tables are computed in the model's forward from the positions of the tokens it is given, so a token
decoded with a KV cache at position ``start`` gets the same angles as in a full forward pass; the frequencies
they are built from are a buffer computed once by ``reset_parameters`` (not saved; nothing allocated on the meta
device), except for schemes whose frequencies follow the length. Rotary
scaling (``position.scaling``: linear, dynamic, llama3, yarn, longrope) adds its scheme's lines to the class
(``archcalc.codegen.rope_scaling``).
"""

from __future__ import annotations

import textwrap
from typing import TYPE_CHECKING

import sympy

from archcalc.codegen.errors import UnsupportedError
from archcalc.codegen.rope_scaling import Scheme, scaling_scheme
from archcalc.ir import Component
from archcalc.ir.attrs import LatentAttention

if TYPE_CHECKING:
    from archcalc.codegen.emitter import Emitter

def rotary_class(pairing: str, scheme: Scheme | None = None, name: str = "Rotary", base: str = "cfg.rotary_base") -> str:
    """The Rotary class: default rotary tables, or those of a scaling scheme (its doc, __init__ and frequency lines);
    ``name`` and ``base``: another class of tables with its own base (LocalRotary, the sliding layers' own).

    Frequencies that do not depend on the length (no scheme, linear, llama3, yarn) are computed once, by
    reset_parameters, into a buffer a checkpoint does not save: under torch.compile, tables computed from scratch in
    forward are fused into every kernel that rotates, which then evaluates a power per element (measured on an
    H200: 14 of a 127 ms Llama-1B training step, against 2.5 ms when the frequencies are read;
    docs/benchmarks.md). Schemes whose frequencies follow the length (dynamic, longrope) compute them in forward."""
    by_length = scheme is not None and scheme.own_frequencies  # dynamic NTK, LongRoPE: the length decides
    what = " of the sliding-window layers (their own base)" if name != "Rotary" else ""
    paragraph = (f"Rotary position tables{what}: the cos and sin of position x frequency, for the first rotary_width "
                 "features of each head, computed in forward for the positions asked for.")
    if not by_length:
        paragraph += (" The frequencies are computed once, by reset_parameters, into a buffer that checkpoints leave "
                      "out (on the meta device it allocates nothing): a compiled step reads them instead of evaluating "
                      "a power in every kernel that rotates.")
    doc = textwrap.wrap(paragraph, 100, initial_indent='    """', subsequent_indent="    ")
    init = [f"        self.width, self.base = cfg.rotary_width, {base}"]
    frequencies = ["        exponent = (",
                   "            torch.arange(0, self.width, 2, device=device, dtype=torch.int64).float() / self.width",
                   "        )"]
    factor = ""
    if not by_length:
        frequencies.append("        inv_freq = 1.0 / self.base**exponent  # (rotary_width / 2,)")
    if scheme is not None:
        doc += [""] + [f"    {line}" for line in scheme.doc]
        init += [f"        {line}" if line else "" for line in scheme.init]
        frequencies += [f"        {line}" for line in scheme.forward]
        factor = " * self.attention_factor" if scheme.attention_factor else ""
    doc[-1] += '"""'
    tables = [
        "        positions = torch.arange(start, start + T, device=device, dtype=torch.float32)",
        "        angles = positions[:, None] * inv_freq  # (T, rotary_width / 2)",
        *_commented(f"angles = {PAIRINGS[pairing][0]}", "        "),
        f"        return angles.cos(){factor}, angles.sin(){factor}",
    ]
    signature = ["    def forward(",
                 "        self, start: int, T: int, device: torch.device",
                 "    ) -> tuple[torch.Tensor, torch.Tensor]:",
                 '        """The tables of positions start .. start + T - 1: (cos, sin), each (T, rotary_width)."""']
    if by_length:
        body = [*signature, *frequencies, *tables]
    else:
        init += ["        # float32 frequencies, set by reset_parameters; not saved in checkpoints",
                 "        self.register_buffer(\"inv_freq\", torch.empty(len(range(0, self.width, 2))), persistent=False)",
                 "        self.reset_parameters()"]
        body = [
            "    def reset_parameters(self) -> None:",
            '        """(Re)compute the frequencies: build() calls it, and so does a model given memory after',
            '        the meta device (to_empty, then reset_parameters)."""',
            "        with torch.no_grad():",
            "            self.inv_freq.copy_(self.frequencies(self.inv_freq.device))",
            "",
            "    def frequencies(self, device: torch.device) -> torch.Tensor:",
            '        """The rotation frequencies, in float32: (rotary_width / 2,)."""',
            *frequencies,
            "        return inv_freq",
            "",
            *signature,
            "        inv_freq = self.inv_freq",
            "        if inv_freq.dtype != torch.float32:  # a cast of the model casts buffers: compute afresh",
            "            inv_freq = self.frequencies(device)",
            *tables,
        ]
    return "\n".join([
        f"class {name}(nn.Module):",
        *doc,
        "",
        "    def __init__(self, cfg: Config):",
        "        super().__init__()",
        *init,
        "",
        *body,
    ])


def _commented(line: str, indent: str) -> list[str]:
    """``line`` at ``indent``, its trailing comment on a line of its own above it where the two are too long for the
    generated file's 100 characters."""
    code, _, comment = line.partition("  # ")
    if not comment or len(indent + line) <= 100:
        return [indent + line]
    return [f"{indent}# {comment}", indent + code]


PAIRINGS = {  # how the rotated features pair up, and the matching layout of the angles
    "half": ("torch.cat((angles, angles), dim=-1)  # (T, rotary_width): feature j pairs with j + rotary_width / 2",
             ["first, second = {x}.chunk(2, dim=-1)",
              "turned = torch.cat((-second, first), dim=-1)  # rotate_half (Llama, GPT-NeoX, Falcon, ...)"]),
    "interleaved": ("angles.repeat_interleave(2, dim=-1)  # (T, rotary_width): features 2j and 2j + 1 pair up (GPT-J)",
                    ["even, odd = {x}[..., 0::2], {x}[..., 1::2]",
                     "turned = torch.stack((-odd, even), dim=-1).flatten(-2)  # rotate every two (GPT-J)"]),
    "deinterleaved": ("torch.cat((angles, angles), dim=-1)  # (T, rotary_width): the pairs (2j, 2j + 1) are gathered first",
                      ["even, odd = {x}[..., 0::2], {x}[..., 1::2]  # DeepSeek: features 2j and 2j + 1 pair up",
                       "{x} = torch.cat((even, odd), dim=-1)  # de-interleaved: the rotated pairs come out as j, j + width / 2",
                       "turned = torch.cat((-odd, even), dim=-1)"]),
}


def emit_rotary(em: Emitter, embed: Component, attentions: list[Component]) -> None:
    """Declare the rotary config fields and add the Rotary class and ``rotate`` for these attention layers."""
    widths = {rotary_width(em, embed, attn) for attn in attentions}
    if len(widths) != 1:
        raise UnsupportedError(f"codegen: stacks with different rotary widths ({sorted(widths)}) are not generated yet")
    width = widths.pop()
    if len({isinstance(attn.attrs, LatentAttention) for attn in attentions}) != 1:
        raise UnsupportedError("codegen: stacks with latent and standard attention are not generated yet")
    em.field("rotary_width", sympy.Integer(width), "features of each head that rotary positions rotate")
    em.field("rotary_base", float(embed.attrs.rotary_base), "rotary base (theta)")
    latent = isinstance(attentions[0].attrs, LatentAttention)
    default = "deinterleaved" if latent else "half"  # DeepSeek's rope layout (transformers: rope_interleave, default true)
    pairing = embed.attrs.rotary_pairing or default  # the spec's position.pairing
    if width % 2 and pairing != "half":
        raise UnsupportedError(f"codegen: an odd rotary width ({width}) with {pairing} pairs of features (transformers' "
                               "models of that layout fail on it)")
    partial = not latent and width != em.value(attentions[0].attrs.head_width)
    scaling = embed.attrs.rotary_scaling
    scheme = scaling_scheme(em, scaling, width) if scaling is not None else None
    for source in rotary_sources(pairing, partial, scheme):
        em.add(source, helper=True)
    if local_rotary(embed, attentions):  # the sliding layers' own tables (Gemma 3)
        if embed.attrs.rotary_local_scaling is not None:
            raise UnsupportedError("codegen: rotary scaling on the sliding-window layers' own tables is not generated yet")
        em.field("rotary_local_base", float(embed.attrs.rotary_local_base), "rotary base (theta) of the sliding-window layers")
        em.add(rotary_class(pairing, None, "LocalRotary", "cfg.rotary_local_base"), helper=True)


def local_rotary(embed: Component, attentions: list[Component]) -> bool:
    """Do the sliding-window layers have rotary tables of their own (``position.local``), and the model such layers?"""
    return embed.attrs.rotary_local_base is not None and any(attn.attrs.banded for attn in attentions)


def rotary_sources(pairing: str, partial: bool, scheme: Scheme | None = None) -> list[str]:
    """The Rotary class and the ``rotate`` function that applies its tables to queries and keys."""
    _, turn = PAIRINGS[pairing]
    x = "rot" if partial else "x"
    lines = [
        "def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:",
        *(['    """Rotate the first cos.shape[-1] features of each head of x (B, H, T, d_head) by its',
            '    position\'s angles."""'] if partial else
          ['    """Rotate each head of x (B, H, T, d_head) by its position\'s angles."""']),
        "    cos, sin = cos.to(x.dtype), sin.to(x.dtype)  # (T, rotary_width)",
    ]
    if partial:
        lines += ["    # the rest passes through unrotated", "    rot, rest = x[..., : cos.shape[-1]], x[..., cos.shape[-1] :]"]
    lines += [part for line in turn for part in _commented(line.format(x=x), "    ")]
    if partial:
        lines.append("    return torch.cat((rot * cos + turned * sin, rest), dim=-1)")
    else:
        lines.append("    return x * cos + turned * sin")
    return [rotary_class(pairing, scheme), "\n".join(lines)]


def rotary_width(em: Emitter, embed: Component, attn: Component) -> int:
    """Rotated features of each head: head_width x rotary_fraction (HF: int(head_dim * partial_rotary_factor));
    latent attention rotates its rope_width features (transformers' qk_rope_head_dim)."""
    fraction = embed.attrs.rotary_fraction
    if isinstance(attn.attrs, LatentAttention):
        width = em.value(attn.attrs.rope_width)
        if width % 2 or fraction is not None:
            raise UnsupportedError(f"codegen: latent attention rotates all of an even rope_width (got {width}, "
                                   f"rotary_fraction {fraction})")
        return width
    head = em.value(attn.attrs.head_width)
    if fraction is None:
        return head
    width = int(sympy.floor(head * fraction.xreplace(em.numeric)))
    # an odd width n turns ceil(n / 2) frequencies, so rotate_half (transformers' GPT-NeoX, Phi, ...) rotates the first
    # 2 * ceil(n / 2) features; the frequencies keep n as their exponent's denominator
    if width < 1 or width + width % 2 > head:
        raise UnsupportedError(f"rotary width {width} (head width {head} x rotary_fraction {fraction}) rotates "
                               f"{width + width % 2} features; expected from 1 to {head}")
    return width
