"""transformers' parameter names of the families whose maps :mod:`codegen.hf_maps` keeps here (it is near its size
limit): Granite's mixture of experts and Cohere's blocks. Each function returns a map of recipes (see
:mod:`codegen.hf_maps`); ``hf_maps.MAPS`` names the model types.

>>> granite_moe({})["blocks.{i}.mlp.router.weight"]
'model.layers.{i}.block_sparse_moe.router.weight'
"""

from __future__ import annotations

from codegen.hf_maps_moe import experts

Recipe = str | tuple


def granite_moe(llama: dict[str, Recipe]) -> dict[str, Recipe]:
    """Llama's names (``llama``: its map) with the experts under ``block_sparse_moe``: a bias-free ``router`` and
    transformers 5's stacked ``experts.gate_up_proj`` (E, 2 x d_ff, d) and ``experts.down_proj`` (E, d, d_ff)."""
    moe = "model.layers.{i}.block_sparse_moe."
    w = llama | experts(mlp=moe)
    w["blocks.{i}.mlp.router.weight"] = moe + "router.weight"
    return w


def cohere(llama: dict[str, Recipe]) -> dict[str, Recipe]:
    """Llama's names (``llama``: its map) with one shared norm per block (``input_layernorm``) and QK-norm weights
    stored one row per head, (heads, d_head): ``("flat", r)`` reads them as one vector."""
    layer = "model.layers.{i}."
    w = dict(llama)
    w["blocks.{i}.norm.weight"] = layer + "input_layernorm.weight"
    for which in ("q", "k"):
        w[f"blocks.{{i}}.attn.{which}_norm.weight"] = ("flat", f"{layer}self_attn.{which}_norm.weight")
    return w
