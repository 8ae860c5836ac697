"""The settings of each kind of IR component: one small frozen dataclass per kind, so a reader sees the fields
and a misspelt field is an error (``attn.attrs.heads``, not ``attn.attrs["heads"]``).

Widths are sympy expressions in the spec's hyperparameters (``d``, ``d_head``...); flags, names and numbers
that change no shape are plain Python values decided at lowering. The attention node also carries how the
generated module computes it (its kernel: a written-out softmax, shared or repeated key/value heads, a
position bias), decided once at lowering and read alike by codegen, the activation estimate and the FLOPs.

The class of a component's settings says what the component is: ``Component.kind`` is the class's ``kind``
(``"attention"``, ``"rmsnorm"``...), kept for printing and for the hf reader, and code that asks what a node is asks
``isinstance(node.attrs, Attention)``, as codegen's printer dispatches on the class (``_print_Attention``). Kinds that
share their settings have a class each (:class:`LayerNorm` and :class:`RMSNorm` are :class:`Norm`; a :class:`Table`,
the :class:`Experts` list, the :class:`Pooler` and a :class:`RelativeBias` table have no settings). :data:`KINDS`
lists them.

>>> import sympy
>>> H, d_head = sympy.symbols("H d_head", positive=True, integer=True)
>>> a = Attention(heads=H, kv_heads=H, head_width=d_head, value_width=d_head, causal=True)
>>> a.heads, a.grouped, a.layer_windows
(H, False, (None,))
>>> a.hedas
Traceback (most recent call last):
AttributeError: 'Attention' object has no attribute 'hedas'
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import TYPE_CHECKING, ClassVar

import sympy

if TYPE_CHECKING:
    from archcalc.spec.components import Init, RopeScaling


class Attrs:
    """The settings of one component: read its fields (``attrs.heads``); there is no string-keyed reading
    (tests/test_structure.py keeps every module off ``attrs[...]``, ``.get``, ``.items()``)."""

    kind: ClassVar[str]  # the component these settings make (Component.kind); a base class (Norm, Empty) has none


@dataclass(frozen=True)
class Empty(Attrs):
    """A component with no settings of its own: the base of :class:`Table`, :class:`Experts`, :class:`Pooler` and
    :class:`RelativeBias`."""


@dataclass(frozen=True)
class Table(Empty):
    """An embedding table read by lookup: tokens, positions, token types."""

    kind: ClassVar[str] = "embedding"


@dataclass(frozen=True)
class Experts(Empty):
    """The routed experts of a mixture of experts (the component repeats once an expert)."""

    kind: ClassVar[str] = "experts"


@dataclass(frozen=True)
class Pooler(Empty):
    """BERT's pooler: a dense layer over the first token."""

    kind: ClassVar[str] = "pooler"


@dataclass(frozen=True)
class MTP(Attrs):
    """Multi-token prediction modules (``repeat`` of them, chained): enorm, hnorm, eh_proj, ``layers`` blocks, a norm,
    and the model's embedding and head (``stored``: the checkpoint's own copies of them)."""

    kind: ClassVar[str] = "mtp"
    layers: sympy.Expr
    stored: bool = False


@dataclass(frozen=True)
class RelativeBias(Empty):
    """T5's relative-position bias table, shared by a tower's layers."""

    kind: ClassVar[str] = "relative_bias"


@dataclass(frozen=True)
class Adapter(Empty):
    """A per-use low-rank adapter beside a shared projection (Zamba2's LoRA: ``down`` to the rank, ``up`` back), its
    output added to the projection's."""

    kind: ClassVar[str] = "adapter"


@dataclass(frozen=True)
class SharedBlock(Attrs):
    """Zamba2's shared transformer block, run at the start of each layer of its stack: its input is the layer's input
    beside the token embeddings (``concat``: width 2d), then attention (to d) and a gated MLP, each behind its norm, no
    residual. ``copies`` distinct blocks serve the stack's layers in turn; each tensor's ``owned`` share counts them."""

    kind: ClassVar[str] = "shared"
    copies: sympy.Expr
    concat: bool = True


