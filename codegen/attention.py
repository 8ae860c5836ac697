"""Source templates for attention: projections, QK-norm, rotary positions, the kernel, sinks and soft-capping.

Attention runs through ``F.scaled_dot_product_attention`` (flash attention where available). Two
features need the scores themselves, so those layers write the two products out (``q @ kᵀ``, then
``probs @ v``: the same two matmuls, the same FLOPs): attention sinks (gpt-oss: a learned logit per
head that takes a share of the softmax) and soft-capped scores (Gemma 2: cap · tanh(score / cap)).

Rotary tables are computed in the model's forward from the sequence length (no buffers: building on
the meta device allocates nothing, and any device or dtype works) and passed down to every layer.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import sympy

from archcalc.backends.activations import kernel_shares_kv_heads
from archcalc.ir import Component
from codegen.errors import UnsupportedError
from codegen.parts import camel, norm_expr

if TYPE_CHECKING:
    from codegen.emit import Emitter

ROTARY_CLASS = '''class Rotary(nn.Module):
    """Rotary position tables: the cos and sin of position x frequency, for the first rotary_width features
    of each head. Computed in forward (no buffers): building on the meta device allocates nothing."""

    def __init__(self, cfg: Config):
        super().__init__()
        self.width, self.base = cfg.rotary_width, cfg.rotary_base

    def forward(self, T: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        exponent = torch.arange(0, self.width, 2, device=device, dtype=torch.int64).float() / self.width
        inv_freq = 1.0 / self.base**exponent  # (rotary_width / 2,)
        angles = torch.arange(T, device=device, dtype=torch.float32)[:, None] * inv_freq  # (T, rotary_width / 2)
        angles = {pairing}
        return angles.cos(), angles.sin()'''

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


def rotary_sources(pairing: str, partial: bool) -> list[str]:
    """The Rotary class and the ``rotate`` function that applies its tables to queries and keys."""
    angles, turn = PAIRINGS[pairing]
    x = "rot" if partial else "x"
    lines = [
        "def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:",
        f'    """Rotate {"the first cos.shape[-1] features of " if partial else ""}each head of x (B, H, T, d_head) by its position\'s angles."""',
        "    cos, sin = cos.to(x.dtype), sin.to(x.dtype)  # (T, rotary_width)",
    ]
    if partial:
        lines.append("    rot, rest = x[..., : cos.shape[-1]], x[..., cos.shape[-1]:]  # the rest passes through unrotated")
    lines += [f"    {line.format(x=x)}" for line in turn]
    if partial:
        lines.append("    return torch.cat((rot * cos + turned * sin, rest), dim=-1)")
    else:
        lines.append("    return x * cos + turned * sin")
    return [ROTARY_CLASS.format(pairing=angles), "\n".join(lines)]


