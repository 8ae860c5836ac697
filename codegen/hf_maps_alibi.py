"""transformers' parameter names of the ALiBi families (BLOOM, MPT), for :mod:`codegen.hf_maps` (recipes as there)."""

from __future__ import annotations

Recipe = str | tuple


def _pair(weights: dict, ours: str, theirs) -> None:
    """``ours.weight`` and ``ours.bias`` from ``theirs(suffix)`` (a recipe for each), or from ``theirs.weight/bias``."""
    for suffix in ("weight", "bias"):
        weights[f"{ours}.{suffix}"] = theirs(suffix) if callable(theirs) else f"{theirs}.{suffix}"


def bloom() -> dict[str, Recipe]:
    """BloomForCausalLM: a LayerNorm on the embeddings; query_key_value stores [q, k, v] head by head (as NeoX)."""
    h, w = "transformer.h.{i}.", {}
    w["embed.token.weight"] = "transformer.word_embeddings.weight"
    _pair(w, "embed.norm", "transformer.word_embeddings_layernorm")
    qkv = h + "self_attention.query_key_value."
    _pair(w, "blocks.{i}.attn.qkv", lambda s: ("qkv_by_group", qkv + s))
    for n, ours in enumerate("qkv"):  # separate projections (--separate-projections)
        _pair(w, f"blocks.{{i}}.attn.{ours}", lambda s, n=n: ("qkv_group", n, qkv + s))
    _pair(w, "blocks.{i}.attn.out", h + "self_attention.dense")
    _pair(w, "blocks.{i}.mlp.up", h + "mlp.dense_h_to_4h")
    _pair(w, "blocks.{i}.mlp.down", h + "mlp.dense_4h_to_h")
    _pair(w, "blocks.{i}.attn_norm", h + "input_layernorm")
    _pair(w, "blocks.{i}.mlp_norm", h + "post_attention_layernorm")
    _pair(w, "final_norm", "transformer.ln_f")
    _pair(w, "head", "lm_head")
    return w


def mpt() -> dict[str, Recipe]:
    """MptForCausalLM: Wqkv stores all queries, then all keys, then all values; no biases anywhere."""
    b, w = "transformer.blocks.{i}.", {}
    w["embed.token.weight"] = "transformer.wte.weight"
    w["blocks.{i}.attn.qkv.weight"] = b + "attn.Wqkv.weight"
    for n, ours in enumerate("qkv"):  # separate projections (--separate-projections)
        w[f"blocks.{{i}}.attn.{ours}.weight"] = ("qkv_rows", n, b + "attn.Wqkv.weight")
    w["blocks.{i}.attn.out.weight"] = b + "attn.out_proj.weight"
    w["blocks.{i}.mlp.up.weight"] = b + "ffn.up_proj.weight"
    w["blocks.{i}.mlp.down.weight"] = b + "ffn.down_proj.weight"
    w["blocks.{i}.attn_norm.weight"] = b + "norm_1.weight"
    w["blocks.{i}.mlp_norm.weight"] = b + "norm_2.weight"
    w["final_norm.weight"] = "transformer.norm_f.weight"
    w["head.weight"] = "lm_head.weight"
    return w