@dataclass(frozen=True)
class Model(Attrs):
    """The whole model: ``architecture`` (decoder, encoder, encoder-decoder), the model ``width`` d and ``vocab``,
    and the initialisation scheme of the spec's ``init`` section."""

    kind: ClassVar[str] = "model"
    architecture: str
    width: sympy.Expr
    vocab: sympy.Expr
    init: Init
    layer_order: tuple[str, ...] | None = None  # a cycle of stack names: the stacks' layers interleaved in that order


@dataclass(frozen=True)
class Embeddings(Attrs):
    """How tokens become vectors: ``position`` (learned, sinusoidal, rotary, relative-bias, alibi, none), ``scale`` by
    sqrt(width), for rotary positions the base, the scaling scheme, the rotated share of a head and how its features
    pair up, and for ALiBi the largest exponent of its slopes (``alibi_max_bias``: slopes 2^(-max_bias * k / n)) and
    the form of its bias: the spec's ``position`` settings, which codegen reads (never the transformers model type)."""

    kind: ClassVar[str] = "embeddings"
    position: str
    scale: bool
    rotary_base: float
    rotary_scaling: RopeScaling | None = None
    rotary_fraction: sympy.Expr | None = None  # None: the whole head rotates
    alibi_max_bias: float = 8.0
    multiplier: float | None = None  # the token embeddings are multiplied by it (Granite's embedding_multiplier)
    rotary_local_base: float | None = None  # the sliding-window layers' own rotary base (None: rotary_base)
    rotary_local_scaling: RopeScaling | None = None  # and their scaling (with a local base; None: unscaled)
    position_offset: int = 0  # learned positions: position p reads row p + offset of the table (OPT's 2)
    # which features rotate together (half, interleaved, deinterleaved); None: half, or deinterleaved for latent attention
    rotary_pairing: str | None = None
    alibi_form: str = "relative"  # ALiBi's bias: slope * (j - i), or "bfloat16_scaled" as transformers' Falcon computes it
    longrope_rerun: bool = False  # generation runs the sequence again past LongRoPE's original context (Phi-3)


@dataclass(frozen=True)
class Tower(Attrs):
    """The encoder or the decoder of an encoder-decoder model."""

    kind: ClassVar[str] = "tower"
    causal: bool


@dataclass(frozen=True)
class Block(Attrs):
    """A stack of blocks: its ``residual`` arrangement (pre-norm, post-norm, parallel, sandwich, reordered)."""

    kind: ClassVar[str] = "block"
    residual: str
    causal: bool
    residual_multiplier: float | None = None  # each branch's output is multiplied by it before the residual add


