"""transformers' parameter names, per ``model_type``, as data (like litgpt's checkpoint maps).

Each map takes one of this project's parameter names (the IR path with ``{i}`` for the block index and
``{e}`` for the expert index) to a *recipe* for the tensor from a transformers ``state_dict()``:

- ``"model.layers.{i}.self_attn.q_proj.weight"``: that tensor as it is;
- ``("t", r)``: transposed (GPT-2's Conv1D stores in x out; gpt-oss's experts store in x out);
- ``("cat", r1, r2, ...)``: concatenated along the output dimension (a fused projection);
- ``("expert", r)``: expert ``{e}`` of a tensor that stacks all experts (transformers 5's MoE layout);
- ``("half", n, r)``: half ``n`` (0 or 1) of the output dimension (gate and up of a fused gate_up); ``("half_last", n, r)``:
  half ``n`` of the last dimension (a gate_up stored in x out, as Llama 4's experts);
- ``("qkv_rows", n, r)`` / ``("qkv_cols", n, r)``: q, k or v (n = 0, 1, 2) of a fused projection stored along
  rows (Phi-3's qkv_proj) or columns (GPT-2's Conv1D c_attn), split at the q, k, v widths;
- ``("qkv_group", n, r)``: q, k or v of a projection stored per key/value group (GPT-NeoX, Falcon);
- ``("every_other", n, r)``: features ``n, n + 2, ...`` of the last dimension (gpt-oss interleaves gate and up);
- ``("either", dense, gated)``: ``dense`` in a module without a gate, ``gated`` in one with a gate (T5's up is wi,
  or wi_1 when gated); the emitter picks one;
- ``("flat", r)``: a (rows, head width) tensor read as one vector (Cohere's per-head QK-norm weights);
- ``("qkv_by_group", r)``: a fused projection stored per key/value group as [queries of the group, key,
  value] (GPT-NeoX and Falcon), reordered to all queries, all keys, all values.

The names are those of the transformers 5 models' own ``state_dict()`` (the class in a config's
``architectures``, e.g. LlamaForCausalLM). A map lists every name a family may have; the emitter
writes into the generated file only the entries of the parameters that the spec's module has.
"""

from __future__ import annotations

from dataclasses import dataclass

from codegen import hf_maps_alibi, hf_maps_dense, hf_maps_scaled
from codegen.hf_maps_moe import experts, stored_in_by_out, with_dense_stack

Recipe = str | tuple


@dataclass(frozen=True)
class HFMap:
    weights: dict[str, Recipe]
    rotary: str = "half"  # "half": rotate_half (Llama, NeoX, ...); "interleaved": GPT-J's rotate-every-two;
    # "deinterleaved": DeepSeek's pairs (2j, 2j + 1), rotated and written out as j and j + width / 2
    copies: tuple[tuple[str, str], ...] = ()  # (copy, original): transformers tensors that are another (T5's per-tower embeddings)
    stacks: tuple[str, ...] = ("blocks",)  # the stacks, in transformers' layer order (one list: model.layers.{i})
    buffers: dict[str, Recipe] | None = None  # our buffers that transformers' state_dict may hold (kept as built if absent)
    longrope_rerun: bool = False  # generate() re-runs the sequence past LongRoPE's original context (transformers' Phi-3)
    alibi: str = "relative"  # ALiBi: slope * (j - i) (BLOOM, MPT), or "bfloat16_scaled" as Falcon's (see codegen.alibi)


def _pair(weights: dict, ours: str, theirs) -> None:
    """``ours.weight`` and ``ours.bias`` from ``theirs(suffix)`` (a recipe for each)."""
    for suffix in ("weight", "bias"):
        weights[f"{ours}.{suffix}"] = theirs(suffix) if callable(theirs) else f"{theirs}.{suffix}"


