"""Source template for ALiBi positions (Press et al. 2022, "Train Short, Test Long"): no position embeddings; every
attention layer adds slope_h · (j - i) to the score of query i over key j in head h, a penalty linear in the distance.

The model computes the bias once per forward, for the tokens it runs over every token they may see (the cached ones
too), with the causal mask in it, and hands it to every layer as SDPA's ``attn_mask``. It has no parameters and no
buffers. transformers' BLOOM adds slope_h · j and MPT slope_h · (j - S + 1) instead: each differs from slope_h · (j - i)
by a constant per query, which the softmax does not see.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from archcalc.ir import Component
from codegen.errors import UnsupportedError

if TYPE_CHECKING:
    from codegen.emitter import Emitter

ALIBI = '''class Alibi(nn.Module):
    """ALiBi's additive attention bias: slope_h * (j - i) for query i and key j in head h, -inf for keys after the
    query (the causal mask). No parameters, no buffers: computed in forward for any device and dtype.

    The slopes are a geometric series: 2^(-max_bias * k / n), k = 1..n, for n the largest power of two not above the
    number of heads; the remaining heads take every other term of the series of 2n heads, 2^(-max_bias * k / 2n) for
    k = 1, 3, 5, ... (as BLOOM and MPT compute them; max_bias is 8 in both)."""

    def __init__(self, cfg: Config):
        super().__init__()
        self.heads, self.max_bias = cfg.heads, cfg.alibi_max_bias

    def slopes(self, device: torch.device) -> torch.Tensor:
        """One slope per head: (H,)."""
        n = 2 ** math.floor(math.log2(self.heads))
        k = torch.arange(1, n + 1, device=device, dtype=torch.float32)
        odd = 2 * torch.arange(self.heads - n, device=device, dtype=torch.float32) + 1  # 1, 3, 5, ...: the heads past n
        return torch.cat([2.0 ** (-self.max_bias * k / n), 2.0 ** (-self.max_bias * odd / (2 * n))])

    def forward(self, start: int, T: int, device: torch.device, dtype: torch.dtype) -> torch.Tensor:
        """The bias of T queries at positions start .. start + T - 1 over the keys at 0 .. start + T - 1: (1, H, T, S)."""
        if torch.is_autocast_enabled(device.type):  # made in the dtype attention runs in: one tensor for every layer,
            dtype = torch.get_autocast_dtype(device.type)  # not one cast (and one saved copy) per layer
        i = torch.arange(start, start + T, device=device)
        j = torch.arange(start + T, device=device)
        distance = (j[None, :] - i[:, None]).float()  # (T, S): keys before the query are negative
        bias = self.slopes(device)[:, None, None] * distance  # (H, T, S)
        return bias.masked_fill(distance > 0, float("-inf")).unsqueeze(0).to(dtype)  # causal'''



def emit_alibi(em: Emitter, embed: Component, attns: list[Component]) -> None:
    """Declare ALiBi's config fields (the heads, the slopes' exponent) and add the ``Alibi`` class. One bias serves
    every layer, so every stack has the same heads; it holds the causal mask, so the layers are causal and dense."""
    heads = {em.value(a.attrs.heads) for a in attns}
    if len(heads) != 1 or any(not a.attrs.causal or a.attrs.banded for a in attns):
        raise UnsupportedError("codegen generates ALiBi for causal, dense attention with one head count in every stack only")
    em.field("heads", attns[0].attrs.heads, f"{attns[0].attrs.heads}: attention heads")
    em.field("alibi_max_bias", float(embed.attrs.alibi_max_bias), "ALiBi's slopes are 2^(-alibi_max_bias * k / heads)")
    em.add(ALIBI, helper=True)
