"""The ``model:`` section of a spec: components described as data, one schema for every family.

Each class is a frozen pydantic model; strings such as ``"layernorm"`` name behaviour that the
backends (count, FLOPs, codegen) resolve, so a spec stays plain serialisable data. The schema
covers decoder-only, encoder-only and encoder-decoder models; learned, sinusoidal, rotary and
relative-bias positions; LayerNorm and RMSNorm; dense, gated and mixture-of-experts MLPs;
MHA/GQA/MQA and multi-head latent attention, QK-norm, sinks, sliding windows and layer patterns.

>>> Norm.model_validate("rmsnorm").kind
'rmsnorm'
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import Field, PlainValidator, StrictBool, model_validator

from archcalc.spec.fields import BoolExpr, Factor, FieldError, IntExpr, PositiveReal, Real, Strict, constant, shorthand
from archcalc.spec.positions import Position
from archcalc.spec.positions import RopeScaling as RopeScaling  # re-exported: archcalc.spec.schema imports it from here


class Norm(Strict):
    """A normalisation layer: ``layernorm`` (weight and, unless ``bias: false``, bias) or ``rmsnorm`` (weight)."""

    kind: Literal["layernorm", "rmsnorm"]
    bias: BoolExpr | None = None
    eps: PositiveReal = 1e-5  # x / sqrt(var + eps): zero or below divides by zero or takes a negative root
    unit_offset: StrictBool = False  # scale by (1 + weight), as Gemma does; the parameter count is the same

    @classmethod
    def _preprocess(cls, data: Any, info: Any) -> Any:
        return shorthand(data)

    @model_validator(mode="after")
    def _rms_has_no_bias(self) -> Norm:
        if self.kind == "rmsnorm" and self.bias is not None and self.bias.text != "false":
            raise FieldError("rmsnorm has no bias; drop 'bias' or use layernorm", sub=("bias",))
        return self


class Init(Strict):
    """How a freshly built module's weights start (the generated ``reset_parameters``); no effect on any count.

    - ``normal``: matrices and embeddings normal(0, ``std``), biases zero, norm weights one (zero for (1 + w) norms),
      as transformers' ``_init_weights`` does with ``initializer_range`` = ``std``; ``scaled_residual``: the projections
      that add into the residual stream (attention's ``out``, the MLP's ``down``) get ``std / sqrt(2 * layers)``
      (GPT-2, nanoGPT);
    - ``t5``: T5's per-matrix scales with ``std`` as transformers' ``initializer_factor``;
    - ``xavier``: Xavier-uniform matrices, normal(0, width**-0.5) embeddings (fairseq's Transformer).
    """

    scheme: Literal["normal", "t5", "xavier"] = "normal"
    std: Real = 0.02
    scaled_residual: StrictBool = False
    # a Mamba2 mixer's own: Mamba2's (step sizes log-uniform in [0.001, 0.1], conv and out_proj PyTorch's default,
    # conv bias zero) or plain (Bamba's: dt_bias one, the conv and out_proj normal(0, std) like every layer); a Mamba
    # mixer's: Mamba's (dt_proj uniform, its bias from log-uniform step sizes) or plain (Jamba's: the conv, dt_proj and
    # out_proj normal(0, std), their biases zero)
    # or, a Mamba2 mixer's, rescaled (Nemotron-H's: Mamba2's step sizes, the conv normal(0, std) like every layer and
    # out_proj PyTorch's default divided by sqrt(layers), transformers' rescale_prenorm_residual)
    mixer: Literal["mamba", "plain", "rescaled"] = "mamba"


class PerLayerEmbedding(Strict):
    """Gemma 4's per-layer input embeddings: ``embed_tokens_per_layer`` (``vocab`` x layers·``width``, scaled by
    sqrt(width)), ``per_layer_model_projection`` (d -> layers·``width``) and ``per_layer_projection_norm`` (an RMSNorm
    of ``width``); width 0: none, as transformers builds them only for a hidden_size_per_layer_input."""

    vocab: IntExpr
    width: IntExpr


class Embedding(Strict):
    """Token (and optionally position and token-type) embeddings of width ``width``."""

    vocab: IntExpr
    width: IntExpr
    # the token table's width where it differs from the model's: a bias-free projection up after the lookup and one
    # down before the head (OPT-350m's project_in and project_out); none where the two widths are equal
    token_width: IntExpr | None = None
    position: Position = Position()
    token_types: IntExpr | None = None  # BERT's segment embeddings
    norm: Norm | None = None  # BERT normalises the summed embeddings
    scale: StrictBool = False  # multiply by sqrt(width), as Gemma and the 2017 Transformer do
    multiplier: Factor | None = None  # multiply the token embeddings by this (Granite's embedding_multiplier)
    # Gemma 4's per-layer input embeddings (PLE): a second table of ``vocab`` rows, ``width`` features per layer, and a
    # projection of the embeddings to the same; each layer with ``per_layer_input`` adds its slice (none: width 0)
    per_layer: PerLayerEmbedding | None = None


class QueryTemperature(Strict):
    """Llama 4's attention temperature: the queries at position p multiplied by 1 + scale * log(1 + floor((p + 1) / floor))
    (transformers' attn_temperature_tuning with floor_scale and attn_scale); no parameters. ``offset`` 0 and
    ``every_layer``: Mistral 3's and 4's (llama_4_scaling_beta), floor(p / floor) on every layer after the rotation."""

    floor: PositiveReal
    scale: PositiveReal
    offset: Literal[0, 1] = 1  # added to the position before dividing: Llama 4 counts from 1, Mistral from 0
    every_layer: StrictBool = False  # false: the layers without rotary positions only (Llama 4)


class Indexer(Strict):
    """DeepSeek Sparse Attention's lightning indexer (DeepSeek-V3.2, GLM-5) on latent attention: ``heads`` queries of
    ``head_width`` from the query latent (wq_b), one key per token (wk, then a LayerNorm with bias, eps 1e-6), a weight
    per head (weights_proj); the first rope_width features of its queries and key rotate (``pairing``: half, or
    deinterleaved as the main attention's). Each query's ``top_k`` best earlier tokens (by Σ_h w_h·relu(q_h·k)) are the
    only keys the attention reads. ``shared``: the stack's layers own no indexer and reuse the previous layer's
    selection (GLM-5's ``shared`` indexer type)."""

    heads: IntExpr
    head_width: IntExpr
    top_k: IntExpr
    pairing: Literal["half", "deinterleaved"] = "half"
    shared: BoolExpr | None = None


class Attention(Strict):
    """Self- or cross-attention. ``kv_heads`` < ``heads`` is GQA (1 is MQA); ``kind: latent`` is MLA."""

    kind: Literal["standard", "latent"] = "standard"
    heads: IntExpr
    kv_heads: IntExpr | None = None  # default: heads (multi-head attention)
    head_width: IntExpr  # query/key width of one head (latent: the part without rotary)
    value_width: IntExpr | None = None  # default: head_width
    qkv_bias: BoolExpr | None = None
    out_bias: BoolExpr | None = None
    layout: Literal["fused", "separate"] = "fused"  # one qkv projection, or q, k, v
    qk_norm: Norm | None = None
    # norm over one head's width (weights shared by the heads), over all heads at once, or over each head's width with
    # weights of its own per head (each_head: StableLM's per-head LayerNorms)
    qk_norm_scope: Literal["head", "all", "each_head"] = "head"
    qk_norm_on: BoolExpr | None = None  # a switch per size: false drops qk_norm (StableLM 2 12B has it, 1.6B not)
    sinks: BoolExpr | None = None  # a learned sink logit per head (gpt-oss)
    # an output gate (Qwen3-Next, Qwen3.5): the query projection also yields a gate per head (its rows head by head:
    # the head's query, then its gate), and each head's output is multiplied by sigmoid(gate) before the output projection
    output_gate: BoolExpr | None = None
    window: IntExpr | None = None  # sliding-window / band width for 'local' layers
    # repeats over the layers; default all global. chunked: a token sees the tokens before it in its own block of `chunk`
    pattern: list[Literal["global", "local", "chunked"]] | None = None
    chunk: IntExpr | None = None  # tokens per block of the 'chunked' layers (Llama 4's attention_chunk_size)
    rotary_pattern: list[StrictBool] | None = None  # repeats over the layers; false: no rotary positions there (NoPE)
    # queries and keys divided by their root mean square (no weights; this epsilon) after the rotary positions, on the
    # layers with rotary positions only (Llama 4's use_qk_norm)
    rotary_qk_norm: PositiveReal | None = None
    temperature: QueryTemperature | None = None  # queries scaled by position (on the layers without rotary positions)
    softcap: PositiveReal | None = None  # cap * tanh(x / cap): zero divides by zero, below zero flips the sign
    scale: Factor | None = None  # score scale (a number or an expression: 1 / d_head); default 1/sqrt(head_width)
    scale_width: IntExpr | None = None  # scores divided by sqrt(this) instead of sqrt(head_width) (query_pre_attn_scalar)
    q_rank: IntExpr | None = None  # latent: query compression rank (none: no compression)
    kv_rank: IntExpr | None = None  # latent: key/value compression rank
    rope_width: IntExpr | None = None  # latent: rotary part of each query/key head
    # latent: the query (after q_up) times sqrt(width / q_rank) and the normed key/value latent times
    # sqrt(width / kv_rank) (LongCat-Flash's mla_scale_q_lora and mla_scale_kv_lora; no parameters)
    rank_scale: BoolExpr | None = None
    # μP-style multipliers (Falcon-H1's; no parameters): the attention's input times in_multiplier and its output
    # times out_multiplier (in a block with a mixer beside it), the keys times key_multiplier (a factor on every score:
    # folded into the score scale)
    in_multiplier: Factor | None = None
    out_multiplier: Factor | None = None
    key_multiplier: Factor | None = None
    indexer: Indexer | None = None  # latent with q_rank: DeepSeek Sparse Attention (top-k keys chosen by an indexer)
    # Gemma 4's: the values are the keys (no value projection: attention_k_eq_v on its global layers); a weightless RMS
    # norm of each value head with this epsilon (v_norm); the keys and values of an earlier layer of the same kind
    # reused (kv_shared: no key/value projections, no key norm, no cache of its own: num_kv_shared_layers)
    k_eq_v: BoolExpr | None = None
    value_norm: PositiveReal | None = None
    kv_shared: BoolExpr | None = None

    @model_validator(mode="after")
    def _consistent(self) -> Attention:
        if self.indexer is not None and (self.kind != "latent" or self.q_rank is None):
            raise FieldError("an indexer needs latent attention with a query compression (q_rank): it reads the query "
                             "latent", sub=("indexer",), key=True)
        if self.kind == "latent" and (self.kv_rank is None or self.rope_width is None):
            raise FieldError("latent attention needs 'kv_rank' and 'rope_width'")
        if self.kind == "standard" and any(v is not None for v in (self.q_rank, self.kv_rank, self.rope_width, self.rank_scale)):
            raise FieldError("q_rank, kv_rank, rope_width and rank_scale only apply to 'kind: latent'")
        if self.pattern is not None and "local" in self.pattern and self.window is None:
            raise FieldError("a pattern with 'local' layers needs 'window'", sub=("pattern",))
        if self.pattern is not None and "chunked" in self.pattern and self.chunk is None:
            raise FieldError("a pattern with 'chunked' layers needs 'chunk'", sub=("pattern",))
        if self.pattern is not None and not self.pattern:
            raise FieldError("pattern must list at least one of 'global', 'local'", sub=("pattern",))
        if self.scale is not None and self.scale_width is not None:
            raise FieldError("give one of 'scale' (the score scale) and 'scale_width' (scores divided by its square root)",
                             sub=("scale_width",))
        if self.output_gate is not None and (self.kind == "latent" or self.layout == "fused"):
            raise FieldError("output_gate needs standard attention with 'layout: separate' (the gate rides on q's "
                             "projection)", sub=("output_gate",), key=True)
        if self.rotary_pattern is not None and not self.rotary_pattern:
            raise FieldError("rotary_pattern must list at least one layer (true: rotary positions, false: none)",
                             sub=("rotary_pattern",))
        window = constant(self.window)
        if window is not None and (window < 1 or window.denominator != 1):
            raise FieldError(f"window = {self.window}; expected a positive whole number of tokens", sub=("window",))
        return self


# relu2: squared ReLU, relu(x)² (Nemotron-H's relu2, Primer's); xielu: xIELU (Huang et al. 2024, Apertus), with two
# learnable scalars per MLP (alpha_p, alpha_n: their own tensors)
Activation = Literal["gelu", "gelu_tanh", "relu", "relu2", "silu", "swiglu_clamped", "xielu"]


class MLP(Strict):
    """``dense`` (up, act, down), ``gated`` (act(gate)·up, down: SwiGLU/GeGLU) or ``moe`` (router + experts)."""

    kind: Literal["dense", "gated", "moe"]
    hidden: IntExpr  # hidden width (moe: of one expert)
    activation: Activation = "gelu"
    bias: BoolExpr | None = None
    layout: Literal["fused", "separate"] = "separate"  # gated: one gate_up projection, or gate and up
    experts: IntExpr | None = None
    top_k: IntExpr | None = None
    expert_kind: Literal["dense", "gated"] = "gated"
    router_bias: BoolExpr | None = None
    shared_experts: IntExpr | None = None  # always-on experts beside the routed ones
    shared_hidden: IntExpr | None = None  # hidden width of all shared experts together (default: count x hidden)
    shared_gate: BoolExpr | None = None  # a sigmoid gate on the shared expert (Qwen-MoE)
    clamp: PositiveReal | None = None  # swiglu_clamped limit (gpt-oss: 7.0)
    # gated: the gate's output times gate_multiplier before its activation, the down projection's output times
    # down_multiplier (Falcon-H1's mlp_multipliers; no parameters)
    gate_multiplier: Factor | None = None
    down_multiplier: Factor | None = None
    # routing (no parameters; the generated module needs them): default softmax over the chosen experts' logits
    scoring: Literal["softmax", "sigmoid"] | None = None  # sigmoid: DeepSeek-V3's per-expert sigmoid scores
    groups: IntExpr | None = None  # experts form this many groups (DeepSeek-V3's n_group); default one
    group_top_k: IntExpr | None = None  # tokens pick experts from their best groups only (topk_group)
    # what ranks a group: the sum of its two best scores (DeepSeek-V3, the default) or its best one (DeepSeek-V2)
    group_score: Literal["top2_sum", "max"] | None = None
    # rescale the chosen weights to sum to 1 (norm_topk_prob); default true (softmax: Mixtral's softmax over the
    # chosen logits); false: the chosen experts' shares of a softmax over all experts (Qwen-MoE, OLMoE, DeepSeek-V2)
    normalize: StrictBool | None = None
    routed_scale: PositiveReal | None = None  # the routed experts' mixing weights are multiplied by this (routed_scaling_factor)
    # the weights scale each chosen expert's input, not its output (Llama 4: sigmoid of the chosen logits, top_k 1)
    weigh_input: StrictBool | None = None
    # softmax: a learned per-expert bias (a parameter of 1 x experts, counted: ERNIE 4.5's moe_statics) added to the
    # experts' shares to choose them, not to weigh them; sigmoid scoring keeps its own as a buffer, or with this as a
    # parameter of experts, counted (AFMoE's expert_bias; not generated yet)
    score_bias: StrictBool | None = None
    # zero-compute experts (LongCat-Flash's zero_expert_num): the router scores experts + zero_experts; a token's slot
    # routed to one adds its input times the weight (no parameters, no matmul FLOPs); zero_gate_up: transformers
    # allocates the gate_up rows of the zero experts too (never used, counted as it builds them)
    zero_experts: IntExpr | None = None
    zero_gate_up: StrictBool | None = None
    # with zero_experts: how many of a token's top_k slots land on real experts (the router decides per token; the
    # active parameters and the FLOPs count this many)
    real_top_k: IntExpr | None = None
    # the experts' output joins the residual after the block's next sublayer (LongCat-Flash's shortcut-connected MoE);
    # counted as here (the same parameters and FLOPs), not generated yet
    shortcut: StrictBool | None = None

    @model_validator(mode="after")
    def _moe_fields(self) -> MLP:
        moe_only = ("experts", "top_k", "router_bias", "shared_experts", "shared_hidden", "shared_gate",
                    "scoring", "groups", "group_top_k", "group_score", "normalize", "routed_scale", "weigh_input",
                    "score_bias", "zero_experts", "zero_gate_up", "real_top_k", "shortcut")
        if (self.groups is None) != (self.group_top_k is None):
            raise FieldError("group-limited routing needs both 'groups' and 'group_top_k'",
                             sub=("groups" if self.groups is None else "group_top_k",))
        if self.kind == "moe" and (self.experts is None or self.top_k is None):
            raise FieldError("a mixture of experts needs 'experts' and 'top_k'")
        if self.kind != "moe":
            for name in moe_only:
                if getattr(self, name) is not None:
                    raise FieldError(f"{name!r} only applies to 'kind: moe'", sub=(name,), key=True)
        return self


class Mixer(Strict):
    """A token mixer with a fixed-size recurrent state in place of attention's growing KV cache: a state-space or
    linear-attention layer, or a short convolution.

    - ``mamba`` (Mamba1's selective scan, as transformers' MambaMixer): ``in_proj`` d -> 2·inner, a depthwise causal
      conv1d of ``conv`` taps over the inner channels, ``x_proj`` inner -> dt_rank + 2·state (no bias), ``dt_proj``
      dt_rank -> inner (with bias), ``A_log`` (inner x state), ``D`` (inner), ``out_proj`` inner -> d;
      ``dt_bc_norm``: FalconMamba's weightless RMS norms of x_proj's three outputs, with that epsilon;
      ``dt_bc_norm_weights: true`` gives those norms weights (Jamba's dt_layernorm, b_layernorm, c_layernorm:
      dt_rank, state and state parameters, role norm), which scale the normed values.
    - ``mamba2`` (SSD, as Mamba2Mixer): ``in_proj`` d -> 2·inner + 2·groups·state + heads, the conv over the inner +
      2·groups·state channels, ``dt_bias``, ``A_log`` and ``D`` (one per head), a gated RMSNorm over inner, ``out_proj``
      inner -> d; each of the ``heads`` is inner / heads wide.
    - ``gated_deltanet`` (Qwen3-Next's and Qwen3.5's linear attention, as Qwen3NextGatedDeltaNet): ``heads`` value
      heads of ``value_width``, ``key_heads`` query/key heads (default: heads) of ``key_width``; ``in_proj_qkv`` d ->
      2·key_heads·key_width + heads·value_width, ``in_proj_z`` d -> heads·value_width, ``in_proj_b`` and ``in_proj_a``
      d -> heads, the conv over q, k and v, ``dt_bias`` and ``A_log`` (one per value head), a gated RMSNorm over
      value_width, ``out_proj`` heads·value_width -> d; ``layout: fused`` has Qwen3-Next's ``in_proj_qkvz`` and
      ``in_proj_ba`` instead, their rows key head by key head (the same parameters).
    - ``short_conv`` (LFM2's gated short convolution, as Lfm2ShortConv): ``in_proj`` d -> 3·d, the conv over d
      channels, ``out_proj`` d -> d.

    ``bias``: the in and out projections' (transformers' use_bias, default false); ``conv_bias``: the conv's
    (use_conv_bias; default true for mamba and mamba2, false for the others); ``chunk``: the chunk size of the chunked
    form (mamba2, gated_deltanet; no parameters).

    Falcon-H1's Mamba2 (mamba2 only): ``out_bias`` the out projection's bias where it differs from ``bias`` (the in
    projection's: mamba_proj_bias; out: projectors_bias); ``gated_norm: false``: no gated RMSNorm (no parameters), the
    scan's output times silu(z) alone (mamba_rms_norm); ``norm_before_gate: true``: normalise, then gate
    (mamba_norm_before_gate; Mamba2's default gates first); ``in_proj_multipliers``: five factors on in_proj's outputs,
    z, x, B, C and dt (ssm_multipliers: transformers' fixed ``mup_vector`` buffer, no parameter). Any mixer kind:
    ``in_multiplier`` and ``out_multiplier`` scale the mixer's input and output in a block with attention beside it
    (ssm_in_multiplier, ssm_out_multiplier; no parameters)."""

    kind: Literal["mamba", "mamba2", "gated_deltanet", "short_conv"]
    conv: IntExpr  # conv kernel taps (conv_kernel, linear_conv_kernel_dim, conv_L_cache)
    inner: IntExpr | None = None  # mamba, mamba2: intermediate width (transformers: expand x hidden_size)
    state: IntExpr | None = None  # mamba, mamba2: state size per channel (mamba) or per head and group (mamba2)
    dt_rank: IntExpr | None = None  # mamba: time_step_rank
    heads: IntExpr | None = None  # mamba2: num_heads; gated_deltanet: value heads (linear_num_value_heads)
    groups: IntExpr | None = None  # mamba2: n_groups (default 1)
    key_heads: IntExpr | None = None  # gated_deltanet: linear_num_key_heads (default: heads)
    key_width: IntExpr | None = None  # gated_deltanet: linear_key_head_dim
    value_width: IntExpr | None = None  # gated_deltanet: linear_value_head_dim
    chunk: IntExpr | None = None  # mamba2: chunk_size; gated_deltanet: 64 unless given
    # mamba: weightless RMS norms of the step sizes' input, B and C with this epsilon (FalconMamba's mixer_rms_eps)
    dt_bc_norm: PositiveReal | None = None
    # mamba2: the chunked scan of a whole sequence (a prompt) clamps each step size to at least this, as mamba_ssm's
    # chunked kernel does with dt_limit (Nemotron-H's time_step_min); a one-token step does not clamp, as there
    dt_min: PositiveReal | None = None
    # mamba2: the gated norm's epsilon where it is not the block norm's (Zamba2's: 1e-5 whatever rms_norm_eps says)
    norm_eps: PositiveReal | None = None
    # mamba, with dt_bc_norm: those norms have weights (Jamba's dt_layernorm, b_layernorm and c_layernorm)
    dt_bc_norm_weights: StrictBool | None = None
    # gated_deltanet: separate in_proj_qkv, in_proj_z, in_proj_b, in_proj_a (Qwen3.5), or fused in_proj_qkvz and
    # in_proj_ba whose rows go key head by key head (Qwen3-Next): the same parameters
    layout: Literal["fused", "separate"] | None = None
    bias: BoolExpr | None = None
    conv_bias: BoolExpr | None = None
    out_bias: BoolExpr | None = None  # mamba2: the out projection's, where it differs from ``bias`` (default: bias)
    gated_norm: BoolExpr | None = None  # mamba2: false drops the gated RMSNorm (default true)
    norm_before_gate: StrictBool | None = None  # mamba2: normalise, then gate (default false: gate, then normalise)
    in_proj_multipliers: list[Factor] | None = None  # mamba2: z, x, B, C and dt times these five
    in_multiplier: Factor | None = None  # the mixer's input times this (beside attention)
    out_multiplier: Factor | None = None  # the mixer's output times this (beside attention)

    @model_validator(mode="after")
    def _kind_fields(self) -> Mixer:
        needed = {"mamba": ("inner", "state", "dt_rank"), "mamba2": ("inner", "state", "heads"),
                  "gated_deltanet": ("heads", "key_width", "value_width"), "short_conv": ()}
        falcon_h1 = ("out_bias", "gated_norm", "norm_before_gate", "in_proj_multipliers")
        allowed = {"mamba": needed["mamba"] + ("dt_bc_norm", "dt_bc_norm_weights"),
                   "mamba2": needed["mamba2"] + ("groups", "chunk", "dt_min") + falcon_h1,
                   "gated_deltanet": needed["gated_deltanet"] + ("key_heads", "chunk", "layout"), "short_conv": ()}
        for name in needed[self.kind]:
            if getattr(self, name) is None:
                raise FieldError(f"a {self.kind} mixer needs {name!r}")
        for name in sorted({n for names in allowed.values() for n in names} - set(allowed[self.kind])):
            if getattr(self, name) is not None:
                kinds = " or ".join(f"'kind: {k}'" for k, names in allowed.items() if name in names)
                raise FieldError(f"{name!r} only applies to {kinds}", sub=(name,), key=True)
        if self.in_proj_multipliers is not None and len(self.in_proj_multipliers) != 5:
            raise FieldError(f"in_proj_multipliers lists {len(self.in_proj_multipliers)} factors; expected five: z, x, B, "
                             "C and dt", sub=("in_proj_multipliers",))
        if self.dt_bc_norm_weights and self.dt_bc_norm is None:
            raise FieldError("'dt_bc_norm_weights' gives weights to the norms of dt, B and C: it needs their epsilon, "
                             "'dt_bc_norm'", sub=("dt_bc_norm_weights",), key=True)
        return self


class Shared(Strict):
    """Zamba2's shared transformer block, run at the start of each layer of a mixer stack: norm(concat(x, embeddings))
    (width 2·d) -> ``attention`` (its projections read 2·d, its output d) -> norm -> ``mlp``, with no residual of its
    own; ``proj`` (d -> d, each layer its own) takes the result into the layer, whose mixer reads norm(x + proj(...)).
    ``copies`` distinct blocks serve the layers in turn (num_mem_blocks; their weights counted once each); each layer
    owns low-rank adapters (``adapter_rank``) beside the MLP's gate/up projection and, with ``attention_adapters``,
    beside the query, key and value projections (use_shared_attention_adapter)."""

    copies: IntExpr
    attention: Attention
    mlp: MLP
    adapter_rank: IntExpr
    attention_adapters: BoolExpr | None = None
    # the sets of adapters the model holds (default: one a layer); transformers 5 with untied embeddings ties no shared
    # block, so each layer's copy holds every adapter of its block's layers: Σ over blocks of (its layers)²
    adapter_copies: IntExpr | None = None


def _stack_name(value: Any) -> str:
    """Stack names become attributes of the generated module: ``blocks`` or ``<word>_blocks`` only."""
    if not isinstance(value, str) or not STACK_NAME.fullmatch(value):
        raise FieldError(f"stack name must be 'blocks' or end in '_blocks' (lowercase letters, digits, '_'), got {value!r:.40}")
    return value


STACK_NAME = re.compile(r"([a-z][a-z0-9]{0,15}_)?blocks", re.ASCII)  # fullmatch: "$" would allow "blocks\n"
StackName = Annotated[str, PlainValidator(_stack_name)]


class Block(Strict):
    """A stack of ``repeat`` identical blocks (a transformer layer each).

    ``attention`` and ``mixer`` both (pre-norm only): they run side by side on one normed input and both outputs add
    to the residual, x + attn(norm(x)) + mixer(norm(x)), then the MLP, x + mlp(norm(x)) (Falcon-H1's parallel hybrid
    layer; each keeps its own cache: keys and values, and the mixer's state)."""

    name: StackName = "blocks"
    repeat: IntExpr
    residual: Literal["pre-norm", "post-norm", "parallel", "sandwich", "reordered"] = "pre-norm"
    norm: Norm
    parallel_norms: Literal[1, 2] = 1  # parallel blocks: one shared norm (GPT-J) or one each (NeoX)
    parallel: BoolExpr | None = None  # a switch per size: true makes the block parallel, false keeps `residual` (StableLM)
    residual_multiplier: Factor | None = None  # each branch's output is multiplied by this before it is added (Granite)
    attention: Attention | None = None  # a layer mixes tokens by attention or by a mixer (a state-space layer)
    mixer: Mixer | None = None
    cross_attention: Attention | None = None  # decoders of encoder-decoder models
    mlp: MLP | None = None  # none: a layer without an MLP (Mamba's)
    # Gemma 4's: the layer's slice of the per-layer input embeddings (embedding.per_layer) enters after the MLP, through
    # a gate d -> width, its activation times the slice, a projection back and an RMSNorm (0 or none: no such input)
    per_layer_input: IntExpr | None = None
    # Gemma 4's: a mixture of experts beside the dense MLP (enable_moe_block), each behind norms of its own
    moe_beside: MLP | None = None
    # Zamba2's: a shared transformer block that runs before the mixer, its output projected into the layer (mixer only)
    shared: Shared | None = None

    @model_validator(mode="after")
    def _sublayers(self) -> Block:
        if self.attention is not None and self.mixer is not None and self.residual != "pre-norm":
            raise FieldError(f"a block with attention and a mixer side by side is pre-norm (x + attn(norm(x)) + "
                             f"mixer(norm(x))), not {self.residual}", sub=("residual",))
        if self.attention is not None and self.mixer is not None and self.cross_attention is not None:
            raise FieldError("cross_attention beside a mixer is not modelled", sub=("cross_attention",), key=True)
        if self.attention is None and self.mixer is None and self.mlp is None:
            raise FieldError("a block needs 'attention', 'mixer' or 'mlp'")
        if self.shared is not None and (self.mixer is None or self.attention is not None or self.mlp is not None):
            raise FieldError("a shared block runs before a mixer: the block needs 'mixer' and no 'attention' or 'mlp' of "
                             "its own", sub=("shared",), key=True)
        if self.residual != "pre-norm" and (self.attention is None or self.mlp is None):
            raise FieldError(f"a {self.residual} block needs both 'attention' and 'mlp'; blocks with a mixer or without "
                             "one of them are pre-norm", sub=("residual",))
        if self.cross_attention is not None and self.attention is None:
            raise FieldError("cross_attention needs 'attention' in the same block", sub=("cross_attention",), key=True)
        return self


class Head(Strict):
    """The output projection to the vocabulary; ``tied`` reuses the token embedding matrix."""

    tied: BoolExpr | None = None
    bias: BoolExpr | None = None
    softcap: PositiveReal | None = None
    scale_input: StrictBool = False  # multiply the final hidden state by width**-0.5 before the head (T5 v1.0); no parameters
    multiplier: Factor | None = None  # multiply the logits by this (Cohere's logit_scale; Granite's 1 / logits_scaling)


class Tower(Strict):
    """The encoder or the decoder of an encoder-decoder model."""

    block: Block | None = None
    blocks: list[Block] | None = None
    final_norm: Norm | None = None

    @model_validator(mode="after")
    def _one_of(self) -> Tower:
        return _check_stacks(self)

    def stacks(self) -> list[Block]:
        return [self.block] if self.block is not None else list(self.blocks or [])


def _check_stacks(obj: Any) -> Any:
    if (obj.block is None) == (obj.blocks is None):
        raise FieldError("give exactly one of 'block' (one stack) or 'blocks' (a list of stacks)")
    names = [b.name for b in obj.stacks()]
    if len(set(names)) != len(names):
        raise FieldError(f"stacks need distinct names, got {names}", sub=("blocks",))
    return obj


class MTP(Strict):
    """Multi-token prediction (DeepSeek-V3's, GLM-4.5's): ``modules`` chained modules after the model, each an RMSNorm of
    the hidden state (hnorm) and one of the next token's embedding (enorm), their concatenation projected 2d -> d
    (eh_proj), ``layers`` blocks of the stack named ``block``, and a norm before the head (shared_head.norm); the
    token embedding and the head are the model's. ``include`` is the counting switch (transformers' models build no
    MTP module, the checkpoints store one): ``off``; ``shared`` (the module, the embedding and head shared, as the
    paper and vLLM run it); ``stored`` (also the checkpoint's own copies of the embedding and head)."""

    modules: IntExpr  # num_nextn_predict_layers; 0: none
    # the stack whose block each module repeats; where a config leaves that stack out (every layer dense), the last
    # stack: the module is the layer after the last, of its kind
    block: StackName = "blocks"
    layers: IntExpr | None = None  # blocks per module (Qwen3-Next's mtp_num_hidden_layers); none: 1
    norm: Norm  # enorm, hnorm and the norm before the head
    include: Literal["off", "shared", "stored"] = "off"


class Model(Strict):
    """The architecture: embeddings, stacks of blocks, a final norm and a head."""

    architecture: Literal["decoder", "encoder", "encoder-decoder"] = Field(
        "decoder", description="decoder, encoder (BERT) or encoder-decoder (T5: then encoder and decoder)")
    embedding: Embedding = Field(description="token embeddings (vocab, width) and positions (learned, rotary, none, ...)")
    block: Block | None = Field(None, description="one stack of blocks: repeat, norm, attention or mixer, mlp")
    blocks: list[Block] | None = Field(None, description="several named stacks, in order (or as layer_order interleaves "
                                                         "them)")
    final_norm: Norm | None = Field(None, description="the norm after the last block")
    encoder: Tower | None = Field(None, description="an encoder-decoder's encoder: its blocks and final norm")
    decoder: Tower | None = Field(None, description="an encoder-decoder's decoder: its blocks and final norm")
    head: Head | None = Field(None, description="the output head: tied to the embedding or its own; none: hidden "
                                                "states out (encoders)")
    pooler: BoolExpr | None = Field(None, description="BERT's tanh pooler over the first token")
    init: Init = Field(Init(), description="how the generated module initialises its weights")
    # the stacks' layers interleaved: this cycle of stack names gives each layer's stack, in order (Llama 4 Maverick's
    # dense and MoE layers: [dense_blocks, blocks]); default: the stacks one after another
    layer_order: list[StackName] | None = Field(None, description="a cycle of stack names giving each layer's stack, "
                                                                  "in order (default: one stack after another)")
    mtp: MTP | None = Field(None, description="multi-token prediction modules (counted where mtp.include says so)")

    @model_validator(mode="after")
    def _towers(self) -> Model:
        if self.architecture == "encoder-decoder":
            if self.encoder is None or self.decoder is None:
                raise FieldError("an encoder-decoder model needs 'encoder' and 'decoder' sections")
            if self.block is not None or self.blocks is not None:
                raise FieldError("an encoder-decoder model puts its blocks under 'encoder' and 'decoder'", sub=("block",))
            return self
        if self.encoder is not None or self.decoder is not None:
            raise FieldError("'encoder' and 'decoder' sections need 'architecture: encoder-decoder'")
        return _check_stacks(self)

    @model_validator(mode="after")
    def _mtp_decoder(self) -> Model:
        if self.mtp is not None and self.architecture != "decoder":
            raise FieldError("multi-token prediction (mtp) needs a decoder", sub=("mtp",), key=True)
        return self

    def stacks(self) -> list[Block]:
        return [self.block] if self.block is not None else list(self.blocks or [])