@dataclass(frozen=True)
class Attention(Attrs):
    """Self- or cross-attention. ``kv_heads`` < ``heads`` is GQA (1: MQA). ``pattern`` cycles over the layers of the
    stack: ``global`` layers are dense, ``local`` ones see the last ``window`` tokens.

    The kernel, decided at lowering (:func:`archcalc.ir.kernel.attention_kernel`): ``explicit_softmax`` (sinks or
    soft-capped scores need the scores, so q·kᵀ and probs·v are written out: the same two matmuls), ``kv_sharing``
    (``none``: a key/value head per query head; ``sdpa``: grouped, SDPA shares each key/value head among its
    queries, ``enable_gqa``; ``repeat``: grouped, k and v repeated to every head before the kernel) and
    ``position_bias`` (an additive score bias with the causal mask in it: T5's relative positions, ALiBi)."""

    kind: ClassVar[str] = "attention"
    heads: sympy.Expr
    kv_heads: sympy.Expr
    head_width: sympy.Expr
    value_width: sympy.Expr
    causal: bool
    cross: bool = False
    window: sympy.Expr | None = None
    pattern: tuple[str, ...] = ("global",)
    softcap: float | None = None
    scale: float | None = None  # None: 1 / sqrt(head_width)
    sinks: bool = False  # a learned logit per head beside the keys (gpt-oss): the ``sinks`` tensor
    position_bias: bool = False
    explicit_softmax: bool = False
    kv_sharing: str = "none"
    rotary_pattern: tuple[bool, ...] = (True,)  # cycles over the layers: False, no rotary positions there (NoPE)
    chunk: sympy.Expr | None = None  # 'chunked' layers: a token sees the tokens before it in its own block of `chunk`
    rotary_qk_norm: float | None = None  # eps of the weightless RMS norm of q and k after rotary, on rotary layers only
    # (floor, scale, offset, every layer): queries scaled by position, on the layers without rotary (else every layer)
    temperature: tuple[float, float, int, bool] | None = None
    output_gate: bool = False  # q's projection also yields a gate per head: output · sigmoid(gate) (Qwen3-Next)
    # beside a mixer (Falcon-H1): the attention's input and output times these (its keys' multiplier is in ``scale``)
    in_multiplier: float | None = None
    out_multiplier: float | None = None
    # Gemma 4's: the values are the keys (no value projection), a weightless RMS norm of the values (its epsilon), and
    # an earlier layer's keys and values reused (no key/value projections and no cache of its own)
    k_eq_v: bool = False
    value_norm: float | None = None
    kv_shared: bool = False

    @property
    def grouped(self) -> bool:
        """Fewer key/value heads than query heads at this size (GQA, MQA)."""
        return self.kv_sharing != "none"

    @property
    def banded(self) -> bool:
        """Some layers of the stack see only a window of tokens."""
        return "local" in self.pattern

    @property
    def chunked(self) -> bool:
        """Some layers of the stack see only the earlier tokens of their own block of ``chunk`` tokens."""
        return "chunked" in self.pattern

    @property
    def layer_windows(self) -> tuple[sympy.Expr | None, ...]:
        """The most keys each layer of the pattern caches (None: every token), cycling over the stack's layers: a local
        layer's window, a chunked layer's block (its tokens see no key of an earlier block)."""
        return tuple(self.window if kind == "local" else self.chunk if kind == "chunked" else None for kind in self.pattern)


@dataclass(frozen=True)
class LatentAttention(Attention):
    """Multi-head latent attention (DeepSeek-V2/V3): queries through a ``q_rank`` bottleneck (None: a plain
    projection), keys and values expanded from a ``kv_rank`` latent, and a ``rope_width`` rotary part per head
    (the key's shared by every head). ``head_width`` is the query/key width without the rotary part."""

    rope_width: sympy.Expr = sympy.Integer(0)
    kv_rank: sympy.Expr = sympy.Integer(0)
    q_rank: sympy.Expr | None = None
    # DeepSeek Sparse Attention: each query reads only the index_top_k keys its indexer (the child ``indexer``, an
    # :class:`Indexer`) scores best; index_shared: the layer has no indexer and reuses the previous layer's selection
    index_top_k: sympy.Expr | None = None
    index_shared: bool = False
    # the query times sqrt(width / q_rank), the normed latent times sqrt(width / kv_rank) (LongCat-Flash)
    rank_scale: bool = False

    @property
    def sparse(self) -> bool:
        """Each query attends to at most ``index_top_k`` keys (DeepSeek Sparse Attention)."""
        return self.index_top_k is not None


@dataclass(frozen=True)
class Indexer(Attrs):
    """DeepSeek Sparse Attention's lightning indexer (a child of latent attention): ``heads`` queries of ``head_width``
    from the query latent (``q_up``), one key per token (``k``, LayerNorm ``k_norm``), a weight per head (``weights``);
    every query scores every earlier token, Σ_h weight_h · relu(q_h · k) / sqrt(heads · head_width), and the attention
    reads its top-k. ``pairing``: how the rotary features (the first rope_width of each) pair."""

    kind: ClassVar[str] = "indexer"
    heads: sympy.Expr
    head_width: sympy.Expr
    pairing: str = "half"


