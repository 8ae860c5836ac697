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
    Indexer,
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
        # region: temperature
        # the query temperature steps up every temperature_floor positions
        self.temperature_floor = cfg.temperature_floor
        self.temperature_scale = cfg.temperature_scale
        # endregion
        # region: rank_scale
        # the compressed query and key latent scaled up by sqrt(width / rank) (LongCat-Flash)
        self.q_scale = (cfg.width / cfg.q_rank) ** 0.5
        self.kv_scale = (cfg.width / cfg.kv_rank) ** 0.5
        # endregion
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
        # region: sparse
        self.indexer = Indexer(cfg)  # chooses the keys each query attends to
        # endregion

    def new_cache(self, batch: int, length: int) -> KVCache:
        """An empty cache for `batch` sequences of up to `length` tokens: the latent and the rotary
        key of each."""
        weight = self.out.weight  # the cache takes the layer's device and dtype
        like = {"device": weight.device, "dtype": weight.dtype}  # (a local tensor under FSDP2)
        latent = torch.zeros(batch, 1, length, self.kv_rank, **like)
        # region: !sparse
        return KVCache(latent, torch.zeros(batch, 1, length, self.rope_width, **like))
        # endregion
        # region: sparse
        # beside the rotary key, the indexer's key of each token
        keys = torch.zeros(batch, 1, length, self.rope_width + self.indexer.head_width, **like)
        return KVCache(latent, keys)
        # endregion

    # region: sparse
    def selected(self, top: torch.Tensor) -> torch.Tensor:
        """The keys each of T queries attends to (top: (B, T, k) indices of its T tokens): its
        top-k, never a later token, (B, 1, T, T) booleans."""
        B, T, _ = top.shape
        chosen = torch.zeros(B, T, T, dtype=torch.bool, device=top.device).scatter(-1, top, True)
        causal = torch.ones(T, T, dtype=torch.bool, device=top.device).tril()
        return (chosen & causal).unsqueeze(1)

    # endregion
    def forward(
        self, x: torch.Tensor, rope: tuple[torch.Tensor, torch.Tensor], cache: KVCache | None = None
    ) -> torch.Tensor:
        B, T, _ = x.shape  # (B, T, d)
        # region: low_rank_q
        # region: !sparse
        q = self.q_up(self.q_down_norm(self.q_down(x)))  # (B, T, heads x (head_width + rope_width))
        # endregion
        # region: sparse
        q_latent = self.q_down_norm(self.q_down(x))  # (B, T, q_rank): the indexer reads it too
        q = self.q_up(q_latent)  # (B, T, heads x (head_width + rope_width))
        # endregion
        # endregion
        # region: !low_rank_q
        q = self.q(x)  # (B, T, heads x (head_width + rope_width))
        # endregion
        # region: rank_scale
        q = q * self.q_scale
        # endregion
        q = q.view(B, T, self.heads, -1).transpose(1, 2)  # (B, H, T, head_width + rope_width)
        q_pass, q_rot = q.split([self.head_width, self.rope_width], dim=-1)
        q_rot = rotate(q_rot, *rope)
        # region: temperature
        # the query temperature: one step stronger every temperature_floor positions
        p = torch.arange(T, device=x.device) + (cache.seen if cache is not None else 0)  # (T,)
        scale = torch.log1p(torch.floor(p.float() / self.temperature_floor))
        scale = (scale * self.temperature_scale + 1.0)[:, None]  # (T, 1)
        q_pass, q_rot = (q_pass * scale).to(q.dtype), (q_rot * scale).to(q.dtype)
        # endregion
        # (B, T, kv_rank), (B, T, rope_width)
        latent, k_rot = self.kv_down(x).split([self.kv_rank, self.rope_width], dim=-1)
        # region: !rank_scale
        latent = self.kv_down_norm(latent).unsqueeze(1)  # (B, 1, T, kv_rank): shared by every head
        # endregion
        # region: rank_scale
        # (B, 1, T, kv_rank): shared by every head, cached as scaled
        latent = (self.kv_down_norm(latent) * self.kv_scale).unsqueeze(1)
        # endregion
        # (B, 1, T, rope_width): one rotary key for every head
        k_rot = rotate(k_rot.view(B, 1, T, self.rope_width), *rope)
        if cache is not None:  # generating: attend in the latent space to every cached token
            # region: !sparse
            # (B, 1, S, kv_rank), (B, 1, S, rope_width)
            latent, k_rot = cache.update(latent, k_rot)
            # endregion
            # region: sparse
            # (B, 1, S, kv_rank), (B, 1, S, rope_width + the indexer's key)
            keys = torch.cat((k_rot, self.indexer.key(x, rope)), dim=-1)
            latent, keys = cache.update(latent, keys)
            k_rot, index_keys = keys.split([self.rope_width, self.indexer.head_width], dim=-1)
            top = self.indexer(x, q_latent, rope, index_keys.contiguous())  # (B, T, k)
            # endregion
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
            # region: !sparse
            y = F.scaled_dot_product_attention(
                q, k, latent, is_causal=T > 1, scale=scale, enable_gqa=True
            )  # (B, H, T, kv_rank)
            # endregion
            # region: sparse
            mask = self.selected(top) if T > 1 else None  # the prompt: masked to the chosen keys
            if T == 1:  # a new token reads its chosen keys only
                pick = top[..., None]  # (B, 1, k, 1): T = 1
                # (B, 1, k, kv_rank + rope_width), (B, 1, k, kv_rank)
                k = k.gather(2, pick.expand(-1, -1, -1, k.shape[-1]))
                latent = latent.gather(2, pick.expand(-1, -1, -1, self.kv_rank))
            y = F.scaled_dot_product_attention(
                q, k, latent, attn_mask=mask, scale=scale, enable_gqa=True
            )  # (B, H, T, kv_rank)
            # endregion
            y = y @ up_v.transpose(1, 2)  # (B, H, T, value_width)
        else:
            kv = self.kv_up(latent.squeeze(1)).view(B, T, self.heads, -1).transpose(1, 2)
            # (B, H, T, head_width + value_width) -> (B, H, T, head_width), (B, H, T, value_width)
            k_pass, v = kv.split([self.head_width, self.value_width], dim=-1)
            q = torch.cat((q_pass, q_rot), dim=-1)  # (B, H, T, head_width + rope_width)
            # (B, H, T, head_width + rope_width)
            k = torch.cat((k_pass, k_rot.expand(-1, self.heads, -1, -1)), dim=-1)
            # region: !sparse
            # region: scale
            # (B, H, T, value_width)
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=self.scale)
            # endregion
            # region: !scale
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # (B, H, T, value_width)
            # endregion
            # endregion
            # region: sparse
            # each query's chosen keys, never a later one
            mask = self.selected(self.indexer(x, q_latent, rope, self.indexer.key(x, rope)))
            # region: scale
            # (B, H, T, value_width)
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=self.scale)
            # endregion
            # region: !scale
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)  # (B, H, T, value_width)
            # endregion
            # endregion
        return self.out(y.transpose(1, 2).reshape(B, T, -1))  # (B, T, d)