def attention_class(em: Emitter, attn: Component, p: str, rotary: bool, cls: str | None = None, score_bias: bool = False) -> str:
    """One attention class for a stack; ``rotary``: forward takes the (cos, sin) tables; ``score_bias``: forward takes
    an additive score bias (T5's relative position bias, with the causal mask in it); ``cls``: the class name.
    Cross-attention (``cross`` in the IR) takes its keys and values from the encoder output ``memory``."""
    a = attn.attrs
    heads = em.field(f"{p}heads", a["heads"], f"{a['heads']}: attention heads")
    kv = em.field(f"{p}kv_heads", a["kv_heads"], f"{a['kv_heads']}: key/value heads")
    hw = em.field(f"{p}head_width", a["head_width"], f"{a['head_width']}: width of one head")
    kids = {c.name: c for c in attn.children}
    fused = "qkv" in kids
    gqa = em.value(a["kv_heads"]) != em.value(a["heads"])
    vw = hw if a["value_width"] == a["head_width"] else em.field(f"{p}value_width", a["value_width"])
    name = cls or f"{camel(p)}Attention"
    cross = bool(a.get("cross"))
    causal = "True" if a.get("causal") and not score_bias else "False"  # a bias carries the causal mask itself
    banded = "local" in (a.get("pattern") or ())
    sinks = any(t.name == "sinks" for t in attn.tensors)
    softcap = a.get("softcap")
    explicit = sinks or softcap is not None  # write the two products out: the softmax needs the scores
    qk_norm = "q_norm" in kids
    per_head_norm = qk_norm and kids["q_norm"].attrs["width"] == a["head_width"]
    kind = "multi-head" if not gqa else "grouped-query"
    features = ["a fused qkv projection" if fused else "q, k, v projections"]
    features += ["QK-norm"] if qk_norm else []
    features += ["rotary positions"] if rotary else []
    features += ["sinks"] if sinks else []
    features += ["soft-capped scores"] if softcap is not None else []
    features += ["an additive position bias" + (" (with the causal mask)" if a.get("causal") else "")] if score_bias else []
    if (score_bias or cross) and (explicit or banded or fused or rotary):
        raise UnsupportedError("codegen: cross-attention and position-biased attention with sinks, soft-capping, "
                               "windows, rotary positions or a fused qkv projection are not generated yet")
    features += ["explicit softmax" if explicit else "SDPA", "an output projection"]
    lines = [
        f"class {name}(nn.Module):",
        f'    """{"Causal" if a.get("causal") else "Bidirectional"} {kind} self-attention: {", ".join(features)}."""' if not cross else
        f'    """{kind.capitalize()} cross-attention: queries from x, keys and values from the encoder output; {", ".join(features)}."""',
        "",
        f"    def __init__(self, cfg: Config{', window: int | None = None' if banded else ''}):",
        "        super().__init__()",
        f"        self.heads, self.kv_heads, self.head_width, self.value_width = {heads}, {kv}, {hw}, {vw}",
    ]
    if banded:
        lines.append("        self.window = window  # None: dense causal attention; else each token sees the last `window` tokens")
    scale = None
    if a.get("scale") is not None:
        scale = em.field(f"{p}attn_scale", float(a["scale"]), "attention score scale (instead of 1 / sqrt(head_width))")
        lines.append(f"        self.scale = {scale}{'  # T5: scores are not divided by sqrt(head_width)' if float(a['scale']) == 1.0 else ''}")
    elif explicit:
        lines.append("        self.scale = self.head_width**-0.5")
    if softcap is not None:
        cap = em.field(f"{p}attn_softcap", float(softcap), "attention scores are capped to (-cap, cap) by cap * tanh(s / cap)")
        lines.append(f"        self.softcap = {cap}")
    if fused:
        bias = kids["qkv"].attrs["bias"]
        if not gqa and vw == hw:
            width = f"3 * {heads} * {hw}"
        else:
            width = f"({heads} + {kv}) * {hw} + {kv} * {vw}"
        lines.append(f"        self.qkv = nn.Linear(cfg.width, {width}, bias={bias})")
    else:
        for proj, count, width in (("q", heads, hw), ("k", kv, hw), ("v", kv, vw)):
            lines.append(f"        self.{proj} = nn.Linear(cfg.width, {count} * {width}, bias={kids[proj].attrs['bias']})")
    if qk_norm:
        widths = (hw, hw) if per_head_norm else (f"{heads} * {hw}", f"{kv} * {hw}")
        for which, width in zip(("q", "k"), widths):
            lines.append(f"        self.{which}_norm = {norm_expr(em, kids[f'{which}_norm'], width, own=(f'{p}qk_norm_eps',))}")
    lines.append(f"        self.out = nn.Linear({heads} * {vw}, cfg.width, bias={kids['out'].attrs['bias']})")
    if sinks:
        lines.append("        self.sinks = nn.Parameter(torch.zeros(self.heads))  # one learned logit per head, beside the keys")
    rope = ", rope: tuple[torch.Tensor, torch.Tensor]" if rotary else ""
    rope = (", memory: torch.Tensor" if cross else "") + rope + (", bias: torch.Tensor" if score_bias else "")
    if sinks:
        lines += ["", "    def reset_parameters(self) -> None:",
                  "        nn.init.zeros_(self.sinks)  # the projections are Linear layers: reset on their own"]
    lines += ["", f"    def forward(self, x: torch.Tensor{rope}) -> torch.Tensor:", "        B, T, _ = x.shape  # (B, T, d)"]
    if fused:
        lines += [
            "        q_width, kv_width = self.heads * self.head_width, self.kv_heads * self.head_width",
            "        q, k, v = self.qkv(x).split([q_width, kv_width, self.kv_heads * self.value_width], dim=-1)",
        ]
    elif cross:
        lines += ["        S = memory.shape[1]  # (B, S, d): the encoder output",
                  "        q, k, v = self.q(x), self.k(memory), self.v(memory)  # (B, T or S, heads x width)"]
    else:
        lines.append("        q, k, v = self.q(x), self.k(x), self.v(x)  # (B, T, heads x width)")
    if qk_norm and not per_head_norm:
        lines.append("        q, k = self.q_norm(q), self.k_norm(k)  # QK-norm over all heads' features at once")
    lines += [
        "        q = q.view(B, T, self.heads, -1).transpose(1, 2)  # (B, H, T, d_head)",
        f"        k = k.view(B, {'S' if cross else 'T'}, self.kv_heads, -1).transpose(1, 2)  # (B, KV, {'S' if cross else 'T'}, d_head)",
        f"        v = v.view(B, {'S' if cross else 'T'}, self.kv_heads, -1).transpose(1, 2)  # (B, KV, {'S' if cross else 'T'}, d_value)",
    ]
    if per_head_norm:
        lines.append("        q, k = self.q_norm(q), self.k_norm(k)  # QK-norm over each head's features")
    if rotary:
        lines.append("        q, k = rotate(q, *rope), rotate(k, *rope)  # rotary positions")
    if fused and (rotary or qk_norm):  # q and k are new tensors now; v is still a view of the whole qkv output
        lines.append("        v = v.contiguous()  # attention keeps v for backward: a view would keep all of qkv alive")
    # SDPA shares each key/value head among its queries itself (enable_gqa: no copies, flash attention keeps working);
    # a mask or a written-out softmax needs the heads repeated (flash attention takes no mask; head widths up to 256)
    sdpa_gqa = gqa and kernel_shares_kv_heads(attn, em.value(a["head_width"]), position_bias=score_bias)
    if gqa and not sdpa_gqa:
        lines += [
            "        k = k.repeat_interleave(self.heads // self.kv_heads, dim=1)  # (B, H, T, d_head)",
            "        v = v.repeat_interleave(self.heads // self.kv_heads, dim=1)  # (B, H, T, d_value)",
        ]
    if score_bias:
        lines.append(f"        y = F.scaled_dot_product_attention(q, k, v, attn_mask=bias{', scale=self.scale' if scale else ''})  # (B, H, T, d_value)")
    elif explicit:
        lines += _explicit(a.get("causal"), banded, sinks, softcap is not None)
    else:
        lines += _sdpa(causal, banded, (", scale=self.scale" if scale else "") + (", enable_gqa=True" if sdpa_gqa else ""))
    lines.append("        return self.out(y.transpose(1, 2).reshape(B, T, -1))  # (B, T, d)")
    em.add("\n".join(lines))
    return name


