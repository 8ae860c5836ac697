"""Random small configs per model type, for the oracle test (transformers builds each on the meta device).

Drawn from the model type's bundled spec, not from a branch per type: each ``hf.keys`` entry says what the key
fills, so a new model type gets random configs with no change here. Symbols are drawn by hyperparameter name (the
names every family shares: V, L, d, H, KV, d_head, d_ff, E, K, ...), switches by their default's type, and the keys
that named hooks read by the key's name (``sliding_window``, ``first_k_dense_replace``, ...), whichever family has
them.
"""

from __future__ import annotations

import random
from typing import Any

from archcalc.hf.build import family_of

_SKIP = object()


def _heads(rng: random.Random) -> tuple[int, int, int]:
    """(heads, kv heads dividing them, head width)."""
    heads = rng.choice([1, 2, 4, 6])
    kv = rng.choice([k for k in range(1, heads + 1) if heads % k == 0])
    return heads, kv, rng.choice([4, 8, 16])


def _symbol(name: str, rng: random.Random, v: dict[str, Any]) -> Any:
    """A small value of the hyperparameter ``name`` (v: the values drawn so far, and H, KV, dh)."""
    draws = {
        "V": lambda: rng.randint(40, 300), "T": lambda: rng.randint(8, 64), "L": lambda: rng.randint(1, 3),
        "H": lambda: v["heads"], "KV": lambda: v["kv"], "d": lambda: v["heads"] * v["dh"],
        "d_head": lambda: rng.choice([4, 8, 12]), "d_ff": lambda: rng.randint(8, 64), "d_expert": lambda: rng.randint(4, 32),
        "E": lambda: rng.randint(1, 5), "K": lambda: rng.randint(1, v.get("E", 1)), "L_dec": lambda: rng.choice([1, 2, 4]),
        "buckets": lambda: rng.choice([8, 32]), "d_rope": lambda: rng.choice([2, 4]), "d_v": lambda: rng.choice([4, 6]),
        "kv_rank": lambda: rng.choice([4, 8]), "d_shared": lambda: rng.randint(4, 48),
        "q_rank": lambda: rng.choice([4, 8, 12]),  # LongCat-Flash: a query compression always (q_lora_rank)
        "q_scalar": lambda: rng.choice([16, 168, 256]),
        # Gated DeltaNet: value heads, key heads dividing them, their widths, the conv's taps
        "Hv": lambda: rng.choice([1, 2, 4, 6]), "Hk": lambda: rng.choice([k for k in (1, 2, 3) if v["Hv"] % k == 0]),
        "Dk": lambda: rng.choice([4, 8]), "Dv": lambda: rng.choice([4, 6, 8]), "d_conv": lambda: rng.choice([2, 3, 4]),
        # Mamba, Mamba2: expansion, inner width, state, step-size rank, heads, groups of heads, chunk (d_conv above)
        "expand": lambda: rng.randint(1, 3), "d_inner": lambda: rng.randint(4, 64), "d_state": lambda: rng.choice([1, 4, 16]),
        "dt_rank": lambda: rng.randint(1, 8), "ssm_heads": lambda: v["heads"],
        "groups": lambda: rng.choice([g for g in range(1, v["ssm_heads"] + 1) if v["ssm_heads"] % g == 0]),
        "chunk": lambda: rng.choice([4, 64, 256]),
        # Falcon-H1: the Mamba2 mixer's own inner width, a whole number of widths per head
        "d_ssm": lambda: v["ssm_heads"] * rng.choice([2, 4, 8]),
        # Nemotron-H: the Mamba2 heads' own width; expert groups dividing the experts, and how many a token picks from
        "ssm_head_dim": lambda: rng.choice([2, 4, 8]),
        "G": lambda: rng.choice([g for g in range(1, v["E"] + 1) if v["E"] % g == 0]), "Kg": lambda: rng.randint(1, v["G"]),
        # DeepSeek Sparse Attention: the indexer's heads, their width (at least the rotary part's), the keys kept
        "H_index": lambda: rng.choice([1, 2, 3]), "d_index": lambda: rng.choice([4, 8]), "k_index": lambda: rng.choice([1, 2, 5]),
        # Gemma 4: the global layers' head width, the sliding window, the per-layer inputs' width (0: none) and vocabulary
        "d_global": lambda: rng.choice([4, 8, 16]), "window": lambda: rng.randint(1, 16), "P": lambda: rng.choice([0, 2, 4]),
        "Vp": lambda: rng.randint(40, 300),
        # Zamba2: shared blocks (num_mem_blocks), the adapters' rank
        "M": lambda: rng.randint(1, 3), "r": lambda: rng.choice([1, 4, 8]),
        # multi-token prediction modules: in the checkpoints, not in transformers' models (counted only with --with-mtp)
        "N_mtp": lambda: rng.randint(0, 2),
    }
    return draws[name]()


