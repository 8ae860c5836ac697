"""Template of multi-head latent attention (archcalc.codegen.latent fills it), as transformers'
DeepseekV3Attention: the low-rank queries and the score scale in regions."""

import torch
import torch.nn.functional as F
from torch import nn

from archcalc.codegen.templates.names import (
    K_NORM,
    KV_DOWN_BIAS,
    KV_UP_BIAS,
    MSCALE,
    OUT_BIAS,
    Q_BIAS,
    Q_DOWN_BIAS,
    Q_NORM,
    Q_UP_BIAS,
    Config,
    KVCache,
    rotate,
)


class Attention(nn.Module):
    """DOC"""

    def __init__(self, cfg: Config):
        super().__init__()
        self.heads, self.head_width = cfg.heads, cfg.head_width
        self.rope_width = cfg.rope_width
        self.value_width = cfg.value_width
        self.kv_rank = cfg.kv_rank
        # region: field_scale
        self.scale = cfg.attn_scale
        # endregion
        # region: field_mscale
        self.scale = cfg.attn_scale * MSCALE**2
        # endregion
        # region: mscale
        # YaRN's attention temperature
        self.scale = (self.head_width + self.rope_width) ** -0.5 * MSCALE**2
        # endregion
        # region: low_rank_q
        self.q_down = nn.Linear(cfg.width, cfg.q_rank, bias=Q_DOWN_BIAS)
        self.q_down_norm = Q_NORM
        q_width = self.heads * (self.head_width + self.rope_width)
        self.q_up = nn.Linear(cfg.q_rank, q_width, bias=Q_UP_BIAS)
        # endregion
        # region: !low_rank_q
        self.q = nn.Linear(cfg.width, self.heads * (self.head_width + self.rope_width), bias=Q_BIAS)
        # endregion
        # the latent and the shared rotary key
        self.kv_down = nn.Linear(cfg.width, self.kv_rank + self.rope_width, bias=KV_DOWN_BIAS)
        self.kv_down_norm = K_NORM
        kv_width = self.heads * (self.head_width + self.value_width)
        self.kv_up = nn.Linear(cfg.kv_rank, kv_width, bias=KV_UP_BIAS)
        self.out = nn.Linear(self.heads * self.value_width, cfg.width, bias=OUT_BIAS)

    def new_cache(self, batch: int, length: int) -> KVCache:
        """An empty cache for `batch` sequences of up to `length` tokens: the latent and the rotary
        key of each."""
        weight = self.out.weight  # the cache takes the layer's device and dtype
        like = {"device": weight.device, "dtype": weight.dtype}  # (a local tensor under FSDP2)
        latent = torch.zeros(batch, 1, length, self.kv_rank, **like)
        return KVCache(latent, torch.zeros(batch, 1, length, self.rope_width, **like))

    def forward(
        self, x: torch.Tensor, rope: tuple[torch.Tensor, torch.Tensor], cache: KVCache | None = None
    ) -> torch.Tensor:
        B, T, _ = x.shape  # (B, T, d)
        # region: low_rank_q
        q = self.q_up(self.q_down_norm(self.q_down(x)))  # (B, T, heads x (head_width + rope_width))
        # endregion
        # region: !low_rank_q
        q = self.q(x)  # (B, T, heads x (head_width + rope_width))
        # endregion
        q = q.view(B, T, self.heads, -1).transpose(1, 2)  # (B, H, T, head_width + rope_width)
        q_pass, q_rot = q.split([self.head_width, self.rope_width], dim=-1)
        q_rot = rotate(q_rot, *rope)
        # (B, T, kv_rank), (B, T, rope_width)
        latent, k_rot = self.kv_down(x).split([self.kv_rank, self.rope_width], dim=-1)
        latent = self.kv_down_norm(latent).unsqueeze(1)  # (B, 1, T, kv_rank): shared by every head
        # (B, 1, T, rope_width): one rotary key for every head
        k_rot = rotate(k_rot.view(B, 1, T, self.rope_width), *rope)
        if cache is not None:  # generating: attend in the latent space to every cached token
            # (B, 1, S, kv_rank), (B, 1, S, rope_width)
            latent, k_rot = cache.update(latent, k_rot)
            up_width = self.head_width + self.value_width
            up = self.kv_up.weight.view(self.heads, up_width, self.kv_rank)
            # (H, head_width or value_width, kv_rank)
            up_k, up_v = up.split([self.head_width, self.value_width], dim=1)
            # (B, H, T, kv_rank + rope_width): queries in the latent space
            q = torch.cat((q_pass @ up_k, q_rot), dim=-1)
            k = torch.cat((latent, k_rot), dim=-1)  # (B, 1, S, kv_rank + rope_width)
            # region: scale
            scale = self.scale  # as in the expanded form
            # endregion
            # region: !scale
            scale = (self.head_width + self.rope_width) ** -0.5  # as in the expanded form
            # endregion
            y = F.scaled_dot_product_attention(
                q, k, latent, is_causal=T > 1, scale=scale, enable_gqa=True
            )  # (B, H, T, kv_rank)
            y = y @ up_v.transpose(1, 2)  # (B, H, T, value_width)
        else:
            kv = self.kv_up(latent.squeeze(1)).view(B, T, self.heads, -1).transpose(1, 2)
            # (B, H, T, head_width + value_width) -> (B, H, T, head_width), (B, H, T, value_width)
            k_pass, v = kv.split([self.head_width, self.value_width], dim=-1)
            q = torch.cat((q_pass, q_rot), dim=-1)  # (B, H, T, head_width + rope_width)
            # (B, H, T, head_width + rope_width)
            k = torch.cat((k_pass, k_rot.expand(-1, self.heads, -1, -1)), dim=-1)
            # region: scale
            # (B, H, T, value_width)
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=self.scale)
            # endregion
            # region: !scale
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # (B, H, T, value_width)
            # endregion
        return self.out(y.transpose(1, 2).reshape(B, T, -1))  # (B, T, d)
