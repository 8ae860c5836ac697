"""Lowering: a spec and a bound size become the IR tree.

Shapes stay symbolic in the spec's hyperparameters (``d``, ``d_head``...); booleans are decided
here, because they change the structure (a bias or not, a head or not). Every width is also
evaluated at the size, so a zero, negative or fractional width is caught here, pointing at the spec
expression that produced it.

>>> from archcalc.spec import load_spec
>>> from archcalc.spec.bind import bind
>>> ir = lower(bind(load_spec("gpt2"), "small"))
>>> [c.name for c in ir.root.children]
['embed', 'blocks', 'final_norm', 'head']
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

import sympy

from archcalc.errors import SpecError
from archcalc.ir import attrs, parts
from archcalc.ir.kernel import attention_kernel
from archcalc.ir.layers import layers_of_kind
from archcalc.ir.mtp import lower_mtp
from archcalc.ir.nodes import Component, Tensor
from archcalc.ir.values import SizeValues
from archcalc.spec import components as sc
from archcalc.spec.bind import Binding
from archcalc.spec.loader import where

T = TypeVar("T")

ZERO = sympy.Integer(0)  # a lookup reads rows: no parameter of the table is active in a matmul


@dataclass(frozen=True)
class Lowered:
    """The IR of one bound size, and what lowering noticed (e.g. H·d_head ≠ d)."""

    root: Component
    binding: Binding
    warnings: tuple[str, ...] = ()

    def require_attention_only(self, what: str, modelled: tuple[type, ...] = ()) -> None:
        """Refuse, in one line at the spec's mixer, what is not modelled yet for state-space layers (their parameters
        are: ``archcalc count`` and the solver work on them); ``modelled``: the mixer kinds (attrs classes) that
        ``what`` does model."""
        for path, node in self.root.walk():
            if isinstance(node.attrs, attrs.MIXERS) and not isinstance(node.attrs, modelled):
                spec = self.binding.spec
                stack = next((i for i, b in enumerate(spec.model.stacks()) if b.mixer is not None), None)
                loc = ("model", "block", "mixer") if spec.model.block is not None else ("model", "blocks", stack, "mixer")
                raise SpecError.at(where(spec, loc), f"{what}: not modelled yet for state-space layers ({node.attrs.kind} "
                                                     f"at {path}); archcalc count and solve work on them")


def lower(binding: Binding) -> Lowered:
    """The IR tree of ``binding``'s spec at its size (built once a binding: the tree is frozen)."""
    return binding.memo("_lowered", lambda: _lower(binding))


def per_ir(lowered: Lowered, key: str, build: Callable[[], T]) -> T:
    """``build()``, kept with the binding under ``key`` where ``lowered`` is :func:`lower`'s tree of it (a backend's
    figures of one IR, asked for many times by a docs build); built each time for a variant (MTP modules added, say).
    Asks without lowering."""
    binding = lowered.binding
    return binding.memo(key, build) if binding.__dict__.get("_lowered") is lowered else build()


def _lower(binding: Binding) -> Lowered:
    lowerer = Lowerer(binding)
    root = lowerer.model(binding.spec.model, ("model",))
    return Lowered(root, binding, tuple(dict.fromkeys(lowerer.warnings)))


