"""Source template for ALiBi positions (Press et al. 2022, "Train Short, Test Long"): no position embeddings; every
attention layer adds slope_h · (j - i) to the score of query i over key j in head h, a penalty linear in the distance.

The model computes the bias once per forward, for the tokens it runs over every token they may see (the cached ones
too), with the causal mask in it, and hands it to every layer as SDPA's ``attn_mask``. It has no parameters and no
buffers. transformers' BLOOM adds slope_h · j and MPT slope_h · (j - S + 1) instead: each differs from slope_h · (j - i)
by a constant per query, which the softmax does not see.

Falcon (Falcon-RW, ``alibi: true``) differs in two ways, which its weight map asks for (``HFMap.alibi``): transformers'
``build_alibi_tensor`` rounds the slopes and slope_h · j to bfloat16 (as the original Falcon-RW code did), and the bias
is divided by sqrt(head width) like the scores (BLOOM adds it unscaled). That is its SDPA path, the default; its eager
path adds the bias twice (to the scores, and again with the mask), which the original model did not.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from archcalc.ir import Component
from codegen.errors import UnsupportedError
from codegen.hf_maps import MAPS

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



FALCON_ALIBI = '''class Alibi(nn.Module):
    """ALiBi's additive attention bias as transformers' Falcon computes it: slope_h * j for key j in head h, the slope and
    the product rounded to bfloat16, divided by sqrt(head_width); -inf for keys after the query (the causal mask). Up to
    the rounding, the softmax of slope_h * (j - i) / sqrt(head_width). No parameters, no buffers.

    The slopes are a geometric series, base^k for base = 2^(-max_bias / n), k = 1..n, n the largest power of two not
    above the number of heads; the remaining heads take the odd powers of the series of 2n heads (max_bias: 8)."""

    def __init__(self, cfg: Config):
        super().__init__()
        self.heads, self.max_bias, self.head_width = cfg.heads, cfg.alibi_max_bias, cfg.head_width

    def slopes(self, device: torch.device) -> torch.Tensor:
        """One slope per head: (H,), computed as transformers' Falcon does (powers of a float32 base)."""
        n = 2 ** math.floor(math.log2(self.heads))
        base = torch.full((), 2 ** (-self.max_bias / n), device=device, dtype=torch.float32)
        slopes = torch.pow(base, torch.arange(1, 1 + n, device=device, dtype=torch.int32))
        extra = torch.full((), 2 ** (-self.max_bias / (2 * n)), device=device, dtype=torch.float32)
        odd = torch.arange(1, 1 + 2 * (self.heads - n), 2, device=device, dtype=torch.int32)  # 1, 3, 5, ...: the heads past n
        return torch.cat([slopes, torch.pow(extra, odd)])

    def forward(self, start: int, T: int, device: torch.device, dtype: torch.dtype) -> torch.Tensor:
        """The bias of T queries at positions start .. start + T - 1 over the keys at 0 .. start + T - 1: (1, H, T, S)."""
        if torch.is_autocast_enabled(device.type):  # made in the dtype attention runs in (one tensor for every layer)
            dtype = torch.get_autocast_dtype(device.type)
        i = torch.arange(start, start + T, device=device)
        j = torch.arange(start + T, device=device)
        bias = (self.slopes(device).bfloat16()[:, None] * j).float() / math.sqrt(self.head_width)  # (H, S), in bfloat16 steps
        bias = bias[:, None, :].expand(-1, T, -1)  # (H, T, S): the same for every query
        return bias.masked_fill(j[None, :] > i[:, None], float("-inf")).unsqueeze(0).to(dtype)  # causal'''


def emit_alibi(em: Emitter, embed: Component, attns: list[Component]) -> None:
    """Declare ALiBi's config fields (the heads, the slopes' exponent) and add the ``Alibi`` class (Falcon's where its
    weight map says so). One bias serves every layer, so every stack has the same heads; it holds the causal mask, so the
    layers are causal and dense."""
    heads = {em.value(a.attrs.heads) for a in attns}
    if len(heads) != 1 or any(not a.attrs.causal or a.attrs.banded for a in attns):
        raise UnsupportedError("codegen generates ALiBi for causal, dense attention with one head count in every stack only")
    em.field("heads", attns[0].attrs.heads, f"{attns[0].attrs.heads}: attention heads")
    em.field("alibi_max_bias", float(embed.attrs.alibi_max_bias), "ALiBi's slopes are 2^(-alibi_max_bias * k / heads)")
    origin = em.lowered.binding.spec.hf
    hf_map = MAPS.get(origin.model_type) if origin is not None else None
    if hf_map is not None and hf_map.alibi == "bfloat16_scaled":
        if len({em.value(a.attrs.head_width) for a in attns}) != 1:
            raise UnsupportedError("codegen generates Falcon's ALiBi for one head width in every stack only")
        em.field("head_width", attns[0].attrs.head_width, f"{attns[0].attrs.head_width}: width of one head")
        em.add(FALCON_ALIBI, helper=True)
    else:
        em.add(ALIBI, helper=True)
