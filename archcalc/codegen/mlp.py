"""Source templates for feed-forward layers: dense, gated (SwiGLU/GeGLU, gpt-oss's clamped SwiGLU) and
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
from archcalc.codegen.parts import ACTIVATIONS, camel
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
              name: str, what: str = "Feed-forward") -> str:
    """A dense (up, act, down) or gated (act(gate) * up, down) feed-forward class named ``name``."""
    act, act_name = ACTIVATIONS.get(activation, ("", "clamped SiLU"))
    lines = [f"class {name}(nn.Module):"]
    init = ["    def __init__(self, cfg: Config):", "        super().__init__()"]
    if clamp is not None:
        init.append(f"        self.limit = {clamp}  # gate and up are clamped to this")
    if "gate" not in linears and "gate_up" not in linears:
        lines.append(f'    """{what}: up-projection, {act_name}, down-projection."""')
        init.append(f"        self.up = nn.Linear(cfg.width, {hidden}, bias={linears['up'].attrs.bias})")
        body = [f"        return self.down({act.format(x='self.up(x)')})  # (B, T, d_ff) -> (B, T, d)"]
    else:
        if "gate_up" in linears:
            lines.append(f'    """{what}, gated: {act_name} of the gate times up, from one fused projection; then down."""' if clamp is None else
                         f'    """{what}, gpt-oss\'s clamped SwiGLU: (up + 1) * gate * sigmoid(1.702 * gate) from one fused projection, then down."""')
            init.append(f"        self.gate_up = nn.Linear(cfg.width, 2 * {hidden}, bias={linears['gate_up'].attrs.bias})")
            body = ["        gate, up = self.gate_up(x).chunk(2, dim=-1)  # 2 x (B, T, d_ff)"]
        else:
            lines.append(f'    """{what}, gated: {act_name} of the gate times up, then down."""' if clamp is None else
                         f'    """{what}, gpt-oss\'s clamped SwiGLU: (up + 1) * gate * sigmoid(1.702 * gate), then down."""')
            init.append(f"        self.gate = nn.Linear(cfg.width, {hidden}, bias={linears['gate'].attrs.bias})")
            init.append(f"        self.up = nn.Linear(cfg.width, {hidden}, bias={linears['up'].attrs.bias})")
            body = []
        if clamp is not None:
            if not body:
                body = ["        gate, up = self.gate(x), self.up(x)  # 2 x (B, T, d_ff)"]
            body += ["        gate, up = gate.clamp(max=self.limit), up.clamp(-self.limit, self.limit)",
                     "        return self.down((up + 1) * gate * torch.sigmoid(1.702 * gate))  # (B, T, d)"]
        elif body:
            body.append(f"        return self.down({act.format(x='gate')} * up)  # (B, T, d)")
        else:
            body = [f"        return self.down({act.format(x='self.gate(x)')} * self.up(x))  # (B, T, d_ff) -> (B, T, d)"]
    init.append(f"        self.down = nn.Linear({hidden}, cfg.width, bias={linears['down'].attrs.bias})")
    lines += ["", *init, "", "    def forward(self, x: torch.Tensor) -> torch.Tensor:", *body]
    em.add("\n".join(lines))
    return name


def mlp_class(em: Emitter, mlp: Component, p: str) -> str:
    """The MLP class of a stack: dense or gated (a mixture of experts: :func:`moe_class`)."""
    a = mlp.attrs
    assert isinstance(a, MLP)
    hidden = em.field(f"{p}mlp_hidden", a.hidden, f"{a.hidden}: MLP hidden width")
    return ffn_class(em, {c.name: c for c in mlp.children}, hidden, a.activation, _clamp(em, a, p), f"{camel(p)}MLP")


def _clamp(em: Emitter, a: MLP | MoE, p: str) -> str | None:
    if a.activation not in GATED_ONLY:
        return None
    assert a.clamp is not None
    return em.field(f"{p}mlp_clamp", float(a.clamp), "clamped SwiGLU limit")