def _sdpa(causal: str, banded: bool, scale: str) -> list[str]:
    if not banded:
        return [f"        y = F.scaled_dot_product_attention(q, k, v, is_causal={causal}{scale})  # (B, H, T, d_value)"]
    return [
        "        if self.window is None:",
        f"            y = F.scaled_dot_product_attention(q, k, v, is_causal={causal}{scale})  # (B, H, T, d_value)",
        "        else:",
        "            i = torch.arange(T, device=x.device)",
        "            band = (i[None, :] <= i[:, None]) & (i[:, None] - i[None, :] < self.window)  # (T, T) causal band",
        f"            y = F.scaled_dot_product_attention(q, k, v, attn_mask=band{scale})  # (B, H, T, d_value)",
    ]


def _explicit(causal: bool, banded: bool, sinks: bool, softcap: bool) -> list[str]:
    lines = ["        scores = (q @ k.transpose(-2, -1)) * self.scale  # (B, H, T, T)"]
    if softcap:
        lines.append("        scores = self.softcap * torch.tanh(scores / self.softcap)  # soft-capped to (-cap, cap)")
    if causal:
        lines += ["        i = torch.arange(T, device=x.device)",
                  "        allowed = i[None, :] <= i[:, None]  # (T, T): causal"]
        if banded:
            lines += ["        if self.window is not None:",
                      "            allowed = allowed & (i[:, None] - i[None, :] < self.window)  # only the last `window` tokens"]
        lines.append('        scores = scores.masked_fill(~allowed, float("-inf"))')
    if sinks:
        lines += ["        sinks = self.sinks.float().view(1, -1, 1, 1).expand(B, -1, T, 1)  # (B, H, T, 1)",
                  "        probs = torch.cat([scores.float(), sinks], dim=-1).softmax(dim=-1)[..., :-1]  # the sink takes a share, then is dropped"]
    else:
        lines.append("        probs = scores.float().softmax(dim=-1)  # (B, H, T, T)")
    lines.append("        y = probs.to(v.dtype) @ v  # (B, H, T, d_value)")
    return lines