def _llama_like(attn: dict[str, str] | None = None, mlp: dict[str, str] | None = None,
                norms: dict[str, str] | None = None) -> dict[str, Recipe]:
    """Llama and the families that kept its names (Mistral, Qwen2/3, Mixtral, OLMo2, Gemma 2, Phi-3, gpt-oss)."""
    layer, w = "model.layers.{i}.", {}
    w["embed.token.weight"] = "model.embed_tokens.weight"
    a = layer + "self_attn."
    projections = {"q": "q_proj", "k": "k_proj", "v": "v_proj", "out": "o_proj", **(attn or {})}
    for ours, theirs in projections.items():
        _pair(w, f"blocks.{{i}}.attn.{ours}", a + theirs)
    if "qkv" not in projections:
        _pair(w, "blocks.{i}.attn.qkv", lambda s: ("cat", *(f"{a}{p}_proj.{s}" for p in "qkv")))
    w["blocks.{i}.attn.q_norm.weight"] = a + "q_norm.weight"
    w["blocks.{i}.attn.k_norm.weight"] = a + "k_norm.weight"
    w["blocks.{i}.attn.sinks"] = a + "sinks"
    m = layer + "mlp."
    linears = {"gate": "gate_proj", "up": "up_proj", "down": "down_proj", **(mlp or {})}
    for ours, theirs in linears.items():
        _pair(w, f"blocks.{{i}}.mlp.{ours}", m + theirs)
    if "gate_up" not in linears:
        _pair(w, "blocks.{i}.mlp.gate_up", lambda s: ("cat", f"{m}gate_proj.{s}", f"{m}up_proj.{s}"))
    for ours, theirs in (norms or {"attn_norm": "input_layernorm", "mlp_norm": "post_attention_layernorm"}).items():
        w[f"blocks.{{i}}.{ours}.weight"] = f"{layer}{theirs}.weight"
    w["final_norm.weight"] = "model.norm.weight"
    _pair(w, "head", "lm_head")
    return w


def _mixtral() -> dict[str, Recipe]:
    w = _llama_like()
    m = "model.layers.{i}.mlp."
    w["blocks.{i}.mlp.router.weight"] = m + "gate.weight"
    gate_up = ("expert", m + "experts.gate_up_proj")  # (E, 2 x d_ff, d): gate rows, then up rows
    w["blocks.{i}.mlp.experts.{e}.gate.weight"] = ("half", 0, gate_up)
    w["blocks.{i}.mlp.experts.{e}.up.weight"] = ("half", 1, gate_up)
    w["blocks.{i}.mlp.experts.{e}.gate_up.weight"] = gate_up
    w["blocks.{i}.mlp.experts.{e}.down.weight"] = ("expert", m + "experts.down_proj")
    return w


def _gpt_oss() -> dict[str, Recipe]:
    w = _llama_like()
    m = "model.layers.{i}.mlp."
    _pair(w, "blocks.{i}.mlp.router", m + "router")
    gate_up = ("expert", m + "experts.gate_up_proj")  # (E, d, 2 x d_ff): gate and up interleaved
    bias = ("expert", m + "experts.gate_up_proj_bias")
    w["blocks.{i}.mlp.experts.{e}.gate_up.weight"] = ("cat", ("t", ("every_other", 0, gate_up)), ("t", ("every_other", 1, gate_up)))
    w["blocks.{i}.mlp.experts.{e}.gate_up.bias"] = ("cat", ("every_other", 0, bias), ("every_other", 1, bias))
    w["blocks.{i}.mlp.experts.{e}.gate.weight"] = ("t", ("every_other", 0, gate_up))
    w["blocks.{i}.mlp.experts.{e}.gate.bias"] = ("every_other", 0, bias)
    w["blocks.{i}.mlp.experts.{e}.up.weight"] = ("t", ("every_other", 1, gate_up))
    w["blocks.{i}.mlp.experts.{e}.up.bias"] = ("every_other", 1, bias)
    w["blocks.{i}.mlp.experts.{e}.down.weight"] = ("t", ("expert", m + "experts.down_proj"))
    w["blocks.{i}.mlp.experts.{e}.down.bias"] = ("expert", m + "experts.down_proj_bias")
    return w


