"""Source templates for attention: projections, QK-norm, rotary positions, the kernel, sinks and soft-capping.

Attention runs through ``F.scaled_dot_product_attention`` (flash attention where available). Two
features need the scores themselves, so those layers write the two products out (``q @ kᵀ``, then
``probs @ v``: the same two matmuls, the same FLOPs): attention sinks (gpt-oss: a learned logit per
head that takes a share of the softmax) and soft-capped scores (Gemma 2: cap · tanh(score / cap)).

Rotary tables are computed in the model's forward from the sequence length (no buffers: building on
the meta device allocates nothing, and any device or dtype works) and passed down to every layer.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from archcalc.ir import Component
from archcalc.ir.attrs import Attention, LatentAttention
from codegen.attention_layers import chunk_sdpa, per_layer_init, rotary_qk_norm, temperature
from codegen.errors import UnsupportedError
from codegen.parts import camel, norm_expr

if TYPE_CHECKING:
    from codegen.emitter import Emitter

def attention_class(em: Emitter, attn: Component, p: str, rotary: bool, cls: str | None = None) -> str:
    """One attention class for a stack; ``rotary``: forward takes the (cos, sin) tables; ``cls``: the class name.
    The IR's kernel decides the rest: with a ``position_bias`` forward takes an additive score bias (T5's relative
    position bias, with the causal mask in it); an ``explicit_softmax`` writes the two products out; ``kv_sharing``
    says whether SDPA shares the key/value heads or they are repeated first. Cross-attention takes its keys and
    values from the encoder output ``memory``. Causal self-attention and cross-attention take a ``KVCache``."""
    a = attn.attrs
    assert isinstance(a, Attention)
    heads = em.field(f"{p}heads", a.heads, f"{a.heads}: attention heads")
    gqa = a.grouped
    kv = em.field(f"{p}kv_heads", a.kv_heads, f"{a.kv_heads}: key/value heads") if gqa else heads
    hw = em.field(f"{p}head_width", a.head_width, f"{a.head_width}: width of one head")
    vw = hw if a.value_width == a.head_width else em.field(f"{p}value_width", a.value_width, "value width of one head")
    kids = {c.name: c for c in attn.children}
    fused = "qkv" in kids
    name = cls or f"{camel(p)}Attention"
    cross, causal, banded, sinks, softcap = a.cross, a.causal, a.banded, a.sinks, a.softcap
    chunked = a.chunked
    cached = causal or cross  # what generation caches: causal self-attention and cross-attention
    explicit, score_bias = a.explicit_softmax, a.position_bias
    qk_norm = "q_norm" in kids
    nope = rotary and False in a.rotary_pattern  # some layers of the stack leave out rotary positions
    per_head_norm = qk_norm and (kids["q_norm"].attrs.width == a.head_width or kids["q_norm"].attrs.groups is not None)
    kind = "multi-head" if not gqa else "grouped-query"
    features = ["a fused qkv projection" if fused else "q, k, v projections"]
    features += ["QK-norm"] if qk_norm else []
    features += ["rotary positions"] if rotary else []
    features += ["sinks"] if sinks else []
    features += ["soft-capped scores"] if softcap is not None else []
    features += ["an additive position bias" + (" (with the causal mask)" if causal else "")] if score_bias else []
    if (score_bias or cross) and (explicit or banded or rotary or (fused and cross)):
        raise UnsupportedError("codegen: cross-attention and position-biased attention with sinks, soft-capping, "
                               "windows or rotary positions, and fused cross-attention, are not generated yet")
    features += ["explicit softmax" if explicit else "SDPA", "an output projection"]
    widths = "self.heads, self.kv_heads, self.head_width" if gqa else "self.heads, self.head_width"
    lines = [
        f"class {name}(nn.Module):",
        f'    """{"Causal" if causal else "Bidirectional"} {kind} self-attention: {", ".join(features)}."""' if not cross else
        f'    """{kind.capitalize()} cross-attention: queries from x, keys and values from the encoder output; {", ".join(features)}."""',
        "",
        f"    def __init__(self, cfg: Config{', window: int | None = None' if banded else ''}{', rotary: bool = True' if nope else ''}"
        f"{', chunk: int | None = None' if chunked else ''}):",
        "        super().__init__()",
        f"        {widths} = {heads}, {kv + ', ' if gqa else ''}{hw}",
    ]
    if nope:
        lines.append("        self.rotary = rotary  # False: this layer has no rotary positions (NoPE)")
    if vw != hw:
        lines.append(f"        self.value_width = {vw}")
    if banded:
        lines.append("        self.window = window  # None: dense causal attention; else each token sees the last `window` tokens")
    if chunked:
        lines.append("        self.chunk = chunk  # None: dense causal attention; else a token sees the earlier tokens of its block")
    lines += per_layer_init(em, a, p)
    scale = None
    if a.scale is not None:
        scale = em.field(f"{p}attn_scale", float(a.scale), "attention score scale (instead of 1 / sqrt(head_width))")
        lines.append(f"        self.scale = {scale}{'  # T5: scores are not divided by sqrt(head_width)' if float(a.scale) == 1.0 else ''}")
    elif explicit:
        lines.append("        self.scale = self.head_width**-0.5")
    if softcap is not None:
        cap = em.field(f"{p}attn_softcap", float(softcap), "attention scores are capped to (-cap, cap) by cap * tanh(s / cap)")
        lines.append(f"        self.softcap = {cap}")
    if fused:
        bias = kids["qkv"].attrs.bias
        width = f"3 * {heads} * {hw}" if not gqa and vw == hw else f"({heads} + {kv}) * {hw} + {kv} * {vw}"
        lines.append(f"        self.qkv = nn.Linear(cfg.width, {width}, bias={bias})")
    else:
        for proj, count, width in (("q", heads, hw), ("k", kv, hw), ("v", kv, vw)):
            lines.append(f"        self.{proj} = nn.Linear(cfg.width, {count} * {width}, bias={kids[proj].attrs.bias})")
    if qk_norm:
        norm_widths = (hw, hw) if per_head_norm else (f"{heads} * {hw}", f"{kv} * {hw}")
        for which, width, count in zip(("q", "k"), norm_widths, (heads, kv)):  # count: heads with norms of their own
            lines.append(f"        self.{which}_norm = {norm_expr(em, kids[f'{which}_norm'], width, own=(f'{p}qk_norm_eps',), groups=count)}")
    lines.append(f"        self.out = nn.Linear({heads} * {vw}, cfg.width, bias={kids['out'].attrs.bias})")
    if sinks:
        lines.append("        self.sinks = nn.Parameter(torch.zeros(self.heads))  # one learned logit per head, beside the keys")
    if cached:
        lines += ["", *_new_cache("self.kv_heads" if gqa else "self.heads", "self.value_width" if vw != hw else "self.head_width",
                                  banded, chunked)]
    args = (", memory: torch.Tensor" if cross else "") + (", rope: tuple[torch.Tensor, torch.Tensor]" if rotary else "")
    args += (", bias: torch.Tensor" if score_bias else "") + (", cache: KVCache | None = None" if cached else "")
    lines += ["", f"    def forward(self, x: torch.Tensor{args}) -> torch.Tensor:", "        B, T, _ = x.shape  # (B, T, d)"]
    if fused and not gqa and vw == hw:
        lines.append("        q, k, v = self.qkv(x).chunk(3, dim=-1)  # (B, T, heads x width) each")
    elif fused:
        kv_heads = "self.kv_heads" if gqa else "self.heads"
        value = "self.value_width" if vw != hw else "self.head_width"
        lines += [f"        q_width, kv_width = self.heads * self.head_width, {kv_heads} * self.head_width",
                  f"        q, k, v = self.qkv(x).split([q_width, kv_width, {kv_heads} * {value}], dim=-1)"]
    elif cross:
        lines += ["        q = self.q(x).view(B, T, self.heads, -1).transpose(1, 2)  # (B, H, T, d_head)",
                  "        if cache is not None and cache.seen:  # generating: the encoder output's keys and values were cached",
                  "            k, v = cache.k, cache.v  # (B, KV, S, d_head)",
                  "        else:",
                  "            S = memory.shape[1]  # (B, S, d): the encoder output",
                  "            k = self.k(memory).view(B, S, self.kv_heads, -1).transpose(1, 2)  # (B, KV, S, d_head)".replace("self.kv_heads", "self.kv_heads" if gqa else "self.heads"),
                  "            v = self.v(memory).view(B, S, self.kv_heads, -1).transpose(1, 2)  # (B, KV, S, d_value)".replace("self.kv_heads", "self.kv_heads" if gqa else "self.heads"),
                  "            if cache is not None:",
                  "                k, v = cache.update(k, v)"]
    else:
        lines.append("        q, k, v = self.q(x), self.k(x), self.v(x)  # (B, T, heads x width)")
    if not cross:
        kv_heads = "self.kv_heads" if gqa else "self.heads"
        if qk_norm and not per_head_norm:
            lines.append("        q, k = self.q_norm(q), self.k_norm(k)  # QK-norm over all heads' features at once")
        lines += [
            "        q = q.view(B, T, self.heads, -1).transpose(1, 2)  # (B, H, T, d_head)",
            f"        k = k.view(B, T, {kv_heads}, -1).transpose(1, 2)  # ({'B, KV, T' if gqa else 'B, H, T'}, d_head)",
            f"        v = v.view(B, T, {kv_heads}, -1).transpose(1, 2)  # ({'B, KV, T' if gqa else 'B, H, T'}, d_value)",
        ]
        if per_head_norm:
            lines.append("        q, k = self.q_norm(q), self.k_norm(k)  # QK-norm over each head's features")
        if nope:
            lines += ["        if self.rotary:", "            q, k = rotate(q, *rope), rotate(k, *rope)  # rotary positions",
                      *("    " + line for line in rotary_qk_norm(a))]
        elif rotary:
            lines += ["        q, k = rotate(q, *rope), rotate(k, *rope)  # rotary positions", *rotary_qk_norm(a)]
        lines += temperature(a, nope)
        if fused and (rotary or qk_norm):  # q and k are new tensors now; v is still a view of the whole qkv output
            lines.append("        v = v.contiguous()  # attention keeps v for backward: a view would keep all of qkv alive")
        if cached:
            lines += ["        if cache is not None:  # generating: attend to the cached tokens too",
                      f"            k, v = cache.update(k, v)  # ({'B, KV, S' if gqa else 'B, H, S'}, d_head): S tokens in all"]
    sdpa_gqa = a.kv_sharing == "sdpa"  # else k and v are repeated to every head (archcalc.ir.kernel decided which)
    if a.kv_sharing == "repeat":
        lines += [
            "        k = k.repeat_interleave(self.heads // self.kv_heads, dim=1)  # (B, H, S, d_head)",
            "        v = v.repeat_interleave(self.heads // self.kv_heads, dim=1)  # (B, H, S, d_value)",
        ]
    extra = (", scale=self.scale" if scale else "") + (", enable_gqa=True" if sdpa_gqa else "")
    if score_bias:
        lines.append(f"        y = F.scaled_dot_product_attention(q, k, v, attn_mask=bias{extra})  # (B, H, T, d_value)")
    elif explicit:
        lines += _explicit(causal, banded, sinks, softcap is not None)
    elif not causal:
        lines.append(f"        y = F.scaled_dot_product_attention(q, k, v{extra})  # (B, H, T, d_value)")
    elif chunked:
        lines += chunk_sdpa(banded, extra)
    else:
        lines += _sdpa(banded, extra)
    lines.append("        return self.out(y.transpose(1, 2).reshape(B, T, -1))  # (B, T, d)")
    em.add("\n".join(lines))
    return name


def _new_cache(kv_heads: str, value_width: str, banded: bool, chunked: bool = False) -> list[str]:
    lines = [
        "    def new_cache(self, batch: int, length: int) -> KVCache:",
        '        """An empty cache for `batch` sequences of up to `length` tokens' + (" (a window keeps only its last tokens)." if banded else
                                                                               " (a chunked layer keeps one block)." if chunked else ".") + '"""',
    ]
    slots = "length"
    if banded or chunked:
        span = "self.window if self.window is not None else self.chunk" if banded and chunked else "self.window" if banded else "self.chunk"
        lines += [f"        span = {span}", "        slots = length if span is None else min(length, span)"]
        slots = "slots"
    lines += [
        "        weight = self.out.weight  # the cache takes the layer's device and dtype",
        f"        k = weight.new_zeros(batch, {kv_heads}, {slots}, self.head_width)",
        f"        v = weight.new_zeros(batch, {kv_heads}, {slots}, {value_width})",
        f"        return KVCache(k, v{', ring=span is not None' if banded or chunked else ''})",
    ]
    return lines