def check_attention(attn: Component) -> list[str]:
    """What the attention template cannot generate (an empty list: everything is supported)."""
    a = attn.attrs
    problems = []
    if a.get("kind") == "latent":
        kids = {c.name for c in attn.children}
        if a.get("cross") or not a.get("causal") or "local" in (a.get("pattern") or ()) or a.get("window") is not None \
                or a.get("softcap") is not None or attn.tensors or {"q_norm", "k_norm"} & kids:
            problems.append("latent attention with cross-attention, bidirectional attention, windows, soft-capping, sinks or QK-norm")
        return problems
    if a.get("window") is not None and "local" not in (a.get("pattern") or ()):
        problems.append("a window without 'local' layers in the pattern (use pattern: [local] for a window on every layer)")
    if any(t.name != "sinks" for t in attn.tensors):
        problems.append("attention tensors other than sinks")
    return problems


def rotary_width(em: Emitter, embed: Component, attn: Component) -> int:
    """Rotated features of each head: head_width x rotary_fraction (HF: int(head_dim * partial_rotary_factor));
    latent attention rotates its rope_width features (transformers' qk_rope_head_dim)."""
    if attn.attrs.get("kind") == "latent":
        width = em.value(attn.attrs["rope_width"])
        if width % 2 or embed.attrs.get("rotary_fraction") is not None:
            raise UnsupportedError(f"codegen: latent attention rotates all of an even rope_width (got {width}, "
                                   f"rotary_fraction {embed.attrs.get('rotary_fraction')})")
        return width
    head = em.value(attn.attrs["head_width"])
    fraction = embed.attrs.get("rotary_fraction")
    if fraction is None:
        return head
    width = int(sympy.floor(head * fraction.xreplace(em.numeric)))
    if width < 2 or width % 2 or width > head:
        raise UnsupportedError(f"rotary width {width} (head width {head} x rotary_fraction {fraction}) must be even and between 2 and {head}")
    return width


