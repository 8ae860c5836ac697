"""Feed-forward layers (``templates/mlp.py``): dense, gated (SwiGLU/GeGLU, gpt-oss's clamped SwiGLU) and
mixture-of-experts (a router, top-k routed experts, optional shared experts).

The mixture of experts runs each expert on the tokens routed to it only, so torch's FlopCounterMode
counts exactly the routed top-k FLOPs that archcalc's ``forward_matmul`` counts, whichever experts the
tokens choose. (Routing needs values: a forward pass of a mixture of experts runs on a real device.) Its
forward sorts the (token, expert) pairs by expert once (one argsort, one bincount: one host sync a layer),
gathers the tokens with index_select, runs each expert on its contiguous slice with plain matmuls, and sums
the weighted outputs back into their tokens with scatter_add_ (both backwards: one index_add_ or gather, where
indexing with a tensor and its inverse permutation would scatter with index_put_ twice).
torch._grouped_mm would run the experts in one call, but FlopCounterMode counts it as 0 FLOPs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from archcalc.codegen.errors import UnsupportedError
from archcalc.codegen.parts import ACTIVATIONS, camel, docstring
from archcalc.codegen.template import WIDTH, fragment, unit
from archcalc.ir import Component
from archcalc.ir.attrs import MLP, MoE

if TYPE_CHECKING:
    from archcalc.codegen.emitter import Emitter

GATED_ONLY = {"swiglu_clamped"}


def check_mlp(mlp: Component) -> list[str]:
    """What the MLP templates cannot generate (an empty list: everything is supported)."""
    a = mlp.attrs
    assert isinstance(a, (MLP, MoE))
    act = a.activation
    if act not in ACTIVATIONS and act not in GATED_ONLY:
        return [f"the {act} activation"]
    linears = next((c for c in mlp.children if c.name == "experts"), mlp).children
    if act in GATED_ONLY and not {"gate", "gate_up"} & {c.name for c in linears}:
        return [f"the {act} activation in a dense (ungated) MLP"]
    if act in GATED_ONLY and a.clamp is None:
        return [f"the {act} activation without 'clamp'"]
    return []


def ffn_class(em: Emitter, linears: dict[str, Component], hidden: str, activation: str, clamp: str | None,
              name: str, what: str = "Feed-forward", multipliers: tuple[str, str] | None = None,
              adapter: bool = False) -> str:
    """A dense (up, act, down) or gated (act(gate) * up, down) feed-forward class named ``name``; ``multipliers``: the
    config fields of the gate's and the output's multipliers (Falcon-H1's, a separate gated MLP); ``adapter``: forward
    takes the calling layer's low-rank adapter beside a fused gate_up (Zamba2's shared MLP)."""
    act, act_name = ACTIVATIONS.get(activation, ("", "clamped SiLU"))
    fused, gated = "gate_up" in linears, "gate" in linears or "gate_up" in linears
    clamped = clamp is not None
    multiplied = multipliers is not None
    if multiplied and (clamped or not gated):
        raise UnsupportedError("codegen generates MLP multipliers in a gated MLP only")
    if adapter and (not fused or clamped or multiplied):
        raise UnsupportedError("codegen generates an adapter beside a fused gate_up only (not with separate gate and up "
                               "projections, a clamp or multipliers)")
    flags = {"clamp": clamped, "fused": fused, "separate": gated and not fused, "dense": not gated,
             "clamp_separate": clamped and gated and not fused, "fused_plain": fused and not clamped and not multiplied,
             "separate_plain": gated and not fused and not clamped and not multiplied, "multiplied": multiplied,
             "xielu": activation == "xielu", "adapter": adapter}
    projection = " from one fused projection" if fused else ""
    if not gated:
        doc = f"{what}: up-projection, {act_name}, down-projection."
    elif clamped:
        doc = f"{what}, gpt-oss's clamped SwiGLU: (up + 1) * gate * sigmoid(1.702 * gate){projection}, then down."
    elif fused:
        doc = f"{what}, gated: {act_name} of the gate times up, from one fused projection; then down."
        if adapter:
            doc = doc.replace("; then", " (beside it the calling layer's low-rank adapter); then")
    else:
        doc = f"{what}, gated: {act_name} of the gate times up, then down."
    if multiplied:
        doc = doc[:-1] + "; the gate times gate_multiplier, the output times down_multiplier."
    names = {"MLP": name, "DOC": docstring(doc, 4), "cfg.mlp_hidden": hidden,
             "ACT_UP": act.format(x="self.up(x)"), "ACT_GATE": act.format(x="gate" if fused else "self.gate(x)"),
             "ACT_SCALED": act.format(x="gate")}
    if multipliers is not None:
        names |= {"cfg.mlp_gate_multiplier": multipliers[0], "cfg.mlp_down_multiplier": multipliers[1]}
    names |= {"cfg.mlp_clamp": clamp} if clamp is not None else {}
    names |= {f"{proj.upper()}_BIAS": str(linears[proj].attrs.bias) for proj in ("gate", "up", "gate_up", "down")
              if proj in linears}
    if activation == "xielu":
        em.add(unit("parts", "xielu"), helper=True)
    em.add(_split_long(unit("mlp", "MLP", flags, names)))
    return name


def _split_long(text: str) -> str:
    """``text`` with each line longer than :data:`WIDTH` whose code ends with a call split as ruff format splits a
    call with one argument: the argument on a line of its own (a gated MLP's return with a long activation, Gemma's
    GeGLU: ``return self.down(`` ... ``)  # comment``)."""
    lines = text.split("\n")
    for j, line in reversed(list(enumerate(lines))):
        code, sep, comment = line.partition("  # ")
        if len(line) <= WIDTH or not code.endswith(")"):
            continue
        depth, k = 0, len(code) - 1
        while k >= 0:  # the bracket that the last one closes
            depth += {")": 1, "(": -1}.get(code[k], 0)
            if depth == 0:
                break
            k -= 1
        if k < 0:
            continue
        indent = len(code) - len(code.lstrip())
        lines[j] = f"{code[: k + 1]}\n{' ' * (indent + 4)}{code[k + 1 : -1]}\n{' ' * indent}){sep}{comment}"
    return "\n".join(lines)


def mlp_class(em: Emitter, mlp: Component, p: str, adapter: bool = False) -> str:
    """The MLP class of a stack: dense or gated (a mixture of experts: :func:`moe_class`); ``adapter``: forward takes
    the calling layer's adapter (Zamba2's shared MLP)."""
    a = mlp.attrs
    assert isinstance(a, MLP)
    hidden = em.field(f"{p}mlp_hidden", a.hidden, f"{a.hidden}: MLP hidden width")
    multipliers = None
    if a.gate_multiplier is not None or a.down_multiplier is not None:
        multipliers = (em.field(f"{p}mlp_gate_multiplier", float(a.gate_multiplier or 1.0), "the gate times this"),
                       em.field(f"{p}mlp_down_multiplier", float(a.down_multiplier or 1.0), "the MLP's output times this"))
    return ffn_class(em, {c.name: c for c in mlp.children}, hidden, a.activation, _clamp(em, a, p), f"{camel(p)}MLP",
                     multipliers=multipliers, adapter=adapter)


def _clamp(em: Emitter, a: MLP | MoE, p: str) -> str | None:
    if a.activation not in GATED_ONLY:
        return None
    assert a.clamp is not None
    return em.field(f"{p}mlp_clamp", float(a.clamp), "clamped SwiGLU limit")


def moe_class(em: Emitter, moe: Component, p: str, router_eps: float | None = None) -> str:
    """A mixture of experts: the expert class (and the shared experts'), then the MoE class that routes to them
    (``templates/mlp.py``). Gemma 4's beside the dense MLP (its ``router_scale`` and ``expert_scale``): forward takes
    what the router reads apart, which it RMS-normalises with ``router_eps``."""
    a = moe.attrs
    assert isinstance(a, MoE)
    kids = {c.name: c for c in moe.children}
    experts = em.field(f"{p}experts", a.experts, f"{a.experts}: routed experts")
    top_k = em.field(f"{p}top_k", a.top_k, f"{a.top_k}: experts per token")
    hidden = em.field(f"{p}expert_hidden", a.hidden, f"{a.hidden}: hidden width of one expert")
    clamp = _clamp(em, a, p)
    expert = ffn_class(em, {c.name: c for c in kids["experts"].children}, hidden, a.activation, clamp,
                       f"{camel(p)}Expert", "One expert")
    names = {"MoE": f"{camel(p)}MoE", "Expert": expert, "cfg.experts": experts, "cfg.top_k": top_k,
             "ROUTER_BIAS": str(kids["router"].attrs.bias), "FLOAT_BIAS": "self.router.bias.float()"}
    if "shared" in kids:
        width = kids["shared"].attrs.hidden
        shared_hidden = em.field(f"{p}shared_hidden", width, f"{width}: hidden width of the shared experts")
        names["SharedExpert"] = ffn_class(em, {c.name: c for c in kids["shared"].children}, shared_hidden,
                                          a.activation, clamp, f"{camel(p)}SharedExpert",
                                          "The shared experts (every token uses them)")
    flags = _moe_flags(a, kids)
    if a.zero_experts is not None:
        names |= _zero_experts(em, a, kids, p, hidden)
    if {t.name for t in moe.tensors} == {"router_scale", "expert_scale"}:  # Gemma 4's routing, in a region of its own
        if router_eps is None or flags["shared"] or a.groups is not None or a.score_bias or a.weigh_input \
                or a.scoring != "softmax":
            raise UnsupportedError("codegen generates a router with scales (router_scale, expert_scale) for Gemma 4's "
                                   "softmax routing beside a dense MLP only")
        flags = {k: False for k in flags} | {"router_scales": True, "own_params": True, "no_shared": True}
        names["cfg.router_norm_eps"] = em.field("router_norm_eps", router_eps, "epsilon of the router's input norm")
    else:
        flags |= {"router_scales": False, "own_params": flags["own_bias"]}
    if flags["scaled"]:
        scale = a.routed_scale if a.routed_scale is not None else 1.0
        names["cfg.routed_scale"] = em.field(f"{p}routed_scale", float(scale),
                                             "the routed experts' mixing weights are multiplied by this")
    names |= _group_fields(em, a, p)
    doc = _moe_doc(a, flags)
    if flags["zero_experts"]:
        doc += (" The router also scores zero_experts zero-compute experts, the identity: a token's slot on one adds its "
                "input, weighted, and costs no matmul.")
    if flags["shortcut"]:
        doc += (" It returns the routed experts' output and the shared expert's apart: the block adds the shared one "
                "at once, the routed one joins the residual after the next block (the shortcut).")
    names["DOC"] = docstring(doc, 4)
    names["MoEOutput"] = "tuple[torch.Tensor, torch.Tensor]" if a.shortcut else "torch.Tensor"
    # the group mask keeps the experts of the best groups: of the choice scores (others -inf) or of the softmax (others 0)
    mask = names | ({"scores": "choice", "FILL": 'float("-inf")'} if flags["sigmoid"] else {"scores": "probs", "FILL": "0.0"})
    inserts = {"group_mask": fragment("mlp", "group_mask", 8, flags, mask) if flags["groups"] else ""}
    drop = set() if kids["router"].attrs.bias else {"FLOAT_BIAS"}
    em.add(unit("mlp", "MoE", flags, names, drop, inserts))
    return names["MoE"]


def _moe_flags(a: MoE, kids: dict[str, Component]) -> dict[str, bool]:
    """The MoE template's regions: the routing (Llama 4's weighted inputs, DeepSeek-V3's sigmoid scores, a softmax over
    all experts, or Mixtral's softmax over the chosen logits) and the shared experts."""
    sigmoid = a.scoring == "sigmoid" and not a.weigh_input
    scaled = a.routed_scale not in (None, 1.0)
    # Mixtral's form (a softmax over the chosen logits) is the renormalised softmax; anything else weighs the chosen
    # experts by their shares of a softmax over all experts
    over_all = not a.weigh_input and not sigmoid and (a.normalize is False or a.groups is not None or scaled or a.score_bias)
    shared, gate = "shared" in kids, "shared_gate" in kids
    zero, shortcut = a.zero_experts is not None, a.shortcut
    if shortcut and not shared or shortcut and gate:
        raise UnsupportedError("codegen generates a shortcut-connected mixture of experts with an ungated shared expert "
                               "only (its output joins the residual at once, the routed experts' a block later)")
    if zero and not over_all:
        raise UnsupportedError("codegen generates zero-compute experts with a softmax over all experts only")
    return {"weigh_input": a.weigh_input, "sigmoid": sigmoid, "softmax_all": over_all,
            "softmax_chosen": not (a.weigh_input or sigmoid or over_all),
            "chosen_logits": a.weigh_input or not (sigmoid or over_all),
            "scaled": sigmoid or (over_all and scaled), "softmax_all_unscaled": over_all and not scaled,
            "normalize": bool(a.normalize), "groups": (sigmoid or over_all) and a.groups is not None,
            "top2_sum": a.group_score == "top2_sum", "shared": shared, "shared_gate": gate,
            "gated_shared": shared and gate, "plain_shared": shared and not gate and not shortcut,
            "shared_added": shared and not shortcut, "no_shared": not shared, "shortcut": shortcut,
            "zero_experts": zero, "zero_gate_up": "zero_experts" in kids,
            "learned_choice": over_all and a.score_bias, "choice_bias": over_all and (a.score_bias or zero),
            "own_bias": sigmoid or (over_all and (a.score_bias or zero)),
            "sigmoid_buffer": sigmoid and not a.score_bias, "sigmoid_learned": sigmoid and a.score_bias}


def _zero_experts(em: Emitter, a: MoE, kids: dict[str, Component], p: str, hidden: str) -> dict[str, str]:
    """The config field of the zero-compute experts, and the class of their unused gate_up rows where the spec counts
    them (LongCat-Flash's, as transformers allocates them)."""
    zero = em.field(f"{p}zero_experts", a.zero_experts, f"{a.zero_experts}: zero-compute (identity) experts")
    names = {"cfg.zero_experts": zero, "cfg.expert_hidden": hidden}
    if "zero_experts" in kids:
        doc = ("A zero-compute expert's gate_up rows: the expert is the identity and never reads them, but transformers' "
               "LongcatFlashExperts allocates them, so they are kept for its checkpoints (and counted).")
        names["ZeroExpert"] = f"{camel(p)}ZeroExpert"
        em.add(unit("mlp", "ZeroExpert", {}, {"ZeroExpert": names["ZeroExpert"], "DOC": docstring(doc, 4),
                                              "cfg.expert_hidden": hidden}))
    return names


_GROUP_RANK = {"top2_sum": "its two best scores summed", "max": "its best score"}


def _moe_doc(a: MoE, flags: dict[str, bool]) -> str:
    shared = ", plus shared experts every token uses" if flags["shared"] else ""
    if flags.get("router_scales"):
        return ("Mixture of experts, Gemma 4's beside the dense MLP: the router reads the layer's input (RMS-normed "
                "without weights, times router_scale and 1/sqrt(d)); each token takes its top_k experts by a softmax over "
                "all, their shares renormalised to sum to 1 and times each expert's expert_scale mix their outputs.")
    if flags["weigh_input"]:
        return ("Mixture of experts: each token takes its top_k experts by router logit and multiplies each chosen "
                f"expert's input (not its output) by the sigmoid of its logit{shared}.")
    if flags["sigmoid"]:
        among = " among the experts of its best group_top_k groups (a group ranks by its two best)" if flags["groups"] else ""
        normalized = ", renormalised to sum to 1," if a.normalize else ""
        return ("Mixture of experts, DeepSeek-V3's routing: sigmoid scores per expert; a token picks its top_k experts "
                f"by score + score_bias{' (learned)' * a.score_bias}{among}; the chosen scores{normalized} times routed_scale mix the experts' "
                f"outputs{shared}.")
    if flags["softmax_all"]:
        rank = _GROUP_RANK.get(a.group_score or "")
        among = f" among the experts of its best group_top_k groups (a group ranks by {rank})" if flags["groups"] else ""
        normalized = ", renormalised to sum to 1" if a.normalize else ""
        scaled = " times routed_scale" if flags["scaled"] else ""
        by = " by probability + score_bias" + " (learned)" * a.score_bias if flags["choice_bias"] else ""
        return ("Mixture of experts: a softmax over all experts' router logits; each token picks its top_k experts"
                f"{by}{among} and mixes their outputs with their probabilities{normalized}{scaled}{shared}.")
    return ("Mixture of experts: the router picks each token's top_k experts and mixes their outputs with a softmax "
            f"over the chosen experts' router logits (Mixtral, gpt-oss){shared}.")


def _group_fields(em: Emitter, a: MoE, p: str) -> dict[str, str]:
    """The group-limited routing's config fields (none without groups)."""
    if a.groups is None or a.weigh_input:
        return {}
    assert a.group_top_k is not None
    if a.group_score == "top2_sum" and em.value(a.experts) // em.value(a.groups) < 2:
        raise UnsupportedError("codegen: group-limited routing ranks a group by its two best experts; "
                               f"{em.value(a.experts)} experts in {em.value(a.groups)} groups leave fewer than two per group")
    groups = em.field(f"{p}expert_groups", a.groups, f"{a.groups}: groups of experts")
    group_top_k = em.field(f"{p}group_top_k", a.group_top_k, f"{a.group_top_k}: groups a token picks its experts from")
    return {"cfg.expert_groups": groups, "cfg.group_top_k": group_top_k}
