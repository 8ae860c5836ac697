"""transformers' parameter names of more dense decoders, for :mod:`codegen.hf_maps` (recipes as described there):
Phi-1/1.5/2, StarCoder2, GPTBigCode (SantaCoder, StarCoder), OPT and StableLM."""

from __future__ import annotations

Recipe = str | tuple


def _pair(weights: dict, ours: str, theirs) -> None:
    """``ours.weight`` and ``ours.bias`` from ``theirs(suffix)`` (a recipe for each), or from ``theirs.weight/bias``."""
    for suffix in ("weight", "bias"):
        weights[f"{ours}.{suffix}"] = theirs(suffix) if callable(theirs) else f"{theirs}.{suffix}"


def _separate(w: dict, attn: str, q: str, k: str, v: str, out: str) -> None:
    """q, k, v and out projections stored apart; the fused qkv (--fuse-projections) is their concatenation."""
    for ours, theirs in (("q", q), ("k", k), ("v", v), ("out", out)):
        _pair(w, f"blocks.{{i}}.attn.{ours}", attn + theirs)
    _pair(w, "blocks.{i}.attn.qkv", lambda s: ("cat", *(f"{attn}{p}.{s}" for p in (q, k, v))))


def starcoder2() -> dict[str, Recipe]:
    """Starcoder2ForCausalLM: Llama's names with biases everywhere and a dense c_fc/c_proj MLP."""
    layer, w = "model.layers.{i}.", {}
    w["embed.token.weight"] = "model.embed_tokens.weight"
    _separate(w, layer + "self_attn.", "q_proj", "k_proj", "v_proj", "o_proj")
    _pair(w, "blocks.{i}.mlp.up", layer + "mlp.c_fc")
    _pair(w, "blocks.{i}.mlp.down", layer + "mlp.c_proj")
    _pair(w, "blocks.{i}.attn_norm", layer + "input_layernorm")
    _pair(w, "blocks.{i}.mlp_norm", layer + "post_attention_layernorm")
    _pair(w, "final_norm", "model.norm")
    _pair(w, "head", "lm_head")
    return w


def phi() -> dict[str, Recipe]:
    """PhiForCausalLM: one LayerNorm feeds attention and MLP (a parallel block); the output projection is dense."""
    layer, w = "model.layers.{i}.", {}
    w["embed.token.weight"] = "model.embed_tokens.weight"
    _separate(w, layer + "self_attn.", "q_proj", "k_proj", "v_proj", "dense")
    _pair(w, "blocks.{i}.attn.q_norm", layer + "self_attn.q_layernorm")  # qk_layernorm: one norm over a head's width
    _pair(w, "blocks.{i}.attn.k_norm", layer + "self_attn.k_layernorm")
    _pair(w, "blocks.{i}.mlp.up", layer + "mlp.fc1")
    _pair(w, "blocks.{i}.mlp.down", layer + "mlp.fc2")
    _pair(w, "blocks.{i}.norm", layer + "input_layernorm")
    _pair(w, "final_norm", "model.final_layernorm")
    _pair(w, "head", "lm_head")
    return w


def gpt_bigcode() -> dict[str, Recipe]:
    """GPTBigCodeForCausalLM: GPT-2's names, but nn.Linear layers (no transposes); c_attn holds [queries, key, value]
    per key/value group (multi-query: one group, all queries then the key and the value; else head by head)."""
    h, w = "transformer.h.{i}.", {}
    w["embed.token.weight"] = "transformer.wte.weight"
    w["embed.position.weight"] = "transformer.wpe.weight"
    _pair(w, "blocks.{i}.attn.qkv", lambda s: ("qkv_by_group", f"{h}attn.c_attn.{s}"))
    for n, ours in enumerate("qkv"):  # separate projections (--separate-projections)
        _pair(w, f"blocks.{{i}}.attn.{ours}", lambda s, n=n: ("qkv_group", n, f"{h}attn.c_attn.{s}"))
    _pair(w, "blocks.{i}.attn.out", h + "attn.c_proj")
    _pair(w, "blocks.{i}.mlp.up", h + "mlp.c_fc")
    _pair(w, "blocks.{i}.mlp.down", h + "mlp.c_proj")
    _pair(w, "blocks.{i}.attn_norm", h + "ln_1")
    _pair(w, "blocks.{i}.mlp_norm", h + "ln_2")
    _pair(w, "final_norm", "transformer.ln_f")
    _pair(w, "head", "lm_head")
    return w


def opt() -> dict[str, Recipe]:
    """OPTForCausalLM: the decoder under model.decoder; each layer's second norm is its final_layer_norm."""
    dec, w = "model.decoder.", {}
    layer = dec + "layers.{i}."
    w["embed.token.weight"] = dec + "embed_tokens.weight"
    w["embed.position.weight"] = dec + "embed_positions.weight"
    w["embed.project_in.weight"] = dec + "project_in.weight"  # OPT-350m: its token table is narrower than the model
    w["project_out.weight"] = dec + "project_out.weight"
    _separate(w, layer + "self_attn.", "q_proj", "k_proj", "v_proj", "out_proj")
    _pair(w, "blocks.{i}.mlp.up", layer + "fc1")
    _pair(w, "blocks.{i}.mlp.down", layer + "fc2")
    _pair(w, "blocks.{i}.attn_norm", layer + "self_attn_layer_norm")
    _pair(w, "blocks.{i}.mlp_norm", layer + "final_layer_norm")
    _pair(w, "final_norm", dec + "final_layer_norm")
    _pair(w, "head", "lm_head")
    return w


def stablelm() -> dict[str, Recipe]:
    """StableLmForCausalLM: Llama's names with LayerNorm biases; per-head QK-norms are one LayerNorm per head ({h});
    a parallel block (use_parallel_residual) has input_layernorm only."""
    layer, w = "model.layers.{i}.", {}
    a = layer + "self_attn."
    w["embed.token.weight"] = "model.embed_tokens.weight"
    _separate(w, a, "q_proj", "k_proj", "v_proj", "o_proj")
    for ours, theirs in (("q_norm", "q_layernorm"), ("k_norm", "k_layernorm")):
        _pair(w, f"blocks.{{i}}.attn.{ours}", lambda s, theirs=theirs: ("heads", f"{a}{theirs}.norms.{{h}}.{s}"))
    for ours, theirs in (("gate", "gate_proj"), ("up", "up_proj"), ("down", "down_proj")):
        _pair(w, f"blocks.{{i}}.mlp.{ours}", f"{layer}mlp.{theirs}")
    _pair(w, "blocks.{i}.mlp.gate_up", lambda s: ("cat", f"{layer}mlp.gate_proj.{s}", f"{layer}mlp.up_proj.{s}"))
    _pair(w, "blocks.{i}.attn_norm", layer + "input_layernorm")
    _pair(w, "blocks.{i}.norm", layer + "input_layernorm")  # parallel: one norm
    _pair(w, "blocks.{i}.mlp_norm", layer + "post_attention_layernorm")
    _pair(w, "final_norm", "model.norm")
    _pair(w, "head", "lm_head")
    return w