def latent_attention_class(em: Emitter, attn: Component, p: str) -> str:
    """Multi-head latent attention (DeepSeek-V2/V3), as transformers' DeepseekV3Attention computes it."""
    a = attn.attrs
    kids = {c.name: c for c in attn.children}
    heads = em.field(f"{p}heads", a["heads"], f"{a['heads']}: attention heads")
    hw = em.field(f"{p}head_width", a["head_width"], f"{a['head_width']}: query/key width of one head without the rotary part")
    rw = em.field(f"{p}rope_width", a["rope_width"], f"{a['rope_width']}: rotary query/key width of one head (the key's is shared)")
    vw = em.field(f"{p}value_width", a["value_width"], f"{a['value_width']}: value width of one head")
    kv_rank = em.field(f"{p}kv_rank", kids["kv_down"].attrs["out"] - a["rope_width"], "key/value compression rank")
    low_rank_q = "q_down" in kids
    own = ("norm_eps", f"{p}latent_norm_eps")
    name = f"{camel(p)}Attention"
    lines = [
        f"class {name}(nn.Module):",
        '    """Causal multi-head latent attention (DeepSeek-V2/V3): queries through a low-rank bottleneck'
        + ("" if low_rank_q else " (here a plain projection)") + ",",
        "    keys and values expanded from a compressed latent, plus one rotary key shared by every head; SDPA, an output",
        '    projection. The score scale is SDPA\'s default 1 / sqrt(head_width + rope_width), as transformers\' without rope scaling."""',
        "",
        "    def __init__(self, cfg: Config):",
        "        super().__init__()",
        f"        self.heads, self.head_width, self.rope_width, self.value_width = {heads}, {hw}, {rw}, {vw}",
        f"        self.kv_rank = {kv_rank}",
    ]
    if a.get("scale") is not None:
        scale = em.field(f"{p}attn_scale", float(a["scale"]), "attention score scale (instead of 1 / sqrt(head_width + rope_width))")
        lines.append(f"        self.scale = {scale}")
    if low_rank_q:
        q_rank = em.field(f"{p}q_rank", kids["q_down"].attrs["out"], "query compression rank")
        lines += [f"        self.q_down = nn.Linear(cfg.width, {q_rank}, bias={kids['q_down'].attrs['bias']})",
                  f"        self.q_down_norm = {norm_expr(em, kids['q_down_norm'], q_rank, own=own)}",
                  f"        self.q_up = nn.Linear({q_rank}, {heads} * ({hw} + {rw}), bias={kids['q_up'].attrs['bias']})"]
    else:
        lines.append(f"        self.q = nn.Linear(cfg.width, {heads} * ({hw} + {rw}), bias={kids['q'].attrs['bias']})")
    lines += [
        f"        self.kv_down = nn.Linear(cfg.width, {kv_rank} + {rw}, bias={kids['kv_down'].attrs['bias']})  # the latent and the shared rotary key",
        f"        self.kv_down_norm = {norm_expr(em, kids['kv_down_norm'], kv_rank, own=own)}",
        f"        self.kv_up = nn.Linear({kv_rank}, {heads} * ({hw} + {vw}), bias={kids['kv_up'].attrs['bias']})",
        f"        self.out = nn.Linear({heads} * {vw}, cfg.width, bias={kids['out'].attrs['bias']})",
        "",
        "    def forward(self, x: torch.Tensor, rope: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:",
        "        B, T, _ = x.shape  # (B, T, d)",
        ("        q = self.q_up(self.q_down_norm(self.q_down(x)))  # (B, T, heads x (head_width + rope_width))" if low_rank_q else
         "        q = self.q(x)  # (B, T, heads x (head_width + rope_width))"),
        "        q = q.view(B, T, self.heads, -1).transpose(1, 2)  # (B, H, T, head_width + rope_width)",
        "        q_pass, q_rot = q.split([self.head_width, self.rope_width], dim=-1)",
        "        latent, k_rot = self.kv_down(x).split([self.kv_rank, self.rope_width], dim=-1)  # (B, T, kv_rank), (B, T, rope_width)",
        "        k_rot = k_rot.view(B, 1, T, self.rope_width)  # one rotary key for every head",
        "        q = torch.cat((q_pass, rotate(q_rot, *rope)), dim=-1)  # (B, H, T, head_width + rope_width)",
        "        kv = self.kv_up(self.kv_down_norm(latent)).view(B, T, self.heads, -1).transpose(1, 2)  # (B, H, T, head_width + value_width)",
        "        k_pass, v = kv.split([self.head_width, self.value_width], dim=-1)",
        "        k = torch.cat((k_pass, rotate(k_rot, *rope).expand(-1, self.heads, -1, -1)), dim=-1)  # (B, H, T, head_width + rope_width)",
        f"        y = F.scaled_dot_product_attention(q, k, v, is_causal=True{', scale=self.scale' if a.get('scale') is not None else ''})  # (B, H, T, value_width)",
        "        return self.out(y.transpose(1, 2).reshape(B, T, -1))  # (B, T, d)",
    ]
    em.add("\n".join(lines))
    return name
