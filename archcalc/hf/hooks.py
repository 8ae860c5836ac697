"""Named hooks: the few things a family's ``hf.keys`` table cannot say, each a small function a spec names in
``hf.hooks`` (``hooks: [falcon_layout]``). A hook reads the config through the :class:`Reader` (which marks what it
reads as understood and locates errors) and fills the :class:`~archcalc.hf.family.Draft`: hyperparameter values
(``draft.set``) and model settings (``draft.put``). Keys a hook reads take their class defaults from the table.

Sliding windows and per-layer types (:mod:`archcalc.hf.windows`), Falcon's three layouts, DeepSeek's dense-then-MoE
stacks, T5's ``feed_forward_proj``, GPT-J's ``rotary_dim``, and the state-space mixers' keys that only need checking
(:mod:`archcalc.hf.mixer_keys`: Mamba2's ``head_dim``, ``time_step_limit`` and ``time_step_rank``).

>>> {'deepseek_stacks', 'falcon_layout', 'gptj_rotary_dim'} <= set(HOOKS)
True
"""

from __future__ import annotations

from collections.abc import Callable

from archcalc.hf.afmoe_layers import afmoe_layers
from archcalc.hf.attn_config import nested_attn_config
from archcalc.hf.family import Draft
from archcalc.hf.layer_shapes import per_layer_type_attention
from archcalc.hf.layers import (
    global_nope_layers,
    no_rope_layers,
    sliding_rope_layers,
    sliding_window_on_nope_layers,
    sliding_window_pattern,
)
from archcalc.hf.lfm2_moe_layers import short_conv_moe_layers
from archcalc.hf.longcat_layers import zero_compute_experts
from archcalc.hf.mistral import dense_stack, latent_rotary_share, llama_4_scaling
from archcalc.hf.mixer_keys import falcon_h1_mixer, ssm_head_dim, unclamped_time_step, unused_time_step_rank
from archcalc.hf.mixer_layers import (
    attention_layer_indices,
    granite_hybrid_layers,
    hybrid_pattern_layers,
    jamba_layers,
    linear_attention_layers,
    short_conv_layers,
)
from archcalc.hf.moe_layers import dense_and_moe_stacks, interleaved_moe_layers, moe_layer_range, sparse_step_layers
from archcalc.hf.reader import ACTIVATIONS, MISSING, Reader
from archcalc.hf.rope import rotary_share
from archcalc.hf.sparse_layers import sparse_attention_layers
from archcalc.hf.switches import (
    auto_adjusted_ff_dim,
    full_attention_layers,
    initializer_range_first,
    latent_attention_keys,
    multi_query_heads,
    opt_layout,
    qk_norm_eps,
    unapplied_attn_softcap,
)
from archcalc.hf.windows import sliding_window_alternate, sliding_window_every_layer, sliding_window_qwen
from archcalc.hf.zamba2_layers import zamba2_layers

Hook = Callable[[Reader, Draft], None]


