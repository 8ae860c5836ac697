"""Source templates for per-layer attention settings without parameters: chunked layers (a token sees the earlier
tokens of its own block of ``chunk``), the queries' and keys' RMS norm without weights after the rotary positions,
and the query temperature of the layers without rotary positions (Llama 4's use_qk_norm and attn_temperature_tuning).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from archcalc.ir.attrs import Attention

if TYPE_CHECKING:
    from codegen.emitter import Emitter


def per_layer_init(em: Emitter, a: Attention, p: str) -> list[str]:
    """__init__'s constants of the QK norm and the temperature."""
    lines = []
    if a.rotary_qk_norm is not None:
        eps = em.field(f"{p}rotary_qk_norm_eps", a.rotary_qk_norm, "epsilon of the rotary layers' query/key RMS norm")
        lines.append(f"        self.qk_eps = {eps}  # rotary layers: q and k divided by their root mean square (no weights)")
    if a.temperature is not None:
        floor = em.field(f"{p}temperature_floor", a.temperature[0], "positions per step of the query temperature")
        scale = em.field(f"{p}temperature_scale", a.temperature[1], "strength of the query temperature")
        lines.append(f"        self.temperature_floor, self.temperature_scale = {floor}, {scale}  # layers without rotary positions")
    return lines


def rotary_qk_norm(a: Attention) -> list[str]:
    """forward's lines, after the rotation: q and k divided by their root mean square over each head, in float32."""
    if a.rotary_qk_norm is None:
        return []
    return ["        q, k = ((t.float() * torch.rsqrt(t.float().pow(2).mean(-1, keepdim=True) + self.qk_eps)).type_as(t) for t in (q, k))"]


def temperature(a: Attention, nope: bool) -> list[str]:
    """forward's lines that scale the queries at position p by 1 + scale * log(1 + floor((p + 1) / floor)), on the
    layers without rotary positions (before the cache takes the new keys: its count is the first position)."""
    if a.temperature is None or not nope:
        return []
    return [
        "        if not self.rotary:  # the query temperature: stronger at later positions",
        "            p = torch.arange(T, device=x.device) + (cache.seen if cache is not None else 0)  # (T,) positions",
        "            scale = torch.log1p(torch.floor((p.float() + 1.0) / self.temperature_floor)) * self.temperature_scale + 1.0",
        "            q = (q * scale[:, None]).to(q.dtype)  # (B, H, T, d_head)",
    ]


def chunk_sdpa(banded: bool, extra: str) -> list[str]:
    """forward's attention for a stack with chunked layers: the causal mask limited to the query's own block; one new
    token against the cache sees the cached tokens of its block (the cache is a ring of one block: token p in slot
    p % slots)."""
    lines = ["        if self.chunk is None:"]
    if banded:
        lines += ["            if self.window is not None and T > 1:",
                  "                i = torch.arange(T, device=x.device)",
                  "                band = (i[None, :] <= i[:, None]) & (i[:, None] - i[None, :] < self.window)  # (T, T) causal band",
                  f"                y = F.scaled_dot_product_attention(q, k, v, attn_mask=band{extra})  # (B, H, T, d_value)",
                  "            else:",
                  f"                y = F.scaled_dot_product_attention(q, k, v, is_causal=T > 1{extra})  # (B, H, T, d_value)"]
    else:
        lines.append(f"            y = F.scaled_dot_product_attention(q, k, v, is_causal=T > 1{extra})  # (B, H, T, d_value)")
    return lines + [
        "        else:",
        "            if cache is not None and T == 1:  # one new token at position p: the cached tokens of its block",
        "                p, s = cache.seen - 1, torch.arange(k.shape[2], device=x.device)",
        "                held = p - (p - s) % cache.k.shape[2]  # (S,): the position of the token in each slot",
        "                allowed = (held // self.chunk == p // self.chunk)[None, :]  # (1, S)",
        "            else:  # a training batch or a prompt: causal within each block of `chunk` tokens",
        "                i = torch.arange(T, device=x.device)",
        "                allowed = (i[None, :] <= i[:, None]) & (i[None, :] // self.chunk == i[:, None] // self.chunk)  # (T, T)",
        f"            y = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed{extra})  # (B, H, T, d_value)",
    ]
