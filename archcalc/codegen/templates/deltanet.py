"""Template of the Gated DeltaNet token mixer of Qwen3-Next and Qwen3.5: its output norm
(``DeltaNorm``), the chunked gated delta rule over a whole sequence and the ``GatedDeltaNet``
layer, whose one-token ``step`` continues a cached state (a ``MixerCache`` of templates/mixer.py).

The matrix products are exactly those of docs' FLOPs convention for Gated DeltaNet (``@`` on the
shapes in the comments, nothing else as a matmul): the five projections and the depthwise conv;
within a chunk, the scores k_beta·kᵀ and q·kᵀ and the scores applied to the new values; the state
read by the decayed keys and by the queries, and the state's update. A token's step reads the
state twice (by k and by q) and writes it once (k δᵀ). The UT transform is a triangular solve."""

import math

import torch
import torch.nn.functional as F
from torch import nn

from archcalc.codegen.templates.mixer import cumsum
from archcalc.codegen.templates.names import CONV_BIAS, IN_BIAS, OUT_BIAS, Config, MixerCache


def l2norm(x: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """x scaled to unit length over its last dimension (eps inside the root, as FLA)."""
    return x * torch.rsqrt((x * x).sum(dim=-1, keepdim=True) + eps)


class DeltaNorm(nn.Module):
    """Gated DeltaNet's output norm: y normalised (in float32) over each head's Dv features, times a
    weight, then gated by silu(z) (in float32)."""

    def __init__(self, width: int, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(width))

    def reset_parameters(self) -> None:
        nn.init.ones_(self.weight)

    def forward(self, y: torch.Tensor, z: torch.Tensor) -> torch.Tensor:  # (..., Dv) each
        dtype = y.dtype
        y = y.float()
        y = y * torch.rsqrt(y.pow(2).mean(-1, keepdim=True) + self.eps)  # the norm first
        y = self.weight * y.to(dtype)
        return (y * F.silu(z.float())).to(dtype)


def chunk_delta_rule(q, k, v, g, beta, chunk: int, state) -> tuple[torch.Tensor, torch.Tensor]:
    """The gated delta rule over a whole sequence (float32), from `state` (zeros if None): q and k
    (b, T, H, Dk), v (b, T, H, Dv), the log decays g and the write strengths beta (b, T, H), state
    (b, H, Dk, Dv) -> output (b, T, H, Dv) and the final state (b, H, Dk, Dv).

    Within a chunk of Q tokens, a UT transform (a triangular solve) turns the chunk's delta-rule
    writes into new values; across chunks, a recurrence on the state, which each chunk reads."""
    b, T, H, Dk = k.shape
    Dv = v.shape[-1]
    pad = -T % chunk  # zeros up to whole chunks: k = 0 and g = 0 there, so the state is kept
    q = q.float() * Dk**-0.5
    # (b, T, H, ·) -> (b, H, nc, Q, ·)
    q, k, v = (
        F.pad(t.float(), (0, 0, 0, 0, 0, pad)).unflatten(1, (-1, chunk)).permute(0, 3, 1, 2, 4)
        for t in (q, k, v)
    )
    # (b, T, H) -> (b, H, nc, Q)
    g, beta = (
        F.pad(t.float(), (0, 0, 0, pad)).unflatten(1, (-1, chunk)).permute(0, 3, 1, 2)
        for t in (g, beta)
    )
    k_beta, v_beta = k * beta[..., None], v * beta[..., None]  # each token's write
    g = cumsum(g, dim=-1)  # (b, H, nc, Q): the log decay from the chunk's start to each position
    upper = torch.ones(chunk, chunk, dtype=torch.bool, device=q.device).triu(1)
    decay = (g[..., :, None] - g[..., None, :]).masked_fill(upper, -math.inf).exp()  # (.., Q, Q)
    # 1. within each chunk: the scores, under the causal decay mask
    system = (k_beta @ k.transpose(-1, -2)) * decay  # (b, H, nc, Q, Dk) @ (.., Dk, Q) -> (.., Q, Q)
    attn = (q @ k.transpose(-1, -2)) * decay  # (b, H, nc, Q, Dk) @ (.., Dk, Q) -> (.., Q, Q)
    # 2. the UT transform: (I + strictly lower part of system)⁻¹ applied to the writes
    values = torch.linalg.solve_triangular(system, v_beta, upper=False, unitriangular=True)
    k_cumdecay = torch.linalg.solve_triangular(
        system, k_beta * g.exp()[..., None], upper=False, unitriangular=True
    )  # (b, H, nc, Q, Dk)
    q = q * g.exp()[..., None]  # decayed from the chunk's start
    k = k * (g[..., -1:] - g).exp()[..., None]  # decayed to the chunk's end
    chunk_decay = g[..., -1].exp()[..., None, None]  # (b, H, nc, 1, 1)
    # 3. across chunks: each chunk reads the state it starts from, then writes its new values
    if state is None:
        state = q.new_zeros(b, H, Dk, Dv)
    state = state.float()
    ys = []
    for i in range(q.shape[2]):
        v_new = values[:, :, i] - k_cumdecay[:, :, i] @ state  # (b, H, Q, Dk) @ (b, H, Dk, Dv)
        y = q[:, :, i] @ state  # (b, H, Q, Dk) @ (b, H, Dk, Dv) -> (b, H, Q, Dv)
        ys.append(y + attn[:, :, i] @ v_new)  # (b, H, Q, Q) @ (b, H, Q, Dv) -> (b, H, Q, Dv)
        update = k[:, :, i].transpose(-1, -2) @ v_new  # (b, H, Dk, Q) @ (b, H, Q, Dv)
        state = state * chunk_decay[:, :, i] + update  # (b, H, Dk, Dv)
    y = torch.stack(ys, dim=2).flatten(2, 3)  # (b, H, nc * Q, Dv)
    return y.transpose(1, 2)[:, :T], state  # (b, T, H, Dv), (b, H, Dk, Dv)


class GatedDeltaNet(nn.Module):
    """DOC"""

    def __init__(self, cfg: Config):
        super().__init__()
        self.key_heads = cfg.mixer_key_heads  # Hk
        self.value_heads = cfg.mixer_value_heads  # Hv: a multiple of Hk
        self.key_width = cfg.mixer_key_width  # Dk
        self.value_width = cfg.mixer_value_width  # Dv
        self.key_dim = self.key_heads * self.key_width  # Hk·Dk
        self.value_dim = self.value_heads * self.value_width  # Hv·Dv
        self.channels = 2 * self.key_dim + self.value_dim  # C: q, k, v
        self.taps = cfg.mixer_conv  # K
        self.chunk = cfg.mixer_chunk  # Q
        # q k v (through the conv), z (the output's gate), b (the write strength), a (the decay)
        # region: !fused
        self.in_proj_qkv = nn.Linear(cfg.width, self.channels, bias=IN_BIAS)
        self.in_proj_z = nn.Linear(cfg.width, self.value_dim, bias=IN_BIAS)
        self.in_proj_b = nn.Linear(cfg.width, self.value_heads, bias=IN_BIAS)
        self.in_proj_a = nn.Linear(cfg.width, self.value_heads, bias=IN_BIAS)
        # endregion
        # region: fused
        # key head by key head: its q, its k, then its value heads' v and z; its b, then its a
        self.in_proj_qkvz = nn.Linear(cfg.width, self.channels + self.value_dim, bias=IN_BIAS)
        self.in_proj_ba = nn.Linear(cfg.width, 2 * self.value_heads, bias=IN_BIAS)
        # endregion
        # causal and depthwise: each channel its own filter of K taps
        self.conv = nn.Conv1d(
            self.channels, self.channels, self.taps, groups=self.channels, bias=CONV_BIAS
        )
        self.dt_bias = nn.Parameter(torch.empty(self.value_heads))
        self.A_log = nn.Parameter(torch.empty(self.value_heads))  # A = exp(A_log): a decay rate
        self.norm = DeltaNorm(self.value_width, eps=cfg.norm_eps)
        self.out_proj = nn.Linear(self.value_dim, cfg.width, bias=OUT_BIAS)

    def reset_parameters(self) -> None:
        """As transformers' Qwen3-Next init: dt_bias one; A uniform in [0.01, 16]."""
        with torch.no_grad():
            nn.init.ones_(self.dt_bias)
            self.A_log.copy_(torch.empty(self.value_heads).uniform_(0.01, 16).log())

    def new_cache(self, batch: int) -> MixerCache:
        """An empty state for `batch` sequences, of one size however many tokens follow."""
        weight = self.out_proj.weight  # the cache takes the layer's device and dtype
        like = {"device": weight.device, "dtype": weight.dtype}  # (a local tensor under FSDP2)
        conv_state = torch.zeros(batch, self.channels, self.taps - 1, **like)
        ssm_state = torch.zeros(batch, self.value_heads, self.key_width, self.value_width, **like)
        return MixerCache(conv_state, ssm_state)

    def forward(self, u: torch.Tensor, cache: MixerCache | None = None) -> torch.Tensor:
        """u (B, T, d) -> (B, T, d); with a cache that has seen tokens, T = 1: one step."""
        # region: !fused
        qkv, z, b, a = self.in_proj_qkv(u), self.in_proj_z(u), self.in_proj_b(u), self.in_proj_a(u)
        # endregion
        # region: fused
        qkv, z, b, a = self.unfuse(u)
        # endregion
        z = z.unflatten(-1, (self.value_heads, self.value_width))  # (B, T, Hv, Dv)
        beta = torch.sigmoid(b).float()  # (B, T, Hv): how much each token writes
        a = a.float() + self.dt_bias
        g = -torch.exp(self.A_log.float()) * F.softplus(a)  # (B, T, Hv): each token's log decay
        if cache is not None and cache.seen:
            if u.shape[1] != 1:
                raise ValueError("a MixerCache takes the prompt at once, then one token at a time")
            y = self.step(qkv, g, beta, cache)  # (B, 1, Hv, Dv)
        else:
            y = self.scan(qkv, g, beta, cache)  # (B, T, Hv, Dv)
        y = self.norm(y.to(u.dtype), z)  # (B, T, Hv, Dv)
        return self.out_proj(y.flatten(-2))  # (B, T, d)

    # region: fused
    def unfuse(self, u: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """Qwen3-Next's fused projections, grouped by key head, as q k v (B, T, C), z (B, T, Hv·Dv),
        b and a (B, T, Hv)."""
        r, Dk = self.value_heads // self.key_heads, self.key_width  # value heads per key head
        qkvz = self.in_proj_qkvz(u).unflatten(-1, (self.key_heads, -1))  # (B, T, Hk, ·)
        q, k, v, z = qkvz.split([Dk, Dk, r * self.value_width, r * self.value_width], dim=-1)
        b, a = self.in_proj_ba(u).unflatten(-1, (self.key_heads, 2 * r)).chunk(2, dim=-1)
        qkv = torch.cat([q.flatten(-2), k.flatten(-2), v.flatten(-2)], dim=-1)  # (B, T, C)
        return qkv, z.flatten(-2), b.flatten(-2), a.flatten(-2)

    # endregion
    def split(self, qkv: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """q and k (..., Hv, Dk), l2-normalised, each key head repeated for its Hv / Hk value heads;
        v (..., Hv, Dv); in float32."""
        q, k, v = qkv.float().split([self.key_dim, self.key_dim, self.value_dim], dim=-1)
        q, k = (l2norm(t.unflatten(-1, (self.key_heads, self.key_width))) for t in (q, k))
        q, k = (t.repeat_interleave(self.value_heads // self.key_heads, dim=-2) for t in (q, k))
        v = v.unflatten(-1, (self.value_heads, self.value_width))  # (..., Hv, Dv)
        return q, k, v

    def scan(self, qkv: torch.Tensor, g, beta, cache: MixerCache | None) -> torch.Tensor:
        """A whole sequence (B, T, ·) from a zero state: (B, T, Hv, Dv). With a cache (a prompt),
        the last K - 1 conv inputs and the final state go in it."""
        T = qkv.shape[1]
        qkv = qkv.transpose(1, 2)  # (B, C, T)
        if cache is not None:  # the last K - 1 inputs, zeros before the first (a negative pad cuts)
            cache.conv_state.copy_(F.pad(qkv, (self.taps - 1 - T, 0)))
        qkv = F.silu(self.conv(F.pad(qkv, (self.taps - 1, 0)))).transpose(1, 2)  # (B, T, C)
        q, k, v = self.split(qkv)  # (B, T, Hv, Dk) twice, (B, T, Hv, Dv)
        y, final = chunk_delta_rule(q, k, v, g, beta, self.chunk, None)
        if cache is not None:
            cache.ssm_state.copy_(final)
            cache.seen += T
        return y  # (B, T, Hv, Dv)

    def step(self, qkv: torch.Tensor, g, beta, cache: MixerCache) -> torch.Tensor:
        """One token (B, 1, ·) after the cached ones: the conv over the cached window, then the
        delta rule's update of the state: (B, 1, Hv, Dv)."""
        window = torch.cat((cache.conv_state, qkv.transpose(1, 2)), dim=-1)  # (B, C, K)
        cache.conv_state.copy_(window[..., 1:])
        qkv = F.silu(self.conv(window))[..., 0]  # (B, C)
        q, k, v = self.split(qkv)  # (B, Hv, Dk) twice, (B, Hv, Dv)
        q = q[..., None, :] / self.key_width**0.5  # (B, Hv, 1, Dk), scaled
        k, v = k[..., None, :], v[..., None, :]  # (B, Hv, 1, Dk), (B, Hv, 1, Dv)
        state = cache.ssm_state.float() * g[:, 0].exp()[..., None, None]  # (B, Hv, Dk, Dv): decayed
        kv = k @ state  # (B, Hv, 1, Dk) @ (B, Hv, Dk, Dv) -> (B, Hv, 1, Dv): what it predicts for v
        delta = (v - kv) * beta[:, 0, :, None, None]  # (B, Hv, 1, Dv): the correction it writes
        state = state + k.transpose(-1, -2) @ delta  # (B, Hv, Dk, 1) @ (B, Hv, 1, Dv)
        cache.ssm_state.copy_(state)
        cache.seen += 1
        y = q @ state  # (B, Hv, 1, Dk) @ (B, Hv, Dk, Dv) -> (B, Hv, 1, Dv)
        return y.transpose(1, 2)  # (B, 1, Hv, Dv)
