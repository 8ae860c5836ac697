"""The PyTorch printer: walks the IR in the manner of sympy's printers, one ``_print_<Kind>`` method per kind of
component, named after the class of its settings (:mod:`archcalc.ir.attrs`).

``_print(node, **context)`` calls the method of ``type(node.attrs)``, or of the nearest class up its MRO
(``LatentAttention`` has its own, else ``Attention``'s would serve), passing the context on (the stack's field
prefix, whether rotary tables come in). Each method adds what its component needs to the :class:`Emitter` (config
fields, classes) through the source templates beside it (``archcalc.codegen.attention``, ``archcalc.codegen.mlp``...) and returns how
its parent builds it: the name of the class it wrote (``Attention``), or a constructor call (``nn.RMSNorm(...)``).
A new kind of component is its settings class, its lowering and one method here.

>>> from archcalc.spec import load_spec
>>> from archcalc.spec.bind import bind
>>> from archcalc.ir import lower
>>> printer = TorchPrinter(lower(bind(load_spec("gpt2"), "small")))
>>> printer.doprint(printer.em.lowered.root), [c.split("(", 1)[0] for c in printer.em.classes]
('Transformer', ['class Embeddings', 'class Attention', 'class MLP', 'class Block', 'class Transformer'])
"""

from __future__ import annotations

import sympy

from archcalc.codegen.alibi import emit_alibi
from archcalc.codegen.attention import attention_class, check_attention
from archcalc.codegen.blocks import block_class, mixer_block_class, parallel_mixer_block_class, tower_class
from archcalc.codegen.cache import KV_CACHE, SAMPLE
from archcalc.codegen.deltanet import deltanet_class, short_conv_class
from archcalc.codegen.emitter import Emitter
from archcalc.codegen.errors import UnsupportedError
from archcalc.codegen.latent import latent_attention_class
from archcalc.codegen.mixer import mamba2_class
from archcalc.codegen.mlp import check_mlp, mlp_class, moe_class
from archcalc.codegen.model import model_class, seq2seq_model_class
from archcalc.codegen.mtp import check_mtp, mtp_class, mtp_stack
from archcalc.codegen.parts import camel, embeddings_class, norm_expr
from archcalc.codegen.rotary import emit_rotary
from archcalc.codegen.shared import hybrid_block_class
from archcalc.ir import Component, Lowered


class Printer:
    """Dispatch on the kind of an IR component, as sympy's ``Printer._print`` dispatches on the class of an expression."""

    def doprint(self, node: Component) -> str:
        return self._print(node)

    def _print(self, node: Component, **context) -> str:
        for cls in type(node.attrs).__mro__:
            method = getattr(self, f"_print_{cls.__name__}", None)
            if method is not None:
                return method(node, **context)
        return self.emptyPrinter(node)

    def emptyPrinter(self, node: Component) -> str:
        raise UnsupportedError(f"codegen does not generate {node.kind} components yet")


