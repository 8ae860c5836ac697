"""Model types that transformers builds and archcalc refuses on purpose, each with the features that keep it out: a
line the importer prints instead of a count it cannot make exact.

DeepSeek-V4 (transformers' DeepseekV4ForCausalLM) carries each token as ``hc_mult`` parallel residual streams mixed by
hyper-connections (Sinkhorn-normalised weights computed per token), attends through compressors that pool keys at
``compress_rates`` (with an indexer on the compressed layers), projects its output in ``o_groups`` low-rank groups,
routes its first MoE layers by a hash of the token id and scores the others by sqrt(softplus): none of these is in the
IR, so neither its counts nor its FLOPs could be checked against transformers.

>>> refusal("deepseek_v4").startswith("hyper-connections (hc_mult)")
True
>>> refusal("llama") is None
True
"""

from __future__ import annotations

REFUSED = {  # a reason short enough for the one line of an error (300 characters, the file's path included)
    "deepseek_v4": "hyper-connections (hc_mult), compressed attention (compress_rates), grouped output (o_groups), "
                   "hash-routed experts (mlp_layer_types) and sqrtsoftplus scores are not modelled",
}


def refusal(model_type: str) -> str | None:
    """Why ``model_type`` is refused on purpose, or None."""
    return REFUSED.get(model_type)
