"""transformers' parameter names of the families whose maps :mod:`codegen.hf_maps` keeps here (it is near its size
limit): Granite's mixture of experts and Cohere's blocks. Each function returns a map of recipes (see
:mod:`codegen.hf_maps`); ``hf_maps.MAPS`` names the model types.

>>> granite_moe()["blocks.{i}.mlp.router.weight"]
'model.layers.{i}.block_sparse_moe.router.weight'
"""

from __future__ import annotations

Recipe = str | tuple


def granite_moe() -> dict[str, Recipe]:
    """Llama's names with the experts under ``block_sparse_moe``: a bias-free ``router`` and transformers 5's stacked
    ``experts.gate_up_proj`` (E, 2 x d_ff, d) and ``experts.down_proj`` (E, d, d_ff)."""
    from codegen.hf_maps import _llama_like
    from codegen.hf_maps_moe import experts

    moe = "model.layers.{i}.block_sparse_moe."
    w = _llama_like() | experts(mlp=moe)
    w["blocks.{i}.mlp.router.weight"] = moe + "router.weight"
    return w


def cohere() -> dict[str, Recipe]:
    """Llama's names with one shared norm per block (``input_layernorm``) and QK-norm weights stored one row per head,
    (heads, d_head): ``("flat", r)`` reads them as one vector."""
    from codegen.hf_maps import _llama_like

    layer = "model.layers.{i}."
    w = _llama_like()
    w["blocks.{i}.norm.weight"] = layer + "input_layernorm.weight"
    for which in ("q", "k"):
        w[f"blocks.{{i}}.attn.{which}_norm.weight"] = ("flat", f"{layer}self_attn.{which}_norm.weight")
    return w
