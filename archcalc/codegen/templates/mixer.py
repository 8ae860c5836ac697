"""Template of Mamba2's mixer (archcalc.codegen.mixer fills it): the state a layer keeps for
generation (``MixerCache``), its gated RMSNorm, the chunked scan (SSD) of a whole sequence and the
``Mamba2`` layer, whose one-token ``step`` continues a cached state.

The matrix products are exactly those of docs' FLOPs convention for Mamba2 (``@`` on the shapes in
the comments, nothing else as a matmul): within a chunk, scores C·Bᵀ and their product with the
inputs; each chunk's state; the recurrence over the chunks; the states read by C."""

import math

import torch
import torch.nn.functional as F
from torch import nn

from archcalc.codegen.templates.names import CONV_BIAS, IN_BIAS, OUT_BIAS, Config


class MixerCache:
    """The state one state-space layer keeps for generation: the last K - 1 inputs of its conv
    (B, C, K - 1) and its SSM state (Mamba2: (B, H, N, P); Mamba: (B, I, N)). Its size does not
    grow with the tokens: allocated once. The prompt goes in at once, then one token at a time."""

    def __init__(self, conv_state: torch.Tensor, ssm_state: torch.Tensor):
        self.conv_state, self.ssm_state = conv_state, ssm_state
        self.seen = 0  # tokens so far