def _sdpa(banded: bool, extra: str) -> list[str]:
    causal = [f"F.scaled_dot_product_attention(q, k, v, is_causal=T > 1{extra})  # (B, H, T, d_value)"]
    if not banded:
        return ["        # T > 1: a training batch or a prompt, causal; T = 1: one new token sees every cached token",
                f"        y = {causal[0]}"]
    return [
        "        if self.window is None or T == 1:  # dense causal; or one new token, whose cache holds just its window",
        f"            y = {causal[0]}",
        "        else:",
        "            i = torch.arange(T, device=x.device)",
        "            band = (i[None, :] <= i[:, None]) & (i[:, None] - i[None, :] < self.window)  # (T, T) causal band",
        f"            y = F.scaled_dot_product_attention(q, k, v, attn_mask=band{extra})  # (B, H, T, d_value)",
    ]


def _explicit(causal: bool, banded: bool, sinks: bool, softcap: bool) -> list[str]:
    lines = ["        scores = (q @ k.transpose(-2, -1)) * self.scale  # (B, H, T, S)"]
    if softcap:
        lines.append("        scores = self.softcap * torch.tanh(scores / self.softcap)  # soft-capped to (-cap, cap)")
    if causal:
        lines += ["        if T > 1:  # causal (a training batch or a prompt); one new token sees every cached token",
                  "            i = torch.arange(T, device=x.device)",
                  "            allowed = i[None, :] <= i[:, None]  # (T, T)"]
        if banded:
            lines += ["            if self.window is not None:",
                      "                allowed = allowed & (i[:, None] - i[None, :] < self.window)  # only the last `window` tokens"]
        lines.append('            scores = scores.masked_fill(~allowed, float("-inf"))')
    if sinks:
        lines += ["        sinks = self.sinks.float().view(1, -1, 1, 1).expand(B, -1, T, 1)  # (B, H, T, 1)",
                  "        probs = torch.cat([scores.float(), sinks], dim=-1).softmax(dim=-1)[..., :-1]  # the sink takes a share, then is dropped"]
    else:
        lines.append("        probs = scores.float().softmax(dim=-1)  # (B, H, T, S)")
    lines.append("        y = probs.to(v.dtype) @ v  # (B, H, T, d_value)")
    return lines


def check_attention(attn: Component) -> list[str]:
    """What the attention template cannot generate (an empty list: everything is supported)."""
    a = attn.attrs
    assert isinstance(a, Attention)
    problems = []
    if isinstance(a, LatentAttention):
        kids = {c.name for c in attn.children}
        if a.cross or not a.causal or a.banded or a.window is not None or a.softcap is not None or attn.tensors \
                or {"q_norm", "k_norm"} & kids or False in a.rotary_pattern:
            problems.append("latent attention with cross-attention, bidirectional attention, windows, soft-capping, sinks, QK-norm "
                            "or layers without rotary positions")
        return problems
    if a.window is not None and not a.banded:
        problems.append("a window without 'local' layers in the pattern (use pattern: [local] for a window on every layer)")
    if a.chunked and (a.explicit_softmax or a.position_bias or a.cross or not a.causal):
        problems.append("chunked layers with sinks, soft-capping, a position bias, cross- or bidirectional attention")
    if any(t.name != "sinks" for t in attn.tensors):
        problems.append("attention tensors other than sinks")
    return problems
