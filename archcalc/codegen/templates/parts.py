"""Template of the parts shared by the component kinds (archcalc.codegen.parts fills it): the
embeddings and the norms that torch does not have."""

import torch
import torch.nn.functional as F
from torch import nn

from archcalc.codegen.templates.names import (
    EMBEDDED,
    NORM,
    PER_LAYER_NORM,
    POSITION_ROWS,
    TOKEN_TYPES,
    TOKEN_WIDTH,
    Config,
)


class Embeddings(nn.Module):
    """DOC"""

    def __init__(self, cfg: Config):
        super().__init__()
        self.token = nn.Embedding(cfg.vocab, TOKEN_WIDTH)
        # region: project_in
        self.project_in = nn.Linear(TOKEN_WIDTH, cfg.width, bias=False)
        # endregion
        # region: token_type
        self.token_type = nn.Embedding(TOKEN_TYPES, cfg.width)
        # endregion
        # region: offset
        self.offset = cfg.position_offset  # position p reads row p + offset
        # endregion
        # region: position
        self.position = nn.Embedding(POSITION_ROWS, cfg.width)
        # endregion
        # region: norm
        self.norm = NORM
        # endregion
        # region: scale
        self.scale = cfg.width**0.5  # Gemma multiplies the embeddings by sqrt(d)
        # endregion
        # region: sinusoidal_scale
        self.scale = cfg.width**0.5  # the token embeddings are multiplied by sqrt(d)
        # endregion
        # region: multiplier
        self.multiplier = cfg.embedding_multiplier  # Granite's embedding_multiplier
        # endregion
        # region: per_layer
        # Gemma 4's per-layer inputs: each layer's own small embedding of every token (one table,
        # P features per layer) and a projection of the token's embedding, combined per layer
        self.layers, self.per_layer_width = cfg.ple_layers, cfg.per_layer_width
        self.per_layer = nn.Embedding(cfg.per_layer_vocab, cfg.ple_layers * cfg.per_layer_width)
        self.per_layer_proj = nn.Linear(cfg.width, cfg.ple_layers * cfg.per_layer_width, bias=False)
        self.per_layer_norm = PER_LAYER_NORM
        # endregion

    # region: per_layer
    def per_layer_inputs(self, input_ids: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        """Every layer's per-layer input (B, T, layers, P), from the tokens and their embeddings x
        (B, T, d)."""
        shape = (*input_ids.shape, self.layers, self.per_layer_width)
        # the layers' own embeddings of the tokens, scaled by sqrt(P) as the tokens' are by sqrt(d)
        own = self.per_layer(input_ids).view(shape) * self.per_layer_width**0.5
        projected = self.per_layer_proj(x).view(shape) * x.shape[-1] ** -0.5  # (B, T, layers, P)
        return (self.per_layer_norm(projected) + own) * 2**-0.5  # the two, summed and scaled

    # endregion
    def forward(
        self,
        input_ids: torch.Tensor,
        # region: start
        start: int = 0,
        # endregion
        # region: token_type
        token_type_ids: torch.Tensor | None = None,
        # endregion
    ) -> torch.Tensor:
        # region: token_type
        # (B, T)
        types = token_type_ids if token_type_ids is not None else torch.zeros_like(input_ids)  # noqa: F841
        # endregion
        # region: position
        # region: start
        positions = torch.arange(start, start + input_ids.shape[1], device=input_ids.device)  # (T,)
        # endregion
        # region: !start
        positions = torch.arange(input_ids.shape[1], device=input_ids.device)  # (T,)
        # endregion
        # region: offset
        positions = positions + self.offset
        # endregion
        # endregion
        # region: sinusoidal
        T, d = input_ids.shape[1], self.token.embedding_dim
        # region: start
        position = torch.arange(start, start + T, device=input_ids.device, dtype=torch.float32)
        # endregion
        # region: !start
        position = torch.arange(T, device=input_ids.device, dtype=torch.float32)
        # endregion
        position = position[:, None]  # (T, 1)
        # (T, ceil(d / 2))
        angles = position / 10000.0 ** (torch.arange(0, d, 2, device=input_ids.device) / d)
        # sin on even features, cos on odd
        table = torch.stack((angles.sin(), angles.cos()), dim=-1).flatten(-2)[:, :d]
        return EMBEDDED + table.to(self.token.weight.dtype)  # (B, T, d)
        # endregion
        # region: !sinusoidal
        # region: fits
        return EMBEDDED  # (B, T, d)
        # endregion
        # region: !fits
        # (B, T, d)
        return EMBEDDED
        # endregion
        # endregion


class OffsetRMSNorm(nn.Module):
    """RMSNorm that scales by (1 + weight), as Gemma does (the weight starts at zero); computed in
    float32."""

    def __init__(self, width: int, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.zeros(width))

    def reset_parameters(self) -> None:
        nn.init.zeros_(self.weight)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x.float()
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
        return (h * (1.0 + self.weight.float())).type_as(x)


class HeadNorm(nn.Module):
    """A LayerNorm (or RMSNorm) over each head's features with weights of its own for every head
    (StableLM's per-head QK-norms): x is (B, heads, T, width); weight and bias hold head h's at
    h * width .. (h + 1) * width - 1."""

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
        return y if self.bias is None else y + self.bias.view(self.heads, 1, self.width)


def xielu(x: torch.Tensor, alpha_p: torch.Tensor, alpha_n: torch.Tensor, beta, eps) -> torch.Tensor:
    """xIELU (Huang et al. 2024), as transformers' XIELUActivation computes it: softplus(alpha_p)
    * x² + beta * x above zero, (beta + softplus(alpha_n)) * (expm1(min(x, eps)) - x) + beta * x
    elsewhere (beta and eps: 0-d tensors)."""
    a_p, a_n = F.softplus(alpha_p), beta + F.softplus(alpha_n)
    below = (torch.expm1(torch.min(x, eps)) - x) * a_n + beta * x
    return torch.where(x > 0, a_p * x * x + beta * x, below)
