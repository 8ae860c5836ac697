"""Hooks for config keys that switch a part of the model on or off, or tie one width to another, where the
``hf.keys`` table cannot say it by itself (registered in :data:`archcalc.hf.hooks.HOOKS`):

- ``qk_norm_eps``: a QK-norm that a boolean key adds (Phi's and StableLM's ``qk_layernorm``) takes the epsilon of
  the blocks' norms, as transformers builds it;
- ``multi_query_heads``: ``multi_query`` gives one key/value head, else one per query head (GPTBigCode);
- ``initializer_range_first``: the initial weights' standard deviation is ``initializer_range`` where a config has
  one, else ``init_std`` (OPT's key), as transformers' ``_init_weights`` reads them;
- ``opt_layout``: OPT-350m's narrower token table (``word_embed_proj_dim``, projected in and out) and its post-norm
  blocks without a final LayerNorm (``do_layer_norm_before: false``);
- ``full_attention_layers``: ``layer_types`` may list full-attention layers only (Qwen2-MoE, whose sliding layers
  archcalc does not model: with ``use_sliding_window`` false transformers gives them a window of 0 and fails);
- ``unapplied_attn_softcap``: Gemma 3's ``attn_logit_softcapping``, which transformers stores and never applies: noted;
- ``latent_attention_keys``: DeepSeek's ``num_key_value_heads`` and (where the table reads it) ``head_dim``, which
  transformers reads though multi-head latent attention has no use for them: other values than the heads' number and
  ``qk_rope_head_dim`` make its forward fail (noted) or rotate otherwise (refused);
- ``auto_adjusted_ff_dim``: LFM2's MLP width, which transformers derives from ``intermediate_size`` where
  ``block_auto_adjust_ff_dim`` is true: two thirds of it, times ``block_ffn_dim_multiplier``, rounded up to a
  multiple of ``block_multiple_of`` (LFM2-700M: 10,240 -> 6,912).
"""

from __future__ import annotations

from archcalc.hf.family import Draft
from archcalc.hf.reader import MISSING, Reader
from archcalc.hf.windows import _given


def qk_norm_eps(r: Reader, draft: Draft) -> None:
    """The QK-norm, where the config switched it on, normalises with the blocks' norms' epsilon."""
    eps = draft.get("block.norm.eps")
    if isinstance(draft.get("block.attention.qk_norm"), dict) and eps is not MISSING:
        draft.put("block.attention.qk_norm.eps", eps)


def multi_query_heads(r: Reader, draft: Draft) -> None:
    """``multi_query: true``: one key/value head shared by every query head; false: a key/value head per head."""
    multi = r.bool("multi_query", r.defaults["multi_query"], nullable=True)
    draft.set("KV", 1 if multi is not False else draft.values["H"], r.where("multi_query", value=True))


def opt_layout(r: Reader, draft: Draft) -> None:
    """OPT-350m's two departures: ``word_embed_proj_dim`` other than ``hidden_size`` is a token table of that width
    (``d_embed``) projected up after the lookup and down before the head (``embedding.token_width``); and
    ``do_layer_norm_before: false`` is a post-norm block, LayerNorm(x + attn(x)) then LayerNorm(x + mlp(x)), with no
    final LayerNorm (transformers builds none)."""
    width = r.int("word_embed_proj_dim", None, nullable=True)
    if width is not None and width != draft.values["d"]:
        draft.set("d_embed", width, r.where("word_embed_proj_dim", value=True),
                  doc="width of the token table (word_embed_proj_dim), projected to and from d")
        draft.put("embedding.token_width", "d_embed")
    if r.bool("do_layer_norm_before", r.defaults.get("do_layer_norm_before", True)) is False:
        draft.put("block.residual", "post-norm")
        draft.put("final_norm", None)


def initializer_range_first(r: Reader, draft: Draft) -> None:
    """``init.std``: ``initializer_range`` where the config has the key (0.02 where it is 0 or null), else ``init_std``."""
    if r.get("initializer_range") is not MISSING:
        std = r.real("initializer_range", 0.02, nullable=True) or 0.02
    else:
        std = r.real("init_std", r.defaults["init_std"], nullable=True) or 0.02
    draft.put("init.std", std)