class StateMixer(Attrs):
    """A token mixer with a fixed-size recurrent state in place of attention's growing KV cache: a state-space or
    linear-attention layer. Each kind says, alike for every backend, the channels its causal depthwise conv mixes
    (``channels``, ``conv`` taps), the state it keeps per sequence beside the conv's last K - 1 inputs
    (``recurrent``), and the matmul FLOPs of its mixing beyond its projections and its conv, as the generated code
    computes them: over a sequence (``mixing_flops``, the op ``mixing``) and for one decode token (``step_flops``),
    with the element operations of its state update apart (``update_ops``). A new kind is one more subclass."""

    label: ClassVar[str]  # as prose names it
    mixing: ClassVar[str | None]  # the op of its mixing over a sequence (ir.ops' Op.kind); None: its conv only
    state_formula: ClassVar[str]  # its state per layer and sequence in the letters of docs/conventions.md
    update_formula: ClassVar[str] = "0"  # update_ops in those letters
    conv: sympy.Expr

    @property
    def channels(self) -> sympy.Expr:
        raise NotImplementedError

    @property
    def recurrent(self) -> sympy.Expr:
        """Elements of its recurrent state per sequence (the conv's window apart)."""
        raise NotImplementedError

    @property
    def state_elements(self) -> sympy.Expr:
        """Elements kept per sequence: the conv's last K - 1 inputs and the recurrent state."""
        return self.channels * (self.conv - 1) + self.recurrent

    def mixing_flops(self, batch: sympy.Expr, seq: sympy.Expr) -> sympy.Expr:
        """Matmul FLOPs of its mixing over ``batch`` sequences of ``seq`` tokens (0: none beyond the conv)."""
        return sympy.Integer(0)

    def step_flops(self) -> sympy.Expr:
        """Matmul FLOPs of one decode token's state read and update beyond the conv."""
        return sympy.Integer(0)

    def update_ops(self) -> sympy.Expr:
        """Element operations of one token's state update: in no matmul total."""
        return sympy.Integer(0)

    @property
    def divisors(self) -> tuple[tuple[sympy.Expr, sympy.Expr, str, str], ...]:
        """(whole, part, their names): the widths one of which must divide the other (Mamba2's heads its inner width)."""
        return ()

    def numeric(self, value) -> StateMixer:
        """These settings at one size: every width through ``value`` (a hyperparameter may share a name with a run
        symbol), the chunk filled in; sympy integers, so that a width's quotient (Mamba2's I / H) stays exact."""
        widths = {f.name: sympy.Integer(value(getattr(self, f.name))) for f in fields(self)
                  if isinstance(getattr(self, f.name), sympy.Expr)}
        return replace(self, **widths)


@dataclass(frozen=True)
class Mamba(StateMixer):
    """Mamba1's selective-scan mixer (transformers' MambaMixer): ``inner`` channels, each with a ``state``-wide state
    and its own ``conv``-tap causal filter; the step sizes come through a ``dt_rank`` bottleneck. The generated code
    runs the sequential scan: each token's state read out by C, ``state @ C`` (2·I·N a token); the discretisation and
    the update (decay multiply, input multiply, add: 3·I·N) are element-wise."""

    kind: ClassVar[str] = "mamba"
    label: ClassVar[str] = "Mamba"
    mixing: ClassVar[str | None] = "scan"
    state_formula: ClassVar[str] = "I·(K-1) + I·N"
    update_formula: ClassVar[str] = "3·I·N"
    inner: sympy.Expr
    state: sympy.Expr
    conv: sympy.Expr
    dt_rank: sympy.Expr
    dt_bc_norm: float | None = None  # FalconMamba: weightless RMS norms of dt, B and C with this epsilon
    dt_bc_norm_weights: bool = False  # Jamba: those norms have weights (dt_norm, b_norm, c_norm)

    @property
    def channels(self) -> sympy.Expr:
        return self.inner

    @property
    def recurrent(self) -> sympy.Expr:
        return self.inner * self.state

    def mixing_flops(self, batch: sympy.Expr, seq: sympy.Expr) -> sympy.Expr:
        return 2 * batch * seq * self.inner * self.state

    def step_flops(self) -> sympy.Expr:
        return 2 * self.inner * self.state

    def update_ops(self) -> sympy.Expr:
        return 3 * self.inner * self.state