def _gpt2() -> dict[str, Recipe]:
    h, w = "transformer.h.{i}.", {}
    w["embed.token.weight"] = "transformer.wte.weight"
    w["embed.position.weight"] = "transformer.wpe.weight"
    conv1d = lambda name: lambda s: ("t", f"{h}{name}.weight") if s == "weight" else f"{h}{name}.bias"  # noqa: E731
    for ours, theirs in (("attn.qkv", "attn.c_attn"), ("attn.out", "attn.c_proj"), ("mlp.up", "mlp.c_fc"), ("mlp.down", "mlp.c_proj")):
        _pair(w, f"blocks.{{i}}.{ours}", conv1d(theirs))
    for n, ours in enumerate("qkv"):  # separate projections (--separate-projections): q, k, v of c_attn
        w[f"blocks.{{i}}.attn.{ours}.weight"] = ("t", ("qkv_cols", n, f"{h}attn.c_attn.weight"))
        w[f"blocks.{{i}}.attn.{ours}.bias"] = ("qkv_rows", n, f"{h}attn.c_attn.bias")
    _pair(w, "blocks.{i}.attn_norm", h + "ln_1")
    _pair(w, "blocks.{i}.mlp_norm", h + "ln_2")
    _pair(w, "final_norm", "transformer.ln_f")
    _pair(w, "head", "lm_head")
    return w


def _gpt_neox() -> dict[str, Recipe]:
    layer, w = "gpt_neox.layers.{i}.", {}
    w["embed.token.weight"] = "gpt_neox.embed_in.weight"
    _pair(w, "blocks.{i}.attn.qkv", lambda s: ("qkv_by_group", f"{layer}attention.query_key_value.{s}"))
    for n, ours in enumerate("qkv"):  # separate projections (--separate-projections)
        _pair(w, f"blocks.{{i}}.attn.{ours}", lambda s, n=n: ("qkv_group", n, f"{layer}attention.query_key_value.{s}"))
    _pair(w, "blocks.{i}.attn.out", layer + "attention.dense")
    _pair(w, "blocks.{i}.mlp.up", layer + "mlp.dense_h_to_4h")
    _pair(w, "blocks.{i}.mlp.down", layer + "mlp.dense_4h_to_h")
    _pair(w, "blocks.{i}.attn_norm", layer + "input_layernorm")
    _pair(w, "blocks.{i}.mlp_norm", layer + "post_attention_layernorm")
    _pair(w, "final_norm", "gpt_neox.final_layer_norm")
    _pair(w, "head", "lm_head")
    return w


def _gptj() -> dict[str, Recipe]:
    h, w = "transformer.h.{i}.", {}
    w["embed.token.weight"] = "transformer.wte.weight"
    for ours, theirs in (("q", "q_proj"), ("k", "k_proj"), ("v", "v_proj"), ("out", "out_proj")):
        _pair(w, f"blocks.{{i}}.attn.{ours}", f"{h}attn.{theirs}")
    _pair(w, "blocks.{i}.attn.qkv", lambda s: ("cat", *(f"{h}attn.{p}_proj.{s}" for p in "qkv")))
    _pair(w, "blocks.{i}.mlp.up", h + "mlp.fc_in")
    _pair(w, "blocks.{i}.mlp.down", h + "mlp.fc_out")
    _pair(w, "blocks.{i}.norm", h + "ln_1")
    _pair(w, "final_norm", "transformer.ln_f")
    _pair(w, "head", "lm_head")
    return w


