"""Template of rotary positions (archcalc.codegen.rotary fills it): the ``Rotary`` tables, with
each scaling scheme's lines in a region (archcalc.codegen.rope_scaling declares their config
fields), and the ``rotate`` function that applies them to queries and keys. The sliding-window
layers' own tables (Gemma 3, Gemma 4) are ``Rotary`` emitted as ``LocalRotary``, with
``cfg.rotary_local_base`` for ``cfg.rotary_base`` (and ``cfg.rotary_local_width`` for
``cfg.rotary_width`` where their heads are narrower: Gemma 4's).

Frequencies that do not depend on the length (no scheme, linear, llama3, yarn) are a buffer that
``reset_parameters`` computes; those that follow the length (dynamic, longrope: ``by_length``)
are computed in forward."""

import math

import torch
from torch import nn

from archcalc.codegen.templates.names import Config


class Rotary(nn.Module):
    """DOC"""

    def __init__(self, cfg: Config):
        super().__init__()
        self.width, self.base = cfg.rotary_width, cfg.rotary_base
        # region: linear
        self.factor = cfg.rotary_factor
        # endregion
        # region: dynamic
        self.factor, self.original_context = cfg.rotary_factor, cfg.rotary_original_context
        # endregion
        # region: llama3
        self.factor, self.original_context = cfg.rotary_factor, cfg.rotary_original_context
        self.low_freq_factor = cfg.rotary_low_freq_factor
        self.high_freq_factor = cfg.rotary_high_freq_factor
        # endregion
        # region: yarn
        self.factor, self.attention_factor = cfg.rotary_factor, cfg.rotary_attention_factor

        def feature(turns: float) -> float:
            """The feature whose frequency turns `turns` times over the original context."""
            turn = math.log(cfg.rotary_original_context / (turns * 2 * math.pi))
            return self.width * turn / (2 * math.log(self.base))

        # region: truncate
        # rounded outwards
        low = math.floor(feature(cfg.rotary_beta_fast))
        high = math.ceil(feature(cfg.rotary_beta_slow))
        # endregion
        # region: !truncate
        # not rounded (truncate: false, as gpt-oss)
        low, high = feature(cfg.rotary_beta_fast), feature(cfg.rotary_beta_slow)
        # endregion
        self.low, self.high = max(low, 0), min(high, self.width - 1)  # the ramp, in features
        if self.low == self.high:
            self.high += 0.001  # as transformers: no division by zero
        # endregion
        # region: proportional
        self.pairs = cfg.rotary_pairs
        # endregion
        # region: longrope
        self.original_context = cfg.rotary_original_context
        self.attention_factor = cfg.rotary_attention_factor
        self.short_factor, self.long_factor = cfg.rotary_short_factor, cfg.rotary_long_factor
        # endregion
        # region: !by_length
        # float32 frequencies, one per pair of features (as many as arange(0, width, 2) has), set
        # by reset_parameters; not saved in checkpoints
        self.register_buffer("inv_freq", torch.empty((self.width + 1) // 2), persistent=False)
        self.reset_parameters()
        # endregion

    # region: !by_length
    def reset_parameters(self) -> None:
        """(Re)compute the frequencies: build() calls it, and so does a model given memory after
        the meta device (to_empty, then reset_parameters)."""
        with torch.no_grad():
            self.inv_freq.copy_(self.frequencies(self.inv_freq.device))

    def frequencies(self, device: torch.device) -> torch.Tensor:
        """The rotation frequencies, in float32: (rotary_width / 2,)."""
        exponent = (
            torch.arange(0, self.width, 2, device=device, dtype=torch.int64).float() / self.width
        )
        inv_freq = 1.0 / self.base**exponent  # (rotary_width / 2,)
        # region: linear
        inv_freq = inv_freq / self.factor  # position p turns as p / factor did
        # endregion
        # region: llama3
        wavelength = 2 * math.pi / inv_freq
        band = self.high_freq_factor - self.low_freq_factor
        smooth = (self.original_context / wavelength - self.low_freq_factor) / band
        blended = (1 - smooth) * inv_freq / self.factor + smooth * inv_freq
        long = wavelength > self.original_context / self.low_freq_factor
        short = wavelength < self.original_context / self.high_freq_factor
        inv_freq = torch.where(long, inv_freq / self.factor, torch.where(short, inv_freq, blended))
        # endregion
        # region: yarn
        features = torch.arange(self.width // 2, device=device, dtype=torch.float32)
        ramp = (features - self.low) / (self.high - self.low)
        # the share of each frequency kept: 1 for the fast ones, 0 for the slow ones
        kept = 1 - ramp.clamp(0, 1)
        # the rest divided by factor
        inv_freq = 1.0 / (self.factor * self.base**exponent) * (1 - kept) + inv_freq * kept
        # endregion
        # region: proportional
        inv_freq[self.pairs :] = 0.0  # these pairs do not turn: cos 1, sin 0
        # endregion
        return inv_freq

    # endregion
    def forward(
        self, start: int, T: int, device: torch.device
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The tables of positions start .. start + T - 1: (cos, sin), each (T, rotary_width)."""
        # region: by_length
        exponent = (
            torch.arange(0, self.width, 2, device=device, dtype=torch.int64).float() / self.width
        )
        # region: dynamic
        base = self.base  # within the original context the base does not change
        # past it, it grows with the length (in float32, as transformers computes it)
        if start + T > self.original_context:
            length = torch.tensor(start + T, device=device)
            grown = self.factor * length / self.original_context - (self.factor - 1)
            base = self.base * grown ** (self.width / (self.width - 2))
        inv_freq = 1.0 / base**exponent
        # endregion
        # region: longrope
        factors = self.long_factor if start + T > self.original_context else self.short_factor
        factors = torch.tensor(factors, device=device, dtype=torch.float32)
        inv_freq = 1.0 / (factors * self.base**exponent)
        # endregion
        # endregion
        # region: !by_length
        inv_freq = self.inv_freq
        if inv_freq.dtype != torch.float32:  # a cast of the model casts buffers: compute afresh
            inv_freq = self.frequencies(device)
        # endregion
        positions = torch.arange(start, start + T, device=device, dtype=torch.float32)
        angles = positions[:, None] * inv_freq  # (T, rotary_width / 2)
        # region: half
        # (T, rotary_width): feature j pairs with j + rotary_width / 2
        angles = torch.cat((angles, angles), dim=-1)
        # endregion
        # region: interleaved
        # (T, rotary_width): features 2j and 2j + 1 pair up (GPT-J)
        angles = angles.repeat_interleave(2, dim=-1)
        # endregion
        # region: deinterleaved
        # (T, rotary_width): the pairs (2j, 2j + 1) are gathered first
        angles = torch.cat((angles, angles), dim=-1)
        # endregion
        # region: attention_factor
        return angles.cos() * self.attention_factor, angles.sin() * self.attention_factor
        # endregion
        # region: !attention_factor
        return angles.cos(), angles.sin()
        # endregion


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    # region: partial
    """Rotate the first cos.shape[-1] features of each head of x (B, H, T, d_head) by its
    position's angles."""
    # endregion
    # region: !partial
    """Rotate each head of x (B, H, T, d_head) by its position's angles."""
    # endregion
    cos, sin = cos.to(x.dtype), sin.to(x.dtype)  # (T, rotary_width)
    # region: partial
    # the rest passes through unrotated
    rot, rest = x[..., : cos.shape[-1]], x[..., cos.shape[-1] :]
    # endregion
    rot, turned = turn(x)  # insert: turn
    # region: partial
    return torch.cat((rot * cos + turned * sin, rest), dim=-1)
    # endregion
    # region: !partial
    return x * cos + turned * sin
    # endregion


def turn(rot: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    # region: half
    first, second = rot.chunk(2, dim=-1)
    turned = torch.cat((-second, first), dim=-1)  # rotate_half (Llama, GPT-NeoX, Falcon, ...)
    # endregion
    # region: interleaved
    even, odd = rot[..., 0::2], rot[..., 1::2]
    turned = torch.stack((-odd, even), dim=-1).flatten(-2)  # rotate every two (GPT-J)
    # endregion
    # region: deinterleaved
    even, odd = rot[..., 0::2], rot[..., 1::2]  # DeepSeek: features 2j and 2j + 1 pair up
    # de-interleaved: the rotated pairs come out as j, j + width / 2
    rot = torch.cat((even, odd), dim=-1)
    turned = torch.cat((-odd, even), dim=-1)
    # endregion
    return rot, turned
