"""Hooks for config keys that switch a part of the model on or off, or tie one width to another, where the
``hf.keys`` table cannot say it by itself (registered in :data:`archcalc.hf.hooks.HOOKS`):

- ``qk_norm_eps``: a QK-norm that a boolean key adds (Phi's and StableLM's ``qk_layernorm``) takes the epsilon of
  the blocks' norms, as transformers builds it;
- ``multi_query_heads``: ``multi_query`` gives one key/value head, else one per query head (GPTBigCode);
- ``initializer_range_first``: the initial weights' standard deviation is ``initializer_range`` where a config has
  one, else ``init_std`` (OPT's key), as transformers' ``_init_weights`` reads them;
- ``layer_norm_before``: ``do_layer_norm_before: false`` (OPT-350m) normalises after each residual add and builds no
  final LayerNorm.
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


def layer_norm_before(r: Reader, draft: Draft) -> None:
    """OPT's ``do_layer_norm_before``: true is the pre-norm block with a final LayerNorm; false (OPT-350m) is a
    post-norm block, LayerNorm(x + attn(x)) then LayerNorm(x + mlp(x)), and transformers builds no final LayerNorm."""
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