def _linear_attention_layers_rules(rng: random.Random, v: dict[str, Any], layers: int) -> dict:
    """Qwen3.5's and Qwen3-Next's linear-attention and attention layers."""
    rules: dict[str, Any] = {}
    rules["layer_types"] = lambda: [rng.choice(["linear_attention", "full_attention"]) for _ in range(layers)]
    rules["full_attention_interval"] = lambda: rng.randint(1, 4)
    return rules


def _ssm_head_dim_rules(rng: random.Random, v: dict[str, Any], layers: int) -> dict:
    """Mamba2: the width of each of the mixer's heads, checked against expand · d / heads."""
    rules: dict[str, Any] = {}
    rules["head_dim"] = rules["mamba_d_head"] = lambda: v["expand"] * v["d"] // v["ssm_heads"]
    return rules


def _falcon_h1_mixer_rules(rng: random.Random, v: dict[str, Any], layers: int) -> dict:
    """Falcon-H1: the mixer's head width (auto: inner / heads), its lists of multipliers."""
    rules: dict[str, Any] = {}
    rules["mamba_d_head"] = lambda: "auto"
    rules["ssm_multipliers"] = lambda: rng.choice([None, [rng.choice([0.25, 1.0, 1.5]) for _ in range(5)]])
    rules["mlp_multipliers"] = lambda: rng.choice([None, [rng.choice([0.5, 1.0, 2.0]) for _ in range(2)]])
    return rules


def _attention_layer_indices_rules(rng: random.Random, v: dict[str, Any], layers: int) -> dict:
    """Bamba's attention layers among its Mamba2 layers."""
    rules: dict[str, Any] = {}
    rules["attn_layer_indices"] = lambda: rng.choice([None, sorted(rng.sample(range(layers), rng.randint(1, layers)))])
    return rules


def _short_conv_layers_rules(rng: random.Random, v: dict[str, Any], layers: int) -> dict:
    """LFM2's short-convolution and attention layers, by type or by index."""
    rules: dict[str, Any] = {}
    rules["layer_types"] = lambda: rng.choice([None, [rng.choice(["conv", "full_attention"]) for _ in range(layers)]])
    rules["full_attn_idxs"] = lambda: rng.choice([None, sorted(rng.sample(range(layers), rng.randint(0, layers)))])
    return rules


def _short_conv_moe_layers_rules(rng: random.Random, v: dict[str, Any], layers: int) -> dict:
    """LFM2-MoE's layers by type (always listed: transformers builds none without) and its leading dense layers."""
    rules: dict[str, Any] = {}
    rules["layer_types"] = lambda: [rng.choice(["conv", "full_attention"]) for _ in range(layers)]
    rules["num_dense_layers"] = lambda: rng.randint(0, layers + 1)
    return rules


def _afmoe_layers_rules(rng: random.Random, v: dict[str, Any], layers: int) -> dict:
    """AFMoE's leading dense layers, shared experts, and sliding/full layers by type or one full in every n."""
    rules: dict[str, Any] = {}
    rules["num_dense_layers"] = lambda: rng.randint(0, layers + 1)
    rules["num_shared_experts"] = lambda: rng.randint(0, 2)
    rules["global_attn_every_n_layers"] = lambda: rng.randint(1, layers + 2)
    rules["layer_types"] = lambda: rng.choice([None, [rng.choice(["sliding_attention", "full_attention"]) for _ in range(layers)]])
    return rules


def _zero_compute_experts_rules(rng: random.Random, v: dict[str, Any], layers: int) -> dict:
    """LongCat-Flash's zero-compute experts (none or some), and the
    rotary width its config also writes as head_dim (another is refused: transformers' forward fails on it)."""
    return {"zero_expert_num": lambda: rng.choice([0, rng.randint(1, 4)]), "head_dim": lambda: v.get("d_rope", 64)}


def _rotary_dim_share_rules(rng: random.Random, v: dict[str, Any], layers: int) -> dict:
    """MiniMax-M2: the rotated features of a head (more than a head fails in its forward)."""
    rules: dict[str, Any] = {}
    rules["rotary_dim"] = lambda: rng.choice([None, 2, v.get("d_head", v["dh"])])
    return rules