def _falcon() -> dict[str, Recipe]:
    h, w = "transformer.h.{i}.", {}
    w["embed.token.weight"] = "transformer.word_embeddings.weight"
    _pair(w, "blocks.{i}.attn.qkv", lambda s: ("qkv_by_group", f"{h}self_attention.query_key_value.{s}"))
    for n, ours in enumerate("qkv"):  # separate projections (--separate-projections)
        _pair(w, f"blocks.{{i}}.attn.{ours}", lambda s, n=n: ("qkv_group", n, f"{h}self_attention.query_key_value.{s}"))
    _pair(w, "blocks.{i}.attn.out", h + "self_attention.dense")
    _pair(w, "blocks.{i}.mlp.up", h + "mlp.dense_h_to_4h")
    _pair(w, "blocks.{i}.mlp.down", h + "mlp.dense_4h_to_h")
    _pair(w, "blocks.{i}.norm", h + "input_layernorm")  # one shared norm (7B); two: 40B's parallel block, Falcon-RW's sequential one
    for ours, parallel, sequential in (("attn_norm", "ln_attn", "input_layernorm"), ("mlp_norm", "ln_mlp", "post_attention_layernorm")):
        _pair(w, f"blocks.{{i}}.{ours}", lambda s, p=parallel, q=sequential: ("by_residual", ("parallel", f"{h}{p}.{s}"), ("pre-norm", f"{h}{q}.{s}")))
    _pair(w, "final_norm", "transformer.ln_f")
    _pair(w, "head", "lm_head")
    return w


def _bert() -> dict[str, Recipe]:
    e, layer, w = "embeddings.", "encoder.layer.{i}.", {}
    w["embed.token.weight"] = e + "word_embeddings.weight"
    w["embed.position.weight"] = e + "position_embeddings.weight"
    w["embed.token_type.weight"] = e + "token_type_embeddings.weight"
    _pair(w, "embed.norm", e + "LayerNorm")
    for ours, theirs in (("q", "query"), ("k", "key"), ("v", "value")):
        _pair(w, f"blocks.{{i}}.attn.{ours}", f"{layer}attention.self.{theirs}")
    _pair(w, "blocks.{i}.attn.qkv", lambda s: ("cat", *(f"{layer}attention.self.{p}.{s}" for p in ("query", "key", "value"))))
    _pair(w, "blocks.{i}.attn.out", layer + "attention.output.dense")
    _pair(w, "blocks.{i}.attn_norm", layer + "attention.output.LayerNorm")
    _pair(w, "blocks.{i}.mlp.up", layer + "intermediate.dense")
    _pair(w, "blocks.{i}.mlp.down", layer + "output.dense")
    _pair(w, "blocks.{i}.mlp_norm", layer + "output.LayerNorm")
    _pair(w, "pooler.dense", "pooler.dense")
    return w


def _t5() -> dict[str, Recipe]:
    """T5ForConditionalGeneration: block.{i}.layer.0 is self-attention, layer.1 cross-attention (decoder), then the MLP."""
    w = {"embed.token.weight": "shared.weight"}
    for tower, mlp in (("encoder", 1), ("decoder", 2)):
        block = f"{tower}.block.{{i}}.layer."
        for ours, theirs in (("q", "q"), ("k", "k"), ("v", "v"), ("out", "o")):
            w[f"{tower}.blocks.{{i}}.attn.{ours}.weight"] = f"{block}0.SelfAttention.{theirs}.weight"
            w[f"{tower}.blocks.{{i}}.cross_attn.{ours}.weight"] = f"{block}1.EncDecAttention.{theirs}.weight"
        w[f"{tower}.blocks.{{i}}.attn_norm.weight"] = f"{block}0.layer_norm.weight"
        w[f"{tower}.blocks.{{i}}.cross_norm.weight"] = f"{block}1.layer_norm.weight"
        w[f"{tower}.blocks.{{i}}.mlp_norm.weight"] = f"{block}{mlp}.layer_norm.weight"
        ff = f"{block}{mlp}.DenseReluDense."  # dense: wo(act(wi x)); gated (v1.1, gated-ACT): wo(act(wi_0 x) * wi_1 x)
        w[f"{tower}.blocks.{{i}}.mlp.up.weight"] = ("either", ff + "wi.weight", ff + "wi_1.weight")
        w[f"{tower}.blocks.{{i}}.mlp.gate.weight"] = ff + "wi_0.weight"
        w[f"{tower}.blocks.{{i}}.mlp.gate_up.weight"] = ("cat", ff + "wi_0.weight", ff + "wi_1.weight")
        w[f"{tower}.blocks.{{i}}.mlp.down.weight"] = ff + "wo.weight"
        w[f"{tower}.rel_bias.weight"] = f"{tower}.block.0.layer.0.SelfAttention.relative_attention_bias.weight"
        w[f"{tower}.final_norm.weight"] = f"{tower}.final_layer_norm.weight"
    w["head.weight"] = "lm_head.weight"
    return w