def falcon_layout(r: Reader, draft: Draft) -> None:
    """Falcon's three layouts: the new decoder (40B/180B), and the old one with or without parallel attention; ALiBi
    instead of rotary positions where ``alibi`` is true (Falcon-RW), the rotary keys then unread (as by transformers);
    its bias in the form transformers' Falcon computes (``bfloat16_scaled``: see archcalc.codegen.alibi)."""
    if r.bool("alibi", r.defaults["alibi"], nullable=True):
        draft.put("embedding.position", {"kind": "alibi", "form": "bfloat16_scaled"})
    new = r.bool("new_decoder_architecture", r.defaults["new_decoder_architecture"], nullable=True)
    parallel = r.bool("parallel_attn", r.defaults["parallel_attn"], nullable=True)
    norms = r.int("num_ln_in_parallel_attn", None, nullable=True)
    heads = draft.values["H"]
    if new:
        if not parallel:
            raise r.fail("parallel_attn", "false is not modelled with new_decoder_architecture (transformers' own forward fails)")
        kv = r.int("num_kv_heads", None, nullable=True) or heads
        norms = 2 if norms is None else norms
        kv_key = "num_kv_heads"
    else:
        kv = 1 if r.bool("multi_query", r.defaults["multi_query"], nullable=True) else heads
        given = r.int("num_kv_heads", None, nullable=True)
        if kv == heads and given not in (None, heads):  # transformers reshapes the H keys into num_kv_heads heads
            raise r.fail("num_kv_heads", f"{given} is not modelled without new_decoder_architecture and multi_query: transformers' "
                                         f"FalconForCausalLM then splits {heads} heads' keys into {given} heads (its forward fails)")
        if parallel and norms not in (None, 1):
            raise r.fail("num_ln_in_parallel_attn", f"{norms} is not modelled without new_decoder_architecture "
                                                    "(transformers' own forward fails)")
        norms, kv_key = 1, "multi_query"
    if norms not in (1, 2):
        raise r.fail("num_ln_in_parallel_attn", f"expected 1 or 2 layer norms, got {norms}")
    if heads % kv:
        raise r.fail(kv_key, f"num_attention_heads = {heads} is not a multiple of num_kv_heads = {kv}")
    draft.set("KV", kv, r.where(kv_key, value=True))
    draft.put("block.residual", "parallel" if parallel or new else "pre-norm")
    draft.put("block.parallel_norms", norms)


def deepseek_stacks(r: Reader, draft: Draft) -> None:
    """DeepSeek (and GLM-4.5's MoE, which has no query compression): the first ``first_k_dense_replace`` layers dense
    (``blocks.0``; GLM-4.7-Flash: the leading ``dense`` ones of ``mlp_layer_types``), the rest mixture-of-experts
    (``blocks.1``); either stack may be empty. Shared experts, the query compression and expert groups are optional."""
    layers = draft.values["L"]
    if "mlp_layer_types" in r.defaults:
        dense = _leading_dense(r, layers)
    else:
        dense = r.int("first_k_dense_replace", r.defaults["first_k_dense_replace"], minimum=0, nullable=True) or 0
    shared = r.int("n_shared_experts", r.defaults["n_shared_experts"], minimum=0, nullable=True) or 0
    q_rank = r.int("q_lora_rank", r.defaults["q_lora_rank"], nullable=True) if "q_lora_rank" in r.defaults else None
    dense = min(dense, layers)  # transformers: layer i is dense when i < first_k_dense_replace
    dense_and_moe_stacks(r, draft, dense, shared, ("first_k_dense_replace", "n_shared_experts"))
    if q_rank is not None:
        draft.set("q_rank", q_rank, r.where("q_lora_rank", value=True))
    elif "q_lora_rank" in r.defaults:  # latent attention without the query compression
        draft.put("blocks.*.attention.q_rank", None)
    groups = r.int("n_group", r.defaults["n_group"], nullable=True)
    group_top_k = r.int("topk_group", r.defaults["topk_group"], nullable=True)
    if groups is not None and group_top_k is not None and group_top_k > groups:
        raise r.fail("topk_group", f"{group_top_k} groups of experts to choose from, of n_group = {groups}: transformers' "
                                   f"{draft.family.hf_class} fails on it")
    # one group is every expert; DeepSeek-V2's topk_method (deepseek_topk_method) reads the groups even so
    one_group = groups == group_top_k == 1 and "deepseek_topk_method" not in draft.family.origin.hooks
    if groups is None or group_top_k is None or one_group:  # no group limits the choice (transformers needs both)
        groups = group_top_k = None
    for stack in draft.model["blocks"]:
        if stack["mlp"].get("kind") == "moe":
            stack["mlp"].update(groups=groups, group_top_k=group_top_k)
            stack["mlp"] = {k: v for k, v in stack["mlp"].items() if v is not None}


