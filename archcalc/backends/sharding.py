"""Which parameters tensor parallelism splits, and exactly what each rank holds under TP and FSDP2.

The tensor-parallel plan is derived from the IR (the generated file writes it out as ``TP_PLAN``): q, k, v,
gate and up split column-wise (their output features: weight dim 0, bias dim 0), attention's out and the MLP's
down row-wise (input features: weight dim 1; the bias whole on every rank), the token embedding by vocabulary
rows (``vocab``) and the head by vocabulary rows with the logits gathered (``vocab_gather``); everything else is
whole on every rank. A split dimension of n over k ranks gives rank r ``torch.chunk``'s share: chunks of
ceil(n / k), the last ones shorter or empty. FSDP2 (ZeRO-3) then splits what a rank holds along dim 0 the same
way over the data-parallel ranks (ZeRO-1 shards only the optimizer state, ZeRO-2 the gradients too).

What each rank then holds is computed by :mod:`archcalc.backends.parallel_plan` (``archcalc memory``'s per-GPU
split); tests/codegen/test_distributed.py measures it on real two-process runs.

>>> from archcalc.spec import load_spec
>>> from archcalc.spec.bind import bind
>>> from archcalc.ir import lower
>>> plan, why = tensor_parallel_plan(lower(bind(load_spec("llama"), "2-7b")).root)
>>> plan["blocks.*.attn.q"], plan["blocks.*.mlp.down"], why
('colwise', 'rowwise', [])
"""

from __future__ import annotations

from archcalc.ir import Component
from archcalc.ir.attrs import MIXERS, MLP, Attention, Block, Embeddings, LatentAttention, Model, MoE

PRECISION = {  # bytes a parameter: its weights, its gradients, the optimizer's state
    "fp32": (4, 4, 8),  # fp32 training: the weights are the master copy; AdamW's two moments
    "mixed": (2, 2, 12),  # bf16 weights and gradients, fp32 master weights and moments (the ZeRO paper's 16 bytes)
}


def tensor_parallel_plan(root: Component, fused: bool = False) -> tuple[dict[str, str], list[str]]:
    """The plan (module-name pattern -> style) and what keeps the generated module from tensor parallelism (empty:
    nothing). ``fused``: also split fused qkv and gate_up projections column-wise, as Megatron-LM does in its own
    layout (the bytes each rank holds are those of separate projections; the generated module does not do it)."""
    plan: dict[str, str] = {}
    reasons: list[str] = []
    assert isinstance(root.attrs, Model)
    if root.attrs.architecture == "encoder-decoder":
        return {}, ["encoder-decoder models (cross-attention) are not split yet"]
    plan["embed.token"] = "vocab"
    for stack in (c for c in root.children if isinstance(c.attrs, Block)):
        for child in stack.children:
            prefix = f"{stack.name}.*.{child.name}"
            if isinstance(child.attrs, Attention):
                plan.update(_attention(child, prefix, reasons, fused))
            elif isinstance(child.attrs, (MLP, MoE)):
                plan.update(_mlp(child, prefix, reasons, fused))
            elif isinstance(child.attrs, MIXERS):
                reasons.append(f"{child.attrs.label} layers are not split yet (their heads and conv channels would "
                               "be split, their state with them)")
    if any(c.name == "head" for c in root.children):
        plan["head"] = "vocab_gather"
    return plan, sorted(set(reasons))