def moe_class(em: Emitter, moe: Component, p: str) -> str:
    """A mixture of experts: the expert class (and the shared experts'), then the MoE class that routes to them."""
    a = moe.attrs
    assert isinstance(a, MoE)
    kids = {c.name: c for c in moe.children}
    experts = em.field(f"{p}experts", a.experts, f"{a.experts}: routed experts")
    top_k = em.field(f"{p}top_k", a.top_k, f"{a.top_k}: experts per token")
    hidden = em.field(f"{p}expert_hidden", a.hidden, f"{a.hidden}: hidden width of one expert")
    clamp = _clamp(em, a, p)
    expert = ffn_class(em, {c.name: c for c in kids["experts"].children}, hidden, a.activation, clamp,
                       f"{camel(p)}Expert", "One expert")
    shared = None
    if "shared" in kids:
        width = kids["shared"].attrs.hidden
        shared_hidden = em.field(f"{p}shared_hidden", width, f"{width}: hidden width of the shared experts")
        shared = ffn_class(em, {c.name: c for c in kids["shared"].children}, shared_hidden, a.activation, clamp,
                           f"{camel(p)}SharedExpert", "The shared experts (every token uses them)")
    router = kids["router"]
    name = f"{camel(p)}MoE"
    sigmoid = a.scoring == "sigmoid"
    # Mixtral's form (a softmax over the chosen logits) is the renormalised softmax; anything else weighs the chosen
    # experts by their shares of a softmax over all experts
    over_all = not sigmoid and (a.normalize is False or a.groups is not None or a.routed_scale not in (None, 1.0))
    if a.weigh_input:
        doc = ("Mixture of experts: each token takes its top_k experts by router logit and multiplies each chosen expert's\n"
               "    input (not its output) by the sigmoid of its logit" + (", plus shared experts every token uses" if shared else "") + ".")
    elif sigmoid:
        doc = ("Mixture of experts, DeepSeek-V3's routing: sigmoid scores per expert; a token picks its top_k experts by\n"
               "    score + score_bias" + (" among the experts of its best group_top_k groups (a group ranks by its two best)" if a.groups is not None else "")
               + ";\n    the chosen scores" + (", renormalised to sum to 1," if a.normalize else "")
               + " times routed_scale mix the experts' outputs" + (", plus shared experts every token uses" if shared else "") + ".")
    elif over_all:
        doc = ("Mixture of experts: a softmax over all experts' router logits; each token picks its top_k experts"
               + ("\n    among the experts of its best group_top_k groups (a group ranks by " + _GROUP_RANK[a.group_score] + ")"
                  if a.groups is not None else "")
               + "\n    and mixes their outputs with their probabilities" + (", renormalised to sum to 1" if a.normalize else "")
               + (" times routed_scale" if a.routed_scale not in (None, 1.0) else "")
               + (", plus shared experts every token uses" if shared else "") + ".")
    else:
        doc = ("Mixture of experts: the router picks each token's top_k experts and mixes their outputs with a\n"
               "    softmax over the chosen experts' router logits (Mixtral, gpt-oss)"
               + (", plus shared experts every token uses" if shared else "") + ".")
    lines = [
        f"class {name}(nn.Module):",
        f'    """{doc}"""',
        "",
        "    def __init__(self, cfg: Config):",
        "        super().__init__()",
        f"        self.top_k = {top_k}",
        f"        self.router = nn.Linear(cfg.width, {experts}, bias={router.attrs.bias})",
        f"        self.experts = nn.ModuleList({expert}(cfg) for _ in range({experts}))",
    ]
    if shared:
        lines.append(f"        self.shared = {shared}(cfg)")
    if "shared_gate" in kids:
        lines.append("        self.shared_gate = nn.Linear(cfg.width, 1, bias=False)  # a sigmoid gate on the shared experts")
    if a.weigh_input:
        lines += INPUT_ROUTING
    elif sigmoid:
        lines += _sigmoid_routing(em, a, p, router.attrs.bias)
    elif over_all:
        lines += _softmax_routing(em, a, p)
    else:
        lines += [
            "",
            "    def forward(self, x: torch.Tensor) -> torch.Tensor:",
            "        B, T, d = x.shape",
            "        x = x.reshape(-1, d)  # (N, d): every token of the batch",
            "        logits, chosen = self.router(x).topk(self.top_k, dim=-1)  # (N, k): each token's best experts",
            "        weights = logits.float().softmax(dim=-1).flatten()  # (N * k,): mixing weights of the chosen experts",
        ]
    lines += [
        "        # group the (token, slot) pairs by expert once: each expert then runs on one contiguous slice",
        "        expert_of_pair = chosen.flatten()  # (N * k,): pair i is token i // k's slot i % k",
        "        order = expert_of_pair.argsort(stable=True)  # (N * k,): the pairs, expert by expert",
        "        token_of = order // self.top_k  # (N * k,): each pair's token, in that order",
        "        counts = expert_of_pair.bincount(minlength=len(self.experts)).tolist()  # pairs per expert: one host sync",
        "        routed = x.index_select(0, token_of)  # (N * k, d): the tokens, grouped by expert",
    ]
    if a.weigh_input:
        lines.append("        routed = routed * weights[order, None]  # the weight scales the expert's input")
    lines += [
        "        # an expert with no tokens is skipped (its empty slice kept) unless autograd records: in training it runs,",
        "        # so that every expert has a gradient (zeros), as the optimizer and DDP expect",
        "        parts = [expert(part) if n or torch.is_grad_enabled() else part  # (n, d) each",
        "                 for expert, part, n in zip(self.experts, routed.split(counts), counts, strict=True)]",
        "        out = torch.cat(parts)  # (N * k, d): each pair's output" if a.weigh_input else
        "        out = torch.cat(parts) * weights[order, None]  # (N * k, d): each pair's output, weighted",
        "        # summed back into their tokens: scatter_add_ keeps only the index for backward (index_add_ would keep out)",
        "        into = token_of[:, None].expand_as(out)  # (N * k, d): the row of y each pair adds to (a view, not a copy)",
        "        y = torch.zeros_like(x, dtype=out.dtype).scatter_add_(0, into, out)  # (N, d): each token's experts, summed",
    ]
    if shared and "shared_gate" in kids:
        lines.append("        y = y.to(x.dtype) + self.shared(x) * torch.sigmoid(self.shared_gate(x))")
    elif shared:
        lines.append("        y = y.to(x.dtype) + self.shared(x)")
    lines.append("        return y.view(B, T, d)  # (B, T, d)" if shared else "        return y.to(x.dtype).view(B, T, d)  # (B, T, d)")
    at = lines.index("        B, T, d = x.shape")
    lines[at:at] = ON_META  # forward's first lines: refuse the meta device before routing
    em.add("\n".join(lines))
    return name