class GatedRMSNorm(nn.Module):
    """Mamba2's gated RMSNorm: y * silu(z), then normalised (in float32) over each of `groups`
    groups of features, times a weight."""

    def __init__(self, width: int, groups: int, eps: float):
        super().__init__()
        self.groups, self.eps = groups, eps
        self.weight = nn.Parameter(torch.ones(width))

    def reset_parameters(self) -> None:
        nn.init.ones_(self.weight)

    def forward(self, y: torch.Tensor, z: torch.Tensor) -> torch.Tensor:  # (B, T, I) each
        dtype = y.dtype
        y = y.float() * F.silu(z.float())  # the gate first
        y = y.unflatten(-1, (self.groups, -1))  # (B, T, G, I / G)
        y = y * torch.rsqrt(y.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * y.flatten(-2).to(dtype)


class NormThenGate(nn.Module):
    """Falcon-H1's gated RMSNorm: y normalised (in float32) over each of `groups` groups of
    features, times a weight, then times silu(z)."""

    def __init__(self, width: int, groups: int, eps: float):
        super().__init__()
        self.groups, self.eps = groups, eps
        self.weight = nn.Parameter(torch.ones(width))

    def reset_parameters(self) -> None:
        nn.init.ones_(self.weight)

    def forward(self, y: torch.Tensor, z: torch.Tensor) -> torch.Tensor:  # (B, T, I) each
        dtype = y.dtype
        y = y.float().unflatten(-1, (self.groups, -1))  # (B, T, G, I / G)
        y = y * torch.rsqrt(y.pow(2).mean(-1, keepdim=True) + self.eps)
        y = self.weight * y.flatten(-2)
        return (y * F.silu(z.float())).to(dtype)  # the gate last


def scan_sum(x: torch.Tensor, dim: int) -> torch.Tensor:
    """x.cumsum(dim). Where CUDA is, it runs outside torch.compile's graph (cumsum below):
    Inductor (torch 2.11) fails to build its split-scan kernel for a cumsum over few rows
    (a small batch, or a long sequence's chunks). Elsewhere it stays plain: importing
    torch.compiler's machinery costs 1.5 s."""
    return x.cumsum(dim=dim)


cumsum = torch.compiler.disable(scan_sum) if torch.cuda.is_available() else scan_sum


def segsum(a: torch.Tensor) -> torch.Tensor:  # (..., Q) -> (..., Q, Q)
    """Segment sums: out[..., i, j] = a[j + 1] + ... + a[i] for j <= i (0 on the diagonal), -inf
    above it, so that exp(out) is a lower-triangular decay mask."""
    Q = a.shape[-1]
    ones = torch.ones(Q, Q, dtype=torch.bool, device=a.device)
    out = a[..., None].expand(*a.shape, Q).masked_fill(~ones.tril(-1), 0)  # a[i] where i > j
    out = cumsum(out, dim=-2)  # a[j + 1] + ... + a[i]
    return out.masked_fill(~ones.tril(), -math.inf)


def ssd(x, dt, A, B, C, chunk: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Mamba2's chunked scan from a zero state (float32): x (b, T, H, P), dt (b, T, H), A (H,),
    B and C (b, T, H, N) -> y (b, T, H, P) and the final state (b, H, N, P).

    Within a chunk of Q tokens, causal attention-like products under a decay mask; across chunks,
    a recurrence over the chunks' states."""
    b, T, H, P = x.shape
    N = B.shape[-1]
    pad = -T % chunk  # zeros up to whole chunks: dt = 0 there, so they change no state
    # (b, T, H, ·) -> (b, H, nc, Q, ·)
    x, B, C = (
        F.pad(t, (0, 0, 0, 0, 0, pad)).unflatten(1, (-1, chunk)).permute(0, 3, 1, 2, 4)
        for t in (x, B, C)
    )
    dt = F.pad(dt, (0, 0, 0, pad)).unflatten(1, (-1, chunk)).permute(0, 3, 1, 2)  # (b, H, nc, Q)
    xdt = x * dt[..., None]  # (b, H, nc, Q, P)
    dA = dt * A[:, None, None]  # (b, H, nc, Q): each position's log decay
    Acum = cumsum(dA, dim=-1)  # (b, H, nc, Q): the log decay from the chunk's start
    # 1. within each chunk: scores C·Bᵀ under the causal decay mask, applied to the inputs
    scores = C @ B.transpose(-1, -2)  # (b, H, nc, Q, Q)
    y = (scores * torch.exp(segsum(dA))) @ xdt  # (b, H, nc, Q, P)
    # 2. each chunk's inputs, decayed to its end: its own contribution to the state
    decay = torch.exp(Acum[..., -1:] - Acum)  # (b, H, nc, Q)
    states = (B * decay[..., None]).transpose(-1, -2) @ xdt  # (b, H, nc, N, P)
    # 3. the state at each chunk's start: the earlier chunks' states, decayed across the chunks
    states = torch.cat((torch.zeros_like(states[:, :, :1]), states), dim=2)  # (b, H, nc + 1, N, P)
    chunk_decay = torch.exp(segsum(F.pad(Acum[..., -1], (1, 0))))  # (b, H, nc + 1, nc + 1)
    states = (chunk_decay @ states.flatten(-2)).unflatten(-1, (N, P))  # (b, H, nc + 1, N, P)
    final, states = states[:, :, -1], states[:, :, :-1]  # the state after the last token
    # 4. the state each chunk starts from, read by C and decayed to each position
    y = y + (C @ states) * torch.exp(Acum)[..., None]  # (b, H, nc, Q, P)
    y = y.permute(0, 2, 3, 1, 4).flatten(1, 2)[:, :T]  # (b, T, H, P)
    return y, final


class Mamba2(nn.Module):
    """DOC"""

    def __init__(self, cfg: Config):
        super().__init__()
        self.inner = cfg.mixer_inner  # I
        self.state = cfg.mixer_state  # N
        self.heads = cfg.mixer_heads  # H
        self.groups = cfg.mixer_groups  # G
        self.head_width = self.inner // self.heads  # P
        self.channels = self.inner + 2 * self.groups * self.state  # C: x, B, C
        self.taps = cfg.mixer_conv  # K
        self.chunk = cfg.mixer_chunk  # Q
        # region: dt_min
        self.dt_min = cfg.mixer_dt_min  # the least step size of the chunked scan
        # endregion
        # region: conv_init
        self.init_std = cfg.init_std  # the conv's initial spread
        # endregion
        # region: rescaled_init
        self.init_layers = cfg.init_layers  # out_proj starts divided by sqrt(layers)
        # endregion
        # z (the gate), then x B C (through the conv), then dt (a step size per head)
        self.in_proj = nn.Linear(cfg.width, self.inner + self.channels + self.heads, bias=IN_BIAS)
        # region: in_proj_multipliers
        # z, x, B, C and dt each times its own factor: a fixed vector that reset_parameters
        # fills, neither a parameter nor saved
        self.multipliers = cfg.mixer_in_proj_multipliers
        scale = torch.empty(self.in_proj.out_features)
        self.register_buffer("in_proj_scale", scale, persistent=False)
        # endregion
        # causal and depthwise: each channel its own filter of K taps
        self.conv = nn.Conv1d(
            self.channels, self.channels, self.taps, groups=self.channels, bias=CONV_BIAS
        )
        self.dt_bias = nn.Parameter(torch.empty(self.heads))
        self.A_log = nn.Parameter(torch.empty(self.heads))  # A = -exp(A_log): a decay rate per head
        self.D = nn.Parameter(torch.empty(self.heads))  # the skip connection, per head
        # region: gated_norm
        self.norm = GatedRMSNorm(self.inner, self.groups, eps=cfg.norm_eps)
        # endregion
        self.out_proj = nn.Linear(self.inner, cfg.width, bias=OUT_BIAS)

    def reset_parameters(self) -> None:
        """As transformers' Mamba2: A = -1, ..., -H; D one; dt = softplus(dt_bias) drawn
        log-uniformly in [0.001, 0.1]; the conv's bias zero and out_proj PyTorch's own init (the
        model's init runs this after its layers', so it stays). Bamba's (plain): dt_bias one, the
        conv normal(0, init_std); Nemotron-H's (rescaled): that conv, out_proj divided by
        sqrt(layers)."""
        with torch.no_grad():
            if self.conv.bias is not None:
                nn.init.zeros_(self.conv.bias)
            # region: !plain_init
            nn.init.kaiming_uniform_(self.out_proj.weight, a=math.sqrt(5))
            # endregion
            # region: rescaled_init
            self.out_proj.weight /= math.sqrt(self.init_layers)  # by depth
            # endregion
            # region: conv_init
            nn.init.normal_(self.conv.weight, mean=0.0, std=self.init_std)  # as every layer
            # endregion
            # region: in_proj_multipliers
            GN = self.groups * self.state
            widths = torch.tensor([self.inner, self.inner, GN, GN, self.heads])
            self.in_proj_scale.copy_(torch.tensor(self.multipliers).repeat_interleave(widths))
            # endregion
            self.A_log.copy_(torch.log(torch.arange(1, self.heads + 1, dtype=torch.float32)))
            nn.init.ones_(self.D)
            # region: !plain_init
            low, high = math.log(0.001), math.log(0.1)
            dt = torch.exp(torch.rand(self.heads) * (high - low) + low).clamp(min=1e-4)
            self.dt_bias.copy_(dt + torch.log(-torch.expm1(-dt)))  # softplus⁻¹(dt)
            # endregion
            # region: plain_init
            nn.init.ones_(self.dt_bias)
            # endregion

    def new_cache(self, batch: int) -> MixerCache:
        """An empty state for `batch` sequences, of one size however many tokens follow."""
        weight = self.out_proj.weight  # the cache takes the layer's device and dtype
        like = {"device": weight.device, "dtype": weight.dtype}  # (a local tensor under FSDP2)
        conv_state = torch.zeros(batch, self.channels, self.taps - 1, **like)
        ssm_state = torch.zeros(batch, self.heads, self.state, self.head_width, **like)
        return MixerCache(conv_state, ssm_state)

    def forward(self, u: torch.Tensor, cache: MixerCache | None = None) -> torch.Tensor:
        """u (B, T, d) -> (B, T, d); with a cache that has seen tokens, T = 1: one step."""
        # region: !in_proj_multipliers
        z, xBC, dt = self.in_proj(u).split([self.inner, self.channels, self.heads], dim=-1)
        # endregion
        # region: in_proj_multipliers
        zxBCdt = self.in_proj(u) * self.in_proj_scale  # each part times its multiplier
        z, xBC, dt = zxBCdt.split([self.inner, self.channels, self.heads], dim=-1)
        # endregion
        if cache is not None and cache.seen:
            if u.shape[1] != 1:
                raise ValueError("a MixerCache takes the prompt at once, then one token at a time")
            y = self.step(xBC, dt, cache)  # (B, 1, I)
        else:
            y = self.scan(xBC, dt, cache)  # (B, T, I)
        # region: gated_norm
        return self.out_proj(self.norm(y, z))  # (B, T, d)
        # endregion
        # region: !gated_norm
        return self.out_proj(y * F.silu(z))  # the gate alone, no norm: (B, T, d)
        # endregion

    def split(self, xBC: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """x (..., H, P), and B and C (..., H, N): each group's B and C shared by its heads."""
        GN = self.groups * self.state
        x, B, C = xBC.float().split([self.inner, GN, GN], dim=-1)
        x = x.unflatten(-1, (self.heads, self.head_width))
        B, C = (t.unflatten(-1, (self.groups, self.state)) for t in (B, C))
        B, C = (t.repeat_interleave(self.heads // self.groups, dim=-2) for t in (B, C))
        return x, B, C

    def scan(self, xBC: torch.Tensor, dt: torch.Tensor, cache: MixerCache | None) -> torch.Tensor:
        """A whole sequence (B, T, ·) from a zero state: (B, T, I). With a cache (a prompt), the
        last K - 1 conv inputs and the final state go in it."""
        T = xBC.shape[1]
        xBC = xBC.transpose(1, 2)  # (B, C, T)
        if cache is not None:  # the last K - 1 inputs, zeros before the first (a negative pad cuts)
            cache.conv_state.copy_(F.pad(xBC, (self.taps - 1 - T, 0)))
        xBC = F.silu(self.conv(F.pad(xBC, (self.taps - 1, 0)))).transpose(1, 2)  # (B, T, C)
        x, B, C = self.split(xBC)  # (B, T, H, P), (B, T, H, N) twice
        dt = F.softplus(dt.float() + self.dt_bias)  # (B, T, H)
        # region: dt_min
        dt = dt.clamp(min=self.dt_min)  # as mamba_ssm's chunked kernel (dt_limit); step() does not
        # endregion
        A = -torch.exp(self.A_log.float())  # (H,)
        y, final = ssd(x, dt, A, B, C, self.chunk)  # (B, T, H, P), (B, H, N, P)
        if cache is not None:
            cache.ssm_state.copy_(final)
            cache.seen += T
        y = y + x * self.D[:, None]
        return y.flatten(-2).to(xBC.dtype)

    def step(self, xBC: torch.Tensor, dt: torch.Tensor, cache: MixerCache) -> torch.Tensor:
        """One token (B, 1, ·) after the cached ones: the conv over the cached window, then the
        state's update: (B, 1, I)."""
        window = torch.cat((cache.conv_state, xBC.transpose(1, 2)), dim=-1)  # (B, C, K)
        cache.conv_state.copy_(window[..., 1:])
        xBC = F.silu(self.conv(window))[..., 0]  # (B, C)
        x, B, C = self.split(xBC)  # (B, H, P), (B, H, N) twice
        dt = F.softplus(dt[:, 0].float() + self.dt_bias)  # (B, H)
        A = -torch.exp(self.A_log.float())  # (H,)
        decay = torch.exp(dt * A)[..., None, None]  # (B, H, 1, 1)
        state = cache.ssm_state * decay + (x * dt[..., None])[..., None, :] * B[..., :, None]
        cache.ssm_state.copy_(state)  # (B, H, N, P)
        cache.seen += 1
        y = (C[..., None, :] @ state).squeeze(-2)  # (B, H, 1, N) @ (B, H, N, P) -> (B, H, P)
        y = y + x * self.D[:, None]
        return y.flatten(-2)[:, None].to(xBC.dtype)  # (B, 1, I)
