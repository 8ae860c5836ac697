"""Template of the feed-forward classes (archcalc.codegen.mlp fills it): the dense or gated MLP
(also one expert of a mixture, and its shared experts) and the mixture of experts, with its
routings in regions: Mixtral's softmax over the chosen logits, a softmax over all experts
(renormalised, scaled, group-limited), DeepSeek-V3's sigmoid scores, Llama 4's weighted inputs.

The dispatch sorts the (token, expert) pairs by expert once (one stable argsort, one bincount,
one host sync), gathers the tokens with index_select, runs each expert on its contiguous slice and
sums the weighted outputs back into their tokens with scatter_add_."""

import torch
import torch.nn.functional as F
from torch import nn

from archcalc.codegen.templates.names import Config

# placeholders: the linears' bias flags, the activation of up (dense) or of the gate (gated), the
# router's bias in float32 (left out of the call without one), the expert classes, the value a
# group-limited routing gives the experts outside the best groups
GATE_BIAS = UP_BIAS = GATE_UP_BIAS = DOWN_BIAS = ROUTER_BIAS = True
ACT_UP = ACT_GATE = ACT_SCALED = torch.zeros(())
FLOAT_BIAS = None
Expert = SharedExpert = nn.Identity
FILL = 0.0
MoEOutput = torch.Tensor  # what a mixture returns: its output, or (routed, shared) with a shortcut


class ZeroExpert(nn.Module):
    """DOC"""

    def __init__(self, cfg: Config):
        super().__init__()
        self.gate_up = nn.Parameter(torch.empty(2 * cfg.expert_hidden, cfg.width))


class MLP(nn.Module):
    """DOC"""

    def __init__(self, cfg: Config):
        super().__init__()
        # region: clamp
        self.limit = cfg.mlp_clamp  # gate and up are clamped to this
        # endregion
        # region: fused
        self.gate_up = nn.Linear(cfg.width, 2 * cfg.mlp_hidden, bias=GATE_UP_BIAS)
        # endregion
        # region: separate
        self.gate = nn.Linear(cfg.width, cfg.mlp_hidden, bias=GATE_BIAS)
        # endregion
        # region: !fused
        self.up = nn.Linear(cfg.width, cfg.mlp_hidden, bias=UP_BIAS)
        # endregion
        self.down = nn.Linear(cfg.mlp_hidden, cfg.width, bias=DOWN_BIAS)
        # region: multiplied
        self.gate_multiplier = cfg.mlp_gate_multiplier  # the gate times this before its activation
        self.down_multiplier = cfg.mlp_down_multiplier  # the output times this
        # endregion
        # region: xielu
        # xIELU's two learnable scalars (softplus keeps its slopes positive) and its constants
        self.alpha_p = nn.Parameter(torch.empty(1))
        self.alpha_n = nn.Parameter(torch.empty(1))
        self.register_buffer("beta", torch.tensor(0.5))
        self.register_buffer("eps", torch.tensor(-1e-6))
        self.reset_parameters()
        # endregion

    # region: xielu
    def reset_parameters(self) -> None:
        """xIELU's initial slopes, as transformers' XIELUActivation sets them: 0.8 on both sides."""
        with torch.no_grad():
            self.alpha_p.copy_(torch.tensor(0.8).expm1().log())
            self.alpha_n.copy_(torch.tensor(0.8 - 0.5).expm1().log())
            self.beta.fill_(0.5)
            self.eps.fill_(-1e-6)

    # endregion
    def forward(
        self,
        x: torch.Tensor,
        # region: adapter
        adapter: nn.Module,
        # endregion
    ) -> torch.Tensor:
        # region: dense
        return self.down(ACT_UP)  # (B, T, d_ff) -> (B, T, d)
        # endregion
        # region: fused
        # region: !adapter
        gate, up = self.gate_up(x).chunk(2, dim=-1)  # 2 x (B, T, d_ff)
        # endregion
        # region: adapter
        # the calling layer's own low-rank adapter beside the shared projection
        gate, up = (self.gate_up(x) + adapter(x)).chunk(2, dim=-1)  # 2 x (B, T, d_ff)
        # endregion
        # endregion
        # region: clamp_separate
        gate, up = self.gate(x), self.up(x)  # 2 x (B, T, d_ff)
        # endregion
        # region: clamp
        gate, up = gate.clamp(max=self.limit), up.clamp(-self.limit, self.limit)
        return self.down((up + 1) * gate * torch.sigmoid(1.702 * gate))  # (B, T, d)
        # endregion
        # region: multiplied
        # region: !fused
        gate, up = self.gate(x), self.up(x)  # 2 x (B, T, d_ff)
        # endregion
        gate = gate * self.gate_multiplier  # before the activation
        return self.down(ACT_SCALED * up) * self.down_multiplier  # (B, T, d)
        # endregion
        # region: fused_plain
        return self.down(ACT_GATE * up)  # (B, T, d)
        # endregion
        # region: separate_plain
        return self.down(ACT_GATE * self.up(x))  # (B, T, d_ff) -> (B, T, d)
        # endregion


