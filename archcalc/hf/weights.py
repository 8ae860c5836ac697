"""transformers' parameter names as data: the weight-name layouts that a spec's ``hf.weights`` names (like litgpt's
checkpoint maps). ``archcalc generate`` writes the chosen layout into the generated module, whose
``load_hf_state_dict`` (import) and ``to_hf_state_dict`` (export) both read it: one table, both ways. No torch.

A layout is named after the model type it was written for; a model type that kept those names reuses it from its
spec (``hf: {model_type: mistral, weights: llama}``). Each layout takes one of this project's parameter names (the IR path
with ``{i}`` for the block index and ``{e}`` for the expert index) to a *recipe* for the tensor from a transformers
``state_dict()``:

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
- ``("flat", r)``: a (rows, head width) tensor read as one vector (Cohere's per-head QK-norm weights);
- ``("heads", r)``: one tensor per head (``{h}`` in the name), concatenated (StableLM's per-head QK-norms);
- ``("head_pairs", q, gate)``: each head's query rows, then its gate's, from a query and an output gate stored apart
  (AFMoE's q_proj and gate_proj; archcalc's gated query interleaves them head by head);
- ``("qkv_by_group", r)``: a fused projection stored per key/value group as [queries of the group, key,
  value] (GPT-NeoX and Falcon), reordered to all queries, all keys, all values;
- resolved per module before anything is written (by the emitter): ``("either", dense, gated)``: ``dense`` in a
  module without a gate, ``gated`` in one with a gate (T5's up is wi, or wi_1 when gated); ``("by_residual",
  (arrangement, r), ...)``: by the block's residual arrangement (Falcon's norms: ln_attn and ln_mlp in its parallel
  block, input_layernorm and post_attention_layernorm in its sequential one).

The names are those of the transformers 5 models' own ``state_dict()`` (the class in a config's ``architectures``).
A layout lists every name a family may have; the emitter writes only the entries of the parameters the module has.

>>> LAYOUTS["llama"].weights["blocks.{i}.attn.q.weight"]
'model.layers.{i}.self_attn.q_proj.weight'
>>> LAYOUTS["phi3"].weights["blocks.{i}.mlp.up.weight"]
('half', 1, 'model.layers.{i}.mlp.gate_up_proj.weight')
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

Recipe = str | tuple
Weights = dict[str, Recipe]


@dataclass(frozen=True)
class Layout:
    """One family's names: ``weights`` (parameters), ``copies`` ((copy, original): transformers tensors that are another,
    T5's per-tower embeddings), ``stacks`` (the stacks, in transformers' layer order: one list, model.layers.{i}) and
    ``buffers`` (our buffers that transformers' state_dict may hold; kept as built where absent)."""

    weights: Weights
    copies: tuple[tuple[str, str], ...] = ()
    stacks: tuple[str, ...] = ("blocks",)
    buffers: Weights | None = None


DENSE_MOE = ("dense_blocks", "blocks")  # two stacks whose layers share one model.layers list
LLAMA_NORMS = {"attn_norm": "input_layernorm", "mlp_norm": "post_attention_layernorm"}
SANDWICH = {"attn_norm": "input_layernorm", "attn_post_norm": "post_attention_layernorm",
            "mlp_norm": "pre_feedforward_layernorm", "mlp_post_norm": "post_feedforward_layernorm"}
REORDERED = {"attn_post_norm": "post_attention_layernorm", "mlp_post_norm": "post_feedforward_layernorm"}
GATED = {"gate": "gate_proj", "up": "up_proj", "down": "down_proj"}


def _pair(w: Weights, ours: str, theirs: str | Callable[[str], Recipe], suffixes: tuple[str, ...] = ("weight", "bias")) -> None:
    """``ours.weight`` and ``ours.bias`` from ``theirs(suffix)`` (a recipe for each), or from ``theirs.weight/bias``."""
    for suffix in suffixes:
        w[f"{ours}.{suffix}"] = theirs(suffix) if callable(theirs) else f"{theirs}.{suffix}"


def _separate(w: Weights, ours: str, theirs: str, names: dict[str, str], suffixes: tuple[str, ...] = ("weight", "bias")) -> None:
    """q, k, v and out projections stored apart (``names``: ours -> theirs under ``theirs``); the fused qkv
    (--fuse-projections) is the concatenation of q, k and v."""
    for name, their in names.items():
        _pair(w, f"{ours}{name}", theirs + their, suffixes)
    if "qkv" not in names:
        _pair(w, f"{ours}qkv", lambda s: ("cat", *(f"{theirs}{names[p]}.{s}" for p in "qkv")), suffixes)


def _gated(w: Weights, ours: str, theirs: str, names: dict[str, str] = GATED, suffixes: tuple[str, ...] = ("weight", "bias")) -> None:
    """A gated MLP's gate, up and down projections; the fused gate_up (--fuse-projections) is gate then up."""
    for name, their in names.items():
        _pair(w, f"{ours}{name}", theirs + their, suffixes)
    if "gate_up" not in names:
        _pair(w, f"{ours}gate_up", lambda s: ("cat", f"{theirs}{names['gate']}.{s}", f"{theirs}{names['up']}.{s}"), suffixes)


def _by_group(w: Weights, qkv: str) -> None:
    """A projection stored [queries of the group, key, value] per key/value group: fused, and q, k, v cut out of it."""
    _pair(w, "blocks.{i}.attn.qkv", lambda s: ("qkv_by_group", f"{qkv}.{s}"))
    for n, ours in enumerate("qkv"):  # separate projections (--separate-projections)
        _pair(w, f"blocks.{{i}}.attn.{ours}", lambda s, n=n: ("qkv_group", n, f"{qkv}.{s}"))


def _dense(w: Weights, layer: str, out: str, up: str, down: str, norms: tuple[str, ...], final: str,
           suffixes: tuple[str, ...] = ("weight", "bias")) -> None:
    """A dense decoder's attention output, up and down projections, the block's norms (one: a parallel block's
    ``norm``; two: ``attn_norm``, ``mlp_norm``), the final norm and the head."""
    for ours, theirs in (("attn.out", out), ("mlp.up", up), ("mlp.down", down)):
        _pair(w, f"blocks.{{i}}.{ours}", layer + theirs, suffixes)
    for ours, theirs in zip(("norm",) if len(norms) == 1 else ("attn_norm", "mlp_norm"), norms, strict=True):
        _pair(w, f"blocks.{{i}}.{ours}", layer + theirs, suffixes)
    _pair(w, "final_norm", final, suffixes)
    _pair(w, "head", "lm_head", suffixes)


def experts(stack: str = "blocks", mlp: str = "model.layers.{i}.mlp.", shared: str | None = None,
            shared_gate: str | None = None) -> Weights:
    """The MoE layers of ``stack`` (transformers 5's layout), whose module is ``mlp``: its router ``gate``, the experts
    stacked in one ``gate_up_proj`` (E, 2 x d_ff, d: gate rows, then up rows) and one ``down_proj`` (E, d, d_ff), a
    shared expert named ``shared`` (one SwiGLU MLP) and the linear ``shared_gate`` whose sigmoid scales it."""
    ours, w = f"{stack}.{{i}}.mlp.", {}
    w[ours + "router.weight"] = mlp + "gate.weight"
    gate_up = ("expert", mlp + "experts.gate_up_proj")
    w[ours + "experts.{e}.gate.weight"] = ("half", 0, gate_up)
    w[ours + "experts.{e}.up.weight"] = ("half", 1, gate_up)
    w[ours + "experts.{e}.gate_up.weight"] = gate_up
    w[ours + "experts.{e}.down.weight"] = ("expert", mlp + "experts.down_proj")
    if shared is not None:
        _gated(w, ours + "shared.", f"{mlp}{shared}.", suffixes=("weight",))
    if shared_gate is not None:
        w[ours + "shared_gate.weight"] = f"{mlp}{shared_gate}.weight"
    return w


def with_dense_stack(w: Weights) -> Weights:
    """``w`` plus the same layer names for a ``dense_blocks`` stack (dense layers listed in the same ``model.layers.{i}``
    as the MoE ones): attention, norms and a dense MLP, not the MoE layer's own tensors."""
    moe_only = (".mlp.router.", ".mlp.experts.", ".mlp.shared.", ".mlp.shared_gate.")
    return w | {"dense_" + k: r for k, r in w.items() if k.startswith("blocks.{i}.") and not any(m in k for m in moe_only)}


def llama(norms: dict[str, str] = LLAMA_NORMS, attn: dict[str, str] | None = None, mlp: dict[str, str] | None = None) -> Weights:
    """Llama's names, kept by Mistral, Qwen, Gemma, OLMo, Phi-3, gpt-oss...: ``norms``, ``attn`` and ``mlp`` rename."""
    layer, w = "model.layers.{i}.", {"embed.token.weight": "model.embed_tokens.weight"}
    a = layer + "self_attn."
    _separate(w, "blocks.{i}.attn.", a, {"q": "q_proj", "k": "k_proj", "v": "v_proj", "out": "o_proj", **(attn or {})})
    for name in ("q_norm.weight", "k_norm.weight", "sinks"):
        w[f"blocks.{{i}}.attn.{name}"] = a + name
    _gated(w, "blocks.{i}.mlp.", layer + "mlp.", {**GATED, **(mlp or {})})
    for ours, theirs in norms.items():
        w[f"blocks.{{i}}.{ours}.weight"] = f"{layer}{theirs}.weight"
    w["final_norm.weight"] = "model.norm.weight"
    _pair(w, "head", "lm_head")
    return w


def phi3() -> Weights:
    """Phi-3 stores q, k, v in one qkv_proj and gate, up in one gate_up_proj; separate projections cut them out."""
    w = llama(attn={"qkv": "qkv_proj"}, mlp={"gate_up": "gate_up_proj"})
    a, m = "model.layers.{i}.self_attn.", "model.layers.{i}.mlp."
    for n, ours in enumerate("qkv"):
        w[f"blocks.{{i}}.attn.{ours}.weight"] = ("qkv_rows", n, a + "qkv_proj.weight")
    w["blocks.{i}.mlp.gate.weight"] = ("half", 0, m + "gate_up_proj.weight")
    w["blocks.{i}.mlp.up.weight"] = ("half", 1, m + "gate_up_proj.weight")
    return w


def gpt_oss() -> Weights:
    """Llama's names with a biased ``router`` and the experts stored in x out, gate and up interleaved."""
    w, m = llama(), "model.layers.{i}.mlp."
    _pair(w, "blocks.{i}.mlp.router", m + "router")
    gate_up, bias = ("expert", m + "experts.gate_up_proj"), ("expert", m + "experts.gate_up_proj_bias")  # (E, d, 2 x d_ff)
    e = "blocks.{i}.mlp.experts.{e}."
    w[e + "gate_up.weight"] = ("cat", ("t", ("every_other", 0, gate_up)), ("t", ("every_other", 1, gate_up)))
    w[e + "gate_up.bias"] = ("cat", ("every_other", 0, bias), ("every_other", 1, bias))
    for n, name in enumerate(("gate", "up")):
        w[f"{e}{name}.weight"] = ("t", ("every_other", n, gate_up))
        w[f"{e}{name}.bias"] = ("every_other", n, bias)
    w[e + "down.weight"] = ("t", ("expert", m + "experts.down_proj"))
    w[e + "down.bias"] = ("expert", m + "experts.down_proj_bias")
    return w


def granite_moe() -> Weights:
    """Llama's names with the experts under ``block_sparse_moe`` and a bias-free ``router``."""
    moe = "model.layers.{i}.block_sparse_moe."
    return llama() | experts(mlp=moe) | {"blocks.{i}.mlp.router.weight": moe + "router.weight"}


def cohere() -> Weights:
    """Llama's names with one shared norm per block and QK-norm weights stored one row per head, (heads, d_head)."""
    layer, w = "model.layers.{i}.", llama()
    w["blocks.{i}.norm.weight"] = layer + "input_layernorm.weight"
    for which in ("q", "k"):
        w[f"blocks.{{i}}.attn.{which}_norm.weight"] = ("flat", f"{layer}self_attn.{which}_norm.weight")
    return w


def stablelm() -> Weights:
    """Llama's names with LayerNorm biases; per-head QK-norms are one LayerNorm per head ({h}); a parallel block
    (use_parallel_residual) has input_layernorm only."""
    layer, w = "model.layers.{i}.", {"embed.token.weight": "model.embed_tokens.weight"}
    a = layer + "self_attn."
    _separate(w, "blocks.{i}.attn.", a, {"q": "q_proj", "k": "k_proj", "v": "v_proj", "out": "o_proj"})
    for ours, theirs in (("q_norm", "q_layernorm"), ("k_norm", "k_layernorm")):
        _pair(w, f"blocks.{{i}}.attn.{ours}", lambda s, theirs=theirs: ("heads", f"{a}{theirs}.norms.{{h}}.{s}"))
    _gated(w, "blocks.{i}.mlp.", layer + "mlp.")
    _pair(w, "blocks.{i}.norm", layer + "input_layernorm")  # parallel: one norm
    for ours, theirs in LLAMA_NORMS.items():
        _pair(w, f"blocks.{{i}}.{ours}", layer + theirs)
    _pair(w, "final_norm", "model.norm")
    _pair(w, "head", "lm_head")
    return w


def starcoder2() -> Weights:
    """Llama's names with biases everywhere and a dense c_fc/c_proj MLP."""
    layer, w = "model.layers.{i}.", {"embed.token.weight": "model.embed_tokens.weight"}
    _separate(w, "blocks.{i}.attn.", layer + "self_attn.", {"q": "q_proj", "k": "k_proj", "v": "v_proj"})
    _dense(w, layer, "self_attn.o_proj", "mlp.c_fc", "mlp.c_proj", ("input_layernorm", "post_attention_layernorm"), "model.norm")
    return w


def phi() -> Weights:
    """Phi-1/1.5/2: one LayerNorm feeds attention and MLP (a parallel block); the output projection is dense."""
    layer, w = "model.layers.{i}.", {"embed.token.weight": "model.embed_tokens.weight"}
    _separate(w, "blocks.{i}.attn.", layer + "self_attn.", {"q": "q_proj", "k": "k_proj", "v": "v_proj"})
    _pair(w, "blocks.{i}.attn.q_norm", layer + "self_attn.q_layernorm")  # qk_layernorm: one norm over a head's width
    _pair(w, "blocks.{i}.attn.k_norm", layer + "self_attn.k_layernorm")
    _dense(w, layer, "self_attn.dense", "mlp.fc1", "mlp.fc2", ("input_layernorm",), "model.final_layernorm")
    return w


def opt() -> Weights:
    """OPT: the decoder under model.decoder; each layer's second norm is its final_layer_norm; OPT-350m's token table is
    narrower than the model (project_in, project_out)."""
    dec = "model.decoder."
    layer, w = dec + "layers.{i}.", {f"embed.{k}.weight": f"{dec}{v}.weight" for k, v in
                                     (("token", "embed_tokens"), ("position", "embed_positions"), ("project_in", "project_in"))}
    w["project_out.weight"] = dec + "project_out.weight"
    _separate(w, "blocks.{i}.attn.", layer + "self_attn.", {"q": "q_proj", "k": "k_proj", "v": "v_proj"})
    _dense(w, layer, "self_attn.out_proj", "fc1", "fc2", ("self_attn_layer_norm", "final_layer_norm"), dec + "final_layer_norm")
    return w


def gpt2() -> Weights:
    """GPT-2: Conv1D layers (stored in x out); c_attn holds [q, k, v] along its columns."""
    h, w = "transformer.h.{i}.", {"embed.token.weight": "transformer.wte.weight", "embed.position.weight": "transformer.wpe.weight"}
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


def gpt_bigcode() -> Weights:
    """GPTBigCode: GPT-2's names, but nn.Linear layers (no transposes); c_attn holds [queries, key, value] per key/value
    group (multi-query: one group, all queries then the key and the value; else head by head)."""
    h, w = "transformer.h.{i}.", {"embed.token.weight": "transformer.wte.weight", "embed.position.weight": "transformer.wpe.weight"}
    _by_group(w, h + "attn.c_attn")
    _dense(w, h, "attn.c_proj", "mlp.c_fc", "mlp.c_proj", ("ln_1", "ln_2"), "transformer.ln_f")
    return w


def gpt_neox() -> Weights:
    layer, w = "gpt_neox.layers.{i}.", {"embed.token.weight": "gpt_neox.embed_in.weight"}
    _by_group(w, layer + "attention.query_key_value")
    _dense(w, layer, "attention.dense", "mlp.dense_h_to_4h", "mlp.dense_4h_to_h", ("input_layernorm", "post_attention_layernorm"),
           "gpt_neox.final_layer_norm")
    return w


def gptj() -> Weights:
    h, w = "transformer.h.{i}.", {"embed.token.weight": "transformer.wte.weight"}
    _separate(w, "blocks.{i}.attn.", h + "attn.", {"q": "q_proj", "k": "k_proj", "v": "v_proj"})
    _dense(w, h, "attn.out_proj", "mlp.fc_in", "mlp.fc_out", ("ln_1",), "transformer.ln_f")
    return w


def falcon() -> Weights:
    """One shared norm (7B); two: 40B's parallel block (ln_attn, ln_mlp), Falcon-RW's sequential one."""
    h, w = "transformer.h.{i}.", {"embed.token.weight": "transformer.word_embeddings.weight"}
    _by_group(w, h + "self_attention.query_key_value")
    _dense(w, h, "self_attention.dense", "mlp.dense_h_to_4h", "mlp.dense_4h_to_h", ("input_layernorm",), "transformer.ln_f")
    for ours, parallel, sequential in (("attn_norm", "ln_attn", "input_layernorm"), ("mlp_norm", "ln_mlp", "post_attention_layernorm")):
        _pair(w, f"blocks.{{i}}.{ours}", lambda s, p=parallel, q=sequential: ("by_residual", ("parallel", f"{h}{p}.{s}"), ("pre-norm", f"{h}{q}.{s}")))
    return w


def bloom() -> Weights:
    """BLOOM: a LayerNorm on the embeddings; query_key_value stores [q, k, v] head by head (as NeoX)."""
    h, w = "transformer.h.{i}.", {"embed.token.weight": "transformer.word_embeddings.weight"}
    _pair(w, "embed.norm", "transformer.word_embeddings_layernorm")
    _by_group(w, h + "self_attention.query_key_value")
    _dense(w, h, "self_attention.dense", "mlp.dense_h_to_4h", "mlp.dense_4h_to_h", ("input_layernorm", "post_attention_layernorm"),
           "transformer.ln_f")
    return w


def mpt() -> Weights:
    """MPT: Wqkv stores all queries, then all keys, then all values; no biases anywhere."""
    b, w = "transformer.blocks.{i}.", {"embed.token.weight": "transformer.wte.weight"}
    w["blocks.{i}.attn.qkv.weight"] = b + "attn.Wqkv.weight"
    for n, ours in enumerate("qkv"):  # separate projections (--separate-projections)
        w[f"blocks.{{i}}.attn.{ours}.weight"] = ("qkv_rows", n, b + "attn.Wqkv.weight")
    _dense(w, b, "attn.out_proj", "ffn.up_proj", "ffn.down_proj", ("norm_1", "norm_2"), "transformer.norm_f", ("weight",))
    return w


def bert() -> Weights:
    e, layer = "embeddings.", "encoder.layer.{i}."
    w = {f"embed.{k}.weight": f"{e}{v}_embeddings.weight" for k, v in (("token", "word"), ("position", "position"), ("token_type", "token_type"))}
    _pair(w, "embed.norm", e + "LayerNorm")
    _separate(w, "blocks.{i}.attn.", layer + "attention.self.", {"q": "query", "k": "key", "v": "value"})
    for ours, theirs in (("attn.out", "attention.output.dense"), ("attn_norm", "attention.output.LayerNorm"),
                         ("mlp.up", "intermediate.dense"), ("mlp.down", "output.dense"), ("mlp_norm", "output.LayerNorm")):
        _pair(w, f"blocks.{{i}}.{ours}", layer + theirs)
    _pair(w, "pooler.dense", "pooler.dense")
    return w


def t5() -> Weights:
    """T5ForConditionalGeneration: block.{i}.layer.0 is self-attention, layer.1 cross-attention (decoder), then the MLP."""
    w: Weights = {"embed.token.weight": "shared.weight"}
    for tower, mlp in (("encoder", 1), ("decoder", 2)):
        block, ours = f"{tower}.block.{{i}}.layer.", f"{tower}.blocks.{{i}}."
        for name, theirs in (("q", "q"), ("k", "k"), ("v", "v"), ("out", "o")):
            w[f"{ours}attn.{name}.weight"] = f"{block}0.SelfAttention.{theirs}.weight"
            w[f"{ours}cross_attn.{name}.weight"] = f"{block}1.EncDecAttention.{theirs}.weight"
        for name, layer in (("attn_norm", 0), ("cross_norm", 1), ("mlp_norm", mlp)):
            w[f"{ours}{name}.weight"] = f"{block}{layer}.layer_norm.weight"
        ff = f"{block}{mlp}.DenseReluDense."  # dense: wo(act(wi x)); gated (v1.1, gated-ACT): wo(act(wi_0 x) * wi_1 x)
        w[f"{ours}mlp.up.weight"] = ("either", ff + "wi.weight", ff + "wi_1.weight")
        w[f"{ours}mlp.gate.weight"] = ff + "wi_0.weight"
        w[f"{ours}mlp.gate_up.weight"] = ("cat", ff + "wi_0.weight", ff + "wi_1.weight")
        w[f"{ours}mlp.down.weight"] = ff + "wo.weight"
        w[f"{tower}.rel_bias.weight"] = f"{tower}.block.0.layer.0.SelfAttention.relative_attention_bias.weight"
        w[f"{tower}.final_norm.weight"] = f"{tower}.final_layer_norm.weight"
    w["head.weight"] = "lm_head.weight"
    return w


def deepseek() -> Weights:
    """DeepSeek-V2/V3: the dense layers (dense_blocks) and the MoE layers (blocks) share one model.layers list; latent
    attention's down and up projections and their norms; a shared expert beside the routed ones."""
    layer, w = "model.layers.{i}.", {"embed.token.weight": "model.embed_tokens.weight"}
    a, m = layer + "self_attn.", layer + "mlp."
    attn = {"q": "q_proj", "q_down": "q_a_proj", "q_up": "q_b_proj", "kv_down": "kv_a_proj_with_mqa", "kv_up": "kv_b_proj", "out": "o_proj"}
    for stack in DENSE_MOE:
        ours = f"{stack}.{{i}}."
        for name, theirs in attn.items():
            _pair(w, f"{ours}attn.{name}", a + theirs)
        w[ours + "attn.q_down_norm.weight"] = a + "q_a_layernorm.weight"
        w[ours + "attn.kv_down_norm.weight"] = a + "kv_a_layernorm.weight"
        for name, theirs in LLAMA_NORMS.items():
            w[f"{ours}{name}.weight"] = f"{layer}{theirs}.weight"
        _gated(w, ours + "mlp.", m, suffixes=("weight",))  # dense layers
        w |= experts(stack, m, shared="shared_experts")
    w["final_norm.weight"] = "model.norm.weight"
    w["head.weight"] = "lm_head.weight"
    return w


DSA_STACKS = ("dense_blocks", "shareddense_blocks", "blocks", "shared_blocks")  # GLM-5: the shared layers' own stacks


def deepseek_sparse() -> Weights:
    """DeepSeek Sparse Attention (DeepSeek-V3.2, GLM-5): DeepSeek-V3's names, the indexer's (self_attn.indexer: wq_b,
    wk, k_norm, weights_proj), and the same names for the stacks of the layers that reuse the previous layer's
    selection (no indexer of their own)."""
    w, a = deepseek(), "model.layers.{i}.self_attn.indexer."
    for stack in DENSE_MOE:
        for ours, theirs in (("q_up", "wq_b"), ("k", "wk"), ("weights", "weights_proj")):
            w[f"{stack}.{{i}}.attn.indexer.{ours}.weight"] = f"{a}{theirs}.weight"
        _pair(w, f"{stack}.{{i}}.attn.indexer.k_norm", a + "k_norm")
    for stack, twin in zip(DENSE_MOE, DSA_STACKS[1::2]):
        w |= {twin + k[len(stack):]: v for k, v in w.items() if k.startswith(stack + ".") and ".indexer." not in k}
    return w


def llama4() -> Weights:
    """Llama 4 (``model.layers.{i}`` for the layers of every stack; the MLP is ``feed_forward``): dense layers' gate,
    up and down projections; in MoE layers the ``router``, the experts stacked in x out (``gate_up_proj`` (E, d,
    2 x d_ff): gate columns, then up columns; ``down_proj`` (E, d_ff, d)) and one ``shared_expert``."""
    layer, w = "model.layers.{i}.", {"embed.token.weight": "model.embed_tokens.weight"}
    a, m = layer + "self_attn.", layer + "feed_forward."
    stacked, down = ("expert", m + "experts.gate_up_proj"), ("t", ("expert", m + "experts.down_proj"))
    for stack in DENSE_MOE:
        ours = f"{stack}.{{i}}."
        _separate(w, ours + "attn.", a, {"q": "q_proj", "k": "k_proj", "v": "v_proj", "out": "o_proj"})
        for name, theirs in LLAMA_NORMS.items():
            w[f"{ours}{name}.weight"] = f"{layer}{theirs}.weight"
        _gated(w, ours + "mlp.", m, suffixes=("weight",))  # a dense layer's MLP
        _gated(w, ours + "mlp.shared.", m + "shared_expert.", suffixes=("weight",))
        w[ours + "mlp.router.weight"] = m + "router.weight"
        w[ours + "mlp.experts.{e}.gate.weight"] = ("t", ("half_last", 0, stacked))
        w[ours + "mlp.experts.{e}.up.weight"] = ("t", ("half_last", 1, stacked))
        w[ours + "mlp.experts.{e}.gate_up.weight"] = ("t", stacked)
        w[ours + "mlp.experts.{e}.down.weight"] = down
    w["final_norm.weight"] = "model.norm.weight"
    w["head.weight"] = "lm_head.weight"
    return w


MAMBA2_MIXER = (("in_proj", "in_proj"), ("conv", "conv1d"), ("out_proj", "out_proj")), ("dt_bias", "A_log", "D", "norm.weight")
MAMBA_MIXER = ((("in_proj", "in_proj"), ("conv", "conv1d"), ("x_proj", "x_proj"), ("dt_proj", "dt_proj"),
                ("out_proj", "out_proj")), ("A_log", "D"))


def _mixer(w: Weights, ours: str, theirs: str, names: tuple) -> None:
    """A mixer's weights (``names``: a *_MIXER table of transformers' names for one kind of mixer): its
    layers with their biases, then its own parameters."""
    layers, params = names
    for mine, hf in layers:
        _pair(w, ours + mine, theirs + hf)
    for name in params:
        w[ours + name] = theirs + name


def _backbone(mixer: tuple) -> Weights:
    """Mamba(2)ForCausalLM: the layers under backbone.layers, each a norm and a mixer; the final norm is norm_f."""
    layer, w = "backbone.layers.{i}.", {"embed.token.weight": "backbone.embeddings.weight"}
    w["blocks.{i}.mixer_norm.weight"] = layer + "norm.weight"
    _mixer(w, "blocks.{i}.mixer.", layer + "mixer.", mixer)
    w["final_norm.weight"] = "backbone.norm_f.weight"
    w["head.weight"] = "lm_head.weight"
    return w


def mamba2() -> Weights:
    """Mamba2ForCausalLM (Mamba2Mixer: in_proj, conv1d, dt_bias, A_log, D, the gated norm, out_proj)."""
    return _backbone(MAMBA2_MIXER)


def mamba() -> Weights:
    """MambaForCausalLM (MambaMixer: in_proj, conv1d, x_proj, dt_proj, A_log, D, out_proj)."""
    return _backbone(MAMBA_MIXER)


HYBRID = ("mamba_blocks", "blocks")  # Bamba: Mamba2 layers and attention layers in one model.layers list


def bamba() -> Weights:
    """BambaForCausalLM: Mamba2 layers (mamba_blocks) and attention layers (blocks) in one model.layers list, each
    with input_layernorm, pre_ff_layernorm and a gated feed_forward; the mixer is ``mamba`` (Mamba2Mixer's names), the
    attention ``self_attn``; the final norm is final_layernorm."""
    layer, w = "model.layers.{i}.", {"embed.token.weight": "model.embed_tokens.weight"}
    for stack, norm in zip(HYBRID, ("mixer_norm", "attn_norm"), strict=True):
        ours = f"{stack}.{{i}}."
        w[f"{ours}{norm}.weight"] = layer + "input_layernorm.weight"
        w[f"{ours}mlp_norm.weight"] = layer + "pre_ff_layernorm.weight"
        _gated(w, ours + "mlp.", layer + "feed_forward.")
    _mixer(w, "mamba_blocks.{i}.mixer.", layer + "mamba.", MAMBA2_MIXER)
    _separate(w, "blocks.{i}.attn.", layer + "self_attn.", {"q": "q_proj", "k": "k_proj", "v": "v_proj", "out": "o_proj"})
    w["final_norm.weight"] = "model.final_layernorm.weight"
    w["head.weight"] = "lm_head.weight"
    return w


def falcon_h1() -> Weights:
    """FalconH1ForCausalLM: every layer attention (``self_attn``) and a Mamba2 mixer (``mamba``: Mamba2Mixer's names,
    its gated norm only where mamba_rms_norm) side by side behind input_layernorm, then pre_ff_layernorm and a gated
    ``feed_forward``; the final norm is final_layernorm. The mixer's ``mup_vector`` is a buffer transformers does not
    save."""
    layer, w = "model.layers.{i}.", {"embed.token.weight": "model.embed_tokens.weight"}
    w["blocks.{i}.norm.weight"] = layer + "input_layernorm.weight"
    _separate(w, "blocks.{i}.attn.", layer + "self_attn.", {"q": "q_proj", "k": "k_proj", "v": "v_proj", "out": "o_proj"})
    _mixer(w, "blocks.{i}.mixer.", layer + "mamba.", MAMBA2_MIXER)
    w["blocks.{i}.mlp_norm.weight"] = layer + "pre_ff_layernorm.weight"
    _gated(w, "blocks.{i}.mlp.", layer + "feed_forward.")
    w["final_norm.weight"] = "model.final_layernorm.weight"
    w["head.weight"] = "lm_head.weight"
    return w


ZAMBA2 = ("mamba_blocks", "hybrid_blocks")  # Zamba2: Mamba2 layers and hybrid layers in one model.layers list


def zamba2() -> Weights:
    """Zamba2ForCausalLM: Mamba2 layers (``mamba``, Mamba2Mixer's names, behind input_layernorm) and hybrid layers, whose
    Mamba2 layer is ``mamba_decoder`` and whose projection into it is ``linear``; the final norm is final_layernorm. A
    hybrid layer's ``shared_transformer`` is its shared block (transformers lists a tied block under every layer that
    runs it): input_layernorm, self_attn (q_proj, k_proj, v_proj, o_proj), pre_ff_layernorm, feed_forward (gate_up_proj,
    down_proj); the adapters of hybrid layer ``{n}`` (its number among the hybrid layers) are entry {n} of its block's
    lists (linear_q_adapter_list..., gate_up_proj_adapter_list: down, then up), which every layer of that block lists."""
    layer, w = "model.layers.{i}.", {"embed.token.weight": "model.embed_tokens.weight"}
    for stack, theirs in zip(ZAMBA2, (layer, layer + "mamba_decoder."), strict=True):
        w[f"{stack}.{{i}}.mixer_norm.weight"] = theirs + "input_layernorm.weight"
        _mixer(w, f"{stack}.{{i}}.mixer.", theirs + "mamba.", MAMBA2_MIXER)
    w["hybrid_blocks.{i}.proj.weight"] = layer + "linear.weight"
    ours, shared = "hybrid_blocks.{i}.shared.", layer + "shared_transformer."
    w[ours + "attn_norm.weight"] = shared + "input_layernorm.weight"
    w[ours + "mlp_norm.weight"] = shared + "pre_ff_layernorm.weight"
    _separate(w, ours + "attn.", shared + "self_attn.", {"q": "q_proj", "k": "k_proj", "v": "v_proj", "out": "o_proj"}, ("weight",))
    _gated(w, ours + "mlp.", shared + "feed_forward.", {"gate_up": "gate_up_proj", "down": "down_proj"})
    lists = {"q": "self_attn.linear_q_adapter_list", "k": "self_attn.linear_k_adapter_list",
             "v": "self_attn.linear_v_adapter_list", "mlp": "feed_forward.gate_up_proj_adapter_list"}
    for name, theirs in lists.items():
        for n, part in enumerate(("down", "up")):  # nn.Sequential(down, up)
            w[f"hybrid_blocks.{{i}}.{name}_adapter.{part}.weight"] = f"{shared}{theirs}.{{n}}.{n}.weight"
    w["final_norm.weight"] = "model.final_layernorm.weight"
    w["head.weight"] = "lm_head.weight"
    return w


#: Jamba: Mamba layers with a SwiGLU MLP, Mamba layers with a mixture of experts, attention layers with either, in one
#: model.layers list
JAMBA = ("mamba_blocks", "mambamoe_blocks", "blocks", "moe_blocks")


def jamba() -> Weights:
    """JambaForCausalLM: Mamba layers (``mamba``: MambaMixer's names, and dt_layernorm, b_layernorm and c_layernorm, the
    weights of the norms of dt, B and C) and attention layers (``self_attn``), each with input_layernorm and
    pre_ff_layernorm and a ``feed_forward``: SwiGLU (gate_proj, up_proj, down_proj) or a mixture of experts (its
    ``router``, the experts stacked in gate_up_proj and down_proj); the final norm is final_layernorm."""
    layer, w = "model.layers.{i}.", {"embed.token.weight": "model.embed_tokens.weight"}
    for stack in JAMBA:
        ours = f"{stack}.{{i}}."
        mixer = "mixer_norm" if stack.startswith("mamba") else "attn_norm"
        w[f"{ours}{mixer}.weight"] = layer + "input_layernorm.weight"
        w[f"{ours}mlp_norm.weight"] = layer + "pre_ff_layernorm.weight"
        if "moe" in stack:
            moe = experts(stack, layer + "feed_forward.")
            moe[f"{ours}mlp.router.weight"] = layer + "feed_forward.router.weight"
            w |= moe
        else:
            _gated(w, ours + "mlp.", layer + "feed_forward.", suffixes=("weight",))
        if stack.startswith("mamba"):
            _mixer(w, ours + "mixer.", layer + "mamba.", MAMBA_MIXER)
            for norm, theirs in (("dt_norm", "dt_layernorm"), ("b_norm", "b_layernorm"), ("c_norm", "c_layernorm")):
                w[f"{ours}mixer.{norm}.weight"] = f"{layer}mamba.{theirs}.weight"
        else:
            _separate(w, ours + "attn.", layer + "self_attn.", {"q": "q_proj", "k": "k_proj", "v": "v_proj", "out": "o_proj"},
                      ("weight",))
    w["final_norm.weight"] = "model.final_layernorm.weight"
    w["head.weight"] = "lm_head.weight"
    return w


DELTANET_MIXER = ((("in_proj_qkv", "in_proj_qkv"), ("in_proj_z", "in_proj_z"), ("in_proj_b", "in_proj_b"),
                   ("in_proj_a", "in_proj_a"), ("conv", "conv1d"), ("out_proj", "out_proj")), ("dt_bias", "A_log", "norm.weight"))
LINEAR_ATTENTION = ("delta_blocks", "blocks")  # Qwen3.5: Gated DeltaNet layers and attention layers in one list


DELTANET_FUSED_MIXER = ((("in_proj_qkvz", "in_proj_qkvz"), ("in_proj_ba", "in_proj_ba"), ("conv", "conv1d"),
                         ("out_proj", "out_proj")), ("dt_bias", "A_log", "norm.weight"))


def qwen3_5(mixer: tuple = DELTANET_MIXER) -> Weights:
    """Qwen3_5ForCausalLM (Qwen3.5's text model): Llama's names for the attention layers (``blocks``, with QK-norms)
    and the MLPs, and Gated DeltaNet layers (``delta_blocks``) whose mixer is ``linear_attn`` with separate q k v, z,
    b and a projections (Qwen3-Next's: fused qkvz and ba, ``mixer``), each layer's norms input_layernorm and
    post_attention_layernorm; the MoE variants' layers are Qwen2-MoE's (experts, a shared expert and its gate) under
    the same names."""
    w = llama() | experts(shared="shared_expert", shared_gate="shared_expert_gate")
    w |= {"delta_" + k: r for k, r in w.items() if k.startswith("blocks.{i}.") and ".attn." not in k}
    w = {k.replace(".attn_norm.", ".mixer_norm.") if k.startswith("delta_") else k: r for k, r in w.items()}
    _mixer(w, "delta_blocks.{i}.mixer.", "model.layers.{i}.linear_attn.", mixer)
    return w


SHORT_CONV_MIXER = (("in_proj", "in_proj"), ("conv", "conv"), ("out_proj", "out_proj")), ()
SHORT_CONV = ("conv_blocks", "blocks")  # LFM2: short-convolution layers and attention layers in one list


def lfm2() -> Weights:
    """Lfm2ForCausalLM: short-convolution layers (``conv_blocks``, mixer ``conv``) and attention layers (``blocks``,
    ``self_attn`` with q_layernorm and k_layernorm and an out_proj) in one model.layers list, each with operator_norm
    before its mixer and ffn_norm before its SwiGLU feed_forward (w1 gate, w3 up, w2 down); the final norm is
    embedding_norm."""
    layer, w = "model.layers.{i}.", {"embed.token.weight": "model.embed_tokens.weight"}
    for stack, norm in zip(SHORT_CONV, ("mixer_norm", "attn_norm"), strict=True):
        ours = f"{stack}.{{i}}."
        w[f"{ours}{norm}.weight"] = layer + "operator_norm.weight"
        w[f"{ours}mlp_norm.weight"] = layer + "ffn_norm.weight"
        _gated(w, ours + "mlp.", layer + "feed_forward.", {"gate": "w1", "up": "w3", "down": "w2"})
    _mixer(w, "conv_blocks.{i}.mixer.", layer + "conv.", SHORT_CONV_MIXER)
    a = layer + "self_attn."
    _separate(w, "blocks.{i}.attn.", a, {"q": "q_proj", "k": "k_proj", "v": "v_proj", "out": "out_proj"})
    w["blocks.{i}.attn.q_norm.weight"], w["blocks.{i}.attn.k_norm.weight"] = a + "q_layernorm.weight", a + "k_layernorm.weight"
    w["final_norm.weight"] = "model.embedding_norm.weight"
    _pair(w, "head", "lm_head")
    return w


def afmoe() -> Weights:
    """AfmoeForCausalLM: Llama's names with four norms a layer (input_layernorm, post_attention_layernorm,
    pre_mlp_layernorm, post_mlp_layernorm), the MoE layers' ``router.gate``, stacked experts and ``shared_experts``.
    Its attention's output gate is a gate_proj of its own, which archcalc's gated query (each head's query, then its
    gate) interleaves head by head (``head_pairs``); the fused qkv has no name here."""
    norms = {"attn_norm": "input_layernorm", "attn_post_norm": "post_attention_layernorm",
             "mlp_norm": "pre_mlp_layernorm", "mlp_post_norm": "post_mlp_layernorm"}
    w = with_dense_stack(llama(norms=norms) | experts(shared="shared_experts"))
    w["blocks.{i}.mlp.router.weight"] = "model.layers.{i}.mlp.router.gate.weight"
    w["blocks.{i}.mlp.score_bias"] = "model.layers.{i}.mlp.expert_bias"
    a = "model.layers.{i}.self_attn."
    for stack in DENSE_MOE:
        w[f"{stack}.{{i}}.attn.q.weight"] = ("head_pairs", a + "q_proj.weight", a + "gate_proj.weight")
    return {k: r for k, r in w.items() if ".attn.q.bias" not in k and ".attn.qkv." not in k}


LONGCAT = ("blocks", "second_blocks")  # LongCat-Flash: each of transformers' layers is one of each, its halves 0 and 1


def longcat_flash() -> Weights:
    """LongcatFlashForCausalLM: layer i's two halves are ``blocks.{i}`` and ``second_blocks.{i}``, with ``self_attn.0``
    and ``.1`` (DeepSeek's latent attention names), ``input_layernorm`` and ``post_attention_layernorm`` ``.0`` and
    ``.1``, ``mlps.0`` and ``.1``; the first half's mixture is ``mlp`` (a ``router.classifier``, the experts stacked in
    gate_up_proj and down_proj, the zero experts' unused gate_up rows after the real ones'), whose shared expert is
    ``mlps.0``. Both halves share one layer index, so the names read each layer's number in its own stack ({n}), not its
    place in the interleaved order; the zero experts' gate_up rows are the entries after the real experts'
    (``expert_after`` the stack's config field ``blocks_experts``)."""
    layer, w, dsv3 = "model.layers.{n}.", {}, deepseek()
    for stack, half in zip(LONGCAT, "01", strict=True):
        for ours, theirs in dsv3.items():
            if ours.startswith("blocks.{i}.attn."):
                theirs = _renumbered(theirs)
                w[ours.replace("blocks", stack, 1)] = theirs.replace(".self_attn.", f".self_attn.{half}.")
        w[f"{stack}.{{i}}.attn_norm.weight"] = f"{layer}input_layernorm.{half}.weight"
        w[f"{stack}.{{i}}.mlp_norm.weight"] = f"{layer}post_attention_layernorm.{half}.weight"
    _gated(w, "second_blocks.{i}.mlp.", layer + "mlps.1.", suffixes=("weight",))
    w |= experts("blocks", mlp=layer + "mlp.")
    w["blocks.{i}.mlp.router.weight"] = layer + "mlp.router.classifier.weight"
    w["blocks.{i}.mlp.zero_experts.{e}.gate_up"] = ("expert_after", "blocks_experts", layer + "mlp.experts.gate_up_proj")
    _gated(w, "blocks.{i}.mlp.shared.", layer + "mlps.0.", suffixes=("weight",))
    w["embed.token.weight"], w["final_norm.weight"] = "model.embed_tokens.weight", "model.norm.weight"
    _pair(w, "head", "lm_head")
    return w


def _renumbered(recipe: Recipe) -> Recipe:
    """``recipe`` with transformers' layer numbered {n} (the layer's number in its own stack) instead of {i}."""
    if isinstance(recipe, str):
        return recipe.replace("model.layers.{i}.", "model.layers.{n}.")
    return tuple(_renumbered(r) if isinstance(r, (str, tuple)) else r for r in recipe)


LFM2_MOE = ("conv_blocks", "blocks", "convmoe_blocks", "moe_blocks")  # LFM2-MoE: LFM2's two kinds, dense or MoE


def lfm2_moe() -> Weights:
    """Lfm2MoeForCausalLM: LFM2's layers (:func:`lfm2`), those past num_dense_layers with a mixture of experts as their
    ``feed_forward`` (the router ``gate``, the experts stacked in gate_up_proj and down_proj) in the stacks
    ``convmoe_blocks`` and ``moe_blocks``; the experts' ``expert_bias`` is a buffer."""
    layer, w = "model.layers.{i}.", lfm2()
    for stack, dense in (("convmoe_blocks", "conv_blocks"), ("moe_blocks", "blocks")):
        shared = {k.replace(dense, stack, 1): r for k, r in w.items() if k.startswith(dense + ".") and ".mlp." not in k}
        w |= shared | experts(stack, mlp=layer + "feed_forward.")
    return w


PATTERN = ("mamba_blocks", "blocks", "mlp_blocks", "moe_blocks")  # Nemotron-H: a layer of each kind, M * - E


def nemotron_h() -> Weights:
    """NemotronHForCausalLM: one model.layers list whose layers are each a ``norm`` and a ``mixer``, that mixer a Mamba2
    layer (``mamba_blocks``, Mamba2Mixer's names), attention (``blocks``), a dense MLP (``mlp_blocks``: up_proj,
    down_proj) or a mixture of experts (``moe_blocks``: the router ``gate``, the experts stacked in one ``up_proj`` (E,
    d_ff, d) and one ``down_proj`` (E, d, d_ff), a ``shared_experts`` MLP); the embeddings are ``embeddings``, the
    final norm ``norm_f``."""
    layer, w = "model.layers.{i}.", {"embed.token.weight": "model.embeddings.weight"}
    m = layer + "mixer."
    for stack, norm in zip(PATTERN, ("mixer_norm", "attn_norm", "mlp_norm", "mlp_norm"), strict=True):
        w[f"{stack}.{{i}}.{norm}.weight"] = layer + "norm.weight"
    _mixer(w, "mamba_blocks.{i}.mixer.", m, MAMBA2_MIXER)
    _separate(w, "blocks.{i}.attn.", m, {"q": "q_proj", "k": "k_proj", "v": "v_proj", "out": "o_proj"})
    for ours, theirs in (("mlp_blocks.{i}.mlp.", m), ("moe_blocks.{i}.mlp.shared.", m + "shared_experts.")):
        _pair(w, ours + "up", theirs + "up_proj")
        _pair(w, ours + "down", theirs + "down_proj")
    e = "moe_blocks.{i}.mlp."
    w[e + "router.weight"] = m + "gate.weight"
    w[e + "experts.{e}.up.weight"] = ("expert", m + "experts.up_proj")
    w[e + "experts.{e}.down.weight"] = ("expert", m + "experts.down_proj")
    w["final_norm.weight"] = "model.norm_f.weight"
    w["head.weight"] = "lm_head.weight"
    return w



def granite_hybrid() -> Weights:
    """GraniteMoeHybridForCausalLM: Bamba's two stacks in one model.layers list, each layer with input_layernorm and
    post_attention_layernorm; the mixer ``mamba`` (Mamba2Mixer's names), the attention ``self_attn``; the experts
    under ``block_sparse_moe`` (a bias-free ``router``) and the shared MLP ``shared_mlp`` with gate and up fused in
    ``input_linear`` (gate rows first) and ``output_linear``, which is also the whole MLP of a dense layer."""
    layer, w = "model.layers.{i}.", {"embed.token.weight": "model.embed_tokens.weight"}
    shared = layer + "shared_mlp."
    fused = {"gate": ("half", 0, shared + "input_linear.weight"), "up": ("half", 1, shared + "input_linear.weight"),
             "gate_up": shared + "input_linear.weight", "down": shared + "output_linear.weight"}
    for stack, norm in zip(HYBRID, ("mixer_norm", "attn_norm"), strict=True):
        ours = f"{stack}.{{i}}."
        w[f"{ours}{norm}.weight"] = layer + "input_layernorm.weight"
        w[f"{ours}mlp_norm.weight"] = layer + "post_attention_layernorm.weight"
        w |= experts(stack, mlp=layer + "block_sparse_moe.")
        w[f"{ours}mlp.router.weight"] = layer + "block_sparse_moe.router.weight"
        for name, theirs in fused.items():
            w[f"{ours}mlp.shared.{name}.weight"] = w[f"{ours}mlp.{name}.weight"] = theirs
    _mixer(w, "mamba_blocks.{i}.mixer.", layer + "mamba.", MAMBA2_MIXER)
    _separate(w, "blocks.{i}.attn.", layer + "self_attn.", {"q": "q_proj", "k": "k_proj", "v": "v_proj", "out": "o_proj"})
    w["final_norm.weight"] = "model.norm.weight"
    _pair(w, "head", "lm_head")
    return w

_SCORE_BIAS = {f"{stack}.{{i}}.mlp.score_bias": "model.layers.{i}.mlp.gate.e_score_correction_bias" for stack in DENSE_MOE}
# xIELU's learnable scalars (parameters) and its beta and eps (buffers transformers saves) in the MLP's act_fn
_XIELU = {f"blocks.{{i}}.mlp.{name}": f"model.layers.{{i}}.mlp.act_fn.{name}" for name in ("alpha_p", "alpha_n")}
_XIELU_BUFFERS = {f"blocks.{{i}}.mlp.{name}": f"model.layers.{{i}}.mlp.act_fn.{name}" for name in ("beta", "eps")}
_T5_COPIES = (("encoder.embed_tokens.weight", "shared.weight"), ("decoder.embed_tokens.weight", "shared.weight"))

GEMMA4_STACKS = ("local_blocks", "blocks", "sharedlocal_blocks", "shared_blocks")  # one model.layers list
GEMMA4_MOE_NORMS = {"mlp_out_norm": "post_feedforward_layernorm_1", "moe_norm": "pre_feedforward_layernorm_2",
                    "moe_post_norm": "post_feedforward_layernorm_2"}  # beside the MLP (enable_moe_block)
GEMMA4_PER_LAYER = {"ple_gate": "per_layer_input_gate", "ple_proj": "per_layer_projection",
                    "ple_norm": "post_per_layer_input_norm"}


def gemma4() -> Weights:
    """Gemma4ForCausalLM: Gemma 2's names, for the sliding layers' ``local_blocks`` and the layers that reuse an earlier
    layer's keys and values (``sharedlocal_blocks``, ``shared_blocks``) too, listed in the same ``model.layers.{i}`` as
    the global ``blocks`` (where k_eq_v, without a v_proj; where kv_shared, without k and v: the map names only what
    there is); the per-layer input embeddings and each layer's gate, projection and norm of its per-layer input; the
    mixture of experts beside the MLP (its router, scales, experts and norms)."""
    w = llama(norms=SANDWICH)
    layer = "model.layers.{i}."
    w |= {f"blocks.{{i}}.{ours}.weight": f"{layer}{theirs}.weight" for ours, theirs in GEMMA4_PER_LAYER.items()}
    w |= {f"blocks.{{i}}.{ours}.weight": f"{layer}{theirs}.weight" for ours, theirs in GEMMA4_MOE_NORMS.items()}
    gate_up = ("expert", layer + "experts.gate_up_proj")  # (E, 2 x d_moe, d): gate rows, then up rows
    w |= {"blocks.{i}.moe.router.weight": layer + "router.proj.weight", "blocks.{i}.moe.router_scale": layer + "router.scale",
          "blocks.{i}.moe.expert_scale": layer + "router.per_expert_scale", "blocks.{i}.moe.experts.{e}.gate_up.weight": gate_up,
          "blocks.{i}.moe.experts.{e}.gate.weight": ("half", 0, gate_up), "blocks.{i}.moe.experts.{e}.up.weight": ("half", 1, gate_up),
          "blocks.{i}.moe.experts.{e}.down.weight": ("expert", layer + "experts.down_proj")}
    w |= {"embed.per_layer.weight": "model.embed_tokens_per_layer.weight",
          "embed.per_layer_proj.weight": "model.per_layer_model_projection.weight",
          "embed.per_layer_norm.weight": "model.per_layer_projection_norm.weight"}
    layers = {k: r for k, r in w.items() if k.startswith("blocks.{i}.")}
    others = [stack for stack in GEMMA4_STACKS if stack != "blocks"]
    return w | {f"{stack}.{k[len('blocks.'):]}": r for stack in others for k, r in layers.items()}


#: The named layouts (a spec's ``hf.weights``), each named after the model type it was written for.
LAYOUTS: dict[str, Layout] = {
    "llama": Layout(llama()),
    "olmo2": Layout(llama(norms=REORDERED)),
    "gemma2": Layout(llama(norms=SANDWICH)),
    "gemma4": Layout(gemma4(), stacks=GEMMA4_STACKS,
                     buffers={f"{stack}.{{i}}.layer_scalar": "model.layers.{i}.layer_scalar" for stack in GEMMA4_STACKS}),
    "phi3": Layout(phi3()),
    "cohere": Layout(cohere()),
    "apertus": Layout(llama(norms={"attn_norm": "attention_layernorm", "mlp_norm": "feedforward_layernorm"}) | _XIELU,
                      buffers=_XIELU_BUFFERS),
    "mixtral": Layout(llama() | experts()),
    "qwen2_moe": Layout(with_dense_stack(llama() | experts(shared="shared_expert", shared_gate="shared_expert_gate")), stacks=DENSE_MOE),
    "qwen3_moe": Layout(with_dense_stack(llama() | experts()), stacks=DENSE_MOE),
    "granitemoe": Layout(granite_moe()),
    "gpt_oss": Layout(gpt_oss()),
    "llama4_text": Layout(llama4(), stacks=DENSE_MOE),
    "deepseek_v2": Layout(deepseek(), stacks=DENSE_MOE),
    "deepseek_v3": Layout(deepseek(), stacks=DENSE_MOE, buffers=_SCORE_BIAS),
    "deepseek_v32": Layout(deepseek_sparse(), stacks=DSA_STACKS, buffers=_SCORE_BIAS | {
        "shared_blocks.{i}.mlp.score_bias": _SCORE_BIAS["blocks.{i}.mlp.score_bias"]}),
    "minimax_m2": Layout(llama() | experts(), buffers={"blocks.{i}.mlp.score_bias": "model.layers.{i}.mlp.e_score_correction_bias"}),
    "ernie4_5_moe": Layout(with_dense_stack(llama() | experts(shared="shared_experts")) | {
        "blocks.{i}.mlp.score_bias": "model.layers.{i}.mlp.gate.moe_statics.e_score_correction_bias"}, stacks=DENSE_MOE),
    "glm4_moe": Layout(with_dense_stack(llama() | experts(shared="shared_experts")), stacks=DENSE_MOE, buffers=_SCORE_BIAS),
    "stablelm": Layout(stablelm()),
    "starcoder2": Layout(starcoder2()),
    "phi": Layout(phi()),
    "opt": Layout(opt()),
    "gpt2": Layout(gpt2()),
    "gpt_bigcode": Layout(gpt_bigcode()),
    "gpt_neox": Layout(gpt_neox()),
    "gptj": Layout(gptj()),
    "falcon": Layout(falcon()),
    "bloom": Layout(bloom()),
    "mpt": Layout(mpt()),
    "bert": Layout(bert()),
    "t5": Layout(t5(), copies=_T5_COPIES),
    "mamba2": Layout(mamba2()),
    "mamba": Layout(mamba()),
    "bamba": Layout(bamba(), stacks=HYBRID),
    "falcon_h1": Layout(falcon_h1()),
    "jamba": Layout(jamba(), stacks=JAMBA),
    "qwen3_5": Layout(qwen3_5(), stacks=LINEAR_ATTENTION),
    "qwen3_next": Layout(qwen3_5(DELTANET_FUSED_MIXER), stacks=LINEAR_ATTENTION),
    "lfm2": Layout(lfm2(), stacks=SHORT_CONV),
    "longcat_flash": Layout(longcat_flash(), stacks=LONGCAT, buffers={
        "blocks.{i}.mlp.score_bias": "model.layers.{n}.mlp.router.e_score_correction_bias"}),
    "afmoe": Layout(afmoe(), stacks=DENSE_MOE),
    "lfm2_moe": Layout(lfm2_moe(), stacks=LFM2_MOE, buffers={
        f"{stack}.{{i}}.mlp.score_bias": "model.layers.{i}.feed_forward.expert_bias" for stack in LFM2_MOE[2:]}),
    "granitemoehybrid": Layout(granite_hybrid(), stacks=HYBRID),
    "zamba2": Layout(zamba2(), stacks=ZAMBA2),
    "nemotron_h": Layout(nemotron_h(), stacks=PATTERN,
                         buffers={"moe_blocks.{i}.mlp.score_bias": "model.layers.{i}.mixer.gate.e_score_correction_bias"}),
}