@dataclass(frozen=True)
class Mamba2(StateMixer):
    """Mamba2's SSD mixer (transformers' Mamba2Mixer): ``heads`` heads of inner / heads channels, one decay and step
    size per head, B and C shared by the heads of each of ``groups`` groups, a ``state``-wide state per channel; the
    chunked scan works on blocks of ``chunk`` tokens (None: not given, 256 as transformers' default).

    Its mixing over a sequence of S tokens in nc = ceiling(S / Q) chunks, as the generated chunked scan's matmuls
    (P = I / H): 2·B·H·nc·(Q²·N + Q²·P + 2·Q·N·P) + 2·B·H·(nc + 1)²·N·P: per chunk the scores C·Bᵀ and their
    weighted sum of x, each chunk's state and its read-out, and the (nc + 1)² chunk-decay product over the states. A
    decode token reads its state by C (2·H·N·P = 2·I·N) after an element-wise update (3·I·N)."""

    kind: ClassVar[str] = "mamba2"
    label: ClassVar[str] = "Mamba2"
    mixing: ClassVar[str | None] = "ssd"
    state_formula: ClassVar[str] = "C·(K-1) + H·N·P"
    update_formula: ClassVar[str] = "3·H·N·P"
    inner: sympy.Expr
    state: sympy.Expr
    conv: sympy.Expr
    heads: sympy.Expr
    groups: sympy.Expr
    chunk: sympy.Expr | None = None
    dt_min: float | None = None  # the chunked scan's step sizes clamped to at least this (Nemotron-H's time_step_min)
    # Falcon-H1's: no gated RMSNorm (y · silu(z) alone), or one that normalises before it gates; in_proj's five outputs
    # (z, x, B, C, dt) times these; beside attention, the mixer's input and output times in_ and out_multiplier
    gated_norm: bool = True
    norm_before_gate: bool = False
    in_proj_multipliers: tuple[float, ...] | None = None
    in_multiplier: float | None = None
    out_multiplier: float | None = None

    @property
    def divisors(self) -> tuple[tuple[sympy.Expr, sympy.Expr, str, str], ...]:
        return ((self.inner, self.heads, "inner", "heads"), (self.inner, self.groups, "inner", "groups"),
                (self.heads, self.groups, "heads", "groups"))

    @property
    def chunk_size(self) -> sympy.Expr:
        """Q: the spec's chunk, else transformers' Mamba2Config default."""
        return self.chunk if self.chunk is not None else sympy.Integer(256)

    @property
    def channels(self) -> sympy.Expr:
        return self.inner + 2 * self.groups * self.state  # x, B and C

    @property
    def recurrent(self) -> sympy.Expr:
        return self.inner * self.state  # H heads of an N x P state

    def mixing_flops(self, batch: sympy.Expr, seq: sympy.Expr) -> sympy.Expr:
        q, n, h = self.chunk_size, self.state, self.heads
        p, chunks = self.inner / h, sympy.ceiling(seq / q)
        return 2 * batch * h * chunks * (q**2 * n + q**2 * p + 2 * q * n * p) + 2 * batch * h * (chunks + 1) ** 2 * n * p

    def step_flops(self) -> sympy.Expr:
        return 2 * self.inner * self.state

    def update_ops(self) -> sympy.Expr:
        return 3 * self.inner * self.state