class TorchPrinter(Printer):
    """IR → the config fields and classes of one self-contained PyTorch file (``archcalc.codegen.emit`` writes the file)."""

    def __init__(self, lowered: Lowered):
        self.em = Emitter(lowered)

    # -- the model --------------------------------------------------------------------------
    def _print_Model(self, root: Component) -> str:
        """A decoder or an encoder (its stacks of blocks), or an encoder-decoder (two towers); then ``Transformer``."""
        em, a = self.em, root.attrs
        if a.architecture not in ("decoder", "encoder", "encoder-decoder"):
            raise UnsupportedError(f"codegen does not generate {a.architecture} models yet")
        children = {c.name: c for c in root.children}
        embed = children["embed"]
        em.field("vocab", a.vocab, "vocabulary size")
        em.field("width", a.width, "model width")
        generates = a.architecture != "encoder"
        position = embed.attrs.position
        positions = position in ("learned", "sinusoidal")
        self._print(embed, start=generates and positions)
        stacks = [c for c in root.children if c.kind == "block"]
        mixers = [stack for stack in stacks if any(c.name == "mixer" for c in stack.children)]
        if mixers and a.architecture != "decoder":
            raise UnsupportedError("codegen generates state-mixer layers in a decoder only")
        # the stacks of attention layers (Falcon-H1's: attention beside a mixer)
        attended = [stack for stack in stacks if stack not in mixers or any(c.name == "attn" for c in stack.children)]
        shared = [attn for stack in stacks if (attn := stack.find("shared.attn")) is not None]  # Zamba2's
        if generates and (attended or shared or not mixers):  # (an encoder-decoder's stacks are in its towers)
            em.add(KV_CACHE, helper=True)
        if a.architecture == "encoder-decoder":
            return self._seq2seq(children, start=positions)
        if position == "sinusoidal":
            raise UnsupportedError("codegen generates sinusoidal positions for encoder-decoder models only")
        unknown = set(children) - {"embed", "final_norm", "project_out", "head", "pooler", "mtp", *(s.name for s in stacks)}
        if unknown:
            raise UnsupportedError(f"codegen does not generate {', '.join(sorted(unknown))} yet")
        if position == "relative-bias":
            raise UnsupportedError("codegen does not generate relative-bias positions yet")
        rotary, alibi = position == "rotary", position == "alibi"
        if rotary:
            emit_rotary(em, embed, [_child(stack, "attn") for stack in attended] + shared)
        if alibi:
            emit_alibi(em, embed, [_child(stack, "attn") for stack in attended])
        prefixed = len(stacks) > 1
        stack_classes = [(stack, self._print(stack, prefix=f"{stack.name}_" if prefixed else "", rotary=rotary, bias=alibi))
                         for stack in stacks]
        if "mtp" in children:  # multi-token prediction modules (--with-mtp): a block of one stack's class each
            block = dict(stack_classes)[mtp_stack(em.lowered, stacks)]
            check_mtp(em, embed, children.get("head"), _child(children["mtp"], "block"))
            mtp_class(em, children["mtp"], block)
        em.add(model_class(em, stack_classes, children.get("final_norm"), children.get("head"), rotary,
                           pooler="pooler" in children, token_types="token_type" in {c.name for c in embed.children},
                           start=generates and positions, alibi=alibi, project_out="project_out" in children,
                           mtp="mtp" in children))
        return "Transformer"

    def _seq2seq(self, children: dict[str, Component], start: bool) -> str:
        """An encoder-decoder model (T5, the 2017 Transformer): two towers sharing one embedding."""
        em, embed = self.em, children["embed"]
        unknown = set(children) - {"embed", "encoder", "decoder", "head"}
        if unknown:
            raise UnsupportedError(f"codegen does not generate {', '.join(sorted(unknown))} in an encoder-decoder model yet")
        position = embed.attrs.position
        if position not in ("relative-bias", "sinusoidal", "none"):
            raise UnsupportedError(f"codegen does not generate {position} positions in an encoder-decoder model yet")
        if "head" not in children:
            raise UnsupportedError("codegen generates encoder-decoder models with a head only")
        rel = position == "relative-bias"
        if rel:
            tables = [c for tower in ("encoder", "decoder") for c in children[tower].children if c.kind == "relative_bias"]
            em.field("rel_buckets", tables[0].tensors[0].shape[0], "relative position buckets")
            distance = em.lowered.binding.spec.model.embedding.position.max_distance
            em.field("rel_max_distance", distance.to_sympy() if distance is not None else sympy.Integer(128),
                     "distances from here on share the last bucket")
        towers = [self._print(children[tower], rel=rel) for tower in ("encoder", "decoder")]
        em.add(SAMPLE, helper=True)
        em.add(seq2seq_model_class(em, *towers, children["head"], start))
        return "Transformer"

    def _print_Embeddings(self, embed: Component, start: bool = False) -> str:
        self.em.add(embeddings_class(self.em, embed, start))
        return "Embeddings"

    # -- stacks and towers ------------------------------------------------------------------
    def _print_Block(self, stack: Component, prefix: str, rotary: bool, bias: bool = False) -> str:
        """The classes of one stack of blocks (``prefix``: its config fields' prefix; ``bias``: its attention takes
        ALiBi's score bias); the name of its block class."""
        em, p = self.em, prefix
        kids = {c.name: c for c in stack.children}
        if "attn" not in kids:  # a state mixer or an MLP alone: takes what the attention blocks are given and ignores it
            return self._mixer_block(stack, kids, p, rotary, bias)
        if "mixer" in kids:  # attention and a mixer side by side (Falcon-H1)
            return self._parallel_mixer_block(stack, kids, p, rotary, bias)
        if kids["attn"].attrs.in_multiplier is not None or kids["attn"].attrs.out_multiplier is not None:
            raise UnsupportedError("codegen generates attention's in and out multipliers beside a mixer only")
        unsupported = check_attention(kids["attn"]) + (check_mlp(kids["mlp"]) if "mlp" in kids else [])
        if "cross_attn" in kids:
            unsupported.append("cross-attention")
        if unsupported:
            raise UnsupportedError(f"codegen does not generate {', '.join(unsupported)} yet")
        em.field(f"{p}layers", stack.repeat, "blocks")
        attn = self._print(kids["attn"], prefix=p, rotary=rotary)
        mlp = self._print(kids["mlp"], prefix=p) if "mlp" in kids else None  # none: attention alone (Nemotron-H's)
        norms = self._norms(kids, ("norm_eps", f"{p}block_norm_eps"))
        # Gemma 4's mixture of experts beside the MLP: its router normalises the layer's input as the norms do
        moe = moe_class(em, kids["moe"], p, float(kids["moe_norm"].attrs.eps)) if "moe" in kids else None
        if stack.attrs.causal:
            em.add(SAMPLE, helper=True)
        return block_class(em, stack, p, attn, mlp, norms, rotary, bias=bias, moe=moe)

    def _mixer_block(self, stack: Component, kids: dict[str, Component], p: str, rotary: bool, bias: bool) -> str:
        """A stack of pre-norm blocks of a state mixer (and an MLP, if the stack has one), or of an MLP alone; its block
        class."""
        em = self.em
        if "mlp" in kids and check_mlp(kids["mlp"]):
            raise UnsupportedError(f"codegen does not generate {', '.join(check_mlp(kids['mlp']))} yet")
        em.field(f"{p}layers", stack.repeat, "blocks")
        mixer = self._print(kids["mixer"], prefix=p) if "mixer" in kids else None
        mlp = self._print(kids["mlp"], prefix=p) if "mlp" in kids else None
        norms = self._norms(kids, ("norm_eps", f"{p}block_norm_eps"))
        em.add(SAMPLE, helper=True)
        if "shared" in kids:  # Zamba2's hybrid layer: a shared transformer block, then Mamba2
            if mixer is None:
                raise UnsupportedError("codegen generates a shared block before a Mamba2 layer only")
            return hybrid_block_class(em, stack, p, mixer, norms["mixer_norm"], rotary)
        shared = any(c.find("shared") is not None for c in em.lowered.root.children)  # every layer takes the embeddings
        return mixer_block_class(em, stack, p, mixer, mlp, norms, rotary, bias, embeddings=shared)

    def _parallel_mixer_block(self, stack: Component, kids: dict[str, Component], p: str, rotary: bool, bias: bool) -> str:
        """A stack of blocks of attention and a state mixer side by side, then an MLP (Falcon-H1's); its block class."""
        em = self.em
        unsupported = check_attention(kids["attn"]) + (check_mlp(kids["mlp"]) if "mlp" in kids else [])
        if unsupported:
            raise UnsupportedError(f"codegen does not generate {', '.join(unsupported)} yet")
        em.field(f"{p}layers", stack.repeat, "blocks")
        attn = self._print(kids["attn"], prefix=p, rotary=rotary)
        mixer = self._print(kids["mixer"], prefix=p)
        mlp = self._print(kids["mlp"], prefix=p) if "mlp" in kids else None
        norms = self._norms(kids, ("norm_eps", f"{p}block_norm_eps"))
        em.add(SAMPLE, helper=True)
        return parallel_mixer_block_class(em, stack, p, attn, mixer, mlp, norms, rotary, bias)

    def _print_Tower(self, node: Component, rel: bool) -> str:
        """The encoder or the decoder: one stack of blocks (``rel``: T5's relative position bias); its class name."""
        em, tower = self.em, node.name
        stacks = [c for c in node.children if c.kind == "block"]
        other = {c.name for c in node.children if c.kind != "block"} - {"rel_bias", "final_norm"}
        if len(stacks) != 1 or other:
            raise UnsupportedError(f"codegen generates a {tower} of one stack of blocks only")
        stack = stacks[0]
        kids = {c.name: c for c in stack.children}
        unsupported = check_attention(kids["attn"]) + check_mlp(kids["mlp"])
        if "cross_attn" in kids:
            unsupported += check_attention(kids["cross_attn"])
        if unsupported:
            raise UnsupportedError(f"codegen does not generate {', '.join(unsupported)} yet")
        if kids["attn"].attrs.heads != kids.get("cross_attn", kids["attn"]).attrs.heads:
            raise UnsupportedError("codegen: cross-attention with its own head count is not generated yet")
        layers = em.field(f"{tower}_layers", stack.repeat, f"{tower} blocks")
        cls = camel(tower)
        attn = self._print(kids["attn"], prefix="", rotary=False, cls=f"{cls}SelfAttention")
        cross = self._print(kids["cross_attn"], prefix="", rotary=False, cls="CrossAttention") if "cross_attn" in kids else None
        mlp = self._print(kids["mlp"], prefix="")
        norms = self._norms(kids, ("norm_eps", "block_norm_eps"))
        block = block_class(em, stack, "", attn, mlp, norms, False, cls=f"{cls}Block", cross=cross, bias=rel)
        final = next((c for c in node.children if c.name == "final_norm"), None)
        final_norm = self._print(final, own=("norm_eps", "final_norm_eps")) if final is not None else None
        return tower_class(em, node, block, layers, final_norm, rel)

    # -- layers -----------------------------------------------------------------------------
    def _print_Attention(self, attn: Component, prefix: str, rotary: bool, cls: str | None = None) -> str:
        return attention_class(self.em, attn, prefix, rotary, cls)

    def _print_LatentAttention(self, attn: Component, prefix: str, rotary: bool, cls: str | None = None) -> str:
        if not rotary:
            raise UnsupportedError("codegen generates latent attention with rotary positions only")
        return latent_attention_class(self.em, attn, prefix)

    def _print_Mamba2(self, mixer: Component, prefix: str) -> str:
        return mamba2_class(self.em, mixer, prefix)

    def _print_Mamba(self, mixer: Component, prefix: str) -> str:
        from archcalc.codegen.mamba import mamba_class

        return mamba_class(self.em, mixer, prefix)

    def _print_GatedDeltaNet(self, mixer: Component, prefix: str) -> str:
        return deltanet_class(self.em, mixer, prefix)

    def _print_ShortConv(self, mixer: Component, prefix: str) -> str:
        return short_conv_class(self.em, mixer, prefix)

    def _print_MLP(self, mlp: Component, prefix: str) -> str:
        return mlp_class(self.em, mlp, prefix)

    def _print_MoE(self, moe: Component, prefix: str) -> str:
        return moe_class(self.em, moe, prefix)

    def _print_Norm(self, norm: Component, own: tuple[str, ...] = ("norm_eps",), width: str | None = None) -> str:
        return norm_expr(self.em, norm, width, own)

    def _norms(self, kids: dict[str, Component], own: tuple[str, ...]) -> dict[str, str]:
        """The constructor call of each norm of a block, by its name."""
        return {name: self._print(c, own=own) for name, c in kids.items() if c.kind in ("layernorm", "rmsnorm")}


def _child(node: Component, name: str) -> Component:
    return next(c for c in node.children if c.name == name)
