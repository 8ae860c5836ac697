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

from dataclasses import dataclass
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
class RelativeBias(Empty):
    """T5's relative-position bias table, shared by a tower's layers."""

    kind: ClassVar[str] = "relative_bias"


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
    temperature: tuple[float, float] | None = None  # (floor, scale): queries scaled by position on layers without rotary

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


@dataclass(frozen=True)
class Mamba(Attrs):
    """Mamba1's selective-scan mixer (transformers' MambaMixer): ``inner`` channels, each with a ``state``-wide state
    and its own ``conv``-tap causal filter; the step sizes come through a ``dt_rank`` bottleneck."""

    kind: ClassVar[str] = "mamba"
    inner: sympy.Expr
    state: sympy.Expr
    conv: sympy.Expr
    dt_rank: sympy.Expr


@dataclass(frozen=True)
class Mamba2(Attrs):
    """Mamba2's SSD mixer (transformers' Mamba2Mixer): ``heads`` heads of inner / heads channels, one decay and step
    size per head, B and C shared by the heads of each of ``groups`` groups, a ``state``-wide state per channel; the
    chunked scan works on blocks of ``chunk`` tokens (None: not given)."""

    kind: ClassVar[str] = "mamba2"
    inner: sympy.Expr
    state: sympy.Expr
    conv: sympy.Expr
    heads: sympy.Expr
    groups: sympy.Expr
    chunk: sympy.Expr | None = None


@dataclass(frozen=True)
class Conv(Attrs):
    """A depthwise causal conv1d: ``channels`` filters of ``taps`` taps, with or without a bias."""

    kind: ClassVar[str] = "conv"
    channels: sympy.Expr
    taps: sympy.Expr
    bias: bool


MIXERS = (Mamba, Mamba2)  # the token mixers other than attention: a fixed-size state, no KV cache


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


@dataclass(frozen=True)
class Head(Attrs):
    """The LM head: ``softcap`` on its logits (Gemma 2), ``scale_input`` by width**-0.5 first (T5 v1.0)."""

    kind: ClassVar[str] = "head"
    softcap: float | None = None
    scale_input: bool = False
    multiplier: float | None = None  # the logits are multiplied by it (Cohere's logit_scale, Granite's 1 / logits_scaling)


KINDS: dict[str, type[Attrs]] = {cls.kind: cls for cls in (  # component kind -> its settings (LatentAttention: attention's)
    Model, Embeddings, Table, Tower, Block, Attention, Mamba, Mamba2, Conv, Linear, LayerNorm, RMSNorm, MLP, MoE, Experts, Pooler,
    RelativeBias, Head)}