class MoE(nn.Module):
    """DOC"""

    def __init__(self, cfg: Config):
        super().__init__()
        self.top_k = cfg.top_k
        # region: !zero_experts
        self.router = nn.Linear(cfg.width, cfg.experts, bias=ROUTER_BIAS)
        # endregion
        # region: zero_experts
        # the router also scores zero_experts identity experts, numbered after the real ones: a
        # token's slot on one adds its input, weighted, and costs no matmul
        scored = cfg.experts + cfg.zero_experts
        self.router = nn.Linear(cfg.width, scored, bias=ROUTER_BIAS)
        # endregion
        self.experts = nn.ModuleList(Expert(cfg) for _ in range(cfg.experts))
        # region: zero_gate_up
        # only their gate_up rows, which transformers allocates and never uses: kept so that its
        # checkpoints load and the count is what it builds
        self.zero_experts = nn.ModuleList(ZeroExpert(cfg) for _ in range(cfg.zero_experts))
        # endregion
        # region: shared
        self.shared = SharedExpert(cfg)
        # endregion
        # region: shared_gate
        self.shared_gate = nn.Linear(cfg.width, 1, bias=False)  # a sigmoid gate on shared experts
        # endregion
        # region: scaled
        self.routed_scale = cfg.routed_scale
        # endregion
        # region: groups
        self.groups, self.group_top_k = cfg.expert_groups, cfg.group_top_k
        # endregion
        # region: sigmoid_buffer
        # added to the scores to choose the experts, not to weigh them: aux-loss-free balancing
        self.register_buffer("score_bias", torch.zeros(cfg.experts))
        # endregion
        # region: sigmoid_learned
        # added to the scores to choose the experts, not to weigh them; a parameter that
        # gradients do not train (AFMoE's expert_bias)
        self.score_bias = nn.Parameter(torch.zeros(cfg.experts), requires_grad=False)
        # endregion
        # region: learned_choice
        # learned, added to the shares to choose the experts, not to weigh them (ERNIE 4.5)
        self.score_bias = nn.Parameter(torch.zeros(1, cfg.experts), requires_grad=False)
        # endregion
        # region: zero_experts
        # added to the shares to choose the experts, not to weigh them: a buffer the checkpoint sets
        self.register_buffer("score_bias", torch.zeros(scored))
        # endregion
        # region: router_scales
        # Gemma 4: the router reads the layer's input RMS-normed without weights, times a scale
        # per feature; each chosen expert's weight is times a scale of that expert
        self.router_eps = cfg.router_norm_eps
        self.router_scale = nn.Parameter(torch.ones(cfg.width))
        self.expert_scale = nn.Parameter(torch.ones(cfg.experts))
        # endregion

    # region: own_params
    def reset_parameters(self) -> None:
        # region: own_bias
        nn.init.zeros_(self.score_bias)  # router and experts: Linear layers, reset on their own
        # endregion
        # region: router_scales
        nn.init.ones_(self.router_scale)  # router and experts: Linear layers, reset on their own
        nn.init.ones_(self.expert_scale)
        # endregion
        # region: sigmoid_learned
        # AFMoE's router starts at zero (transformers' _init_weights): every score 0.5 at first
        nn.init.zeros_(self.router.weight)
        # endregion

    # endregion
    def forward(
        self,
        x: torch.Tensor,
        # region: router_scales
        route: torch.Tensor,  # (B, T, d): what the router reads (the layer's input, not x)
        # endregion
    ) -> MoEOutput:
        if x.is_meta:  # the routing reads values (argsort, bincount, tolist): meta has none
            raise ValueError(
                "a mixture of experts routes each token by value (which experts take it depends on "
                "the router's output), so its forward needs real tensors: build it on the CPU or a "
                "GPU, or use 'archcalc flops' for its exact FLOPs"
            )
        B, T, d = x.shape
        x = x.reshape(-1, d)  # (N, d): every token of the batch
        # region: chosen_logits
        logits, chosen = self.router(x).topk(self.top_k, dim=-1)  # (N, k): the best experts
        # endregion
        # region: router_scales
        route = F.rms_norm(route.reshape(-1, d).float(), (d,), eps=self.router_eps).type_as(x)
        route = route * self.router_scale * d**-0.5  # (N, d): scaled per feature, and by 1/sqrt(d)
        probs = self.router(route).float().softmax(dim=-1)  # (N, E): each expert's share
        weights, chosen = probs.topk(self.top_k, dim=-1)  # (N, k): the best experts, their shares
        weights = weights / weights.sum(dim=-1, keepdim=True)  # renormalised to sum to 1
        weights = (weights * self.expert_scale[chosen]).flatten()  # (N * k,): times their scales
        # endregion
        # region: softmax_chosen
        weights = logits.float().softmax(dim=-1).flatten()  # (N * k,): their mixing weights
        # endregion
        # region: weigh_input
        weights = torch.sigmoid(logits.float()).to(x.dtype).flatten()  # (N * k,): input scales
        # endregion
        # region: softmax_all
        # region: !zero_experts
        probs = self.router(x).float().softmax(dim=-1)  # (N, E): each expert's share, in float32
        # endregion
        # region: zero_experts
        # (N, E + zero_experts): each expert's share, the logits too in float32 (as transformers')
        probs = F.linear(x.float(), self.router.weight.float(), FLOAT_BIAS).softmax(dim=-1)
        # endregion
        probs = group_mask(self, probs)  # insert: group_mask
        # region: !choice_bias
        weights, chosen = probs.topk(self.top_k, dim=-1)  # (N, k): the best experts, their shares
        # endregion
        # region: choice_bias
        chosen = (probs + self.score_bias).topk(self.top_k, dim=-1)[1]  # (N, k): by share + bias
        weights = probs.gather(1, chosen)  # (N, k): their shares, without score_bias
        # endregion
        # region: normalize
        weights = weights / weights.sum(dim=-1, keepdim=True)  # renormalised to sum to 1
        # endregion
        # endregion
        # region: sigmoid
        # (N, E): the router's logits, in float32
        logits = F.linear(x.float(), self.router.weight.float(), FLOAT_BIAS)
        scores = logits.sigmoid()
        choice = scores + self.score_bias  # (N, E): what the experts are chosen by
        choice = group_mask(self, choice)  # insert: group_mask
        chosen = choice.topk(self.top_k, dim=-1, sorted=False)[1]  # (N, k): each token's experts
        weights = scores.gather(1, chosen)  # (N, k): their scores, without score_bias
        # region: normalize
        weights = weights / (weights.sum(dim=-1, keepdim=True) + 1e-20)  # renormalised
        # endregion
        # endregion
        # region: scaled
        weights = (weights * self.routed_scale).flatten()  # (N * k,): mixing weights
        # endregion
        # region: softmax_all_unscaled
        weights = weights.flatten()  # (N * k,): mixing weights of the chosen experts
        # endregion
        # the (token, slot) pairs grouped by expert once: each expert runs on one contiguous slice
        expert_of_pair = chosen.flatten()  # (N * k,): pair i is token i // k's slot i % k
        order = expert_of_pair.argsort(stable=True)  # (N * k,): the pairs, expert by expert
        token_of = order // self.top_k  # (N * k,): each pair's token, in that order
        # region: !zero_experts
        counts = expert_of_pair.bincount(minlength=len(self.experts)).tolist()  # one host sync
        # endregion
        # region: zero_experts
        # one host sync; the zero experts' pairs come last in this order
        counts = expert_of_pair.bincount(minlength=self.router.out_features).tolist()
        real = sum(counts[: len(self.experts)])  # the pairs on real experts
        # endregion
        routed = x.index_select(0, token_of)  # (N * k, d): the tokens, grouped by expert
        # region: weigh_input
        routed = routed * weights[order, None]  # the weight scales the expert's input
        # endregion
        # region: !zero_experts
        out = self.run_experts(routed, counts)  # (N * k, d): each pair's output
        # endregion
        # region: zero_experts
        # (N * k, d): each pair's output; a zero expert's is its input (the identity)
        out = self.run_experts(routed[:real], counts[: len(self.experts)])
        out = torch.cat((out, routed[real:]))
        # endregion
        # region: !weigh_input
        out = out * weights[order, None]  # weighted
        # endregion
        # summed back into their tokens with scatter_add_: its backward keeps only the index
        # (index_add_'s would keep out)
        into = token_of[:, None].expand_as(out)  # (N * k, d): each pair's row of y (a view)
        y = torch.zeros_like(x, dtype=out.dtype).scatter_add_(0, into, out)  # (N, d): summed
        # region: zero_gate_up
        if torch.is_grad_enabled():  # training: the unused gate_up rows get a gradient (zeros), as
            # every expert does (run_experts): the optimizer and FSDP2 keep state for them all
            y = y + 0 * sum(z.gate_up[0, 0] for z in self.zero_experts)
        # endregion
        # region: gated_shared
        y = y.to(x.dtype) + self.shared(x) * torch.sigmoid(self.shared_gate(x))
        # endregion
        # region: plain_shared
        y = y.to(x.dtype) + self.shared(x)
        # endregion
        # region: shared_added
        return y.view(B, T, d)  # (B, T, d)
        # endregion
        # region: no_shared
        return y.to(x.dtype).view(B, T, d)  # (B, T, d)
        # endregion
        # region: shortcut
        # (B, T, d) each: the routed experts' output, which joins the residual a block later (the
        # shortcut), and the shared expert's, which joins it now
        return y.to(x.dtype).view(B, T, d), self.shared(x).view(B, T, d)
        # endregion

    def run_experts(self, routed: torch.Tensor, counts: list[int]) -> torch.Tensor:
        """Each expert on its slice of `routed` (the tokens grouped by expert, counts[e] for expert
        e): their outputs, in the same order. (Expert parallelism replaces it on each rank with a
        dispatch of the tokens to the ranks that hold their experts.)"""
        # an expert with no tokens is skipped (its empty slice kept) unless autograd records: in
        # training it runs, so every expert has a gradient (zeros), as the optimizer and DDP expect
        parts = [
            expert(part) if n or torch.is_grad_enabled() else part  # (n, d) each
            for expert, part, n in zip(self.experts, routed.split(counts), counts, strict=True)
        ]
        return torch.cat(parts)


def group_mask(self: MoE, scores: torch.Tensor) -> torch.Tensor:
    # group-limited: only the experts of each token's best group_top_k groups can be chosen
    # (N, groups, E / groups)
    by_group = scores.view(-1, self.groups, scores.shape[-1] // self.groups)
    # region: top2_sum
    group_scores = by_group.topk(2, dim=-1)[0].sum(dim=-1)  # (N, groups): each group's two best
    # endregion
    # region: !top2_sum
    group_scores = by_group.max(dim=-1).values  # (N, groups): each group's best
    # endregion
    # (N, group_top_k)
    best_groups = group_scores.topk(self.group_top_k, dim=-1, sorted=False)[1]
    allowed = torch.zeros_like(group_scores).scatter_(1, best_groups, 1.0).bool()  # (N, groups)
    allowed = allowed.unsqueeze(-1).expand_as(by_group).reshape(scores.shape)  # (N, E)
    scores = scores.masked_fill(~allowed, FILL)  # only the experts of the best groups
    return scores