class Lowerer(SizeValues):
    """Turns spec components into IR components (the values of the size: :class:`SizeValues`); ``loc`` tuples track
    the place in the spec file."""

    def __init__(self, binding: Binding):
        super().__init__(binding)
        self.warnings: list[str] = []

    # -- model ------------------------------------------------------------------------------
    def model(self, m: sc.Model, loc: tuple) -> Component:
        emb = m.embedding
        d = self.width(emb.width, loc + ("embedding", "width"), "embedding width")
        vocab = self.width(emb.vocab, loc + ("embedding", "vocab"), "vocabulary size")
        token = self.token_width(emb, d, m.architecture, loc + ("embedding",))
        children = [self.embedding(emb, d, token, vocab, loc + ("embedding",))]
        if m.architecture == "encoder-decoder":
            assert m.encoder is not None and m.decoder is not None
            children.append(self.tower("encoder", m.encoder, d, loc + ("encoder",), causal=False))
            children.append(self.tower("decoder", m.decoder, d, loc + ("decoder",), causal=True))
        else:
            children += self.stacks(m, d, loc, causal=m.architecture == "decoder")
            children += self.relative_bias(m.stacks(), emb, loc)
            if m.final_norm is not None:
                children.append(self.norm("final_norm", m.final_norm, d, loc + ("final_norm",)))
            if token is not d:  # back down to the token table's width, for the head
                children.append(parts.linear("project_out", token, d, False, "other"))
        if self.flag(m.pooler, loc + ("pooler",)):
            children.append(Component("pooler", attrs.Pooler(), children=(parts.linear("dense", d, d, True, "other"),)))
        if m.head is not None:
            children.append(self.head(m.head, token, vocab, loc + ("head",)))
        children += lower_mtp(self, m, d, token, vocab, children[-1] if m.head is not None else None, loc)
        order = self.layer_order(m, [c for c in children if isinstance(c.attrs, attrs.Block)], loc)
        return Component("", attrs.Model(m.architecture, d, vocab, m.init, order), children=tuple(children))

    # -- both ends: the embeddings and the head ---------------------------------------------
    def token_width(self, e: sc.Embedding, d: sympy.Expr, architecture: str, loc: tuple) -> sympy.Expr:
        """The token table's width: ``d`` itself (the very object) unless ``token_width`` gives another width at this
        size, as transformers builds OPT's projections only where word_embed_proj_dim differs from hidden_size."""
        if e.token_width is None:
            return d
        width = self.width(e.token_width, loc + ("token_width",), "token embedding width")
        if self.value(width) == self.value(d):
            return d
        if architecture != "decoder":
            raise SpecError.at(where(self.spec, loc + ("token_width",)), "a token table narrower or wider than the model "
                                                                        "(token_width) is modelled for decoders only")
        return width

    def embedding(self, e: sc.Embedding, d: sympy.Expr, token: sympy.Expr, vocab: sympy.Expr, loc: tuple) -> Component:
        """The token table, positions, token types, their norm, and a projection up from a narrower token table.

        >>> from archcalc.spec import load_spec
        >>> from archcalc.spec.bind import bind
        >>> [c.name for c in lower(bind(load_spec("gpt2"), "small")).root.find("embed").children]
        ['token', 'position']
        """
        kids = [Component("token", attrs.Table(), (Tensor("weight", (vocab, token), "token_embedding", ZERO),))]
        if token is not d:  # up to the model's width, before the positions are added
            kids.append(parts.linear("project_in", d, token, False, "other"))
        pos = self.position(e.position)
        if pos.kind == "learned":
            assert pos.length is not None
            length = self.width(pos.length, loc + ("position", "length"), "position table length")
            kids.append(Component("position", attrs.Table(), (Tensor("weight", (length, d), "position_embedding", ZERO),)))
        if e.token_types is not None:
            types = self.width(e.token_types, loc + ("token_types",), "token types")
            kids.append(Component("token_type", attrs.Table(), (Tensor("weight", (types, d), "other", ZERO),)))
        if e.norm is not None:
            kids.append(self.norm("norm", e.norm, d, loc + ("norm",)))
        kids += self.per_layer_embedding(e, d, loc)
        fraction = None
        if pos.rotary_fraction is not None:
            fraction = self.symbolic(pos.rotary_fraction, loc + ("position", "rotary_fraction"), "rotary_fraction")
        local = pos.local if pos.kind == "rotary" else None  # the sliding layers' own rotary base and scaling
        settings = attrs.Embeddings(pos.kind, e.scale, pos.base, pos.scaling, fraction,
                                    float(pos.max_bias) if pos.max_bias is not None else 8.0, position_offset=pos.offset,
                                    rotary_pairing=pos.pairing, alibi_form=pos.form, longrope_rerun=pos.longrope_rerun,
                                    multiplier=self.factor(e.multiplier, loc + ("multiplier",), "embedding multiplier"),
                                    rotary_local_base=local.base if local else None,
                                    rotary_local_scaling=local.scaling if local else None)
        return Component("embed", settings, children=tuple(kids))

    def per_layer_embedding(self, e: sc.Embedding, d, loc: tuple) -> list[Component]:
        """Gemma 4's per-layer input embeddings over every layer of the stacks (none where their width is 0)."""
        if e.per_layer is None:
            return []
        width = self.symbolic(e.per_layer.width, loc + ("per_layer", "width"), "per-layer embedding width")
        if self.value(width) == 0:
            return []
        width = self.width(e.per_layer.width, loc + ("per_layer", "width"), "per-layer embedding width")
        vocab = self.width(e.per_layer.vocab, loc + ("per_layer", "vocab"), "per-layer embedding vocabulary")
        stacks = self.spec.model.stacks()
        # its norm's epsilon: the layers' (transformers' rms_norm_eps)
        eps = stacks[0].norm.eps if stacks and stacks[0].norm is not None else 1e-6
        layers = sum((self.symbolic(b.repeat, ("model",), "block repeat") for b in stacks), sympy.Integer(0))
        return [Component("per_layer", attrs.Table(), (Tensor("weight", (vocab, layers * width), "token_embedding", ZERO),)),
                parts.linear("per_layer_proj", layers * width, d, False, "other"),
                parts.norm("per_layer_norm", "rmsnorm", width, False, eps)]

    def position(self, pos: sc.Position) -> sc.Position:
        """The model's positions with the size's own rotary base and scaling, where it gives them."""
        size = self.spec.sizes.get(self.binding.size)
        override = size.position if size is not None else None
        if override is None:
            return pos
        changes = {k: v for k, v in (("base", override.base), ("scaling", override.scaling)) if v is not None}
        return pos.model_copy(update=changes)

    def head(self, h: sc.Head, width: sympy.Expr, vocab: sympy.Expr, loc: tuple) -> Component:
        """The head over ``width`` features (the token table's width: the model's, or OPT-350m's narrower one)."""
        if self.flag(h.tied, loc + ("tied",)):
            weight = Tensor("weight", (vocab, width), "lm_head", tied_to="embed.token.weight")
        else:
            weight = Tensor("weight", (vocab, width), "lm_head")
        tensors = (weight,) + ((Tensor("bias", (vocab,), "lm_head"),) if self.flag(h.bias, loc + ("bias",)) else ())
        multiplier = self.factor(h.multiplier, loc + ("multiplier",), "logit multiplier")
        return Component("head", attrs.Head(h.softcap, h.scale_input, multiplier), tensors)

    def layer_order(self, m: sc.Model, stacks: list[Component], loc: tuple) -> tuple[str, ...] | None:
        """The cycle of stack names that interleaves the stacks' layers, checked against their repeats (None: in turn)."""
        if m.layer_order is None:
            return None
        order, spot = tuple(m.layer_order), where(self.spec, loc + ("layer_order",))
        repeats = {c.name: self.value(c.repeat) for c in stacks}
        if not order or set(order) - set(repeats):
            raise SpecError.at(spot, f"layer_order {list(order)} must name the stacks {sorted(repeats)}")
        total = sympy.Integer(sum(repeats.values()))
        got = {name: int(layers_of_kind(order, total, name)) for name in repeats}  # arithmetic: L may be 10^18
        if got != repeats:
            raise SpecError.at(spot, f"layer_order {list(order)} over {total} layers gives the stacks {got} layers, but their "
                                     f"repeats are {repeats}")
        return order

    # -- towers and stacks -------------------------------------------------------------------
    def tower(self, name: str, t: sc.Tower, d, loc: tuple, causal: bool) -> Component:
        kids = self.stacks(t, d, loc, causal, cross=name == "decoder")
        kids += self.relative_bias(t.stacks(), self.spec.model.embedding, loc)
        if t.final_norm is not None:
            kids.append(self.norm("final_norm", t.final_norm, d, loc + ("final_norm",)))
        return Component(name, attrs.Tower(causal), children=tuple(kids))

    def stacks(self, holder, d, loc: tuple, causal: bool, cross: bool = False) -> list[Component]:
        if holder.block is not None:
            return [self.block(holder.block, d, loc + ("block",), causal, cross)]
        return [self.block(b, d, loc + ("blocks", i), causal, cross) for i, b in enumerate(holder.blocks)]

    def relative_bias(self, stacks: list[sc.Block], emb: sc.Embedding, loc: tuple) -> list[Component]:
        """T5-style relative position bias: one table of buckets × heads, shared by a tower's layers."""
        pos = emb.position
        if pos.kind != "relative-bias" or not stacks:
            return []
        assert pos.buckets is not None
        buckets = self.width(pos.buckets, ("model", "embedding", "position", "buckets"), "relative-bias buckets")
        attention = next((b.attention for b in stacks if b.attention is not None), None)
        if attention is None:
            return []
        heads = attention.heads.to_sympy()
        return [Component("rel_bias", attrs.RelativeBias(), (Tensor("weight", (buckets, heads), "position_embedding"),))]

    def norm(self, name: str, n: sc.Norm, width, loc: tuple, groups=None) -> Component:
        return parts.norm(name, n.kind, width, self.flag(n.bias, loc + ("bias",), n.kind == "layernorm"), n.eps, n.unit_offset, groups)

    # -- blocks -----------------------------------------------------------------------------
    def block(self, b: sc.Block, d, loc: tuple, causal: bool, cross: bool) -> Component:
        repeat = self.width(b.repeat, loc + ("repeat",), "block repeat")
        residual = "parallel" if self.flag(b.parallel, loc + ("parallel",)) else b.residual  # a per-size switch
        if b.attention is not None and b.mixer is not None:  # side by side on one norm (Falcon-H1)
            return self.parallel_mixer(b, d, repeat, loc, causal)
        if b.attention is None or b.mlp is None:  # a mixer or an MLP alone (the spec allows it pre-norm only)
            if residual == "parallel":
                raise SpecError.at(where(self.spec, loc + ("parallel",)), "a parallel block needs both attention and an MLP")
            return self.sublayers(b, d, repeat, loc, causal)
        norms = {
            "pre-norm": ["attn_norm", "mlp_norm"],
            "post-norm": ["attn_norm", "mlp_norm"],
            "parallel": ["norm"] if b.parallel_norms == 1 else ["attn_norm", "mlp_norm"],
            "sandwich": ["attn_norm", "attn_post_norm", "mlp_norm", "mlp_post_norm"],
            "reordered": ["attn_post_norm", "mlp_post_norm"],
        }[residual]
        kids = [self.norm(n, b.norm, d, loc + ("norm",)) for n in norms]
        kids.append(self.attention(b.attention, d, loc + ("attention",), causal, layers=self.value(repeat)))
        if b.cross_attention is not None:
            if not cross:
                raise SpecError.at(where(self.spec, loc + ("cross_attention",)), "cross_attention needs a decoder of an encoder-decoder model")
            kids.append(self.norm("cross_norm", b.norm, d, loc + ("norm",)))
            kids.append(self.attention(b.cross_attention, d, loc + ("cross_attention",), False, True))
        kids.append(self.mlp(b.mlp, d, loc + ("mlp",)))
        kids += self.moe_beside(b, d, loc) + self.per_layer_input(b, d, loc)
        multiplier = self.factor(b.residual_multiplier, loc + ("residual_multiplier",), "residual multiplier")
        return Component(b.name, attrs.Block(residual, causal, multiplier), children=tuple(kids), repeat=repeat)

    def sublayers(self, b: sc.Block, d, repeat, loc: tuple, causal: bool) -> Component:
        """A pre-norm block of the sublayers it has, each behind its own norm: a mixer (Mamba's layers), attention
        without an MLP, or an MLP alone (Nemotron-H's)."""
        kids: list[Component] = self.shared(b, d, repeat, loc, causal)
        if b.attention is not None:
            kids += [self.norm("attn_norm", b.norm, d, loc + ("norm",)),
                     self.attention(b.attention, d, loc + ("attention",), causal, layers=self.value(repeat))]
        if b.mixer is not None:
            kids += [self.norm("mixer_norm", b.norm, d, loc + ("norm",)), self.mixer(b.mixer, d, b.norm.eps, loc + ("mixer",))]
        if b.mlp is not None:
            kids += [self.norm("mlp_norm", b.norm, d, loc + ("norm",)), self.mlp(b.mlp, d, loc + ("mlp",))]
        multiplier = self.factor(b.residual_multiplier, loc + ("residual_multiplier",), "residual multiplier")
        return Component(b.name, attrs.Block("pre-norm", causal, multiplier), children=tuple(kids), repeat=repeat)

    def shared(self, b: sc.Block, d, repeat, loc: tuple, causal: bool) -> list[Component]:
        """Zamba2's shared block of a layer (its tensors' ``owned`` share: copies / layers), the layer's own adapters
        beside its projections and ``proj``, d -> d, into the layer (none without ``shared``)."""
        if b.shared is None:
            return []
        sh, loc = b.shared, loc + ("shared",)
        copies = self.width(sh.copies, loc + ("copies",), "shared block copies")
        if self.value(copies) > self.value(repeat):
            raise SpecError.at(where(self.spec, loc + ("copies",)), f"copies = {self.value(copies)} exceeds the "
                                                                    f"{self.value(repeat)} layers that use them")
        if sh.attention.kind != "standard" or sh.mlp.kind != "gated":
            raise SpecError.at(where(self.spec, loc), "a shared block is modelled with standard attention and a gated MLP")
        rank = self.width(sh.adapter_rank, loc + ("adapter_rank",), "adapter rank")
        attn = self.attention(sh.attention, 2 * d, loc + ("attention",), causal, layers=self.value(repeat))
        out = next(c for c in attn.children if c.name == "out")  # back to the model's width, not the input's
        out = parts.linear("out", d, out.attrs.in_features, out.attrs.bias, "attention")
        attn = Component(attn.name, attn.attrs, attn.tensors, tuple(out if c.name == "out" else c for c in attn.children))
        mlp = self.mlp(sh.mlp, d, loc + ("mlp",))
        block = Component("shared", attrs.SharedBlock(copies), children=(
            self.norm("attn_norm", b.norm, 2 * d, loc), attn, self.norm("mlp_norm", b.norm, d, loc), mlp))
        kids = [_owned(block, copies / repeat)]
        adapters = [_adapter("mlp_adapter", d, rank, 2 * mlp.attrs.hidden, "mlp")]
        if self.flag(sh.attention_adapters, loc + ("attention_adapters",)):
            adapters[:0] = [_adapter(f"{name}_adapter", 2 * d, rank, 2 * d, "attention") for name in ("q", "k", "v")]
        if sh.adapter_copies is not None:
            held = self.width(sh.adapter_copies, loc + ("adapter_copies",), "adapter copies")
            adapters = [_owned(a, held / repeat) for a in adapters]
        return kids + adapters + [parts.linear("proj", d, d, False, "other")]

    def parallel_mixer(self, b: sc.Block, d, repeat, loc: tuple, causal: bool) -> Component:
        """Attention and a mixer side by side on one norm, their outputs added to the residual, then the MLP behind its
        own norm (Falcon-H1's layer): x + attn(norm(x)) + mixer(norm(x)), then x + mlp(mlp_norm(x))."""
        assert b.attention is not None and b.mixer is not None
        kids = [self.norm("norm", b.norm, d, loc + ("norm",)),
                self.attention(b.attention, d, loc + ("attention",), causal, layers=self.value(repeat)),
                self.mixer(b.mixer, d, b.norm.eps, loc + ("mixer",))]
        if b.mlp is not None:
            kids += [self.norm("mlp_norm", b.norm, d, loc + ("norm",)), self.mlp(b.mlp, d, loc + ("mlp",))]
        multiplier = self.factor(b.residual_multiplier, loc + ("residual_multiplier",), "residual multiplier")
        return Component(b.name, attrs.Block("pre-norm", causal, multiplier), children=tuple(kids), repeat=repeat)

    def mixer(self, m: sc.Mixer, d, eps: float, loc: tuple) -> Component:
        """A state mixer (transformers' MambaMixer, Mamba2Mixer, Qwen3NextGatedDeltaNet, Lfm2ShortConv): its
        projections, its depthwise causal conv and its own parameters; a gated norm takes the block norm's ``eps``, or
        the mixer's own ``norm_eps``."""
        eps = float(m.norm_eps) if m.norm_eps is not None else eps
        taps = self.width(m.conv, loc + ("conv",), "conv taps")
        bias = self.flag(m.bias, loc + ("bias",))
        conv_bias = self.flag(m.conv_bias, loc + ("conv_bias",), m.kind in ("mamba", "mamba2"))
        if m.kind != "mamba2":
            for name in ("in_multiplier", "out_multiplier"):
                if getattr(m, name) is not None:
                    raise SpecError.at(where(self.spec, loc + (name,)), f"{name} is modelled on a mamba2 mixer only")
        if m.kind == "gated_deltanet":
            return self.deltanet(m, d, eps, taps, conv_bias, loc)
        if m.kind == "short_conv":
            kids = (parts.linear("in_proj", 3 * d, d, bias, "mixer"), parts.conv("conv", d, taps, conv_bias),
                    parts.linear("out_proj", d, d, bias, "mixer"))
            return Component("mixer", attrs.ShortConv(d, taps), (), kids)
        assert m.inner is not None and m.state is not None
        inner = self.width(m.inner, loc + ("inner",), "mixer inner width")
        state = self.width(m.state, loc + ("state",), "state size")
        if m.kind == "mamba":
            assert m.dt_rank is not None
            rank = self.width(m.dt_rank, loc + ("dt_rank",), "dt rank")
            kids = (parts.linear("in_proj", 2 * inner, d, bias, "mixer"),
                    parts.conv("conv", inner, taps, conv_bias),
                    parts.linear("x_proj", rank + 2 * state, inner, False, "mixer"),
                    parts.linear("dt_proj", inner, rank, True, "mixer"),
                    parts.linear("out_proj", d, inner, bias, "mixer"))
            tensors = (Tensor("A_log", (inner, state), "mixer"), Tensor("D", (inner,), "mixer"))
            norm = float(m.dt_bc_norm) if m.dt_bc_norm is not None else None
            weighted = bool(m.dt_bc_norm_weights) and norm is not None
            if weighted:  # Jamba: the norms of dt, B and C have weights
                assert norm is not None
                kids += tuple(parts.norm(name, "rmsnorm", width, False, norm)
                              for name, width in (("dt_norm", rank), ("b_norm", state), ("c_norm", state)))
            return Component("mixer", attrs.Mamba(inner, state, taps, rank, norm, weighted), tensors, kids)
        assert m.heads is not None
        heads = self.width(m.heads, loc + ("heads",), "mixer heads")
        groups = self.width(m.groups, loc + ("groups",), "mixer groups") if m.groups is not None else sympy.Integer(1)
        for value, name in ((heads, "heads"), (groups, "groups")):
            self.divides(value, inner, loc + (name,), name, "inner")
        self.divides(groups, heads, loc + ("groups",), "groups", "heads")  # each group's B and C serve heads / groups heads
        chunk = self.width(m.chunk, loc + ("chunk",), "chunk size") if m.chunk is not None else None
        channels = inner + 2 * groups * state  # what the conv mixes: x, B and C
        gated_norm = self.flag(m.gated_norm, loc + ("gated_norm",), True)
        norm = (parts.norm("norm", "rmsnorm", inner, False, eps, groups=groups),) if gated_norm else ()  # gated by z, per group
        kids = (parts.linear("in_proj", inner + channels + heads, d, bias, "mixer"),  # z, then x B C, then dt
                parts.conv("conv", channels, taps, conv_bias),
                *norm,
                parts.linear("out_proj", d, inner, self.flag(m.out_bias, loc + ("out_bias",), bias), "mixer"))
        tensors = tuple(Tensor(name, (heads,), "mixer") for name in ("dt_bias", "A_log", "D"))
        dt_min = float(m.dt_min) if m.dt_min is not None else None
        factors = None
        if m.in_proj_multipliers is not None:
            factors = tuple(self.factor(f, loc + ("in_proj_multipliers", i), "in_proj multiplier")
                            for i, f in enumerate(m.in_proj_multipliers))
        settings = attrs.Mamba2(inner, state, taps, heads, groups, chunk, dt_min, gated_norm, bool(m.norm_before_gate),
                                factors, self.factor(m.in_multiplier, loc + ("in_multiplier",), "mixer in multiplier"),
                                self.factor(m.out_multiplier, loc + ("out_multiplier",), "mixer out multiplier"))
        return Component("mixer", settings, tensors, kids)

    def deltanet(self, m: sc.Mixer, d, eps: float, taps, conv_bias: bool, loc: tuple) -> Component:
        """Gated DeltaNet (Qwen3.5's separate projections; Qwen3-Next fuses q k v z and b a, the same parameters)."""
        assert m.heads is not None and m.key_width is not None and m.value_width is not None
        heads = self.width(m.heads, loc + ("heads",), "value heads")
        key_heads = self.width(m.key_heads, loc + ("key_heads",), "key heads") if m.key_heads is not None else heads
        self.divides(key_heads, heads, loc + ("key_heads",), "key_heads", "heads")  # each key head serves heads / key_heads
        dk = self.width(m.key_width, loc + ("key_width",), "key head width")
        dv = self.width(m.value_width, loc + ("value_width",), "value head width")
        chunk = self.width(m.chunk, loc + ("chunk",), "chunk size") if m.chunk is not None else None
        bias = self.flag(m.bias, loc + ("bias",))
        channels = 2 * key_heads * dk + heads * dv  # what the conv mixes: q, k and v
        if m.layout == "fused":  # Qwen3-Next: q k v z, and b a, each stored key head by key head
            ins = (parts.linear("in_proj_qkvz", channels + heads * dv, d, bias, "mixer"),
                   parts.linear("in_proj_ba", 2 * heads, d, bias, "mixer"))
        else:
            ins = (parts.linear("in_proj_qkv", channels, d, bias, "mixer"), parts.linear("in_proj_z", heads * dv, d, bias, "mixer"),
                   parts.linear("in_proj_b", heads, d, bias, "mixer"), parts.linear("in_proj_a", heads, d, bias, "mixer"))
        kids = (*ins,
                parts.conv("conv", channels, taps, conv_bias),
                parts.norm("norm", "rmsnorm", dv, False, eps),  # over each head's output, gated by z
                parts.linear("out_proj", d, heads * dv, bias, "mixer"))
        tensors = tuple(Tensor(name, (heads,), "mixer") for name in ("dt_bias", "A_log"))
        return Component("mixer", attrs.GatedDeltaNet(heads, key_heads, dk, dv, taps, chunk), tensors, kids)

    def divides(self, part, whole, loc: tuple, name: str, whole_name: str) -> None:
        """Refuse, at ``loc``, a ``part`` that does not divide ``whole`` at this size."""
        if self.value(whole) % self.value(part):
            raise SpecError.at(where(self.spec, loc), f"{whole_name} = {self.value(whole)} is not a multiple of {name} = "
                                                      f"{self.value(part)}; expected {name} to divide {whole_name}")

    def attention(self, a: sc.Attention, d, loc: tuple, causal: bool, cross: bool = False, layers: int = 1) -> Component:
        heads = self.width(a.heads, loc + ("heads",), "attention heads")
        kv = self.width(a.kv_heads, loc + ("kv_heads",), "key/value heads") if a.kv_heads is not None else heads
        dh = self.width(a.head_width, loc + ("head_width",), "head width")
        dv = self.width(a.value_width, loc + ("value_width",), "value width") if a.value_width is not None else dh
        if self.value(heads) % self.value(kv):
            raise SpecError.at(where(self.spec, loc + ("kv_heads",)),
                               f"heads = {self.value(heads)} is not a multiple of kv_heads = {self.value(kv)}; expected kv_heads to divide heads")
        qkv_bias, out_bias = self.flag(a.qkv_bias, loc + ("qkv_bias",)), self.flag(a.out_bias, loc + ("out_bias",))
        window = self.width(a.window, loc + ("window",), "window") if a.window is not None else None
        pattern = parts.layer_cycle(a.pattern or ("global",), layers)
        if a.pattern is not None and "local" not in pattern:  # the sliding layers come after the last layer
            window = None
        rotary = parts.layer_cycle(a.rotary_pattern or (True,), layers)
        if False in rotary and self.spec.model.embedding.position.kind != "rotary":
            raise SpecError.at(where(self.spec, loc + ("rotary_pattern",)), "rotary_pattern turns rotary positions off in "
                               "some layers, but the model's positions are not rotary")
        latent: dict = {}
        if a.kind == "latent":
            kids, latent = self.latent(a, d, heads, dh, dv, qkv_bias, loc)
        else:
            gate = self.flag(a.output_gate, loc + ("output_gate",))
            kids = parts.projections(d, heads, kv, dh, dv, qkv_bias, "separate" if cross else a.layout, gate)
            kids = self.gemma4_projections(a, kids, dh, dv, loc)
            if self.value(heads * dh) != self.value(d):
                self.warnings.append(
                    f"attention inner width {a.heads.text}·{a.head_width.text} = {self.value(heads)}·{self.value(dh)} = "
                    f"{self.value(heads * dh):,} differs from the model width {self.spec.model.embedding.width.text} = "
                    f"{self.value(d):,}; counted with the inner width {self.value(heads * dh):,}"
                )
        if a.qk_norm is not None and self.flag(a.qk_norm_on, loc + ("qk_norm_on",), True):
            qw, kw = (dh, dh) if a.qk_norm_scope == "head" else (heads * dh, kv * dh)
            kids.append(self.norm("q_norm", a.qk_norm, qw, loc + ("qk_norm",), heads if a.qk_norm_scope == "each_head" else None))
            if not self.flag(a.kv_shared, loc + ("kv_shared",)):  # a layer that reuses keys has no key norm
                kids.append(self.norm("k_norm", a.qk_norm, kw, loc + ("qk_norm",), kv if a.qk_norm_scope == "each_head" else None))
        kids.append(parts.linear("out", d, heads * dv, out_bias, "attention"))
        sinks = self.flag(a.sinks, loc + ("sinks",))
        scale = self.score_scale(a, loc)
        position_bias = not cross and self.spec.model.embedding.position.kind in ("relative-bias", "alibi")
        kernel = attention_kernel(self.value(heads), self.value(kv), self.value(dh), dv != dh, sinks, a.softcap,
                                  "local" in pattern or "chunked" in pattern, position_bias)
        key_multiplier = self.factor(a.key_multiplier, loc + ("key_multiplier",), "key multiplier")
        if key_multiplier is not None:  # every score times it: one scale (the keys' multiplier, Falcon-H1's)
            scale = key_multiplier * (scale if scale is not None else self.value(dh) ** -0.5)
        settings = (attrs.LatentAttention if latent else attrs.Attention)(
            heads, kv, dh, dv, causal, cross, window, pattern, a.softcap, scale,
            sinks, position_bias, **kernel, **latent,
            rotary_pattern=rotary, **self.attention_extras(a, pattern, rotary, loc),
            in_multiplier=self.factor(a.in_multiplier, loc + ("in_multiplier",), "attention in multiplier"),
            out_multiplier=self.factor(a.out_multiplier, loc + ("out_multiplier",), "attention out multiplier"),
            k_eq_v=self.flag(a.k_eq_v, loc + ("k_eq_v",)), kv_shared=self.flag(a.kv_shared, loc + ("kv_shared",)),
            value_norm=float(a.value_norm) if a.value_norm is not None else None)
        tensors = (Tensor("sinks", (heads,), "attention"),) if sinks else ()
        return Component("attn" if not cross else "cross_attn", settings, tensors, tuple(kids))

    def gemma4_projections(self, a: sc.Attention, kids: list[Component], dh, dv, loc: tuple) -> list[Component]:
        """Gemma 4's separate projections less the value's where the values are the keys (k_eq_v), less the key's and
        value's where the layer reuses an earlier layer's (kv_shared)."""
        shared, k_eq_v = self.flag(a.kv_shared, loc + ("kv_shared",)), self.flag(a.k_eq_v, loc + ("k_eq_v",))
        if not (shared or k_eq_v):
            return kids
        if a.layout != "separate" or a.output_gate is not None:
            raise SpecError.at(where(self.spec, loc + ("k_eq_v" if k_eq_v else "kv_shared",)),
                               "k_eq_v and kv_shared need 'layout: separate' (q, k and v projections) and no output gate")
        if k_eq_v and self.value(dv) != self.value(dh):
            raise SpecError.at(where(self.spec, loc + ("k_eq_v",)), f"k_eq_v: the values are the keys, so value_width "
                                                                    f"{self.value(dv)} must equal head_width {self.value(dh)}")
        drop = {"k", "v"} if shared else {"v"}
        return [k for k in kids if k.name not in drop]

    def per_layer_input(self, b: sc.Block, d, loc: tuple) -> list[Component]:
        """Gemma 4's per-layer input of a block (none where its width is 0): the gate, the projection back, its norm."""
        if b.per_layer_input is None:
            return []
        width = self.symbolic(b.per_layer_input, loc + ("per_layer_input",), "per-layer input width")
        if self.value(width) == 0:
            return []
        width = self.width(b.per_layer_input, loc + ("per_layer_input",), "per-layer input width")
        return [parts.linear("ple_gate", width, d, False, "other"), parts.linear("ple_proj", d, width, False, "other"),
                self.norm("ple_norm", b.norm, d, loc + ("norm",))]

    def moe_beside(self, b: sc.Block, d, loc: tuple) -> list[Component]:
        """Gemma 4's mixture of experts beside the dense MLP: a norm after the MLP, one before and one after the experts,
        and the experts with their router, whose input is scaled per feature and whose weights per expert."""
        if b.moe_beside is None:
            return []
        if b.moe_beside.kind != "moe":
            raise SpecError.at(where(self.spec, loc + ("moe_beside", "kind")), "moe_beside is a mixture of experts: kind: moe")
        moe = self.mlp(b.moe_beside, d, loc + ("moe_beside",))
        experts = moe.attrs.experts
        scales = (Tensor("router_scale", (d,), "mlp"), Tensor("expert_scale", (experts,), "mlp"))
        return [self.norm(n, b.norm, d, loc + ("norm",)) for n in ("mlp_out_norm", "moe_norm", "moe_post_norm")] + \
            [Component("moe", moe.attrs, scales, moe.children)]

    def score_scale(self, a: sc.Attention, loc: tuple) -> float | None:
        """The attention's score scale: ``scale``, or 1/sqrt(``scale_width``) (Gemma's query_pre_attn_scalar); None:
        1/sqrt(head width)."""
        if a.scale_width is None:
            return self.factor(a.scale, loc + ("scale",), "attention scale")
        # a positive number, whole or not (Zamba2 divides by sqrt(d_head / 2), d_head odd or even)
        return float(self.factor(a.scale_width, loc + ("scale_width",), "scale_width")) ** -0.5

    def attention_extras(self, a: sc.Attention, pattern: tuple, rotary: tuple, loc: tuple) -> dict:
        """The per-layer settings of an attention node that change no parameter (its ``pattern`` and ``rotary``
        cycles): chunked attention's chunk, Llama 4's query/key norm on the rotary layers and its query temperature
        on the others (Mistral's: on every layer)."""
        out: dict = {}
        if "chunked" in pattern:
            assert a.chunk is not None
            out["chunk"] = self.width(a.chunk, loc + ("chunk",), "chunk")
        if a.rotary_qk_norm is not None and True in rotary and self.spec.model.embedding.position.kind == "rotary":
            out["rotary_qk_norm"] = float(a.rotary_qk_norm)
        if a.temperature is not None and (a.temperature.every_layer or False in rotary):
            t = a.temperature
            out["temperature"] = (float(t.floor), float(t.scale), int(t.offset), bool(t.every_layer))
        if self.flag(a.output_gate, loc + ("output_gate",)):
            out["output_gate"] = True
        return out

    def latent(self, a: sc.Attention, d, heads, dh, dv, bias: bool, loc: tuple) -> tuple[list[Component], dict]:
        """Multi-head latent attention (DeepSeek-V2/V3): low-rank queries and a compressed key/value cache; the
        projections, and the latent widths of its settings."""
        assert a.kv_rank is not None and a.rope_width is not None
        rope = self.width(a.rope_width, loc + ("rope_width",), "rope_width")
        kv_rank = self.width(a.kv_rank, loc + ("kv_rank",), "kv_rank")
        kids: list[Component] = []
        q_rank = None
        if a.q_rank is not None:
            q_rank = self.width(a.q_rank, loc + ("q_rank",), "q_rank")
            kids += [parts.linear("q_down", q_rank, d, bias, "attention"),
                     parts.norm("q_down_norm", "rmsnorm", q_rank, False, 1e-6),
                     parts.linear("q_up", heads * (dh + rope), q_rank, False, "attention")]
        else:
            kids.append(parts.linear("q", heads * (dh + rope), d, False, "attention"))
        kids += [parts.linear("kv_down", kv_rank + rope, d, bias, "attention"),
                 parts.norm("kv_down_norm", "rmsnorm", kv_rank, False, 1e-6),
                 parts.linear("kv_up", heads * (dh + dv), kv_rank, False, "attention")]
        out = {"rope_width": rope, "kv_rank": kv_rank, "q_rank": q_rank, "rank_scale": self.flag(a.rank_scale, loc + ("rank_scale",))}
        if a.indexer is not None:
            out |= self.indexer(a.indexer, d, q_rank, rope, kids, loc + ("indexer",))
        return kids, out

    def indexer(self, ix: sc.Indexer, d, q_rank, rope, kids: list[Component], loc: tuple) -> dict:
        """DeepSeek Sparse Attention: the indexer (appended to ``kids``, unless the layers share the previous layer's
        selection) and the latent attention's sparse settings."""
        top_k = self.width(ix.top_k, loc + ("top_k",), "indexer top_k")
        shared = self.flag(ix.shared, loc + ("shared",))
        if not shared:
            heads = self.width(ix.heads, loc + ("heads",), "indexer heads")
            width = self.width(ix.head_width, loc + ("head_width",), "indexer head width")
            if self.value(width) < self.value(rope):
                raise SpecError.at(where(self.spec, loc + ("head_width",)),
                                   f"indexer head_width = {self.value(width)} is narrower than rope_width = "
                                   f"{self.value(rope)}; expected at least the rotary features")
            kids.append(Component("indexer", attrs.Indexer(heads, width, ix.pairing), children=(
                parts.linear("q_up", heads * width, q_rank, False, "attention"),
                parts.linear("k", width, d, False, "attention"),
                parts.norm("k_norm", "layernorm", width, True, 1e-6),
                parts.linear("weights", heads, d, False, "attention"))))
        return {"index_top_k": top_k, "index_shared": shared}

    def mlp(self, m: sc.MLP, d, loc: tuple) -> Component:
        hidden = self.width(m.hidden, loc + ("hidden",), "MLP hidden width")
        bias = self.flag(m.bias, loc + ("bias",))
        if m.kind != "moe":
            gate = self.factor(m.gate_multiplier, loc + ("gate_multiplier",), "gate multiplier")
            if gate is not None and m.kind != "gated":
                raise SpecError.at(where(self.spec, loc + ("gate_multiplier",)), "gate_multiplier needs a gated MLP")
            down = self.factor(m.down_multiplier, loc + ("down_multiplier",), "down multiplier")
            return Component("mlp", attrs.MLP(m.kind == "gated", m.activation, hidden, m.clamp, False, gate, down),
                             tensors=parts.activation_scalars(m.activation), children=tuple(parts.ffn(m.kind, d, hidden, bias, m.layout)))
        self.check_expert_activation(m, loc)
        assert m.experts is not None and m.top_k is not None
        for name in ("gate_multiplier", "down_multiplier"):
            if getattr(m, name) is not None:
                raise SpecError.at(where(self.spec, loc + (name,)), f"{name} is modelled on a dense or gated MLP only")
        experts = self.width(m.experts, loc + ("experts",), "experts")
        top_k = self.width(m.top_k, loc + ("top_k",), "top_k")
        zero = self.width(m.zero_experts, loc + ("zero_experts",), "zero experts") if m.zero_experts is not None else None
        scored = experts + zero if zero is not None else experts  # what the router chooses among
        if self.value(top_k) > self.value(scored):
            raise SpecError.at(where(self.spec, loc + ("top_k",)), f"top_k = {self.value(top_k)} exceeds experts = {self.value(scored)}")
        kids = [parts.linear("router", scored, d, self.flag(m.router_bias, loc + ("router_bias",)), "mlp")]
        # active: the slots of a token that land on real experts (a slot on a zero expert costs no matmul)
        expert = parts.ffn(m.expert_kind, d, hidden, bias, m.layout, active=self.real_top_k(m, top_k, experts, zero, loc) / experts)
        kids.append(Component("experts", attrs.Experts(), children=tuple(expert), repeat=experts))
        if zero is not None and m.zero_gate_up:
            kids.append(Component("zero_experts", attrs.Experts(), (Tensor("gate_up", (2 * hidden, d), "mlp", sympy.Integer(0)),),
                                  repeat=zero))
        shared = self.width(m.shared_experts, loc + ("shared_experts",), "shared experts") if m.shared_experts is not None else None
        if shared is not None:
            width = self.width(m.shared_hidden, loc + ("shared_hidden",), "shared hidden width") if m.shared_hidden is not None else shared * hidden
            kids.append(Component("shared", attrs.MLP(m.expert_kind == "gated", m.activation, width, m.clamp, shared=True),
                                  children=tuple(parts.ffn(m.expert_kind, d, width, bias, m.layout))))
            if self.flag(m.shared_gate, loc + ("shared_gate",)):
                kids.append(parts.linear("shared_gate", sympy.Integer(1), d, False, "mlp"))
        groups = group_top_k = None
        if m.groups is not None and m.group_top_k is not None:
            groups = self.width(m.groups, loc + ("groups",), "expert groups")
            group_top_k = self.width(m.group_top_k, loc + ("group_top_k",), "group_top_k")
            if self.value(experts) % self.value(groups):
                raise SpecError.at(where(self.spec, loc + ("groups",)),
                                   f"experts = {self.value(experts)} is not a multiple of groups = {self.value(groups)}")
            if self.value(group_top_k) > self.value(groups):
                raise SpecError.at(where(self.spec, loc + ("group_top_k",)),
                                   f"group_top_k = {self.value(group_top_k)} exceeds groups = {self.value(groups)}")
        settings = attrs.MoE(m.activation, hidden, experts, top_k, m.clamp, m.scoring or "softmax", m.normalize, m.routed_scale,
                             groups, group_top_k, m.group_score or "top2_sum", bool(m.weigh_input), bool(m.score_bias),
                             zero, bool(m.shortcut))
        return Component("mlp", settings, tensors=self.score_bias(m, experts, loc), children=tuple(kids))

    def real_top_k(self, m: sc.MLP, top_k, experts, zero, loc: tuple) -> sympy.Expr:
        """How many of a token's top_k slots land on real experts: top_k, or with zero experts ``real_top_k`` (at most
        top_k and experts)."""
        if zero is None:
            if m.real_top_k is not None:
                raise SpecError.at(where(self.spec, loc + ("real_top_k",)), "real_top_k needs zero_experts")
            return top_k
        if m.real_top_k is None:
            raise SpecError.at(where(self.spec, loc + ("zero_experts",)), "zero_experts needs real_top_k: how many of a "
                               "token's top_k slots land on real experts (the active parameters and FLOPs count those)")
        real = self.width(m.real_top_k, loc + ("real_top_k",), "real_top_k")
        if self.value(real) > min(self.value(top_k), self.value(experts)):
            raise SpecError.at(where(self.spec, loc + ("real_top_k",)), f"real_top_k = {self.value(real)} exceeds top_k = "
                               f"{self.value(top_k)} or experts = {self.value(experts)}")
        return real

    def check_expert_activation(self, m: sc.MLP, loc: tuple) -> None:
        if m.activation in parts.LEARNED_ACTIVATIONS:
            raise SpecError.at(where(self.spec, loc + ("activation",)), f"{m.activation} (learnable scalars) is modelled in a dense "
                                                                         "or gated MLP only, not in experts")

    def score_bias(self, m: sc.MLP, experts, loc: tuple) -> tuple[Tensor, ...]:
        """A mixture's learned bias of the choice, where it has one: 1 x experts beside softmax shares (ERNIE 4.5's),
        experts beside sigmoid scores (AFMoE's expert_bias, a parameter where DeepSeek-V3's is a buffer)."""
        if not m.score_bias:
            return ()
        if m.weigh_input:
            raise SpecError.at(where(self.spec, loc + ("score_bias",)), "score_bias is not modelled with weigh_input")
        if m.scoring == "sigmoid":
            return (Tensor("score_bias", (experts,), "mlp"),)
        return (Tensor("score_bias", (sympy.Integer(1), experts), "mlp"),)


def _adapter(name: str, width, rank, out, role: str) -> Component:
    """A low-rank adapter: ``down`` (width -> rank) then ``up`` (rank -> out), no biases."""
    return Component(name, attrs.Adapter(), children=(parts.linear("down", rank, width, False, role),
                                                      parts.linear("up", out, rank, False, role)))


def _owned(node: Component, share: sympy.Expr) -> Component:
    """``node`` with every tensor below it owning ``share`` of its copies (a shared block's weights, counted once)."""
    tensors = tuple(dataclasses.replace(t, owned=share) for t in node.tensors)
    return Component(node.name, node.attrs, tensors, tuple(_owned(c, share) for c in node.children), node.repeat)
