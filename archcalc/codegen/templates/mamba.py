"""Template of Mamba's (Mamba1's) mixer (archcalc.codegen.mamba fills it): the ``Mamba`` layer, a
sequential selective scan over a sequence and a one-token ``step`` that continues a cached state
(a ``MixerCache`` of templates/mixer.py).

The matrix products are exactly those of docs' FLOPs convention for Mamba: the four projections,
the depthwise conv, and one read-out a token, ``state @ C`` on the shapes in the comments. The
discretisation and the state update are element-wise."""

import math

import torch
import torch.nn.functional as F
from torch import nn

from archcalc.codegen.templates.names import CONV_BIAS, IN_BIAS, OUT_BIAS, Config, MixerCache


class Mamba(nn.Module):
    """DOC"""

    def __init__(self, cfg: Config):
        super().__init__()
        self.inner = cfg.mixer_inner  # I
        self.state = cfg.mixer_state  # N
        self.taps = cfg.mixer_conv  # K
        self.dt_rank = cfg.mixer_dt_rank  # R
        # region: dt_bc_norm
        self.norm_eps = cfg.mixer_norm_eps  # of the norms of dt, B and C
        # endregion
        # region: plain_init
        self.init_std = cfg.init_std  # the conv's initial spread
        # endregion
        # x (through the conv and the scan), then z (the gate)
        self.in_proj = nn.Linear(cfg.width, 2 * self.inner, bias=IN_BIAS)
        # causal and depthwise: each channel its own filter of K taps
        self.conv = nn.Conv1d(self.inner, self.inner, self.taps, groups=self.inner, bias=CONV_BIAS)
        # each token's step sizes (through a rank-R bottleneck), B and C
        self.x_proj = nn.Linear(self.inner, self.dt_rank + 2 * self.state, bias=False)
        self.dt_proj = nn.Linear(self.dt_rank, self.inner, bias=True)
        # A = -exp(A_log): decay rates, per channel and state element; D: the skip, per channel
        self.A_log = nn.Parameter(torch.empty(self.inner, self.state))
        self.D = nn.Parameter(torch.empty(self.inner))
        self.out_proj = nn.Linear(self.inner, cfg.width, bias=OUT_BIAS)
        # region: dt_bc_norm_weights
        # the weights of the norms of dt, B and C (each scales its normed values)
        self.dt_norm = nn.RMSNorm(self.dt_rank, eps=self.norm_eps)
        self.b_norm = nn.RMSNorm(self.state, eps=self.norm_eps)
        self.c_norm = nn.RMSNorm(self.state, eps=self.norm_eps)
        # endregion

    def reset_parameters(self) -> None:
        """As transformers' Mamba: A = -1, ..., -N in every channel; D one; dt_proj's weight
        uniform in ±dt_rank^-0.5, and its bias such that dt = softplus(bias) starts log-uniform in
        [0.001, 0.1]; the conv's bias zero and out_proj PyTorch's own init (the model's init runs
        this after its layers', so it stays). Plain (Jamba's): the conv normal(0, init_std), and the
        projections the model's normal init, biases zero."""
        with torch.no_grad():
            if self.conv.bias is not None:
                nn.init.zeros_(self.conv.bias)
            # region: !plain_init
            nn.init.kaiming_uniform_(self.out_proj.weight, a=math.sqrt(5))
            # endregion
            # region: plain_init
            nn.init.normal_(self.conv.weight, mean=0.0, std=self.init_std)  # as every layer
            # endregion
            A = torch.arange(1, self.state + 1, dtype=torch.float32)
            self.A_log.copy_(torch.log(A).expand(self.inner, -1))
            nn.init.ones_(self.D)
            # region: !plain_init
            bound = self.dt_rank**-0.5
            nn.init.uniform_(self.dt_proj.weight, -bound, bound)
            low, high = math.log(0.001), math.log(0.1)
            dt = torch.exp(torch.rand(self.inner) * (high - low) + low).clamp(min=1e-4)
            self.dt_proj.bias.copy_(dt + torch.log(-torch.expm1(-dt)))  # softplus⁻¹(dt)
            # endregion

    def new_cache(self, batch: int) -> MixerCache:
        """An empty state for `batch` sequences, of one size however many tokens follow."""
        weight = self.out_proj.weight  # the cache takes the layer's device and dtype
        like = {"device": weight.device, "dtype": weight.dtype}  # (a local tensor under FSDP2)
        conv_state = torch.zeros(batch, self.inner, self.taps - 1, **like)
        ssm_state = torch.zeros(batch, self.inner, self.state, **like)
        return MixerCache(conv_state, ssm_state)

    def forward(self, u: torch.Tensor, cache: MixerCache | None = None) -> torch.Tensor:
        """u (B, T, d) -> (B, T, d); with a cache that has seen tokens, T = 1: one step."""
        x, z = self.in_proj(u).chunk(2, dim=-1)  # (B, T, I) each
        if cache is not None and cache.seen:
            if u.shape[1] != 1:
                raise ValueError("a MixerCache takes the prompt at once, then one token at a time")
            y = self.step(x, cache)  # (B, 1, I)
        else:
            y = self.scan(x, cache)  # (B, T, I)
        return self.out_proj(y * F.silu(z))  # (B, T, d)

    def ssm_inputs(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """From the conv's output x (..., I): the step sizes dt (..., I), B and C (..., N) and the
        decay rates A (I, N), in float32."""
        dt, B, C = self.x_proj(x).split([self.dt_rank, self.state, self.state], dim=-1)
        # region: dt_bc_norm
        # each divided by its root mean square (FalconMamba's norms: no weights)
        dt, B, C = (
            F.rms_norm(t.float(), t.shape[-1:], eps=self.norm_eps).to(t.dtype) for t in (dt, B, C)
        )
        # endregion
        # region: dt_bc_norm_weights
        # then scaled by their norms' weights (Jamba)
        dt, B, C = self.dt_norm.weight * dt, self.b_norm.weight * B, self.c_norm.weight * C
        # endregion
        dt = F.softplus(self.dt_proj(dt)).float()
        A = -torch.exp(self.A_log.float())
        return dt, B.float(), C.float(), A

    def scan(self, x: torch.Tensor, cache: MixerCache | None) -> torch.Tensor:
        """A whole sequence (B, T, I) from a zero state, one token after another: (B, T, I). With a
        cache (a prompt), the last K - 1 conv inputs and the final state go in it."""
        b, T, _ = x.shape
        x = x.transpose(1, 2)  # (B, I, T)
        if cache is not None:  # the last K - 1 inputs, zeros before the first (a negative pad cuts)
            cache.conv_state.copy_(F.pad(x, (self.taps - 1 - T, 0)))
        x = F.silu(self.conv(F.pad(x, (self.taps - 1, 0)))).transpose(1, 2)  # (B, T, I)
        dt, B, C, A = self.ssm_inputs(x)  # (B, T, I), (B, T, N) twice, (I, N)
        dA = torch.exp(A * dt[..., None])  # (B, T, I, N): each token's decay
        dBx = dt[..., None] * B[:, :, None] * x.float()[..., None]  # (B, T, I, N): its input
        state = x.new_zeros(b, self.inner, self.state, dtype=torch.float32)  # (B, I, N)
        ys = []
        for t in range(T):
            state = dA[:, t] * state + dBx[:, t]
            ys.append((state @ C[:, t, :, None])[..., 0])  # (B, I, N) @ (B, N, 1) -> (B, I)
        if cache is not None:
            cache.ssm_state.copy_(state)
            cache.seen += T
        y = torch.stack(ys, dim=1) + x.float() * self.D  # (B, T, I)
        return y.to(x.dtype)

    def step(self, x: torch.Tensor, cache: MixerCache) -> torch.Tensor:
        """One token (B, 1, I) after the cached ones: the conv over the cached window, then the
        state's update: (B, 1, I)."""
        window = torch.cat((cache.conv_state, x.transpose(1, 2)), dim=-1)  # (B, I, K)
        cache.conv_state.copy_(window[..., 1:])
        x = F.silu(self.conv(window))[..., 0]  # (B, I)
        dt, B, C, A = self.ssm_inputs(x)  # (B, I), (B, N) twice, (I, N)
        dA = torch.exp(A * dt[..., None])  # (B, I, N)
        dBx = dt[..., None] * B[:, None] * x.float()[..., None]  # (B, I, N)
        state = dA * cache.ssm_state.float() + dBx
        cache.ssm_state.copy_(state)
        cache.seen += 1
        y = (state @ C[..., None])[..., 0] + x.float() * self.D  # (B, I, N) @ (B, N, 1) -> (B, I)
        return y[:, None].to(x.dtype)  # (B, 1, I)
