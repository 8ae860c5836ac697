"""Template of Zamba2's shared transformer blocks (archcalc.codegen.shared fills it): the low-rank
``Adapter``, the ``SharedBlock`` that several hybrid layers run, and the hybrid layer's block: the
shared block on concat(x, token embeddings), a projection of the layer's own, then Mamba2."""

import torch
from torch import nn

from archcalc.codegen.templates.names import (
    ATTN_NORM,
    MIXER_NORM,
    MLP_NORM,
    Config,
    KVCache,
    Mamba2,
    ParallelCache,
    SharedAttention,
    SharedMLP,
)


class Adapter(nn.Module):
    """A low-rank adapter beside a shared projection: up(down(x)), added to the projection's output.
    Each layer that runs a shared block has its own, so the layers sharing it still differ."""

    def __init__(self, width: int, rank: int, out: int):
        super().__init__()
        self.down = nn.Linear(width, rank, bias=False)
        self.up = nn.Linear(rank, out, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, T, width)
        return self.up(self.down(x))  # (B, T, out)


class SharedBlock(nn.Module):
    """DOC"""

    def __init__(self, cfg: Config):
        super().__init__()
        self.attn_norm = ATTN_NORM
        self.attn = SharedAttention(cfg)
        self.mlp_norm = MLP_NORM
        self.mlp = SharedMLP(cfg)

    def forward(
        self,
        x: torch.Tensor,
        embeddings: torch.Tensor,
        # region: rotary
        rope: tuple[torch.Tensor, torch.Tensor],
        # endregion
        mlp_adapter: Adapter,
        # region: attention_adapters
        attn_adapters: tuple[Adapter, Adapter, Adapter],
        # endregion
        cache: KVCache | None = None,
    ) -> torch.Tensor:  # x, embeddings: (B, T, d) each
        h = self.attn_norm(torch.cat([x, embeddings], dim=-1))  # (B, T, 2d)
        h = self.attn(h, rope, attn_adapters, cache)  # (B, T, d)
        return self.mlp(self.mlp_norm(h), mlp_adapter)  # (B, T, d): no residual


class HybridBlock(nn.Module):
    """DOC"""

    def __init__(self, cfg: Config, shared: SharedBlock):
        super().__init__()
        # one of cfg.shared_blocks blocks (the same module in every layer it serves)
        self.shared = shared
        # region: attention_adapters
        # this layer's own adapters beside the shared q, k and v projections
        self.q_adapter = Adapter(2 * cfg.width, cfg.adapter_rank, 2 * cfg.width)
        self.k_adapter = Adapter(2 * cfg.width, cfg.adapter_rank, 2 * cfg.width)
        self.v_adapter = Adapter(2 * cfg.width, cfg.adapter_rank, 2 * cfg.width)
        # endregion
        # this layer's own adapter beside the shared MLP's gate_up projection
        self.mlp_adapter = Adapter(cfg.width, cfg.adapter_rank, 2 * cfg.shared_mlp_hidden)
        # takes the shared block's output into this layer
        self.proj = nn.Linear(cfg.width, cfg.width, bias=False)
        self.mixer_norm = MIXER_NORM
        self.mixer = Mamba2(cfg)

    def forward(
        self,
        x: torch.Tensor,
        embeddings: torch.Tensor,
        # region: rotary
        rope: tuple[torch.Tensor, torch.Tensor],
        # endregion
        cache: ParallelCache | None = None,
    ) -> torch.Tensor:  # (B, T, d)
        kv, state = (cache.kv, cache.state) if cache is not None else (None, None)
        # region: attention_adapters
        attn_adapters = (self.q_adapter, self.k_adapter, self.v_adapter)
        # endregion
        shared = self.shared(x, embeddings, rope, self.mlp_adapter, attn_adapters, kv)  # (B, T, d)
        # Mamba2 reads x plus the shared block's output, projected; the residual is x alone
        return x + self.mixer(self.mixer_norm(x + self.proj(shared)), state)
