"""Multi-token prediction modules in the generated file (``archcalc generate --with-mtp``): DeepSeek-V3's MTP
(arXiv 2412.19437 section 2.2), as :mod:`archcalc.ir.mtp` lowers ``model.mtp``: per module, enorm, hnorm, eh_proj
(2d -> d), ``layers`` blocks of the stack ``mtp.block`` names (the same class as that stack's), a norm, and the model's
own embedding and head (the same modules, so the IR's tied ``mtp.{i}.embed.weight`` and ``mtp.{i}.head.weight``).
Forward with targets adds ``mtp_weight`` (DeepSeek's lambda) times their mean loss; generation ignores them.

transformers' models build no MTP module; DeepSeek-V3's and GLM-4.5's checkpoints hold module k as the layer after
the last, ``model.layers.{L + k}`` (:data:`NAMES`; the block's tensors under the stack's names), with copies of the
embedding and head there (``embed_tokens``, ``shared_head.head``): the weight map lists those as copies (HF_COPIES).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from archcalc.codegen.errors import UnsupportedError
from archcalc.codegen.parts import norm_expr
from archcalc.codegen.template import unit
from archcalc.ir import Component, Lowered

if TYPE_CHECKING:
    from archcalc.codegen.emitter import Emitter

LAYER = "model.layers.{i}."  # the checkpoint's layer of module k: {i} = layers of the model + k
NAMES = {"mtp.{i}.enorm.weight": "enorm.weight", "mtp.{i}.hnorm.weight": "hnorm.weight",
         "mtp.{i}.eh_proj.weight": "eh_proj.weight", "mtp.{i}.norm.weight": "shared_head.norm.weight",
         "mtp.{i}.embed.weight": "embed_tokens.weight", "mtp.{i}.head.weight": "shared_head.head.weight"}
WEIGHT = 0.3  # DeepSeek-V3's lambda for its first 10T training tokens (0.1 for the last 4.8T)


def mtp_stack(lowered: Lowered, stacks: list[Component]) -> Component:
    """The stack whose block each module repeats: the one ``model.mtp.block`` names, else the last (as the IR)."""
    name = lowered.binding.spec.model.mtp.block
    return next((s for s in stacks if s.name == name), stacks[-1])


def check_mtp(em: Emitter, embed: Component, head: Component | None, block: Component) -> None:
    """Refuse what the generated MTP modules do not compute yet."""
    a, root = embed.attrs, em.lowered.root
    reasons = []
    if head is None or head.attrs.scale_input or head.attrs.multiplier is not None or head.attrs.softcap is not None:
        reasons.append("a head without scaling or soft-capping")
    if a.position != "rotary" or root.attrs.layer_order is not None:
        reasons.append("rotary positions and stacks one after another")
    if {c.name for c in block.children} & {"mixer", "shared", "cross_attn"} or "attn" not in {c.name for c in block.children}:
        reasons.append("attention blocks")
    if root.find("mtp").attrs.stored:
        reasons.append("the embedding and head shared with the model (--with-mtp, not --mtp-copies)")
    if reasons:
        raise UnsupportedError("codegen generates multi-token prediction modules with " + ", ".join(reasons) + " only")


def mtp_class(em: Emitter, node: Component, block_class: str) -> str:
    """The ``MTP`` class (``templates/mtp.py``) of the ``mtp`` component ``node``, whose blocks are ``block_class``."""
    em.field("mtp_modules", node.repeat, "multi-token prediction modules")
    em.field("mtp_layers", node.attrs.layers, "blocks in each MTP module")
    em.field("mtp_weight", WEIGHT, "lambda, the MTP losses' weight: DeepSeek-V3's early in training (0.1 later)")
    norm = next(c for c in node.children if c.name == "enorm")
    names = {"MTP_NORM": norm_expr(em, norm, own=("norm_eps", "mtp_norm_eps")), "Block": block_class}
    em.add(unit("mtp", "MTP", names=names))
    return "MTP"


def mtp_weights(em: Emitter, hf_weights: dict, stacks: list[Component]) -> dict:
    """The weight map's entries of the MTP modules' tensors: the block's as the stack's, the module's own from
    :data:`NAMES`, all in the layer after the model's (``{i}`` counts on from the model's layers)."""
    root = em.lowered.root
    node = root.find("mtp")
    if node is None:
        return {}
    stack = mtp_stack(em.lowered, stacks).name
    if em.value(node.attrs.layers) != 1:
        raise UnsupportedError("codegen: transformers names for multi-token prediction modules of one block each only")
    out = {f"mtp.{{i}}.block.{{e}}.{k[len(stack) + 5:]}": r for k, r in hf_weights.items() if k.startswith(f"{stack}.{{i}}.")}
    if any(isinstance(r, str) and not r.startswith(LAYER) for r in out.values()):
        raise UnsupportedError(f"codegen: no checkpoint names for multi-token prediction modules beside {LAYER}*")
    return out | {ours: LAYER + theirs for ours, theirs in NAMES.items()}


def mtp_copies(em: Emitter, recipe: str, original: str) -> dict[str, str]:
    """A tied tensor of every MTP module (``recipe``: its name with ``{i}``) as a copy of ``original``."""
    node = em.lowered.root.find("mtp")
    first = sum(em.value(c.repeat) for c in em.lowered.root.children if c.kind == "block")
    return {recipe.format(i=first + k): original for k in range(em.value(node.repeat))}