ON_META = [  # the routing below reads values (argsort, bincount, tolist), which the meta device does not have
    "        if x.is_meta:",
    '            raise ValueError("a mixture of experts routes each token by value (which experts take it depends on the router\'s output), "',
    '                             "so its forward needs real tensors: build it on the CPU or a GPU, or use \'archcalc flops\' for its exact FLOPs")',
]


INPUT_ROUTING = [
    "",
    "    def forward(self, x: torch.Tensor) -> torch.Tensor:",
    "        B, T, d = x.shape",
    "        x = x.reshape(-1, d)  # (N, d): every token of the batch",
    "        logits, chosen = self.router(x).topk(self.top_k, dim=-1)  # (N, k): each token's best experts",
    "        weights = torch.sigmoid(logits.float()).to(x.dtype).flatten()  # (N * k,): what scales each chosen expert's input",
]

_GROUP_RANK = {"top2_sum": "its two best scores summed", "max": "its best score"}


def _group_fields(em: Emitter, a: MoE, p: str) -> list[str]:
    """__init__'s group-limited routing constants (none without groups)."""
    if a.groups is None:
        return []
    assert a.group_top_k is not None
    if a.group_score == "top2_sum" and em.value(a.experts) // em.value(a.groups) < 2:
        raise UnsupportedError("codegen: group-limited routing ranks a group by its two best experts; "
                               f"{em.value(a.experts)} experts in {em.value(a.groups)} groups leave fewer than two per group")
    groups = em.field(f"{p}expert_groups", a.groups, f"{a.groups}: groups of experts")
    group_top_k = em.field(f"{p}group_top_k", a.group_top_k, f"{a.group_top_k}: groups a token picks its experts from")
    return [f"        self.groups, self.group_top_k = {groups}, {group_top_k}"]


