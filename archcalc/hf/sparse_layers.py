"""DeepSeek Sparse Attention's per-layer keys (the hook ``sparse_attention_layers``, after ``deepseek_stacks``):

- the indexer reads the query latent, so ``q_lora_rank`` must be given, and its heads must be at least as wide as
  the rotary part they rotate (``index_head_dim`` ≥ ``qk_rope_head_dim``);
- ``layer_types`` (which cache layer each layer gets) may only say ``indexed_attention``; ``mlp_layer_types`` must
  list the dense layers first, as many as ``first_k_dense_replace`` says (the stacks ``deepseek_stacks`` made);
- where the table reads ``indexer_types`` (GLM-5), each layer is ``full`` (it runs its own indexer) or ``shared`` (it
  reuses the previous layer's selection and owns no indexer weights and no indexer cache): ``indexer_types``, else
  ``index_topk_pattern`` (a string of F and S, or a list), else every ``index_topk_freq``-th layer from
  ``index_skip_topk_offset`` on, as transformers fills it in. A stack whose layers are all shared gets
  ``indexer.shared``; one that mixes them is split in two, the shared layers in a stack of their own
  (``shared_blocks``, ``shareddense_blocks``), interleaved by the model's ``layer_order``.

>>> from archcalc.hf.windows import _period
>>> _period(["full", "shared", "full", "shared"])
['full', 'shared']
"""

from __future__ import annotations

import copy
from typing import Any

from archcalc.hf.reader import MISSING, Reader
from archcalc.hf.windows import _period, listed_layers

# a stack -> the stack of its layers that share the previous layer's selection, and the count of them
SHARED = {"dense_blocks": ("shareddense_blocks", "L_dense_shared"), "blocks": ("shared_blocks", "L_shared")}


def sparse_attention_layers(r: Reader, draft: Any) -> None:
    layers = draft.values["L"]
    listed_layers(r, draft, "indexer and MLP types")
    cls = draft.family.hf_class
    if r.int("q_lora_rank", r.defaults.get("q_lora_rank"), nullable=True) is None:
        raise r.fail("q_lora_rank", f"null is not modelled: the indexer reads the query latent, and transformers' {cls} "
                                    "always builds the query compression (it cannot build one of width None)")
    if draft.values["d_index"] < draft.values["d_rope"]:
        raise r.fail("index_head_dim", f"{draft.values['d_index']} is narrower than qk_rope_head_dim = "
                                       f"{draft.values['d_rope']}: the indexer rotates that many features of each head")
    _only(r, "layer_types", layers, ("indexed_attention",), "the cache of an indexed layer")
    stacks = {stack["name"]: stack for stack in draft.model["blocks"]}
    dense = draft.values.get("L_dense", 0) if "dense_blocks" in stacks else 0
    mlp = _only(r, "mlp_layer_types", layers, ("dense", "sparse"), "a dense or a mixture-of-experts MLP")
    if mlp is not None and mlp != ["dense"] * dense + ["sparse"] * (layers - dense):
        raise r.fail("mlp_layer_types", f"expected the {dense} dense layers that first_k_dense_replace gives first, then "
                                        "the mixture-of-experts ones; other orders are not modelled")
    if "indexer_types" in r.defaults:
        _split(r, draft, *_indexer_types(r, layers), dense)


def _only(r: Reader, key: str, layers: int, allowed: tuple, what: str) -> list | None:
    """The list at ``key`` (one entry per layer, each one of ``allowed``), or None where it is missing or null."""
    given = r.get(key)
    if given in (MISSING, None):
        return None
    if not isinstance(given, list) or len(given) != layers:
        raise r.fail(key, f"expected a list of {layers} entries (one per layer, num_hidden_layers)")
    for i, kind in enumerate(given):
        if kind not in allowed:
            raise r.fail((key, i), f"{str(kind)[:40]!r} is not modelled; expected {' or '.join(allowed)} ({what})")
    return given


def _indexer_types(r: Reader, layers: int) -> tuple[list[str], str]:
    """Each layer's indexer type, as GlmMoeDsaConfig fills it in; the first layer must run its own indexer."""
    pattern, key = r.get("index_topk_pattern"), "indexer_types"
    freq = max(r.int("index_topk_freq", 1, minimum=0) or 1, 1)
    offset = r.int("index_skip_topk_offset", 2, minimum=0)
    kinds = _only(r, "indexer_types", layers, ("full", "shared"), "its own indexer or the previous layer's selection")
    if kinds is None and pattern not in (MISSING, None):
        key = "index_topk_pattern"
        if not isinstance(pattern, str):
            kinds = _only(r, key, layers, ("full", "shared"), "its own indexer or the previous layer's selection")
        elif len(pattern) != layers or set(pattern) - {"F", "S"}:
            raise r.fail(key, f"expected {layers} letters F (its own indexer) or S (the previous layer's selection)")
        else:
            kinds = [{"F": "full", "S": "shared"}[c] for c in pattern]
    if kinds is None:
        key = "index_topk_freq"
        kinds = ["full" if max(i - offset + 1, 0) % freq == 0 else "shared" for i in range(layers)]
    if kinds and kinds[0] == "shared":
        raise r.fail(key, "the first layer shares the previous layer's selection, but no layer precedes it "
                          "(transformers' forward fails)")
    return kinds, key


def _split(r: Reader, draft: Any, kinds: list[str], key: str, dense: int) -> None:
    """Mark or split each stack by its layers' indexer types; the layer order where a stack was split."""
    out, order, split = [], [], False
    spans = {"dense_blocks": range(dense), "blocks": range(dense, len(kinds))}
    for stack in draft.model["blocks"]:
        mine = [kinds[i] for i in spans[stack["name"]]]
        out.append(stack)
        shared = mine.count("shared")
        if shared == len(mine):
            stack["attention"]["indexer"]["shared"] = True
        elif shared:
            name, symbol = SHARED[stack["name"]]
            draft.set(symbol, shared, r.where(key), doc=f"layers of {stack['name']} that reuse the previous "
                                                                     "layer's top-k selection (indexer_types: shared)")
            twin = copy.deepcopy(stack)
            twin["name"], twin["repeat"] = name, symbol
            twin["attention"]["indexer"]["shared"] = True
            stack["repeat"] = f"{stack['repeat']} - {symbol}"
            out.append(twin)
            split = True
        order += [SHARED[stack["name"]][0] if kind == "shared" and 0 < shared < len(mine) else stack["name"]
                  for kind in mine]
    draft.model["blocks"] = out
    if split:
        draft.model["layer_order"] = _period(order)

