"""Template of ALiBi's bias (archcalc.codegen.alibi fills it): as BLOOM and MPT compute it
(``Alibi``), and as transformers' Falcon does (``FalconAlibi``, emitted as ``Alibi``)."""

import math

import torch
from torch import nn

from archcalc.codegen.templates.names import Config


class Alibi(nn.Module):
    """ALiBi's additive attention bias: slope_h * (j - i) for query i and key j in head h, -inf for
    keys after the query (the causal mask). No parameters, no buffers: computed in forward for any
    device and dtype.

    The slopes are a geometric series: 2^(-max_bias * k / n), k = 1..n, for n the largest power of
    two not above the number of heads; the remaining heads take every other term of the series of
    2n heads, 2^(-max_bias * k / 2n) for k = 1, 3, 5, ... (as BLOOM and MPT compute them; max_bias
    is 8 in both)."""

    def __init__(self, cfg: Config):
        super().__init__()
        self.heads, self.max_bias = cfg.heads, cfg.alibi_max_bias

    def slopes(self, device: torch.device) -> torch.Tensor:
        """One slope per head: (H,)."""
        n = 2 ** math.floor(math.log2(self.heads))
        k = torch.arange(1, n + 1, device=device, dtype=torch.float32)
        # 1, 3, 5, ...: the heads past n
        odd = 2 * torch.arange(self.heads - n, device=device, dtype=torch.float32) + 1
        return torch.cat([2.0 ** (-self.max_bias * k / n), 2.0 ** (-self.max_bias * odd / (2 * n))])

    def forward(self, start: int, T: int, device: torch.device, dtype: torch.dtype) -> torch.Tensor:
        """The bias of T queries at positions start .. start + T - 1 over the keys at
        0 .. start + T - 1: (1, H, T, S)."""
        # made in the dtype attention runs in: one tensor for every layer, not one cast (and one
        # saved copy) per layer
        if torch.is_autocast_enabled(device.type):
            dtype = torch.get_autocast_dtype(device.type)
        i = torch.arange(start, start + T, device=device)
        j = torch.arange(start + T, device=device)
        distance = (j[None, :] - i[:, None]).float()  # (T, S): keys before the query are negative
        bias = self.slopes(device)[:, None, None] * distance  # (H, T, S)
        return bias.masked_fill(distance > 0, float("-inf")).unsqueeze(0).to(dtype)  # causal


class FalconAlibi(nn.Module):
    """ALiBi's additive attention bias as transformers' Falcon computes it: slope_h * j for key j in
    head h, the slope and the product rounded to bfloat16, divided by sqrt(head_width); -inf for
    keys after the query (the causal mask). Up to the rounding, the softmax of
    slope_h * (j - i) / sqrt(head_width). No parameters, no buffers.

    The slopes are a geometric series, base^k for base = 2^(-max_bias / n), k = 1..n, n the largest
    power of two not above the number of heads; the remaining heads take the odd powers of the
    series of 2n heads (max_bias: 8)."""

    def __init__(self, cfg: Config):
        super().__init__()
        self.heads, self.max_bias, self.head_width = cfg.heads, cfg.alibi_max_bias, cfg.head_width

    def slopes(self, device: torch.device) -> torch.Tensor:
        """One slope per head: (H,), computed as transformers' Falcon does (powers of a float32
        base)."""
        n = 2 ** math.floor(math.log2(self.heads))
        base = torch.full((), 2 ** (-self.max_bias / n), device=device, dtype=torch.float32)
        slopes = torch.pow(base, torch.arange(1, 1 + n, device=device, dtype=torch.int32))
        extra = torch.full((), 2 ** (-self.max_bias / (2 * n)), device=device, dtype=torch.float32)
        # 1, 3, 5, ...: the heads past n
        odd = torch.arange(1, 1 + 2 * (self.heads - n), 2, device=device, dtype=torch.int32)
        return torch.cat([slopes, torch.pow(extra, odd)])

    def forward(self, start: int, T: int, device: torch.device, dtype: torch.dtype) -> torch.Tensor:
        """The bias of T queries at positions start .. start + T - 1 over the keys at
        0 .. start + T - 1: (1, H, T, S)."""
        # made in the dtype attention runs in (one tensor for every layer)
        if torch.is_autocast_enabled(device.type):
            dtype = torch.get_autocast_dtype(device.type)
        i = torch.arange(start, start + T, device=device)
        j = torch.arange(start + T, device=device)
        # (H, S), in bfloat16 steps
        bias = (self.slopes(device).bfloat16()[:, None] * j).float() / math.sqrt(self.head_width)
        bias = bias[:, None, :].expand(-1, T, -1)  # (H, T, S): the same for every query
        # causal
        return bias.masked_fill(j[None, :] > i[:, None], float("-inf")).unsqueeze(0).to(dtype)
