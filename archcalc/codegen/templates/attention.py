"""Template of the attention class (archcalc.codegen.attention fills it): every kind of attention
layer that codegen generates, its optional parts in regions. Multi-head attention is this with
``self.kv_heads`` read as ``self.heads``; ``cfg.heads`` and the other fields are replaced by the
stack's own, and the calls lose the keyword arguments (``scale``, ``enable_gqa``) that a layer
does not use."""

import torch
import torch.nn.functional as F
from torch import nn

from archcalc.codegen.templates.kernels import kernel, temperature
from archcalc.codegen.templates.names import (
    K_BIAS,
    K_NORM,
    OUT_BIAS,
    OUT_WIDTH,
    Q_BIAS,
    Q_NORM,
    QKV_BIAS,
    V_BIAS,
    Config,
    KVCache,
    rotate,
)


class Attention(nn.Module):
    """DOC"""

    def __init__(
        self,
        cfg: Config,
        # region: banded
        window: int | None = None,
        # endregion
        # region: nope
        rotary: bool = True,
        # endregion
        # region: chunked
        chunk: int | None = None,
        # endregion
    ):
        super().__init__()
        # region: gqa
        self.heads, self.kv_heads, self.head_width = cfg.heads, cfg.kv_heads, cfg.head_width
        # endregion
        # region: !gqa
        self.heads, self.head_width = cfg.heads, cfg.head_width
        # endregion
        # region: nope
        self.rotary = rotary  # False: this layer has no rotary positions (NoPE)
        # endregion
        # region: value_width
        self.value_width = cfg.value_width
        # endregion
        # region: banded
        # None: dense causal attention; else a token sees the last `window` tokens
        self.window = window
        # endregion
        # region: chunked
        # None: dense causal attention; else a token sees the earlier tokens of its block
        self.chunk = chunk
        # endregion
        # region: no_window
        self.window = None  # dense causal attention: the model hands these layers the global tables
        # endregion
        # region: rotary_qk_norm
        # rotary layers: q and k divided by their root mean square (no weights)
        self.qk_eps = cfg.rotary_qk_norm_eps
        # endregion
        # region: temperature
        # the query temperature steps up every temperature_floor positions
        self.temperature_floor = cfg.temperature_floor
        self.temperature_scale = cfg.temperature_scale
        # endregion
        # region: scale_one
        self.scale = cfg.attn_scale  # T5: scores are not divided by sqrt(head_width)
        # endregion
        # region: scale_other
        self.scale = cfg.attn_scale
        # endregion
        # region: explicit_scale
        self.scale = self.head_width**-0.5
        # endregion
        # region: softcap
        self.softcap = cfg.attn_softcap
        # endregion
        # region: value_norm
        self.v_eps = cfg.value_norm_eps  # the values' RMS norm (no weights)
        # endregion
        # region: fused_chunk
        self.qkv = nn.Linear(cfg.width, 3 * cfg.heads * cfg.head_width, bias=QKV_BIAS)
        # endregion
        # region: fused_split
        width = (cfg.heads + cfg.kv_heads) * cfg.head_width + cfg.kv_heads * cfg.value_width
        self.qkv = nn.Linear(cfg.width, width, bias=QKV_BIAS)
        # endregion
        # region: !fused
        # region: !output_gate
        self.q = nn.Linear(cfg.width, cfg.heads * cfg.head_width, bias=Q_BIAS)
        # endregion
        # region: output_gate
        # each head's query, then its output gate
        self.q = nn.Linear(cfg.width, 2 * cfg.heads * cfg.head_width, bias=Q_BIAS)
        # endregion
        # region: !kv_shared
        self.k = nn.Linear(cfg.width, cfg.kv_heads * cfg.head_width, bias=K_BIAS)
        # region: !k_eq_v
        self.v = nn.Linear(cfg.width, cfg.kv_heads * cfg.value_width, bias=V_BIAS)
        # endregion
        # endregion
        # endregion
        # region: qk_norm
        self.q_norm = Q_NORM
        # region: !kv_shared
        self.k_norm = K_NORM
        # endregion
        # endregion
        # region: !concat
        self.out = nn.Linear(cfg.heads * cfg.value_width, cfg.width, bias=OUT_BIAS)
        # endregion
        # region: concat
        # back to the model's width: the input is concat(x, token embeddings), twice as wide
        self.out = nn.Linear(cfg.heads * cfg.value_width, OUT_WIDTH, bias=OUT_BIAS)
        # endregion
        # region: sinks
        # one learned logit per head, beside the keys
        self.sinks = nn.Parameter(torch.zeros(self.heads))
        # endregion

    # insert: new_cache

    def forward(
        self,
        x: torch.Tensor,
        # region: cross
        memory: torch.Tensor,
        # endregion
        # region: rotary
        rope: tuple[torch.Tensor, torch.Tensor],
        # endregion
        # region: score_bias
        bias: torch.Tensor,
        # endregion
        # region: adapters
        adapters: tuple[nn.Module, nn.Module, nn.Module],
        # endregion
        # region: kv
        kv: dict[int | None, tuple[torch.Tensor, torch.Tensor]],
        # endregion
        # region: cached
        cache: KVCache | None = None,
        # endregion
    ) -> torch.Tensor:
        B, T, _ = x.shape  # (B, T, d)
        # region: fused_chunk
        q, k, v = self.qkv(x).chunk(3, dim=-1)  # (B, T, heads x width) each
        # endregion
        # region: fused_split
        q_width, kv_width = self.heads * self.head_width, self.kv_heads * self.head_width
        q, k, v = self.qkv(x).split([q_width, kv_width, self.kv_heads * self.value_width], dim=-1)
        # endregion
        # region: cross
        q = self.q(x).view(B, T, self.heads, -1).transpose(1, 2)  # (B, H, T, d_head)
        if cache is not None and cache.seen:  # generating: the encoder output's keys and values
            k, v = cache.k, cache.v  # (B, KV, S, d_head)
        else:
            S = memory.shape[1]  # (B, S, d): the encoder output
            k = self.k(memory).view(B, S, self.kv_heads, -1).transpose(1, 2)  # (B, KV, S, d_head)
            v = self.v(memory).view(B, S, self.kv_heads, -1).transpose(1, 2)  # (B, KV, S, d_value)
            if cache is not None:
                k, v = cache.update(k, v)
        # endregion
        # region: ungated
        q, k, v = self.q(x), self.k(x), self.v(x)  # (B, T, heads x width)
        # endregion
        # region: k_eq_v
        q, k = self.q(x), self.k(x)  # (B, T, heads x width)
        v = k  # no value projection: the values are the keys (before their norm and rotary)
        # endregion
        # region: kv_shared
        q = self.q(x)  # (B, T, heads x width): the keys and values are an earlier layer's
        # endregion
        # region: output_gate
        q, gate = self.q(x).view(B, T, self.heads, -1).chunk(2, dim=-1)  # (B, T, H, d_head) each
        q, k, v = q.flatten(2), self.k(x), self.v(x)  # (B, T, heads x width)
        # endregion
        # region: adapters
        # the calling layer's own low-rank adapters, beside the shared q, k and v projections
        q_adapter, k_adapter, v_adapter = adapters
        q, k, v = q + q_adapter(x), k + k_adapter(x), v + v_adapter(x)
        # endregion
        # region: !cross
        # region: qk_norm_all
        q, k = self.q_norm(q), self.k_norm(k)  # QK-norm over all heads' features at once
        # endregion
        q = q.view(B, T, self.heads, -1).transpose(1, 2)  # (B, H, T, d_head)
        # region: !kv_shared
        # region: gqa
        k = k.view(B, T, self.kv_heads, -1).transpose(1, 2)  # (B, KV, T, d_head)
        v = v.view(B, T, self.kv_heads, -1).transpose(1, 2)  # (B, KV, T, d_value)
        # endregion
        # region: !gqa
        k = k.view(B, T, self.heads, -1).transpose(1, 2)  # (B, H, T, d_head)
        v = v.view(B, T, self.heads, -1).transpose(1, 2)  # (B, H, T, d_value)
        # endregion
        # endregion
        # region: qk_norm_heads
        q, k = self.q_norm(q), self.k_norm(k)  # QK-norm over each head's features
        # endregion
        # region: q_norm_heads
        q = self.q_norm(q)  # QK-norm over each head's features (the shared keys have theirs)
        # endregion
        # region: value_norm
        # each head's values divided by their root mean square (no weights)
        v = F.rms_norm(v.float(), v.shape[-1:], eps=self.v_eps).type_as(v)
        # endregion
        # region: nope
        if self.rotary:
            q, k = rotate(q, *rope), rotate(k, *rope)  # rotary positions
            # region: rotary_qk_norm
            q, k = (
                (
                    t.float() * torch.rsqrt(t.float().pow(2).mean(-1, keepdim=True) + self.qk_eps)
                ).type_as(t)
                for t in (q, k)
            )
            # endregion
        # endregion
        # region: rotary_q
        q = rotate(q, *rope)  # rotary positions (the shared keys have theirs)
        # endregion
        # region: rotary_all
        q, k = rotate(q, *rope), rotate(k, *rope)  # rotary positions
        # region: rotary_qk_norm
        q, k = (
            (
                t.float() * torch.rsqrt(t.float().pow(2).mean(-1, keepdim=True) + self.qk_eps)
            ).type_as(t)
            for t in (q, k)
        )
        # endregion
        # endregion
        q = temperature(self, q, x, T, cache)  # insert: temperature
        # region: contiguous
        v = v.contiguous()  # attention keeps v for backward: a view would keep all of qkv alive
        # endregion
        # region: cache_update
        if cache is not None:  # generating: attend to the cached tokens too
            # region: gqa
            k, v = cache.update(k, v)  # (B, KV, S, d_head): S tokens in all
            # endregion
            # region: !gqa
            k, v = cache.update(k, v)  # (B, H, S, d_head): S tokens in all
            # endregion
        # endregion
        # endregion
        # region: kv_store
        kv[self.window] = k, v  # the later layers of this kind reuse them (KV sharing)
        # endregion
        # region: kv_shared
        # the keys and values of the last earlier layer of this kind (sliding or not), with its
        # cache's tokens: this layer computes and caches none
        k, v = kv[self.window]  # (B, KV, S, d_head)
        # endregion
        # region: repeat
        k = k.repeat_interleave(self.heads // self.kv_heads, dim=1)  # (B, H, S, d_head)
        v = v.repeat_interleave(self.heads // self.kv_heads, dim=1)  # (B, H, S, d_value)
        # endregion
        y = kernel(self, q, k, v, x, B, T, cache, bias)  # insert: kernel
        # region: output_gate
        y = y * torch.sigmoid(gate.transpose(1, 2))  # (B, H, T, d_value): each head's output gated
        # endregion
        return self.out(y.transpose(1, 2).reshape(B, T, -1))  # (B, T, d)