def _leading_dense(r: Reader, layers: int) -> int:
    """GLM-4.7-Flash's ``mlp_layer_types`` (``dense`` or ``sparse`` per layer; none: the first layer dense): how many
    dense layers lead. Dense layers after a sparse one are not modelled."""
    given = r.get("mlp_layer_types")
    if given in (MISSING, None):
        return min(1, layers)
    if not isinstance(given, list) or len(given) != layers:
        raise r.fail("mlp_layer_types", f"expected a list of {layers} layer types (one per layer, num_hidden_layers)")
    for i, kind in enumerate(given):
        if kind not in ("dense", "sparse"):
            raise r.fail(("mlp_layer_types", i), f"{str(kind)[:40]!r} is not modelled; expected dense or sparse")
        if kind == "dense" and i and given[i - 1] == "sparse":
            raise r.fail(("mlp_layer_types", i), "a dense layer after a mixture-of-experts layer is not modelled; "
                                                 "expected the dense layers first")
    return given.count("dense")


def deepseek_topk_method(r: Reader, draft: Draft) -> None:
    """DeepSeek-V2's ``topk_method`` (after :func:`deepseek_stacks`): ``greedy`` picks each token's experts among all of
    them (``n_group``/``topk_group`` unread), ``group_limited_greedy`` among the experts of its best groups only; with
    any other value transformers' router returns no weights, so the model cannot run."""
    method = r.string("topk_method", r.defaults["topk_method"])
    if method not in ("greedy", "group_limited_greedy"):
        raise r.fail("topk_method", f"{method[:40]!r} is not modelled; expected greedy or group_limited_greedy")
    for stack in draft.model["blocks"]:
        mlp = stack["mlp"]
        if mlp.get("kind") != "moe":
            continue
        if method == "greedy":
            for key in ("groups", "group_top_k", "group_score"):
                mlp.pop(key, None)
        elif "groups" not in mlp:  # transformers views the scores as n_group groups: None fails
            raise r.fail("topk_method", "group_limited_greedy needs n_group and topk_group")
    if r.get("num_experts_per_tok") in (MISSING, None):
        r.notes.append("num_experts_per_tok is not given: transformers builds the model but cannot run it (no experts per "
                       "token); counted with K = 1, which changes only the active count")


def t5_feed_forward(r: Reader, draft: Draft) -> None:
    """``feed_forward_proj`` is ``ACT`` or ``gated-ACT``; explicit ``is_gated_act``/``dense_act_fn`` win, as in
    transformers. T5 v1.0 scales the decoder output by d_model**-0.5 before the tied head (``scale_decoder_outputs``,
    which a saved config holds, else derived from ``tie_word_embeddings``: v1.1 configs say false)."""
    proj = r.string("feed_forward_proj", r.defaults["feed_forward_proj"])
    parts = proj.split("-")
    if len(parts) > 2 or (len(parts) == 2 and parts[0] != "gated"):
        raise r.fail("feed_forward_proj", f"{proj!r} is not valid; expected 'ACT' or 'gated-ACT', e.g. 'relu' or 'gated-gelu'")
    gated, act = parts[0] == "gated" and len(parts) == 2, parts[-1]
    if proj == "gated-gelu":
        act = "gelu_new"
    if r.get("dense_act_fn") is not MISSING:
        act = r.string("dense_act_fn", act)
    gated = r.bool("is_gated_act", gated)
    if act not in ACTIVATIONS:
        key = "dense_act_fn" if r.get("dense_act_fn") is not MISSING else "feed_forward_proj"
        raise r.fail(key, f"activation {act!r} is not modelled; expected one of: {', '.join(sorted(ACTIVATIONS))}")
    for tower in ("encoder", "decoder"):
        draft.put(f"{tower}.block.mlp.kind", "gated" if gated else "dense")
        draft.put(f"{tower}.block.mlp.activation", ACTIVATIONS[act])
    if r.get("tie_word_embeddings") is False:
        r.notes.append("tie_word_embeddings is false, but transformers 5 ties T5's head to the shared embedding anyway "
                       "(the flag only turns off scaling the decoder output by d_model**-0.5): the head adds no parameters, "
                       "while a checkpoint saved with its own lm_head holds V·d more")
    tied = r.bool("tie_word_embeddings", True, nullable=True) is not False
    draft.put("head.scale_input", r.bool("scale_decoder_outputs", tied))