def _group_mask(a: MoE, scores: str, fill: str) -> list[str]:
    """forward's lines that keep, of ``scores`` (N, E), only the experts of each token's best groups (``fill`` elsewhere)."""
    rank = ("by_group.topk(2, dim=-1)[0].sum(dim=-1)  # (N, groups): the sum of each group's two best" if a.group_score == "top2_sum"
            else "by_group.max(dim=-1).values  # (N, groups): each group's best")
    return [
        f"        by_group = {scores}.view(-1, self.groups, {scores}.shape[-1] // self.groups)  # (N, groups, E / groups)",
        f"        group_scores = {rank}",
        "        best_groups = group_scores.topk(self.group_top_k, dim=-1, sorted=False)[1]  # (N, group_top_k)",
        "        allowed = torch.zeros_like(group_scores).scatter_(1, best_groups, 1.0).bool()  # (N, groups)",
        f"        allowed = allowed.unsqueeze(-1).expand_as(by_group).reshape({scores}.shape)  # (N, E)",
        f"        {scores} = {scores}.masked_fill(~allowed, {fill})  # only the experts of the best groups",
    ]


def _softmax_routing(em: Emitter, a: MoE, p: str) -> list[str]:
    """__init__'s routing constants and the start of forward for a softmax over all experts whose chosen shares are
    kept as they are, renormalised, or scaled (transformers' Qwen2MoeTopKRouter, DeepseekV2TopkRouter)."""
    lines = []
    scaled = a.routed_scale not in (None, 1.0)
    if scaled:
        assert a.routed_scale is not None
        scale = em.field(f"{p}routed_scale", float(a.routed_scale), "the routed experts' mixing weights are multiplied by this")
        lines.append(f"        self.routed_scale = {scale}")
    lines += _group_fields(em, a, p)
    lines += [
        "",
        "    def forward(self, x: torch.Tensor) -> torch.Tensor:",
        "        B, T, d = x.shape",
        "        x = x.reshape(-1, d)  # (N, d): every token of the batch",
        "        probs = self.router(x).float().softmax(dim=-1)  # (N, E): each expert's share, in float32",
    ]
    if a.groups is not None:
        lines += _group_mask(a, "probs", "0.0")
    lines.append("        weights, chosen = probs.topk(self.top_k, dim=-1)  # (N, k): each token's best experts and their shares")
    if a.normalize:
        lines.append("        weights = weights / weights.sum(dim=-1, keepdim=True)  # renormalised to sum to 1")
    lines.append("        weights = " + ("(weights * self.routed_scale)" if scaled else "weights")
                 + ".flatten()  # (N * k,): mixing weights of the chosen experts")
    return lines


def _sigmoid_routing(em: Emitter, a: MoE, p: str, bias: bool) -> list[str]:
    """__init__'s routing constants and the start of forward for sigmoid scoring (transformers' DeepseekV3TopkRouter)."""
    scale = em.field(f"{p}routed_scale", float(a.routed_scale if a.routed_scale is not None else 1.0),
                     "the routed experts' mixing weights are multiplied by this")
    lines = [f"        self.routed_scale = {scale}", *_group_fields(em, a, p)]
    grouped = a.groups is not None
    lines += [
        "        # added to the scores to choose the experts, not to weigh them (auxiliary-loss-free balancing): a buffer",
        f"        self.register_buffer(\"score_bias\", torch.zeros({em.field(f'{p}experts', a.experts)}))",
        "",
        "    def reset_parameters(self) -> None:",
        "        nn.init.zeros_(self.score_bias)  # the router and the experts are Linear layers: reset on their own",
        "",
        "    def forward(self, x: torch.Tensor) -> torch.Tensor:",
        "        B, T, d = x.shape",
        "        x = x.reshape(-1, d)  # (N, d): every token of the batch",
        f"        logits = F.linear(x.float(), self.router.weight.float(){', self.router.bias.float()' if bias else ''})  # (N, E), in float32",
        "        scores = logits.sigmoid()",
        "        choice = scores + self.score_bias  # (N, E): what the experts are chosen by",
    ]
    if grouped:
        lines += _group_mask(a, "choice", 'float("-inf")')
    lines += [
        "        chosen = choice.topk(self.top_k, dim=-1, sorted=False)[1]  # (N, k): each token's experts",
        "        weights = scores.gather(1, chosen)  # (N, k): their scores, without score_bias",
    ]
    if a.normalize:
        lines.append("        weights = weights / (weights.sum(dim=-1, keepdim=True) + 1e-20)  # renormalised to sum to 1")
    lines.append("        weights = (weights * self.routed_scale).flatten()  # (N * k,): mixing weights of the chosen experts")
    return lines
