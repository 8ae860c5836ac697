"""Template of DeepSeek Sparse Attention's lightning indexer (archcalc.codegen.latent fills it), as
transformers' DeepseekV32Indexer (half pairs) and GlmMoeDsaIndexer (interleaved pairs): the
rotation of its first rope_width features in regions."""

import torch
import torch.nn.functional as F
from torch import nn

from archcalc.codegen.templates.names import Config, rotate


class Indexer(nn.Module):
    """DOC"""

    def __init__(self, cfg: Config):
        super().__init__()
        self.heads, self.head_width = cfg.index_heads, cfg.index_head_width
        self.rope_width, self.top_k = cfg.rope_width, cfg.index_top_k
        self.q_up = nn.Linear(cfg.q_rank, self.heads * self.head_width, bias=False)
        self.k = nn.Linear(cfg.width, self.head_width, bias=False)
        self.k_norm = nn.LayerNorm(self.head_width, eps=1e-6)
        self.weights = nn.Linear(cfg.width, self.heads, bias=False)

    def turn(self, x: torch.Tensor, rope: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        """Rotate the first rope_width features of each head of x (B, T, heads, head_width)."""
        cos, sin = (table[:, None] for table in rope)  # (T, 1, rope_width)
        x_rot, x_pass = x.split([self.rope_width, self.head_width - self.rope_width], dim=-1)
        # region: half
        cos, sin = cos.to(x.dtype), sin.to(x.dtype)
        half = self.rope_width // 2  # half pairs: features j and j + rope_width / 2
        turned = torch.cat((-x_rot[..., half:], x_rot[..., :half]), dim=-1)
        x_rot = x_rot * cos + turned * sin
        # endregion
        # region: !half
        x_rot = rotate(x_rot, cos, sin)  # the attention's pairs
        # endregion
        return torch.cat((x_rot, x_pass), dim=-1)

    def key(self, x: torch.Tensor, rope: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        """The indexer's key of each token of x (B, T, d): (B, 1, T, head_width)."""
        k = self.k_norm(self.k(x)).unsqueeze(2)  # (B, T, 1, head_width)
        return self.turn(k, rope).transpose(1, 2)

    @torch.no_grad()
    def forward(
        self,
        x: torch.Tensor,
        q_latent: torch.Tensor,
        rope: tuple[torch.Tensor, torch.Tensor],
        keys: torch.Tensor,
    ) -> torch.Tensor:
        """The keys each of the T queries of x attends to, of the S keys (B, 1, S, head_width) whose
        last T are its own tokens': the top_k by score, (B, T, min(top_k, S)) indices."""
        B, T, _ = x.shape
        q = self.q_up(q_latent).view(B, T, self.heads, self.head_width)
        q = self.turn(q, rope)  # (B, T, heads, head_width)
        # (B, T, heads, S): each head's query with every key
        scores = F.relu(q.float() @ keys.float().transpose(-1, -2) * self.head_width**-0.5)
        weights = self.weights(x).float() * self.heads**-0.5  # (B, T, heads)
        index = (weights.unsqueeze(-2) @ scores).squeeze(-2)  # (B, T, S): the heads' weighted sum
        if T > 1:  # the prompt: never a later token
            S = index.shape[-1]
            later = torch.ones(T, S, dtype=torch.bool, device=x.device).triu(S - T + 1)
            index = index.masked_fill(later, float("-inf"))
        return index.topk(min(self.top_k, index.shape[-1]), dim=-1).indices