def _granite_hybrid_layers_rules(rng: random.Random, v: dict[str, Any], layers: int) -> dict:
    """Granite 4.0-H's Mamba2 and attention layers (older or newer names), positions."""
    rules: dict[str, Any] = {}
    rules["layer_types"] = lambda: rng.choice([None, [rng.choice(["mamba", "attention", "linear_attention", "full_attention"])
                                                      for _ in range(layers)]])
    rules["position_embedding_type"] = lambda: rng.choice([None, "nope", "rope"])
    return rules


def _auto_adjusted_ff_dim_rules(rng: random.Random, v: dict[str, Any], layers: int) -> dict:
    """LFM2's MLP width derived from intermediate_size."""
    rules: dict[str, Any] = {}
    rules["block_auto_adjust_ff_dim"] = lambda: rng.random() < 0.5
    rules["block_ffn_dim_multiplier"] = lambda: rng.choice([1, 1.0, 1.5])
    rules["block_multiple_of"] = lambda: rng.choice([1, 8, 256])
    return rules


def _jamba_layers_rules(rng: random.Random, v: dict[str, Any], layers: int) -> dict:
    """Jamba's attention layers and mixture-of-experts layers: each offset below its period."""
    rules: dict[str, Any] = {}
    for kind in ("attn", "expert"):
        rules[f"{kind}_layer_period"] = lambda kind=kind: v.setdefault(kind, rng.randint(1, 3))
        rules[f"{kind}_layer_offset"] = lambda kind=kind: rng.randrange(v.setdefault(kind, rng.randint(1, 3)))
    return rules


def _hybrid_pattern_layers_rules(rng: random.Random, v: dict[str, Any], layers: int) -> dict:
    """Nemotron-H's layers, a character each (or the list, which wins)."""
    rules: dict[str, Any] = {}
    kinds = {"M": "linear_attention", "*": "full_attention", "-": "mlp", "E": "moe"}
    rules["hybrid_override_pattern"] = lambda: v.setdefault("pattern", "".join(rng.choices("M*-E", k=rng.randint(1, 6))))
    rules["layers_block_type"] = lambda: rng.choice([None, [kinds[c] for c in rng.choices("M*-E", k=rng.randint(1, 6))]])
    return rules

def _zamba2_layers_rules(rng: random.Random, v: dict[str, Any], layers: int) -> dict:
    """Zamba2's Mamba2 and hybrid layers (a list of L: without one transformers lists 54), rotary or not."""
    rules: dict[str, Any] = {}
    rules["layers_block_type"] = lambda: [rng.choice(["mamba", "linear_attention", "hybrid"]) for _ in range(layers)]
    rules["use_mem_rope"] = lambda: rng.random() < 0.5
    return rules


def _sparse_attention_layers_rules(rng: random.Random, v: dict[str, Any], layers: int) -> dict:
    """DeepSeek Sparse Attention: a query compression (the indexer reads it), the cache's layer types, and GLM-5's
    layers that reuse the previous layer's top-k (the first layer runs its own indexer)."""
    rules: dict[str, Any] = {}
    rules["q_lora_rank"] = lambda: rng.choice([8, 12])
    rules["layer_types"] = lambda: rng.choice([None, ["indexed_attention"] * layers])
    rules["indexer_types"] = lambda: rng.choice([None, ["full"] + [rng.choice(["full", "shared"]) for _ in range(layers - 1)]])
    rules["index_topk_pattern"] = lambda: rng.choice([None, "F" + "".join(rng.choices("FS", k=layers - 1))])
    rules["index_topk_freq"] = lambda: rng.randint(1, 3)
    rules["index_skip_topk_offset"] = lambda: rng.randint(1, 3)
    return rules


