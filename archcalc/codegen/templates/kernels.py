"""Template fragments of attention (archcalc.codegen.attention inserts them): the kernel that
computes the heads' outputs y from q, k and v, one region per kind of layer; and the query
temperature (Llama 4's, Mistral's)."""

import torch
import torch.nn.functional as F

from archcalc.codegen.templates.names import KVCache


def kernel(self, q, k, v, x: torch.Tensor, B: int, T: int, cache: KVCache, bias: torch.Tensor):
    # region: kernel_bias
    y = F.scaled_dot_product_attention(
        q, k, v, attn_mask=bias, scale=self.scale, enable_gqa=True
    )  # (B, H, T, d_value)
    # endregion
    # region: kernel_explicit
    scores = (q @ k.transpose(-2, -1)) * self.scale  # (B, H, T, S)
    # region: softcap
    scores = self.softcap * torch.tanh(scores / self.softcap)  # soft-capped to (-cap, cap)
    # endregion
    # region: causal
    if T > 1:  # causal (a training batch or a prompt); one new token sees every cached token
        i = torch.arange(T, device=x.device)
        allowed = i[None, :] <= i[:, None]  # (T, T)
        # region: banded
        if self.window is not None:  # only the last `window` tokens
            allowed = allowed & (i[:, None] - i[None, :] < self.window)
        # endregion
        scores = scores.masked_fill(~allowed, float("-inf"))
    # endregion
    # region: sinks
    sinks = self.sinks.float().view(1, -1, 1, 1).expand(B, -1, T, 1)  # (B, H, T, 1)
    # the sink takes a share of the softmax, then is dropped
    probs = torch.cat([scores.float(), sinks], dim=-1).softmax(dim=-1)[..., :-1]
    # endregion
    # region: !sinks
    probs = scores.float().softmax(dim=-1)  # (B, H, T, S)
    # endregion
    y = probs.to(v.dtype) @ v  # (B, H, T, d_value)
    # endregion
    # region: kernel_bidirectional
    y = F.scaled_dot_product_attention(
        q, k, v, scale=self.scale, enable_gqa=True
    )  # (B, H, T, d_value)
    # endregion
    # region: kernel_chunked
    if self.chunk is None:
        # region: banded
        if self.window is not None and T > 1:
            i = torch.arange(T, device=x.device)
            # (T, T)
            band = (i[None, :] <= i[:, None]) & (i[:, None] - i[None, :] < self.window)
            y = F.scaled_dot_product_attention(
                q, k, v, attn_mask=band, scale=self.scale, enable_gqa=True
            )
        else:
            y = F.scaled_dot_product_attention(
                q, k, v, is_causal=T > 1, scale=self.scale, enable_gqa=True
            )
        # endregion
        # region: !banded
        y = F.scaled_dot_product_attention(
            q, k, v, is_causal=T > 1, scale=self.scale, enable_gqa=True
        )
        # endregion
    else:
        # one new token at position p: the cached tokens of its block
        if cache is not None and T == 1:
            p, s = cache.seen - 1, torch.arange(k.shape[2], device=x.device)
            held = p - (p - s) % cache.k.shape[2]  # (S,): the position of each slot's token
            allowed = (held // self.chunk == p // self.chunk)[None, :]  # (1, S)
        else:  # a training batch or a prompt: causal within each block of `chunk` tokens
            i = torch.arange(T, device=x.device)
            allowed = (i[None, :] <= i[:, None]) & (
                i[None, :] // self.chunk == i[:, None] // self.chunk
            )
        y = F.scaled_dot_product_attention(
            q, k, v, attn_mask=allowed, scale=self.scale, enable_gqa=True
        )
    # endregion
    # region: kernel_causal
    # T > 1: a training batch or a prompt, causal; T = 1: one new token sees every cached token
    y = F.scaled_dot_product_attention(
        q, k, v, is_causal=T > 1, scale=self.scale, enable_gqa=True
    )  # (B, H, T, d_value)
    # endregion
    # region: kernel_band
    # dense causal; or one new token, whose cache holds just its window
    if self.window is None or T == 1:
        y = F.scaled_dot_product_attention(
            q, k, v, is_causal=T > 1, scale=self.scale, enable_gqa=True
        )  # (B, H, T, d_value)
    else:
        i = torch.arange(T, device=x.device)
        band = (i[None, :] <= i[:, None]) & (
            i[:, None] - i[None, :] < self.window
        )  # (T, T) causal band
        y = F.scaled_dot_product_attention(
            q, k, v, attn_mask=band, scale=self.scale, enable_gqa=True
        )  # (B, H, T, d_value)
    # endregion
    return y


def temperature(self, q, x: torch.Tensor, T: int, cache: KVCache):
    # region: temperature_nope
    if not self.rotary:  # the query temperature: stronger at later positions
        p = torch.arange(T, device=x.device) + (cache.seen if cache is not None else 0)  # (T,)
        scale = torch.log1p(torch.floor((p.float() + 1.0) / self.temperature_floor))
        scale = scale * self.temperature_scale + 1.0
        q = (q * scale[:, None]).to(q.dtype)  # (B, H, T, d_head)
    # endregion
    # region: temperature_all
    # the query temperature: one step stronger every temperature_floor positions
    p = torch.arange(T, device=x.device) + (cache.seen if cache is not None else 0)  # (T,)
    scale = torch.log1p(torch.floor(p.float() / self.temperature_floor))
    scale = scale * self.temperature_scale + 1.0
    q = (q * scale[:, None]).to(q.dtype)  # (B, H, T, d_head)
    # endregion
    return q