def full_attention_layers(r: Reader, draft: Draft) -> None:
    """``layer_types``, where a config gives it, lists full_attention layers only: transformers' Qwen2-MoE gives a
    sliding_attention layer the window ``sliding_window`` only with ``use_sliding_window`` (which must be false here),
    else a window of 0, with which its forward fails."""
    given = r.get("layer_types")
    if given in (MISSING, None) or "local" not in _given(r, draft, given):
        return
    raise r.fail(("layer_types", given.index("sliding_attention")),
                 f"sliding_attention is not modelled with use_sliding_window false: transformers' {draft.family.hf_class} "
                 "then gives the layer a window of 0 and its forward fails")


def unapplied_attn_softcap(r: Reader, draft: Draft) -> None:
    """Gemma 3's ``attn_logit_softcapping``: its config class keeps the value, its attention never reads it (Gemma 2's
    does); a value is noted in one line and applied neither by transformers nor by the generated module."""
    value = r.real("attn_logit_softcapping", None, nullable=True)
    if value is not None:
        r.notes.append(f"attn_logit_softcapping {value:g} is not applied: transformers' {draft.family.hf_class} stores it but "
                       "never soft-caps its attention scores, and neither does the generated module")


def latent_attention_keys(r: Reader, draft: Draft) -> None:
    """DeepSeek's multi-head latent attention has a key and a value per query head; transformers still repeats them
    ``num_attention_heads / num_key_value_heads`` times, so that any value but the heads' number makes its forward fail
    (noted in one line: the count is transformers', the generated module runs one key and value per head). Where the
    table reads ``head_dim`` (DeepSeek-V3: its config sets it to ``qk_rope_head_dim`` unless a config.json says
    otherwise), transformers computes the rotary frequencies over that many features: another value is refused."""
    heads, kv = draft.values["H"], r.int("num_key_value_heads", None, nullable=True)
    if kv is not None and kv != heads:
        r.notes.append(f"num_key_value_heads {kv} is not applied: transformers' {draft.family.hf_class} builds this model but "
                       f"repeats each latent key and value {heads} // {kv} times, so its forward fails; the generated module "
                       "uses one key and value per head, as the weights hold")
    entry = draft.family.keys.get("head_dim")
    if entry is None or entry.ignored is not None:  # DeepSeek-V2's config class overwrites head_dim: not read
        return
    if "latent_rotary_share" in draft.family.origin.hooks:  # Mistral 4's head_dim is the whole head's: that hook reads it
        return
    rope, width = draft.values["d_rope"], r.int("head_dim", None, nullable=True)
    if width is not None and width != rope:
        raise r.fail("head_dim", f"{width} is not modelled: transformers' {draft.family.hf_class} computes its rotary frequencies "
                                 f"over head_dim features, which archcalc generates for head_dim = qk_rope_head_dim = {rope} only")


def auto_adjusted_ff_dim(r: Reader, draft: Draft) -> None:
    """``d_ff`` as Lfm2MLP computes it (integer arithmetic where transformers' floats are exact)."""
    width = r.int("intermediate_size", r.defaults["intermediate_size"])
    if r.bool("block_auto_adjust_ff_dim", r.defaults["block_auto_adjust_ff_dim"]):
        multiplier = r.real("block_ffn_dim_multiplier", r.defaults["block_ffn_dim_multiplier"])  # null: refused, as there
        multiple = r.int("block_multiple_of", r.defaults["block_multiple_of"])
        width = -(-int(multiplier * (2 * width // 3)) // multiple) * multiple
        if width < 1:
            raise r.fail("block_ffn_dim_multiplier", f"{multiplier} makes the MLP {width} wide; expected a width of at "
                                                     "least 1")
    else:
        for key in ("block_ffn_dim_multiplier", "block_multiple_of"):
            r.get(key)  # read: they change nothing without the adjustment
    draft.set("d_ff", width, r.where("intermediate_size", value=True))
