"""Hooks for config keys that switch a part of the model on or off, or tie one width to another, where the
``hf.keys`` table cannot say it by itself (registered in :data:`archcalc.hf.hooks.HOOKS`):

- ``qk_norm_eps``: a QK-norm that a boolean key adds (Phi's and StableLM's ``qk_layernorm``) takes the epsilon of
  the blocks' norms, as transformers builds it;
- ``multi_query_heads``: ``multi_query`` gives one key/value head, else one per query head (GPTBigCode);
- ``initializer_range_first``: the initial weights' standard deviation is ``initializer_range`` where a config has
  one, else ``init_std`` (OPT's key), as transformers' ``_init_weights`` reads them;
- ``same_width_embeddings``: ``word_embed_proj_dim`` other than ``hidden_size`` adds projections in and out of
  the embedding width (OPT-350m), which are not modelled: refused at the key.
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


def same_width_embeddings(r: Reader, draft: Draft) -> None:
    """``word_embed_proj_dim`` (null: ``hidden_size``) must be the model width: another width adds two projections
    (project_in, project_out) between the embeddings and the blocks that archcalc does not model."""
    width = r.int("word_embed_proj_dim", None, nullable=True)
    if width is not None and width != draft.values["d"]:
        raise r.fail("word_embed_proj_dim", f"{width} differs from hidden_size = {draft.values['d']}: the projections "
                                            "between the embedding width and the model width (project_in, project_out) "
                                            "are not modelled")


def initializer_range_first(r: Reader, draft: Draft) -> None:
    """``init.std``: ``initializer_range`` where the config has the key (0.02 where it is 0 or null), else ``init_std``."""
    if r.get("initializer_range") is not MISSING:
        std = r.real("initializer_range", 0.02, nullable=True) or 0.02
    else:
        std = r.real("init_std", r.defaults["init_std"], nullable=True) or 0.02
    draft.put("init.std", std)
