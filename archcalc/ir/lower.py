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

from dataclasses import dataclass
from fractions import Fraction

import sympy

from archcalc.errors import SpecError
from archcalc.ir import attrs, ends, factors, parts
from archcalc.ir import layers as per_layer
from archcalc.ir.kernel import attention_kernel
from archcalc.ir.nodes import Component, Tensor
from archcalc.spec import components as sc
from archcalc.spec.bind import Binding, _fmt
from archcalc.spec.expr import Expr, ExprError
from archcalc.spec.loader import where
from archcalc.spec.schema import MAX_VALUE


@dataclass(frozen=True)
class Lowered:
    """The IR of one bound size, and what lowering noticed (e.g. H·d_head ≠ d)."""

    root: Component
    binding: Binding
    warnings: tuple[str, ...] = ()


def lower(binding: Binding) -> Lowered:
    """The IR tree of ``binding``'s spec at its size."""
    lowerer = Lowerer(binding)
    root = lowerer.model(binding.spec.model, ("model",))
    return Lowered(root, binding, tuple(dict.fromkeys(lowerer.warnings)))


class Lowerer:
    """Turns spec components into IR components; ``loc`` tuples track the place in the spec file."""

    def __init__(self, binding: Binding):
        self.spec, self.binding = binding.spec, binding
        self.numeric = binding.numeric()
        self.warnings: list[str] = []

    # -- values -----------------------------------------------------------------------------
    def width(self, expr: Expr, loc: tuple, what: str) -> sympy.Expr:
        """A symbolic width that must be a positive integer (and not absurdly large) at this size."""
        formula = self.symbolic(expr, loc, what)
        value = formula.xreplace(self.numeric)
        if value.is_Integer and 1 <= value <= MAX_VALUE:
            return formula
        if not value.is_Rational:  # zoo or nan: a division by zero at this size
            shown = "undefined (a division by zero)"
        elif not value.is_Integer:
            shown = f"{_fmt(Fraction(int(value.p), int(value.q)))}, which is not an integer"
        else:
            shown = _fmt(Fraction(int(value))) + (f", more than {MAX_VALUE:.0e}" if value > MAX_VALUE else "")
        raise SpecError.at(
            where(self.spec, loc),
            f"{what} = {expr.text} is {shown} for size {self.binding.size!r}; expected a positive integer",
        )

    def symbolic(self, expr: Expr, loc: tuple, what: str) -> sympy.Expr:
        """``expr`` as a sympy expression; a division by a constant zero is an error at ``loc``."""
        try:
            return expr.to_sympy()
        except ExprError as e:
            raise SpecError.at(where(self.spec, loc), f"{what} = {expr.text}: {e}") from None

    def value(self, expr: sympy.Expr) -> int:
        return int(expr.xreplace(self.numeric))

    def flag(self, expr: Expr | None, loc: tuple, default: bool = False) -> bool:
        try:
            return default if expr is None else bool(expr.evaluate(self.binding.values))
        except ExprError as e:
            raise SpecError.at(where(self.spec, loc), f"{loc[-1]} = {expr.text}: {e}") from None

    # -- model ------------------------------------------------------------------------------
    def model(self, m: sc.Model, loc: tuple) -> Component:
        emb = m.embedding
        d = self.width(emb.width, loc + ("embedding", "width"), "embedding width")
        vocab = self.width(emb.vocab, loc + ("embedding", "vocab"), "vocabulary size")
        token = ends.token_width(self, emb, d, m.architecture, loc + ("embedding",))
        children = [ends.embedding(self, emb, d, token, vocab, loc + ("embedding",))]
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
            children.append(Component("pooler", "pooler", children=(parts.linear("dense", d, d, True, "other"),)))
        if m.head is not None:
            children.append(ends.head(self, m.head, token, vocab, loc + ("head",)))
        order = per_layer.layer_order(self, m, [c for c in children if c.kind == "block"], loc)
        return Component("", "model", children=tuple(children), attrs=attrs.Model(m.architecture, d, vocab, m.init, order))

    def tower(self, name: str, t: sc.Tower, d, loc: tuple, causal: bool) -> Component:
        kids = self.stacks(t, d, loc, causal, cross=name == "decoder")
        kids += self.relative_bias(t.stacks(), self.spec.model.embedding, loc)
        if t.final_norm is not None:
            kids.append(self.norm("final_norm", t.final_norm, d, loc + ("final_norm",)))
        return Component(name, "tower", children=tuple(kids), attrs=attrs.Tower(causal))

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
        heads = stacks[0].attention.heads.to_sympy()
        return [Component("rel_bias", "relative_bias", (Tensor("weight", (buckets, heads), "position_embedding"),))]

    def norm(self, name: str, n: sc.Norm, width, loc: tuple, groups=None) -> Component:
        return parts.norm(name, n.kind, width, self.flag(n.bias, loc + ("bias",), n.kind == "layernorm"), n.eps, n.unit_offset, groups)

    # -- blocks -----------------------------------------------------------------------------
    def block(self, b: sc.Block, d, loc: tuple, causal: bool, cross: bool) -> Component:
        repeat = self.width(b.repeat, loc + ("repeat",), "block repeat")
        residual = "parallel" if self.flag(b.parallel, loc + ("parallel",)) else b.residual  # a per-size switch
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
        multiplier = factors.factor(self, b.residual_multiplier, loc + ("residual_multiplier",), "residual multiplier")
        return Component(b.name, "block", children=tuple(kids), repeat=repeat, attrs=attrs.Block(residual, causal, multiplier))

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
            kids = parts.projections(d, heads, kv, dh, dv, qkv_bias, "separate" if cross else a.layout)
            if self.value(heads * dh) != self.value(d):
                self.warnings.append(
                    f"attention inner width {a.heads.text}·{a.head_width.text} = {self.value(heads)}·{self.value(dh)} = "
                    f"{self.value(heads * dh):,} differs from the model width {self.spec.model.embedding.width.text} = "
                    f"{self.value(d):,}; counted with the inner width {self.value(heads * dh):,}"
                )
        if a.qk_norm is not None and self.flag(a.qk_norm_on, loc + ("qk_norm_on",), True):
            qw, kw = (dh, dh) if a.qk_norm_scope == "head" else (heads * dh, kv * dh)
            kids.append(self.norm("q_norm", a.qk_norm, qw, loc + ("qk_norm",), heads if a.qk_norm_scope == "each_head" else None))
            kids.append(self.norm("k_norm", a.qk_norm, kw, loc + ("qk_norm",), kv if a.qk_norm_scope == "each_head" else None))
        kids.append(parts.linear("out", d, heads * dv, out_bias, "attention"))
        sinks = self.flag(a.sinks, loc + ("sinks",))
        scale = factors.score_scale(self, a, loc)
        position_bias = not cross and self.spec.model.embedding.position.kind in ("relative-bias", "alibi")
        kernel = attention_kernel(self.value(heads), self.value(kv), self.value(dh), dv != dh, sinks, a.softcap,
                                  "local" in pattern or "chunked" in pattern, position_bias)
        settings = (attrs.LatentAttention if latent else attrs.Attention)(
            heads, kv, dh, dv, causal, cross, window, pattern, a.softcap, scale,
            sinks, position_bias, **kernel, **latent,
            rotary_pattern=rotary, **per_layer.attention_extras(self, a, pattern, rotary, loc))
        tensors = (Tensor("sinks", (heads,), "attention"),) if sinks else ()
        return Component("attn" if not cross else "cross_attn", "attention", tensors, tuple(kids), attrs=settings)

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
        return kids, {"rope_width": rope, "kv_rank": kv_rank, "q_rank": q_rank}

    def mlp(self, m: sc.MLP, d, loc: tuple) -> Component:
        hidden = self.width(m.hidden, loc + ("hidden",), "MLP hidden width")
        bias = self.flag(m.bias, loc + ("bias",))
        if m.kind != "moe":
            return Component("mlp", "mlp", children=tuple(parts.ffn(m.kind, d, hidden, bias, m.layout)),
                             attrs=attrs.MLP(m.kind == "gated", m.activation, hidden, m.clamp))
        assert m.experts is not None and m.top_k is not None
        experts = self.width(m.experts, loc + ("experts",), "experts")
        top_k = self.width(m.top_k, loc + ("top_k",), "top_k")
        if self.value(top_k) > self.value(experts):
            raise SpecError.at(where(self.spec, loc + ("top_k",)), f"top_k = {self.value(top_k)} exceeds experts = {self.value(experts)}")
        kids = [parts.linear("router", experts, d, self.flag(m.router_bias, loc + ("router_bias",)), "mlp")]
        expert = parts.ffn(m.expert_kind, d, hidden, bias, m.layout, active=top_k / experts)
        kids.append(Component("experts", "experts", children=tuple(expert), repeat=experts))
        shared = self.width(m.shared_experts, loc + ("shared_experts",), "shared experts") if m.shared_experts is not None else None
        if shared is not None:
            width = self.width(m.shared_hidden, loc + ("shared_hidden",), "shared hidden width") if m.shared_hidden is not None else shared * hidden
            kids.append(Component("shared", "mlp", children=tuple(parts.ffn(m.expert_kind, d, width, bias, m.layout)),
                                  attrs=attrs.MLP(m.expert_kind == "gated", m.activation, width, m.clamp, shared=True)))
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
                             groups, group_top_k, m.group_score or "top2_sum", bool(m.weigh_input))
        return Component("mlp", "moe", children=tuple(kids), attrs=settings)

