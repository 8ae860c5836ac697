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

from archcalc.codegen.errors import UnsupportedError
from archcalc.codegen.parts import camel, docstring, norm_expr
from archcalc.codegen.rope_scaling import score_mscale
from archcalc.codegen.template import unit
from archcalc.ir import Component
from archcalc.ir.attrs import Indexer, LatentAttention

if TYPE_CHECKING:
    from archcalc.codegen.emitter import Emitter


def latent_attention_class(em: Emitter, attn: Component, p: str) -> str:
    """The latent attention class of a stack (``templates/latent.py``)."""
    a = attn.attrs
    assert isinstance(a, LatentAttention)
    kids = {c.name: c for c in attn.children}
    names = {"cfg.heads": em.field(f"{p}heads", a.heads, f"{a.heads}: attention heads"),
             "cfg.head_width": em.field(f"{p}head_width", a.head_width,
                                        f"{a.head_width}: query/key width of one head without the rotary part"),
             "cfg.rope_width": em.field(f"{p}rope_width", a.rope_width,
                                        f"{a.rope_width}: rotary query/key width of one head (the key's is shared)"),
             "cfg.value_width": em.field(f"{p}value_width", a.value_width, f"{a.value_width}: value width of one head"),
             "cfg.kv_rank": em.field(f"{p}kv_rank", a.kv_rank, "key/value compression rank")}
    low_rank_q = a.q_rank is not None
    own = ("norm_eps", f"{p}latent_norm_eps")
    mscale = score_mscale(em)  # YaRN with mscale_all_dim (DeepSeek-V3): the scores are scaled by mscale squared too
    if a.scale is not None:
        names["cfg.attn_scale"] = em.field(f"{p}attn_scale", float(a.scale),
                                           "attention score scale (instead of 1 / sqrt(head_width + rope_width))")
    names["MSCALE"] = mscale or "1.0"
    if a.temperature is not None:  # Mistral 4's: every layer, from position p
        if a.temperature[2:] != (0, True):
            raise UnsupportedError("codegen generates latent attention's query temperature from position p on every "
                                   "layer (Mistral 4) only")
        names["cfg.temperature_floor"] = em.field(f"{p}temperature_floor", a.temperature[0],
                                                  "positions per step of the query temperature")
        names["cfg.temperature_scale"] = em.field(f"{p}temperature_scale", a.temperature[1], "strength of the query temperature")
    if low_rank_q:
        names["cfg.q_rank"] = em.field(f"{p}q_rank", a.q_rank, "query compression rank")
        names["Q_NORM"] = norm_expr(em, kids["q_down_norm"], names["cfg.q_rank"], own=own)
    names["K_NORM"] = norm_expr(em, kids["kv_down_norm"], names["cfg.kv_rank"], own=own)
    names |= {f"{proj.upper()}_BIAS": str(kids[proj].attrs.bias) for proj in ("q", "q_down", "q_up", "kv_down", "kv_up", "out")
              if proj in kids}
    name = f"{camel(p)}Attention"
    doc = _doc(low_rank_q, bool(mscale)) + (" The query is scaled by sqrt(width / q_rank), the normed latent by "
                                            "sqrt(width / kv_rank) (LongCat-Flash)." if a.rank_scale else "")
    names |= {"Attention": name, "DOC": docstring(doc, 4)}
    scaled = a.scale is not None or bool(mscale)
    flags = {"field_scale": a.scale is not None and not mscale, "field_mscale": a.scale is not None and bool(mscale),
             "mscale": a.scale is None and bool(mscale), "low_rank_q": low_rank_q, "scale": scaled, "sparse": a.sparse,
             "temperature": a.temperature is not None, "rank_scale": a.rank_scale}
    if a.rank_scale and not low_rank_q:
        raise UnsupportedError("codegen generates rank_scale with a query compression (q_rank) only")
    if a.sparse:
        names["Indexer"] = indexer_class(em, attn, p, names)
    em.add(unit("latent", "Attention", flags, names))
    return name


def _doc(low_rank_q: bool, mscale: bool) -> str:
    return ("Causal multi-head latent attention (DeepSeek-V2/V3): queries through a low-rank bottleneck"
            + ("" if low_rank_q else " (here a plain projection)") + ", keys and values expanded from a compressed "
            "latent, plus one rotary key shared by every head; SDPA, an output projection. The score scale is "
            + ("1 / sqrt(head_width + rope_width) times YaRN's mscale squared, as transformers' DeepseekV3Attention."
               if mscale else "SDPA's default 1 / sqrt(head_width + rope_width), as transformers'.")
            + " Generating, it caches the latent and the rotary key only, and attends in the latent space (kv_up "
            "absorbed).")


def indexer_class(em: Emitter, attn: Component, p: str, names: dict[str, str]) -> str:
    """DeepSeek Sparse Attention's indexer of a stack (``templates/indexer.py``), as transformers' DeepseekV32Indexer
    (half pairs) or GlmMoeDsaIndexer (the attention's interleaved pairs)."""
    a = attn.attrs
    assert isinstance(a, LatentAttention) and a.index_top_k is not None
    indexer = next((c for c in attn.children if isinstance(c.attrs, Indexer)), None)
    if indexer is None or a.index_shared:
        raise UnsupportedError("codegen does not generate layers that reuse the previous layer's top-k selection yet "
                               "(GLM-5's shared indexer layers); count, flops, memory and infer model them")
    ix = indexer.attrs
    assert isinstance(ix, Indexer)
    fields = {"cfg.index_heads": em.field(f"{p}index_heads", ix.heads, f"{ix.heads}: indexer heads"),
              "cfg.index_head_width": em.field(f"{p}index_head_width", ix.head_width,
                                               f"{ix.head_width}: width of one indexer head and of its key"),
              "cfg.index_top_k": em.field(f"{p}index_top_k", a.index_top_k, f"{a.index_top_k}: keys each query attends to"),
              "cfg.rope_width": names["cfg.rope_width"], "cfg.q_rank": names["cfg.q_rank"]}
    name = f"{camel(p)}Indexer"
    doc = ("DeepSeek Sparse Attention's lightning indexer: each query's top_k keys by the sum over its heads of "
           "weight x relu(query . key) / sqrt(head_width); a query per head from the query latent, one key per token "
           "(LayerNorm'd), the first rope_width features of both rotated ("
           + ("half pairs" if ix.pairing == "half" else "the attention's interleaved pairs") + ").")
    em.add(unit("indexer", "Indexer", {"half": ix.pairing == "half"}, fields | {"Indexer": name, "DOC": docstring(doc, 4)}))
    return name