def _per_layer_type_attention_rules(rng: random.Random, v: dict[str, Any], layers: int) -> dict:
    """Gemma 4's sliding and full layers (the last full), the last layers sharing keys and values (only where every kind
    of layer among them has an earlier one: transformers refuses the others), K = V's key/value heads, the experts."""
    def kinds() -> list[str] | None:
        return v.setdefault("layer_kinds", rng.choice([None, [rng.choice(["sliding_attention", "full_attention"])
                                                              for _ in range(layers - 1)] + ["full_attention"]]))

    def shared() -> int:
        given = kinds() or ["full_attention" if (i + 1) % 6 == 0 or i == layers - 1 else "sliding_attention" for i in range(layers)]
        return rng.choice([n for n in range(layers + 1) if n in (0, layers) or set(given[: layers - n]) == set(given)])

    experts = lambda: v.setdefault("E", rng.randint(1, 4))  # noqa: E731
    return {"layer_types": kinds, "num_kv_shared_layers": shared, "num_global_key_value_heads": lambda: rng.choice([None, 1]),
            "use_double_wide_mlp": lambda: rng.random() < 0.5, "enable_moe_block": lambda: rng.random() < 0.5,
            "num_experts": experts, "top_k_experts": lambda: rng.randint(1, experts()),
            "moe_intermediate_size": lambda: rng.randint(4, 16)}


#: The keys that named hooks read, by hook: a function of (rng, the values drawn so far, the layers) giving each
#: key's rule.
def _global_nope_layers_rules(rng: random.Random, v: dict[str, Any], layers: int) -> dict:
    """EXAONE 4's and Command R7B's sliding layers (with rotary positions) and global ones (without: the window is always
    set here), by type or by the pattern."""
    rules: dict[str, Any] = {}
    rules["layer_types"] = lambda: rng.choice([None, [rng.choice(["sliding_attention", "full_attention"]) for _ in range(layers)]])
    rules["sliding_window_pattern"] = lambda: rng.randint(1, layers + 2)
    return rules


def _moe_layer_range_rules(rng: random.Random, v: dict[str, Any], layers: int) -> dict:
    """ERNIE 4.5's mixture-of-experts layers: from a start to an end (-1: the last), every interval-th; shared experts."""
    rules: dict[str, Any] = {}
    rules["moe_layer_start_index"] = lambda: rng.randint(0, layers)
    rules["moe_layer_end_index"] = lambda: rng.choice([-1, rng.randint(0, layers)])
    rules["moe_layer_interval"] = lambda: rng.randint(1, 3)
    rules["moe_num_shared_experts"] = lambda: rng.randint(0, 2)
    return rules


HOOK_RULES = {
    "per_layer_type_attention": _per_layer_type_attention_rules,
    "linear_attention_layers": _linear_attention_layers_rules,
    "ssm_head_dim": _ssm_head_dim_rules,
    "falcon_h1_mixer": _falcon_h1_mixer_rules,
    "attention_layer_indices": _attention_layer_indices_rules,
    "short_conv_layers": _short_conv_layers_rules,
    "short_conv_moe_layers": _short_conv_moe_layers_rules,
    "afmoe_layers": _afmoe_layers_rules,
    "zero_compute_experts": _zero_compute_experts_rules,
    "rotary_dim_share": _rotary_dim_share_rules,
    "granite_hybrid_layers": _granite_hybrid_layers_rules,
    "auto_adjusted_ff_dim": _auto_adjusted_ff_dim_rules,
    "jamba_layers": _jamba_layers_rules,
    "hybrid_pattern_layers": _hybrid_pattern_layers_rules,
    "global_nope_layers": _global_nope_layers_rules,
    "sliding_rope_layers": _global_nope_layers_rules,
    "moe_layer_range": _moe_layer_range_rules,
    "sparse_attention_layers": _sparse_attention_layers_rules,
    "zamba2_layers": _zamba2_layers_rules,
}


def _hook_key(key: str, rng: random.Random, v: dict[str, Any], hooks: list[str]) -> Any:
    """A value for a key a hook reads (by the key's name; null is a value), or _SKIP to leave it out."""
    layers = v.get("L", 1)
    if key == "sliding_window":
        return rng.choice([None, 16]) if "sliding_window_every_layer" in hooks else 16
    rules = {
        "use_sliding_window": lambda: rng.random() < 0.5, "max_window_layers": lambda: rng.randint(0, layers),
        "rotary_dim": lambda: rng.choice([2, v["dh"], 64]),  # 64 is GPT-J's default (at most a head)
        "first_k_dense_replace": lambda: rng.randint(0, layers + 1), "n_shared_experts": lambda: rng.randint(0, 2),
        "q_lora_rank": lambda: rng.choice([None, 8, 12]), "n_group": lambda: 1, "topk_group": lambda: 1,
        "topk_method": lambda: rng.choice(["greedy", "group_limited_greedy"]),
        "feed_forward_proj": lambda: rng.choice(["relu", "gated-gelu", "gated-silu", "gelu"]),
        "tie_word_embeddings": lambda: rng.random() < 0.5, "multi_query": lambda: rng.random() < 0.5,
        "decoder_sparse_step": lambda: rng.randint(1, 3), "intermediate_size": lambda: rng.randint(8, 64),
        "mlp_only_layers": lambda: rng.choice([None, [], [0], [layers - 1]]), "do_layer_norm_before": lambda: rng.random() < 0.5,
        "word_embed_proj_dim": lambda: rng.choice([None, v.get("d", 8), 8, 24]),
        "interleave_moe_layer_step": lambda: rng.randint(1, 3), "intermediate_size_mlp": lambda: rng.randint(8, 64),
        "mlp_layer_types": lambda: rng.choice([None, ["dense"] * (k := rng.randint(0, layers)) + ["sparse"] * (layers - k)]),
    }
    for hook in hooks:
        rules |= HOOK_RULES.get(hook, lambda rng, v, layers: {})(rng, v, layers)
    return rules[key]() if key in rules else _SKIP