def gptj_rotary_dim(r: Reader, draft: Draft) -> None:
    """GPT-J rotates the first ``rotary_dim`` features of each head (null: all of them)."""
    dims = r.int("rotary_dim", r.defaults["rotary_dim"], nullable=True)
    draft.put("embedding.position.rotary_fraction", None)
    if dims is not None:
        rotary_share(r, draft, dims, "rotary_dim")



def rotary_dim_share(r: Reader, draft: Draft) -> None:
    """MiniMax-M2's ``rotary_dim``: the features of each head that rotate, where the rope parameters give no share
    (transformers' config sets ``partial_rotary_factor`` to ``rotary_dim / head_dim`` only then)."""
    dims = r.int("rotary_dim", r.defaults["rotary_dim"], nullable=True)
    params = r.get("rope_parameters")
    given = isinstance(params, dict) and "partial_rotary_factor" in params or r.get("partial_rotary_factor") is not MISSING
    if dims is None or given:
        return
    if dims > draft.values["d_head"]:
        raise r.fail("rotary_dim", f"{dims} rotated features of a {draft.values['d_head']}-wide head; expected at most "
                                   "the head's width")
    rotary_share(r, draft, dims, "rotary_dim")

HOOKS: dict[str, Hook] = {
    "sliding_window_every_layer": sliding_window_every_layer,
    "sliding_window_alternate": sliding_window_alternate,
    "sliding_window_qwen": sliding_window_qwen,
    "falcon_layout": falcon_layout,
    "deepseek_stacks": deepseek_stacks,
    "deepseek_topk_method": deepseek_topk_method,
    "t5_feed_forward": t5_feed_forward,
    "gptj_rotary_dim": gptj_rotary_dim,
    "nested_attn_config": nested_attn_config,
    "no_rope_layers": no_rope_layers,
    "interleaved_moe_layers": interleaved_moe_layers,
    "sparse_step_layers": sparse_step_layers,
    "sliding_window_on_nope_layers": sliding_window_on_nope_layers,
    "sliding_window_pattern": sliding_window_pattern,
    "global_nope_layers": global_nope_layers,
    "sliding_rope_layers": sliding_rope_layers,
    "moe_layer_range": moe_layer_range,
    "qk_norm_eps": qk_norm_eps,
    "multi_query_heads": multi_query_heads,
    "opt_layout": opt_layout,
    "initializer_range_first": initializer_range_first,
    "full_attention_layers": full_attention_layers,
    "unapplied_attn_softcap": unapplied_attn_softcap,
    "latent_attention_keys": latent_attention_keys,
    "linear_attention_layers": linear_attention_layers,
    "attention_layer_indices": attention_layer_indices,
    "hybrid_pattern_layers": hybrid_pattern_layers,
    "jamba_layers": jamba_layers,
    "ssm_head_dim": ssm_head_dim,
    "falcon_h1_mixer": falcon_h1_mixer,
    "unclamped_time_step": unclamped_time_step,
    "unused_time_step_rank": unused_time_step_rank,
    "rotary_dim_share": rotary_dim_share,
    "short_conv_layers": short_conv_layers,
    "short_conv_moe_layers": short_conv_moe_layers,
    "afmoe_layers": afmoe_layers,
    "zero_compute_experts": zero_compute_experts,
    "granite_hybrid_layers": granite_hybrid_layers,
    "auto_adjusted_ff_dim": auto_adjusted_ff_dim,
    "sparse_attention_layers": sparse_attention_layers,
    "per_layer_type_attention": per_layer_type_attention,
    "llama_4_scaling": llama_4_scaling,
    "latent_rotary_share": latent_rotary_share,
    "dense_stack": dense_stack,
    "zamba2_layers": zamba2_layers,
}
