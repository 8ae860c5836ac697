"""Source templates for attention: projections, QK-norm, rotary positions, the kernel, sinks and soft-capping.

Attention runs through ``F.scaled_dot_product_attention`` (flash attention where available). Two
features need the scores themselves, so those layers write the two products out (``q @ kᵀ``, then
``probs @ v``: the same two matmuls, the same FLOPs): attention sinks (gpt-oss: a learned logit per
head that takes a share of the softmax) and soft-capped scores (Gemma 2: cap · tanh(score / cap)).

Rotary tables are computed in the model's forward from the sequence length and passed down to every layer;
their frequencies are a buffer computed once (see ``archcalc.codegen.rotary``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from archcalc.codegen.blocks import sharing_kv
from archcalc.codegen.errors import UnsupportedError
from archcalc.codegen.literal import fitted
from archcalc.codegen.parts import camel, docstring, norm_expr
from archcalc.codegen.template import fragment, unit
from archcalc.ir import Component
from archcalc.ir.attrs import Attention, LatentAttention

if TYPE_CHECKING:
    from archcalc.codegen.emitter import Emitter


def attention_class(em: Emitter, attn: Component, p: str, rotary: bool, cls: str | None = None,
                    concat: bool = False, adapters: bool = False) -> str:
    """One attention class for a stack (``templates/attention.py``); ``rotary``: forward takes the (cos, sin) tables;
    ``cls``: the class name. The IR's kernel decides the rest: with a ``position_bias`` forward takes an additive score
    bias (T5's relative position bias, with the causal mask in it); an ``explicit_softmax`` writes the two products
    out; ``kv_sharing`` says whether SDPA shares the key/value heads or they are repeated first. Cross-attention takes
    its keys and values from the encoder output ``memory``. Causal self-attention and cross-attention take a
    ``KVCache``. Zamba2's shared attention: ``concat``, it reads 2d (the layer's input beside the token embeddings)
    and writes d; ``adapters``, forward takes the calling layer's q, k and v adapters."""
    a = attn.attrs
    assert isinstance(a, Attention)
    kids = {c.name: c for c in attn.children}
    embed = em.lowered.root.find("embed")
    # beside sliding layers with tables of their own, the model reads a dense layer's window too (Gemma 4's stacks)
    no_window = rotary and not a.banded and embed is not None and getattr(embed.attrs, "rotary_local_base", None) is not None
    flags = _flags(a, kids, rotary, sharing_kv(em)) | {"concat": concat, "adapters": adapters, "no_window": no_window}
    if (a.position_bias or a.cross) and (a.explicit_softmax or a.banded or rotary or (flags["fused"] and a.cross)):
        raise UnsupportedError("codegen: cross-attention and position-biased attention with sinks, soft-capping, "
                               "windows or rotary positions, and fused cross-attention, are not generated yet")
    if a.temperature is not None and a.temperature[2] != (0 if a.temperature[3] else 1):
        raise UnsupportedError("codegen generates the query temperature from position p + 1 on the layers without rotary "
                               "positions (Llama 4) and from p on every layer (Mistral) only")
    name = cls or f"{camel(p)}Attention"
    names = {"Attention": name, "DOC": docstring(_doc(a, flags), 4), **_fields(em, a, p, flags)}
    names |= _modules(em, kids, p, names, flags)
    names |= {"cfg.width": "2 * cfg.width", "OUT_WIDTH": "cfg.width"} if concat else {}
    drop = {"scale="} if a.scale is None else set()
    drop |= set() if a.kv_sharing == "sdpa" else {"enable_gqa="}  # else k and v are repeated to every head, or MHA
    cache = unit("generation", "Layer.new_cache", flags, names) if flags["cached"] else ""
    cache = unit("generation", "SharingLayer.new_cache") if a.kv_shared else cache
    kernel = fragment("kernels", "kernel", 8, flags, names, drop)
    temperature = fragment("kernels", "temperature", 8, flags, names, drop)  # the query's (Llama 4's, Mistral's)
    em.add(unit("attention", "Attention", flags, names, drop, {"new_cache": cache, "kernel": kernel,
                                                                "temperature": temperature}))
    return name