@dataclass(frozen=True)
class GatedDeltaNet(StateMixer):
    """Gated DeltaNet (Qwen3-Next's and Qwen3.5's linear attention, transformers' Qwen3NextGatedDeltaNet): ``heads``
    value heads of ``value_width`` Dv, ``key_heads`` query/key heads of ``key_width`` Dk (each serves heads /
    key_heads value heads), a Dk x Dv state per value head, decayed and corrected by the delta rule each token; a
    causal depthwise conv over q, k and v; the chunked form works on blocks of ``chunk`` tokens (None: 64).

    Its mixing over a sequence of S tokens in nc = ceiling(S / Q) chunks, as the generated chunked form's matmuls
    (H value heads): 2·B·H·nc·(2·Q²·Dk + Q²·Dv + 3·Q·Dk·Dv): per chunk the products k·kᵀ and q·kᵀ, the state read by
    the decayed keys and by the queries, the scores' weighted sum of the corrected values, and the state's update;
    the triangular solve of the UT transform is not a matmul (FlopCounterMode counts none). A decode token reads the
    state by its key and its query and writes the correction: 6·H·Dk·Dv."""

    kind: ClassVar[str] = "gated_deltanet"
    label: ClassVar[str] = "Gated DeltaNet"
    mixing: ClassVar[str | None] = "delta"
    state_formula: ClassVar[str] = "C·(K-1) + H·Dk·Dv"
    update_formula: ClassVar[str] = "3·H·Dk·Dv"
    heads: sympy.Expr
    key_heads: sympy.Expr
    key_width: sympy.Expr
    value_width: sympy.Expr
    conv: sympy.Expr
    chunk: sympy.Expr | None = None

    @property
    def divisors(self) -> tuple[tuple[sympy.Expr, sympy.Expr, str, str], ...]:
        return ((self.heads, self.key_heads, "heads", "key_heads"),)

    @property
    def chunk_size(self) -> sympy.Expr:
        """Q: the spec's chunk, else transformers' 64."""
        return self.chunk if self.chunk is not None else sympy.Integer(64)

    @property
    def channels(self) -> sympy.Expr:
        return 2 * self.key_heads * self.key_width + self.heads * self.value_width  # q, k and v

    @property
    def recurrent(self) -> sympy.Expr:
        return self.heads * self.key_width * self.value_width

    def mixing_flops(self, batch: sympy.Expr, seq: sympy.Expr) -> sympy.Expr:
        q, dk, dv, chunks = self.chunk_size, self.key_width, self.value_width, sympy.ceiling(seq / self.chunk_size)
        return 2 * batch * self.heads * chunks * (2 * q**2 * dk + q**2 * dv + 3 * q * dk * dv)

    def step_flops(self) -> sympy.Expr:
        return 6 * self.heads * self.key_width * self.value_width

    def update_ops(self) -> sympy.Expr:
        return 3 * self.heads * self.key_width * self.value_width


@dataclass(frozen=True)
class ShortConv(StateMixer):
    """LFM2's gated short convolution (transformers' Lfm2ShortConv): in_proj to B, C and x (``width`` each), B·x
    through a causal depthwise conv of ``conv`` taps, times C, out_proj. Its state is the conv's window alone; its
    gates are element-wise, so its mixing is its conv."""

    kind: ClassVar[str] = "short_conv"
    label: ClassVar[str] = "short convolution"
    mixing: ClassVar[str | None] = None
    state_formula: ClassVar[str] = "d·(K-1)"
    width: sympy.Expr
    conv: sympy.Expr

    @property
    def channels(self) -> sympy.Expr:
        return self.width

    @property
    def recurrent(self) -> sympy.Expr:
        return sympy.Integer(0)


@dataclass(frozen=True)
class Conv(Attrs):
    """A depthwise causal conv1d: ``channels`` filters of ``taps`` taps, with or without a bias."""

    kind: ClassVar[str] = "conv"
    channels: sympy.Expr
    taps: sympy.Expr
    bias: bool


MIXERS = (StateMixer,)  # the token mixers other than attention: a fixed-size state, no KV cache


