"""Source templates for the whole model: the ``Transformer`` class of a decoder, an encoder or an
encoder-decoder, with its initialisation (``reset_parameters``), ``forward`` (logits, and the loss when
given targets) and, for models that generate, ``new_cache`` and ``generate``.

Initialisation follows the spec's ``init`` section (transformers' ``_init_weights`` of the family): see
:func:`init_method`. Forward returns what transformers' model returns (logits, or BERT's hidden states);
with ``targets`` it returns ``(output, loss)``, the mean cross-entropy over positions whose target is not
-100 (decoders: next-token targets; encoders: masked-LM targets scored against the token embeddings;
encoder-decoders: the decoder's targets, transformers' ``labels``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from archcalc.codegen.blocks import sharing_kv, shortcut, stack_init
from archcalc.codegen.cache import PARALLEL_CACHE, SEQ2SEQ_GENERATE, SEQ2SEQ_NEW_CACHE, generate_method, new_cache_method
from archcalc.codegen.errors import UnsupportedError
from archcalc.codegen.init import init_method
from archcalc.codegen.literal import flat
from archcalc.codegen.parts import docstring, norm_expr
from archcalc.codegen.rotary import local_rotary
from archcalc.codegen.template import unit
from archcalc.ir import Component

if TYPE_CHECKING:
    from archcalc.codegen.emitter import Emitter

CHECK_TOKENS = unit("model", "check_tokens") + "\n\n\n" + unit("model", "described")
CHECK_VOCAB = unit("model", "check_vocab")
POOLER = unit("model", "Pooler")


def model_class(em: Emitter, stacks: list[tuple[Component, str]], final: Component | None, head: Component | None,
                rotary: bool = False, pooler: bool = False, token_types: bool = False, start: bool = False,
                alibi: bool = False, project_out: bool = False, mtp: bool = False) -> str:
    """A decoder (causal: a KV cache and generate) or an encoder (hidden states, or a head's logits), from
    ``templates/model.py``. ``start``: the embeddings take the position of the first token (learned positions in a
    decoder); ``alibi``: the blocks take ALiBi's score bias, computed once per forward (archcalc.codegen.alibi);
    ``project_out``: the final hidden state is projected down to the token table's width before the head
    (OPT-350m); ``mtp``: multi-token prediction modules (archcalc.codegen.mtp), whose loss forward adds."""
    causal = all(stack.attrs.causal for stack, _ in stacks)
    attns = [c for s, _ in stacks for c in s.children if c.name == "attn"]
    shared = any(s.find("shared") is not None for s, _ in stacks)  # Zamba2's: every layer is given the embeddings
    mixers = any(c.name == "mixer" for s, _ in stacks for c in s.children)  # state-space layers: a MixerCache each
    # layers of an MLP alone (Nemotron-H's) keep nothing for generation: None in the cache list
    alone = {s.name for s, _ in stacks if not {"attn", "mixer"} & {c.name for c in s.children}}
    if causal and alone and _first_stack(em, stacks) in alone:
        raise UnsupportedError("codegen: a decoder whose first layer is an MLP alone is not generated yet (the model reads "
                               "the position from the first layer's cache)")
    if not causal and any(shortcut(stack) for stack, _ in stacks):
        raise UnsupportedError("codegen generates a shortcut-connected mixture of experts in a decoder only")
    own_local = rotary and local_rotary(em.lowered.root.find("embed"), attns)
    if mixers and own_local:
        raise UnsupportedError("codegen: state-space layers beside sliding layers with their own rotary tables are not "
                               "generated yet")
    stack_lines = []
    for stack, block in stacks:
        p = f"{stack.name}_" if len(stacks) > 1 else ""
        stack_lines += stack_init(em, stack, block, p, f"cfg.{p}layers")
    names = [stack.name for stack, _ in stacks]
    order = em.lowered.root.attrs.layer_order
    flags = {"causal": causal, "rotary": rotary, "local_rotary": own_local, "alibi": alibi, "final_norm": final is not None,
             "pooler": pooler, "interleaved": order is not None, "project_out": project_out, "token_types": token_types,
             "start": causal and (rotary or start or alibi), "several": len(names) > 1, "head": head is not None,
             "encoder_head": not causal and head is not None, "encoder": not causal and head is None,
             "tied": False, "head_scale": False, "logit_multiplier": False, "logit_softcap": False, "shared": shared,
             "shortcut": any(shortcut(stack) for stack, _ in stacks), "mtp": mtp}
    subs = _blocks(names, order is not None) | ({"FINAL_NORM": norm_expr(em, final, own=("norm_eps", "final_norm_eps"))}
                                                if final is not None else {})
    if pooler:
        em.add(POOLER)
    if order is not None:
        subs |= {"ORDER": flat(order), "LAYERS": " + ".join(f"len(self.{n})" for n in names)}
    if head is not None:
        subs |= _head(em, head, flags)
    em.add(CHECK_TOKENS, helper=True)
    if causal:
        em.add(CHECK_VOCAB, helper=True)
    # the blocks take the rotary tables (the sliding layers' own: layer_rope), else ALiBi's bias, else nothing
    per_layer, kv = em.lowered.root.find("embed.per_layer") is not None, sharing_kv(em)  # Gemma 4's
    flags |= {"per_layer": per_layer, "kv": kv}
    used = {"token_type_ids": token_types, "start": start, "bias": alibi and not rotary, "layer_rope": rotary,
            "embeddings": shared, "per_layer": per_layer, "kv": kv}
    drop = {arg for arg, kept in used.items() if not kept}
    if rotary and not own_local:
        subs["layer_rope"] = "rope"
    what = "embeddings, blocks" + (", final norm" if final is not None else "") + (", projection down" if project_out else "")
    subs["DOC"] = docstring(f"The whole model: {what}" + (", head." if head is not None else "."), 4)
    layers = " + ".join(f"self.cfg.{stack.name}_layers" for stack, _ in stacks) if len(stacks) > 1 else "self.cfg.layers"
    inserts = {"stacks": "\n".join(stack_lines), "reset_parameters": "\n".join(init_method(em, layers, _tied(head))),
               "mtp_loss": unit("mtp", "Transformer.mtp_loss") if mtp else ""}
    # attention and a mixer side by side in one layer (Falcon-H1's): a ParallelCache per layer
    parallel = {s.name for s, _ in stacks if {"attn", "mixer"} <= {c.name for c in s.children}}
    if parallel and len(parallel) != len(stacks):
        raise UnsupportedError("codegen: layers of attention and a mixer side by side beside other layers are not "
                               "generated yet")
    # layers that reuse an earlier layer's keys and values (Gemma 4's) keep no cache: None
    subs |= _cache_type(em, bool(attns), mixers, bool(parallel), bool(alone) or kv, shared)
    text = unit("model", "Transformer", flags, subs, drop, inserts)
    hybrid = (mixers and bool(attns)) or bool(alone)
    methods = [new_cache_method(names, order is not None, mixers, hybrid, bool(alone), bool(parallel), shared),
               generate_method(start, _longrope_rerun(em))] if causal else []
    return "\n\n".join([text, *methods])


def _cache_type(em: Emitter, attns: bool, mixers: bool, parallel: bool, alone: bool, shared: bool) -> dict[str, str]:
    """forward's type of a layer's cache where it is not a KVCache: a MixerCache per state-space layer (a hybrid's
    attention layers keep a KVCache; Falcon-H1's layers a ParallelCache, both; Zamba2's hybrid layers a ParallelCache,
    a KVCache for their use of the shared attention beside their state), None for a layer of an MLP alone."""
    cache = "KVCache"
    if mixers:
        cache = "ParallelCache" if parallel else "KVCache | MixerCache" if attns else "MixerCache"
    if shared:
        em.add(PARALLEL_CACHE, helper=True)
        cache = "ParallelCache | MixerCache"
    cache += " | None" if alone else ""
    return {"KVCache": cache} if cache != "KVCache" else {}


def _first_stack(em: Emitter, stacks: list[tuple[Component, str]]) -> str:
    """The stack of the model's first layer."""
    order = em.lowered.root.attrs.layer_order
    return order[0] if order else stacks[0][0].name


def _blocks(names: list[str], interleaved: bool) -> dict[str, str]:
    """forward's ``blocks``: the one stack, or every layer in order."""
    if len(names) == 1:
        return {"blocks": f"self.{names[0]}"}
    return {"BLOCKS": "self.layer_list" if interleaved else "[" + ", ".join(f"*self.{n}" for n in names) + "]"}


def _head(em: Emitter, head: Component, flags: dict[str, bool]) -> dict[str, str]:
    """The head's regions (in ``flags``) and placeholders."""
    flags |= {"tied": _tied(head), "head_scale": head.attrs.scale_input, "logit_multiplier": head.attrs.multiplier is not None,
              "logit_softcap": head.attrs.softcap is not None}
    subs = {"HEAD_BIAS": str(any(t.name == "bias" for t in head.tensors)),
            "HEAD_WIDTH": "cfg.token_width" if "token_width" in em.fields else "cfg.width"}  # OPT-350m: the table's width
    if head.attrs.multiplier is not None:
        subs["cfg.logit_multiplier"] = em.field("logit_multiplier", head.attrs.multiplier, "the logits are multiplied by this")
    if head.attrs.softcap is not None:
        subs["cfg.logit_softcap"] = em.field("logit_softcap", float(head.attrs.softcap),
                                             "logits are capped to (-cap, cap) by cap * tanh(z / cap)")
    return subs


def _longrope_rerun(em: Emitter) -> bool:
    """Does generate() run the sequence again past LongRoPE's original context (the spec's position.longrope_rerun, as
    transformers' Phi-3 does)?"""
    attrs = em.lowered.root.find("embed").attrs
    return attrs.rotary_scaling is not None and attrs.rotary_scaling.type == "longrope" and attrs.longrope_rerun


def _tied(head: Component | None) -> bool:
    return head is not None and any(t.name == "weight" and t.tied_to is not None for t in head.tensors)


def seq2seq_model_class(em: Emitter, encoder: str, decoder: str, head: Component | None, start: bool) -> str:
    """The encoder-decoder model (``templates/towers.py``): one embedding for both towers, the encoder, the decoder,
    the head. ``start``: the embeddings take the position of the first token (sinusoidal positions)."""
    assert head is not None, "encoder-decoder models have a head"
    if head.attrs.multiplier is not None or head.attrs.softcap is not None:
        raise UnsupportedError("codegen: an encoder-decoder head with a logit multiplier or soft-capping is not generated yet")
    em.add(CHECK_TOKENS, helper=True)
    em.add(CHECK_VOCAB, helper=True)  # generate() checks the ids' range once
    flags = {"tied": _tied(head), "head_scale": head.attrs.scale_input, "start": start}
    names = {"Seq2Seq": "Transformer", "Encoder": encoder, "Decoder": decoder,
             "HEAD_BIAS": str(any(t.name == "bias" for t in head.tensors))}
    layers = "(self.cfg.encoder_layers + self.cfg.decoder_layers)"
    inserts = {"reset_parameters": "\n".join(init_method(em, layers, _tied(head))),
               "generation": SEQ2SEQ_NEW_CACHE + "\n\n" + SEQ2SEQ_GENERATE}
    return unit("towers", "Seq2Seq", flags, names, drop=set() if start else {"start"}, inserts=inserts)