def _deepseek_v3() -> tuple[dict[str, Recipe], dict[str, Recipe]]:
    """DeepseekV3ForCausalLM: the dense layers (dense_blocks) and the MoE layers (blocks) share one model.layers list;
    the loader offsets the index of blocks by the number of dense layers."""
    layer, w = "model.layers.{i}.", {}
    a, m = layer + "self_attn.", layer + "mlp."
    w["embed.token.weight"] = "model.embed_tokens.weight"
    for stack in DENSE_MOE:
        attn = {"q": "q_proj", "q_down": "q_a_proj", "q_up": "q_b_proj", "kv_down": "kv_a_proj_with_mqa", "kv_up": "kv_b_proj",
                "out": "o_proj"}
        for ours, theirs in attn.items():
            _pair(w, f"{stack}.{{i}}.attn.{ours}", a + theirs)
        w[f"{stack}.{{i}}.attn.q_down_norm.weight"] = a + "q_a_layernorm.weight"
        w[f"{stack}.{{i}}.attn.kv_down_norm.weight"] = a + "kv_a_layernorm.weight"
        w[f"{stack}.{{i}}.attn_norm.weight"] = layer + "input_layernorm.weight"
        w[f"{stack}.{{i}}.mlp_norm.weight"] = layer + "post_attention_layernorm.weight"
        for ours, theirs in (("gate", "gate_proj"), ("up", "up_proj"), ("down", "down_proj")):  # dense layers
            w[f"{stack}.{{i}}.mlp.{ours}.weight"] = m + theirs + ".weight"
        w[f"{stack}.{{i}}.mlp.gate_up.weight"] = ("cat", m + "gate_proj.weight", m + "up_proj.weight")
        w[f"{stack}.{{i}}.mlp.router.weight"] = m + "gate.weight"
        gate_up = ("expert", m + "experts.gate_up_proj")  # (E, 2 x d_ff, d): gate rows, then up rows
        w[f"{stack}.{{i}}.mlp.experts.{{e}}.gate.weight"] = ("half", 0, gate_up)
        w[f"{stack}.{{i}}.mlp.experts.{{e}}.up.weight"] = ("half", 1, gate_up)
        w[f"{stack}.{{i}}.mlp.experts.{{e}}.gate_up.weight"] = gate_up
        w[f"{stack}.{{i}}.mlp.experts.{{e}}.down.weight"] = ("expert", m + "experts.down_proj")
        s = m + "shared_experts."
        for ours, theirs in (("gate", "gate_proj"), ("up", "up_proj"), ("down", "down_proj")):
            w[f"{stack}.{{i}}.mlp.shared.{ours}.weight"] = s + theirs + ".weight"
        w[f"{stack}.{{i}}.mlp.shared.gate_up.weight"] = ("cat", s + "gate_proj.weight", s + "up_proj.weight")
    w["final_norm.weight"] = "model.norm.weight"
    w["head.weight"] = "lm_head.weight"
    buffers = {f"{stack}.{{i}}.mlp.score_bias": m + "gate.e_score_correction_bias" for stack in DENSE_MOE}
    return w, buffers