@dataclass(frozen=True)
class Linear(Attrs):
    """A Linear layer: ``in_features`` → ``out_features`` (its weight is out × in), with or without a bias."""

    kind: ClassVar[str] = "linear"
    in_features: sympy.Expr
    out_features: sympy.Expr
    bias: bool


@dataclass(frozen=True)
class Norm(Attrs):
    """A norm over ``width`` features (a :class:`LayerNorm` or an :class:`RMSNorm`); ``unit_offset``: it scales by (1 + weight), as Gemma's;
    ``groups``: the features form this many groups (heads) of width / groups, each normalised on its own with
    weights of its own (StableLM's per-head QK-norms)."""

    width: sympy.Expr
    eps: float
    unit_offset: bool = False
    bias: bool = False
    groups: sympy.Expr | None = None


@dataclass(frozen=True)
class LayerNorm(Norm):
    """A LayerNorm: weight, and a bias where ``bias``."""

    kind: ClassVar[str] = "layernorm"


@dataclass(frozen=True)
class RMSNorm(Norm):
    """An RMSNorm: weight only."""

    kind: ClassVar[str] = "rmsnorm"


@dataclass(frozen=True)
class MLP(Attrs):
    """A dense (up, activation, down) or ``gated`` (activation(gate) · up, down) feed-forward net of ``hidden``
    width; ``clamp``: gpt-oss's clamped SwiGLU limit; ``shared``: the shared experts of a mixture of experts."""

    kind: ClassVar[str] = "mlp"
    gated: bool
    activation: str
    hidden: sympy.Expr
    clamp: float | None = None
    shared: bool = False
    gate_multiplier: float | None = None  # gated: the gate's output times this before the activation (Falcon-H1)
    down_multiplier: float | None = None  # the down projection's output times this (Falcon-H1)


@dataclass(frozen=True)
class MoE(Attrs):
    """A mixture of experts: ``experts`` of ``hidden`` width, ``top_k`` per token, routed by ``scoring`` (softmax
    over the chosen logits, or DeepSeek-V3's sigmoid scores with ``groups``, ``group_top_k``, ``normalize`` and
    ``routed_scale``)."""

    kind: ClassVar[str] = "moe"
    activation: str
    hidden: sympy.Expr  # of one expert
    experts: sympy.Expr
    top_k: sympy.Expr
    clamp: float | None = None
    scoring: str = "softmax"
    normalize: bool | None = None
    routed_scale: float | None = None
    groups: sympy.Expr | None = None
    group_top_k: sympy.Expr | None = None
    group_score: str = "top2_sum"  # what ranks a group: its two best scores summed, or its best ("max")
    weigh_input: bool = False  # the routing weights scale the chosen experts' inputs (Llama 4), not their outputs
    score_bias: bool = False  # softmax: a learned per-expert bias chooses the experts, not weighs them (ERNIE 4.5)
    zero_experts: sympy.Expr | None = None  # identity experts the router may choose: no parameters, no matmul FLOPs
    shortcut: bool = False  # the output joins the residual after the next sublayer (LongCat-Flash)


@dataclass(frozen=True)
class Head(Attrs):
    """The LM head: ``softcap`` on its logits (Gemma 2), ``scale_input`` by width**-0.5 first (T5 v1.0)."""

    kind: ClassVar[str] = "head"
    softcap: float | None = None
    scale_input: bool = False
    multiplier: float | None = None  # the logits are multiplied by it (Cohere's logit_scale, Granite's 1 / logits_scaling)


KINDS: dict[str, type[Attrs]] = {cls.kind: cls for cls in (  # component kind -> its settings (LatentAttention: attention's)
    Model, Embeddings, Table, Tower, Block, Attention, Mamba, Mamba2, GatedDeltaNet, ShortConv, Conv, Linear, LayerNorm, RMSNorm, MLP, MoE, Experts, Pooler,
    RelativeBias, Head, Indexer, Adapter, SharedBlock, MTP)}