def draw(model_type: str, rng: random.Random) -> dict:
    """One random config (without model_type) of ``model_type``."""
    family = family_of(model_type)
    heads, kv, dh = _heads(rng)
    v: dict[str, Any] = {"heads": heads, "kv": kv, "dh": dh}
    cfg: dict[str, Any] = {"pad_token_id": 0, "bos_token_id": 0, "eos_token_id": 0}
    for key, entry in sorted(family.keys.items(), key=lambda item: item[1].fallback is not None):
        value = _key_value(key, entry, rng, v, family)
        if value is not _SKIP:
            cfg[key] = value
    if "num_kv_heads" in family.keys and rng.random() < 0.5:  # Falcon's new decoder architecture
        cfg |= {"new_decoder_architecture": True, "num_kv_heads": kv, "num_ln_in_parallel_attn": rng.choice([None, 1, 2])}
    elif "parallel_attn" in family.keys:  # Falcon's older layouts
        cfg |= {"multi_query": rng.random() < 0.5, "parallel_attn": rng.random() < 0.5}
    if "layer_types" not in family.keys and {"sliding_window_alternate", "sliding_window_qwen"} & set(family.origin.hooks) \
            and rng.random() < 0.3:
        cfg["layer_types"] = [rng.choice(["full_attention", "sliding_attention"]) for _ in range(v.get("L", 1))]
    per_type = set(family.origin.rope.parameters or {}) >= {"full_attention"} if family.origin.rope is not None else False
    if family.origin.rope is not None and "d_rope" not in v and not per_type and rng.random() < 0.5:  # Gemma 4: per type
        cfg["rope_parameters"] = {"rope_type": "default", "rope_theta": 10000.0,
                                  "partial_rotary_factor": rng.choice([0.25, 0.5, 1.0])}
        if "llama_4_scaling" in family.origin.hooks:  # Mistral 3's query temperature: both keys, or transformers fails
            cfg["rope_parameters"] |= {"llama_4_scaling_beta": rng.choice([0.0, 0.1]),
                                       "original_max_position_embeddings": rng.choice([4, 64])}
    return cfg


def _key_value(key: str, entry, rng: random.Random, v: dict[str, Any], family) -> Any:
    """A random value of one table key (``v`` collects the hyperparameters drawn so far), or _SKIP."""
    if entry.symbol is not None:
        if family.spec.hyperparameters[entry.symbol].type == "bool":
            return rng.random() < 0.5
        if entry.fallback is not None and entry.default is None and rng.random() < 0.4:
            return _SKIP  # the class default is None: transformers falls back (head_dim -> d / H)
        v[entry.symbol] = _symbol(entry.symbol, rng, v)
        return v[entry.symbol]
    if entry.sets is not None:
        return _setting(entry, rng)
    if entry.allowed is None and entry.ignored is None and entry.noted is None:
        return _hook_key(key, rng, v, family.origin.hooks)
    return _SKIP


def _setting(entry, rng: random.Random) -> Any:
    """A value for a model setting: switches flipped, activations varied, nullable ones sometimes null."""
    if entry.nullable and rng.random() < 0.3:
        return None
    if isinstance(entry.default, bool):
        return rng.random() < 0.5
    if entry.type == "activation" or isinstance(entry.default, str):
        return rng.choice(["gelu_new", "gelu", "relu", "silu"])
    if isinstance(entry.default, int) and entry.type is None:
        return rng.randint(entry.min, entry.min + 3)
    if entry.type == "inverse_sqrt":
        return rng.choice([16, 256])
    return _SKIP  # epsilons, scales: the class default
