"""Template of LFM2's gated short convolution (archcalc.codegen.short_conv fills it): the
``ShortConv`` layer, whose one-token ``step`` continues a cached conv window (a ``MixerCache`` of
templates/mixer.py with an empty state: the window is all it keeps).

Its matmuls are its two projections and its depthwise conv; its gates are element-wise."""

import torch
import torch.nn.functional as F
from torch import nn

from archcalc.codegen.templates.names import CONV_BIAS, IN_BIAS, OUT_BIAS, Config, MixerCache


class ShortConv(nn.Module):
    """DOC"""

    def __init__(self, cfg: Config):
        super().__init__()
        self.width = cfg.width  # d
        self.taps = cfg.mixer_conv  # K
        # B (the input gate), C (the output gate) and x
        self.in_proj = nn.Linear(cfg.width, 3 * cfg.width, bias=IN_BIAS)
        # causal and depthwise: each channel its own filter of K taps
        self.conv = nn.Conv1d(cfg.width, cfg.width, self.taps, groups=cfg.width, bias=CONV_BIAS)
        self.out_proj = nn.Linear(cfg.width, cfg.width, bias=OUT_BIAS)

    def new_cache(self, batch: int) -> MixerCache:
        """An empty window for `batch` sequences: its last K - 1 gated inputs; no other state."""
        weight = self.out_proj.weight  # the cache takes the layer's device and dtype
        like = {"device": weight.device, "dtype": weight.dtype}  # (a local tensor under FSDP2)
        window = torch.zeros(batch, self.width, self.taps - 1, **like)
        return MixerCache(window, torch.zeros(batch, 0, **like))

    def forward(self, u: torch.Tensor, cache: MixerCache | None = None) -> torch.Tensor:
        """u (B, T, d) -> (B, T, d); with a cache that has seen tokens, T = 1: one step."""
        B, C, x = self.in_proj(u).transpose(1, 2).chunk(3, dim=1)  # (B, d, T) each
        Bx = B * x  # the gated input
        if cache is not None and cache.seen:
            if u.shape[1] != 1:
                raise ValueError("a MixerCache takes the prompt at once, then one token at a time")
            window = torch.cat((cache.conv_state, Bx), dim=-1)  # (B, d, K)
        else:
            window = F.pad(Bx, (self.taps - 1, 0))  # (B, d, K - 1 + T): zeros before the first
        if cache is not None:
            cache.conv_state.copy_(window[..., window.shape[-1] - self.taps + 1 :])
            cache.seen += u.shape[1]
        y = C * self.conv(window)  # (B, d, T): the output gate
        return self.out_proj(y.transpose(1, 2))  # (B, T, d)
