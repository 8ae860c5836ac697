"""Source template for multi-head latent attention (DeepSeek-V2/V3), as transformers' DeepseekV3Attention.

Training (no cache) expands the compressed latent into every head's keys and values, as transformers
does. Generation caches only what ``archcalc memory`` counts for latent attention: the normalised latent
(kv_rank) and the one rotary key shared by all heads (rope_width) per token. It then attends in the
latent space: ``kv_up``'s key half is absorbed into the queries and its value half applied after the
weighted sum (DeepSeek-V2 §2.1.2), so the cached latent is never expanded. The two forms give the
same attention output (the products are only associated differently).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from archcalc.ir import Component
from archcalc.ir.attrs import LatentAttention
from codegen.parts import camel, norm_expr
from codegen.rope_scaling import score_mscale

if TYPE_CHECKING:
    from codegen.emitter import Emitter


def latent_attention_class(em: Emitter, attn: Component, p: str) -> str:
    a = attn.attrs
    assert isinstance(a, LatentAttention)
    kids = {c.name: c for c in attn.children}
    heads = em.field(f"{p}heads", a.heads, f"{a.heads}: attention heads")
    hw = em.field(f"{p}head_width", a.head_width, f"{a.head_width}: query/key width of one head without the rotary part")
    rw = em.field(f"{p}rope_width", a.rope_width, f"{a.rope_width}: rotary query/key width of one head (the key's is shared)")
    vw = em.field(f"{p}value_width", a.value_width, f"{a.value_width}: value width of one head")
    kv_rank = em.field(f"{p}kv_rank", a.kv_rank, "key/value compression rank")
    low_rank_q = a.q_rank is not None
    own = ("norm_eps", f"{p}latent_norm_eps")
    name = f"{camel(p)}Attention"
    mscale = score_mscale(em)  # YaRN with mscale_all_dim (DeepSeek-V3): the scores are scaled by mscale squared too
    scale = ", scale=self.scale" if a.scale is not None or mscale else ""
    lines = [
        f"class {name}(nn.Module):",
        '    """Causal multi-head latent attention (DeepSeek-V2/V3): queries through a low-rank bottleneck'
        + ("" if low_rank_q else " (here a plain projection)") + ",",
        "    keys and values expanded from a compressed latent, plus one rotary key shared by every head; SDPA, an output",
        "    projection. The score scale is " + ("1 / sqrt(head_width + rope_width) times YaRN's mscale squared, as transformers' DeepseekV3Attention."
                                                if mscale else "SDPA's default 1 / sqrt(head_width + rope_width), as transformers'."),
        "    Generating, it caches the latent and the rotary key only, and attends in the latent space (kv_up absorbed).\"\"\"",
        "",
        "    def __init__(self, cfg: Config):",
        "        super().__init__()",
        f"        self.heads, self.head_width, self.rope_width, self.value_width = {heads}, {hw}, {rw}, {vw}",
        f"        self.kv_rank = {kv_rank}",
    ]
    if a.scale is not None:
        field = em.field(f"{p}attn_scale", float(a.scale), "attention score scale (instead of 1 / sqrt(head_width + rope_width))")
        lines.append(f"        self.scale = {field}" + (f" * {mscale}**2" if mscale else ""))
    elif mscale:
        lines.append(f"        self.scale = (self.head_width + self.rope_width) ** -0.5 * {mscale}**2  # YaRN's attention temperature")
    if low_rank_q:
        q_rank = em.field(f"{p}q_rank", a.q_rank, "query compression rank")
        lines += [f"        self.q_down = nn.Linear(cfg.width, {q_rank}, bias={kids['q_down'].attrs.bias})",
                  f"        self.q_down_norm = {norm_expr(em, kids['q_down_norm'], q_rank, own=own)}",
                  f"        self.q_up = nn.Linear({q_rank}, {heads} * ({hw} + {rw}), bias={kids['q_up'].attrs.bias})"]
    else:
        lines.append(f"        self.q = nn.Linear(cfg.width, {heads} * ({hw} + {rw}), bias={kids['q'].attrs.bias})")
    lines += [
        f"        self.kv_down = nn.Linear(cfg.width, {kv_rank} + {rw}, bias={kids['kv_down'].attrs.bias})  # the latent and the shared rotary key",
        f"        self.kv_down_norm = {norm_expr(em, kids['kv_down_norm'], kv_rank, own=own)}",
        f"        self.kv_up = nn.Linear({kv_rank}, {heads} * ({hw} + {vw}), bias={kids['kv_up'].attrs.bias})",
        f"        self.out = nn.Linear({heads} * {vw}, cfg.width, bias={kids['out'].attrs.bias})",
        "",
        "    def new_cache(self, batch: int, length: int) -> KVCache:",
        '        """An empty cache for `batch` sequences of up to `length` tokens: the latent and the rotary key of each."""',
        "        weight = self.out.weight  # the cache takes the layer's device and dtype",
        "        return KVCache(weight.new_zeros(batch, 1, length, self.kv_rank), weight.new_zeros(batch, 1, length, self.rope_width))",
        "",
        "    def forward(self, x: torch.Tensor, rope: tuple[torch.Tensor, torch.Tensor], cache: KVCache | None = None) -> torch.Tensor:",
        "        B, T, _ = x.shape  # (B, T, d)",
        ("        q = self.q_up(self.q_down_norm(self.q_down(x)))  # (B, T, heads x (head_width + rope_width))" if low_rank_q else
         "        q = self.q(x)  # (B, T, heads x (head_width + rope_width))"),
        "        q = q.view(B, T, self.heads, -1).transpose(1, 2)  # (B, H, T, head_width + rope_width)",
        "        q_pass, q_rot = q.split([self.head_width, self.rope_width], dim=-1)",
        "        q_rot = rotate(q_rot, *rope)",
        "        latent, k_rot = self.kv_down(x).split([self.kv_rank, self.rope_width], dim=-1)  # (B, T, kv_rank), (B, T, rope_width)",
        "        latent = self.kv_down_norm(latent).unsqueeze(1)  # (B, 1, T, kv_rank): shared by every head",
        "        k_rot = rotate(k_rot.view(B, 1, T, self.rope_width), *rope)  # (B, 1, T, rope_width): one rotary key for every head",
        "        if cache is not None:  # generating: attend in the latent space to every cached token",
        "            latent, k_rot = cache.update(latent, k_rot)  # (B, 1, S, kv_rank), (B, 1, S, rope_width)",
        "            up = self.kv_up.weight.view(self.heads, self.head_width + self.value_width, self.kv_rank)",
        "            up_k, up_v = up.split([self.head_width, self.value_width], dim=1)  # (H, head_width or value_width, kv_rank)",
        "            q = torch.cat((q_pass @ up_k, q_rot), dim=-1)  # (B, H, T, kv_rank + rope_width): queries in the latent space",
        "            k = torch.cat((latent, k_rot), dim=-1)  # (B, 1, S, kv_rank + rope_width)",
        f"            scale = {'self.scale' if scale else '(self.head_width + self.rope_width) ** -0.5'}  # as in the expanded form",
        "            y = F.scaled_dot_product_attention(q, k, latent, is_causal=T > 1, scale=scale, enable_gqa=True)  # (B, H, T, kv_rank)",
        "            y = y @ up_v.transpose(1, 2)  # (B, H, T, value_width)",
        "        else:",
        "            kv = self.kv_up(latent.squeeze(1)).view(B, T, self.heads, -1).transpose(1, 2)  # (B, H, T, head_width + value_width)",
        "            k_pass, v = kv.split([self.head_width, self.value_width], dim=-1)",
        "            q = torch.cat((q_pass, q_rot), dim=-1)  # (B, H, T, head_width + rope_width)",
        "            k = torch.cat((k_pass, k_rot.expand(-1, self.heads, -1, -1)), dim=-1)  # (B, H, T, head_width + rope_width)",
        f"            y = F.scaled_dot_product_attention(q, k, v, is_causal=True{scale})  # (B, H, T, value_width)",
        "        return self.out(y.transpose(1, 2).reshape(B, T, -1))  # (B, T, d)",
    ]
    em.add("\n".join(lines))
    return name