def _flags(a: Attention, kids: dict[str, Component], rotary: bool, stores: bool = False) -> dict[str, bool]:
    """The template's regions: which parts this layer has."""
    nope = rotary and False in a.rotary_pattern  # some layers of the stack leave out rotary positions
    qk_norm = "q_norm" in kids
    per_head = qk_norm and (kids["q_norm"].attrs.width == a.head_width or kids["q_norm"].attrs.groups is not None)
    fused, gqa, same_width = "qkv" in kids, a.grouped, a.value_width == a.head_width
    flags = {
        "gqa": gqa, "nope": nope, "rotary": rotary, "rotary_all": rotary and not nope, "banded": a.banded,
        "chunked": a.chunked, "cross": a.cross, "causal": a.causal, "sinks": a.sinks, "softcap": a.softcap is not None,
        "score_bias": a.position_bias, "cached": a.causal or a.cross, "value_width": not same_width,
        "rotary_qk_norm": a.rotary_qk_norm is not None, "temperature": a.temperature is not None,
        "temperature_nope": a.temperature is not None and not a.temperature[3] and nope,
        "temperature_all": a.temperature is not None and a.temperature[3],
        "scale_one": a.scale is not None and float(a.scale) == 1.0, "scale_other": a.scale is not None and float(a.scale) != 1.0,
        "explicit_scale": a.scale is None and a.explicit_softmax,
        "fused": fused, "fused_chunk": fused and not gqa and same_width, "fused_split": fused and (gqa or not same_width),
        "qk_norm": qk_norm, "qk_norm_all": qk_norm and not per_head,
        "qk_norm_heads": per_head, "contiguous": fused and (rotary or qk_norm), "repeat": a.kv_sharing == "repeat",
        "ring": a.banded or a.chunked, "banded_only": a.banded and not a.chunked,
        "chunked_only": a.chunked and not a.banded, "banded_chunked": a.banded and a.chunked,
        "output_gate": a.output_gate, "ungated": not fused and not a.cross and not a.output_gate and not a.k_eq_v,
        "k_eq_v": a.k_eq_v, "value_norm": a.value_norm is not None,
    }
    return flags | _kernel(a, flags) | _shared_kv(a, flags, stores)


def _shared_kv(a: Attention, flags: dict[str, bool], stores: bool) -> dict[str, bool]:
    """Gemma 4's KV sharing: a sharing layer (kv_shared) computes its queries only and reads the keys and values of the
    last earlier layer of its kind from the model's ``kv`` dict (no cache of its own); in a model with sharing layers,
    every other layer (``stores``) writes its keys and values there."""
    shared = a.kv_shared
    if shared and (flags["nope"] or flags["rotary_qk_norm"] or flags["temperature"] or flags["qk_norm_all"]
                   or flags["fused"] or flags["chunked"] or a.cross or not a.causal):
        raise UnsupportedError("codegen generates KV sharing (kv_shared) on causal layers with separate projections, "
                               "rotary positions on every layer and per-head QK-norm only")
    return {"kv_shared": shared, "kv_store": stores and not shared, "kv": stores or shared,
            "cache_update": flags["cached"] and not shared, "value_norm": flags["value_norm"] and not shared,
            "qk_norm_heads": flags["qk_norm_heads"] and not shared, "q_norm_heads": flags["qk_norm_heads"] and shared,
            "rotary_all": flags["rotary_all"] and not shared, "rotary_q": flags["rotary_all"] and shared,
            "ungated": flags["ungated"] and not shared}


def _kernel(a: Attention, flags: dict[str, bool]) -> dict[str, bool]:
    """Which kernel region computes y: SDPA with the bias, the two products, bidirectional, chunked, causal, banded."""
    kernel = ("bias" if a.position_bias else "explicit" if a.explicit_softmax else "bidirectional" if not a.causal
              else "chunked" if a.chunked else "band" if a.banded else "causal")
    return {f"kernel_{k}": k == kernel for k in ("bias", "explicit", "bidirectional", "chunked", "band", "causal")}


