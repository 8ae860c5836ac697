"""Hooks for config keys that switch a part of the model on or off, or tie one width to another, where the
``hf.keys`` table cannot say it by itself (registered in :data:`archcalc.hf.hooks.HOOKS`):

- ``qk_norm_eps``: a QK-norm that a boolean key adds (Phi's and StableLM's ``qk_layernorm``) takes the epsilon of
  the blocks' norms, as transformers builds it;
- ``multi_query_heads``: ``multi_query`` gives one key/value head, else one per query head (GPTBigCode);
- ``initializer_range_first``: the initial weights' standard deviation is ``initializer_range`` where a config has
  one, else ``init_std`` (OPT's key), as transformers' ``_init_weights`` reads them;
- ``opt_layout``: OPT-350m's narrower token table (``word_embed_proj_dim``, projected in and out) and its post-norm
  blocks without a final LayerNorm (``do_layer_norm_before: false``).
"""

from __future__ import annotations

from archcalc.hf.family import Draft
from archcalc.hf.reader import MISSING, Reader


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