def sequence_parallel_plan(root: Component) -> tuple[dict[str, str], list[str]]:
    """Sequence parallelism on top of tensor parallelism (Megatron-LM's): the norms run on a slice of the tokens,
    the residual stream stays split along the sequence between blocks; the plan's entries replace TP_PLAN's.
    Generated for pre-norm decoders whose embeddings are one token table (rotary or no positions) and whose MLPs
    are dense or gated; what else keeps a model from it is listed."""
    plan, reasons = tensor_parallel_plan(root)
    embed = next(c for c in root.children if c.name == "embed")
    assert isinstance(root.attrs, Model) and isinstance(embed.attrs, Embeddings)
    if root.attrs.architecture != "decoder":
        reasons.append("sequence parallelism is generated for decoders only")
    if len(embed.children) > 1:
        reasons.append("embeddings other than one token table (learned positions, token types, a norm)")
    sp: dict[str, str] = {"embed.token": "vocab_to_sequence"}
    for stack in (c for c in root.children if isinstance(c.attrs, Block)):
        kids = {c.name: c for c in stack.children}
        if stack.attrs.residual != "pre-norm":
            reasons.append(f"{stack.attrs.residual} blocks (pre-norm only)")
        if any(isinstance(c.attrs, MoE) for c in kids.values()):
            reasons.append("mixtures of experts")
        for norm in ("attn_norm", "mlp_norm"):
            sp[f"{stack.name}.*.{norm}"] = "sequence"
        sp[f"{stack.name}.*.attn"] = "gather_sequence_3" if embed.attrs.position == "rotary" else "gather_sequence_2"
        sp[f"{stack.name}.*.attn.out"] = "rowwise_to_sequence"
        sp[f"{stack.name}.*.mlp"] = "gather_sequence_1"
        sp[f"{stack.name}.*.mlp.down"] = "rowwise_to_sequence"
    if any(c.name == "final_norm" for c in root.children):
        sp["final_norm"] = "sequence"
    if "head" in plan:
        sp["head"] = "sequence_to_vocab_gather"
    return {**plan, **sp}, sorted(set(reasons))


def _attention(attn: Component, prefix: str, reasons: list[str], fused: bool = False) -> dict[str, str]:
    a = attn.attrs
    assert isinstance(a, Attention)
    kids = {c.name for c in attn.children}
    if "qkv" in kids:
        reasons.append("a fused qkv projection (generate with --separate-projections)")
    latent = isinstance(a, LatentAttention)
    if "q_norm" in kids and not latent:
        norm = next(c for c in attn.children if c.name == "q_norm")
        if norm.attrs.width != a.head_width:
            reasons.append("QK-norm over all heads at once")
    if a.sinks:
        reasons.append("attention sinks (one parameter per head)")
    if latent:  # the compressions stay whole: every rank expands its own heads
        split = {name: "colwise" for name in ("q", "q_up", "kv_up") if name in kids}
    else:
        split = {name: "colwise" for name in ("q", "k", "v") + (("qkv",) if fused else ()) if name in kids}
    return {f"{prefix}.{name}": style for name, style in {**split, "out": "rowwise"}.items()}


def _mlp(mlp: Component, prefix: str, reasons: list[str], fused: bool = False) -> dict[str, str]:
    out: dict[str, str] = {}
    groups = [(prefix, mlp)] if not isinstance(mlp.attrs, MoE) else []
    for child in mlp.children:
        if child.name == "experts":
            groups.append((f"{prefix}.experts.*", child))
        elif child.name == "shared":
            groups.append((f"{prefix}.shared", child))
    for where, node in groups:
        names = {c.name for c in node.children}
        if "gate_up" in names:
            reasons.append("a fused gate_up projection (generate with --separate-projections)")
        out.update({f"{where}.{name}": "colwise" for name in ("gate", "up") + (("gate_up",) if fused else ()) if name in names})
        out[f"{where}.down"] = "rowwise"
    return out


def chunk(n: int, parts: int, index: int) -> int:
    """The length of ``torch.chunk``'s piece ``index`` of n items in ``parts`` pieces (chunks of ceil(n / parts))."""
    size = -(-n // parts)
    return max(0, min(size, n - index * size))


SPLIT = {  # style -> the dimension of (weight, bias) that tensor parallelism splits (None: whole)
    "colwise": (0, 0), "rowwise": (1, None), "vocab": (0, None), "vocab_gather": (0, 0),
}