def _phi3() -> dict[str, Recipe]:
    """Phi-3 stores q, k, v in one qkv_proj and gate, up in one gate_up_proj; separate projections cut them out."""
    w = _llama_like(attn={"qkv": "qkv_proj"}, mlp={"gate_up": "gate_up_proj"})
    a, m = "model.layers.{i}.self_attn.", "model.layers.{i}.mlp."
    for n, ours in enumerate("qkv"):
        w[f"blocks.{{i}}.attn.{ours}.weight"] = ("qkv_rows", n, a + "qkv_proj.weight")
    w["blocks.{i}.mlp.gate.weight"] = ("half", 0, m + "gate_up_proj.weight")
    w["blocks.{i}.mlp.up.weight"] = ("half", 1, m + "gate_up_proj.weight")
    return w


SANDWICH = {"attn_norm": "input_layernorm", "attn_post_norm": "post_attention_layernorm",
            "mlp_norm": "pre_feedforward_layernorm", "mlp_post_norm": "post_feedforward_layernorm"}
REORDERED = {"attn_post_norm": "post_attention_layernorm", "mlp_post_norm": "post_feedforward_layernorm"}
DENSE_MOE = ("dense_blocks", "blocks")  # two stacks whose layers share one model.layers list

MAPS: dict[str, HFMap] = {
    "llama": HFMap(_llama_like()),
    "mistral": HFMap(_llama_like()),
    "qwen2": HFMap(_llama_like()),
    "qwen3": HFMap(_llama_like()),
    "mixtral": HFMap(_mixtral()),
    "olmoe": HFMap(_llama_like() | experts()),
    "qwen2_moe": HFMap(with_dense_stack(_llama_like() | experts(shared="shared_expert", shared_gate="shared_expert_gate")), stacks=DENSE_MOE),
    "qwen3_moe": HFMap(with_dense_stack(_llama_like() | experts()), stacks=DENSE_MOE),
    "olmo2": HFMap(_llama_like(norms=REORDERED)),
    "gemma": HFMap(_llama_like()),
    "gemma2": HFMap(_llama_like(norms=SANDWICH)),
    "smollm3": HFMap(_llama_like()),
    "granite": HFMap(_llama_like()),
    "granitemoe": HFMap(hf_maps_scaled.granite_moe(_llama_like())),
    "cohere": HFMap(hf_maps_scaled.cohere(_llama_like()), rotary="interleaved"),
    "gemma3_text": HFMap(_llama_like(norms=SANDWICH)),
    "phi3": HFMap(_phi3(), longrope_rerun=True),
    "gpt_oss": HFMap(_gpt_oss()),
    "gpt2": HFMap(_gpt2()),
    "gpt_neox": HFMap(_gpt_neox()),
    "gptj": HFMap(_gptj(), rotary="interleaved"),
    "falcon": HFMap(_falcon(), alibi="bfloat16_scaled"),
    "starcoder2": HFMap(hf_maps_dense.starcoder2()),
    "phi": HFMap(hf_maps_dense.phi()),
    "gpt_bigcode": HFMap(hf_maps_dense.gpt_bigcode()),
    "opt": HFMap(hf_maps_dense.opt()),
    "stablelm": HFMap(hf_maps_dense.stablelm()),
    "bloom": HFMap(hf_maps_alibi.bloom()),
    "mpt": HFMap(hf_maps_alibi.mpt()),
    "bert": HFMap(_bert()),
    "llama4_text": HFMap(stored_in_by_out(), rotary="interleaved", stacks=DENSE_MOE),
    "deepseek_v2": HFMap(_deepseek_v3()[0], rotary="deinterleaved", stacks=DENSE_MOE),
    "deepseek_v3": HFMap(_deepseek_v3()[0], rotary="deinterleaved", stacks=DENSE_MOE, buffers=_deepseek_v3()[1]),
    "t5": HFMap(_t5(), copies=(("encoder.embed_tokens.weight", "shared.weight"), ("decoder.embed_tokens.weight", "shared.weight"))),
}