def _doc(a: Attention, flags: dict[str, bool]) -> str:
    kind = "grouped-query" if flags["gqa"] else "multi-head"
    features = ["a fused qkv projection" if flags["fused"] else "q and k projections (the values are the keys)"
                if flags["k_eq_v"] else "a q projection (the keys and values of an earlier layer of its kind)"
                if flags["kv_shared"] else "q, k, v projections"]
    features += ["the calling layer's low-rank adapters beside them"] if flags.get("adapters") else []
    features += ["QK-norm"] if flags["qk_norm"] else []
    features += ["a weightless RMS norm of the values"] if flags["value_norm"] else []
    features += ["rotary positions"] if flags["rotary"] else []
    features += ["sinks"] if flags["sinks"] else []
    features += ["soft-capped scores"] if flags["softcap"] else []
    features += ["an additive position bias" + (" (with the causal mask)" if a.causal else "")] if a.position_bias else []
    features += ["explicit softmax" if a.explicit_softmax else "SDPA"]
    features += ["an output gate, then an output projection" if a.output_gate else "an output projection"]
    if flags.get("concat"):
        features[-1] += " (shared by several layers, it reads 2d: the layer's input beside the token embeddings; " \
            "it writes d)"
    if a.cross:
        return (f"{kind.capitalize()} cross-attention: queries from x, keys and values from the encoder output; "
                f"{', '.join(features)}.")
    return f"{'Causal' if a.causal else 'Bidirectional'} {kind} self-attention: {', '.join(features)}."


def _fields(em: Emitter, a: Attention, p: str, flags: dict[str, bool]) -> dict[str, str]:
    """The config fields the layer reads (declared in the order the file lists them), by the template's names."""
    heads = em.field(f"{p}heads", a.heads, f"{a.heads}: attention heads")
    kv = em.field(f"{p}kv_heads", a.kv_heads, f"{a.kv_heads}: key/value heads") if flags["gqa"] else heads
    hw = em.field(f"{p}head_width", a.head_width, f"{a.head_width}: width of one head")
    vw = em.field(f"{p}value_width", a.value_width, "value width of one head") if flags["value_width"] else hw
    names = {"cfg.heads": heads, "cfg.kv_heads": kv, "cfg.head_width": hw, "cfg.value_width": vw}
    names |= {} if flags["gqa"] else {"self.kv_heads": "self.heads"}
    names |= {} if flags["value_width"] else {"self.value_width": "self.head_width"}
    if a.rotary_qk_norm is not None:
        names["cfg.rotary_qk_norm_eps"] = em.field(f"{p}rotary_qk_norm_eps", a.rotary_qk_norm,
                                                   "epsilon of the rotary layers' query/key RMS norm")
    if a.temperature is not None:
        names["cfg.temperature_floor"] = em.field(f"{p}temperature_floor", a.temperature[0], "positions per step of the query temperature")
        names["cfg.temperature_scale"] = em.field(f"{p}temperature_scale", a.temperature[1], "strength of the query temperature")
    if a.scale is not None:
        names["cfg.attn_scale"] = em.field(f"{p}attn_scale", float(a.scale), "attention score scale (instead of 1 / sqrt(head_width))")
    if a.value_norm is not None:
        names["cfg.value_norm_eps"] = em.field(f"{p}value_norm_eps", a.value_norm, "epsilon of the values' RMS norm")
    if a.softcap is not None:
        names["cfg.attn_softcap"] = em.field(f"{p}attn_softcap", float(a.softcap),
                                             "attention scores are capped to (-cap, cap) by cap * tanh(s / cap)")
    return names


def _modules(em: Emitter, kids: dict[str, Component], p: str, names: dict[str, str], flags: dict[str, bool]) -> dict[str, str]:
    """The projections' bias flags and the QK-norms' constructor calls."""
    out = {f"{proj.upper()}_BIAS": str(kids[proj].attrs.bias) for proj in ("q", "k", "v", "qkv", "out") if proj in kids}
    if flags["qk_norm"]:
        heads, kv, hw = names["cfg.heads"], names["cfg.kv_heads"], names["cfg.head_width"]
        widths = (hw, hw) if flags["qk_norm_heads"] or flags["q_norm_heads"] else (f"{heads} * {hw}", f"{kv} * {hw}")
        for which, width, count in zip(("q", "k"), widths, (heads, kv)):  # count: heads with norms of their own
            if f"{which}_norm" not in kids:  # a layer that reuses keys (kv_shared) has no key norm
                continue
            expr = norm_expr(em, kids[f"{which}_norm"], width, own=(f"{p}qk_norm_eps",), groups=count)
            out[f"{which.upper()}_NORM"] = fitted(expr, len(f"        self.{which}_norm = "), 8)
    return out


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
