"""How long a training run takes on N GPUs, under which parallel plan: ``archcalc plan``.

Every plan that divides the GPUs (data x tensor x pipeline x context parallel, experts over data-parallel ranks, ZeRO
1 or 3, a micro-batch size, full activation recomputation or none) is checked against the device's memory with
``memory``'s per-GPU figures (:mod:`archcalc.backends.parallel_plan`), then timed by a stated model:

- compute: the step's matmul FLOPs (``flops``' exact ``train_step_matmul``; recomputation adds one forward) split
  evenly over the GPUs, the fullest pipeline stage setting the pace, at a matmul efficiency ``e`` (the share of the
  dense peak the kernels reach). 1F1B runs the M micro-batches in (M + p - 1) slots: the bubble (p - 1) / (M + p - 1).
- communication, in exact bytes each GPU sends a step, by collective, over ring algorithms (an all-reduce sends
  2(n - 1)/n of its buffer, a reduce-scatter or all-gather (n - 1)/n); elements bf16 under mixed precision, fp32 under
  fp32. Tensor parallel: per layer and micro-batch two all-reduces of the layer's activations forward and two backward
  (with sequence parallelism the same bytes as all-gathers and reduce-scatters). Pipeline point-to-point: a
  micro-batch's activations forward and their gradient backward (each tp rank's share with sequence parallelism).
  Data parallel: ZeRO-1 reduce-scatters the gradients and all-gathers the weights; ZeRO-3 (FSDP) all-gathers the
  weights for every micro-batch's forward and backward and reduce-scatters the gradients. Expert parallel: the routed
  tokens' all-to-all there and back, forward and backward. Context parallel: ring exchanges of each layer's keys and
  values. A group within one node runs at the NVLink bandwidth, one that spans nodes at the per-GPU network bandwidth
  (ranks ordered tp, cp, dp, pp from the innermost, as Megatron-LM does; experts within the data-parallel group).
  Latency is not modelled.
- overlap: data-parallel and context-parallel traffic hide behind compute (only what exceeds it shows); tensor,
  pipeline and expert traffic is on the critical path.

``mfu`` (the end-to-end model FLOPs utilization a published run reports) is met by the best plan: the matmul
efficiency is solved for so that the best plan's step takes model FLOPs / (N x peak x mfu); the other plans are timed
at the same efficiency. ``efficiency`` (from ``archcalc run --json``: a measured single-GPU run) sets it directly.
Model FLOPs (MFU's numerator) exclude recomputation and count attention over the full T x T, as PaLM's and
Megatron-LM's formulas do (``causal``: over the causal triangle, as the generated file's ``flops_per_token`` and
flash attention's work). Every time here is an estimate from this model; the FLOPs and bytes are exact.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from functools import cache

import sympy

from archcalc.backends.activations import Activations, activations
from archcalc.backends.flops import flops
from archcalc.backends.infer.hardware import Hardware
from archcalc.backends.memory import check_tensor_parallel
from archcalc.backends.parallel_plan import Plan, _on_stages, _placement, activations_by_stage, states_by_stage
from archcalc.errors import UsageError
from archcalc.ir import Lowered
from archcalc.ir.attrs import MIXERS, Attention, Block, LatentAttention, MoE

WIRE_BYTES = {"mixed": 2, "fp32": 4}  # bytes an activation or gradient element takes on the wire, by precision
MICRO_BATCHES = (1, 2, 4, 8, 16)  # micro-batch sizes tried (sequences)
MIN_CP_TOKENS = 4096  # context parallelism is tried while each rank keeps at least this many tokens of a sequence
MAX_PLANS = 20_000  # plans timed at most (a bound on the work, whatever the number of GPUs)


@dataclass(frozen=True)
class Cluster:
    """The GPUs: how many, which, how many to a node, bytes/s each sends within a node and across nodes."""

    hardware: Hardware
    gpus: int
    per_node: int
    link: int | None  # within a node, per GPU and direction (NVLink); None: not known
    network: int | None  # across nodes, per GPU and direction (one NIC per GPU); None: not known
    dtype: str = "bfloat16"

    @property
    def peak(self) -> int:
        return self.hardware.peak(self.dtype)

    def bandwidth(self, span: int) -> int | None:
        """Bytes/s of a collective over ``span`` consecutive ranks (within a node or across nodes)."""
        return self.link if span <= self.per_node else self.network


@dataclass(frozen=True)
class Job:
    """What to train: ``global_batch`` sequences of ``seq_len`` tokens a step, ``tokens`` in all."""

    lowered: Lowered
    seq_len: int
    global_batch: int
    tokens: int
    reserve: Fraction = Fraction(1, 10)  # of each GPU's memory kept free (CUDA context, NCCL buffers, fragmentation)
    causal: bool = False  # attention FLOPs over the causal triangle (the generated file's flops_per_token), else T x T

    @property
    def steps(self) -> int:
        return -(-self.tokens // (self.global_batch * self.seq_len))


@dataclass
class Candidate:
    plan: Plan
    micro_batch: int  # sequences
    recompute: bool
    memory: dict[str, int]  # the fullest GPU (parallel_plan's per-GPU figures)
    fits: bool
    comm: dict[str, dict] = field(default_factory=dict)  # collective -> bytes a GPU sends a step, group, span
    step_seconds: float = 0.0
    parts: dict[str, float] = field(default_factory=dict)  # compute, bubble, exposed communication by collective
    mfu: float = 0.0
    why: str = ""
    cost: tuple = ()  # Planner.prepare: (compute at full efficiency, bubble ratio, exposed and hidden seconds, by collective)

    @property
    def bubble(self) -> Fraction:
        p, m = self.plan.pp, self.plan.microbatches
        return Fraction(p - 1, m + p - 1)

    def label(self) -> str:
        p = self.plan
        bits = [f"tp {p.tp}", f"pp {p.pp}", f"dp {p.dp}"] + ([f"cp {p.cp}"] if p.cp > 1 else []) + \
            ([f"ep {p.ep}"] if p.ep > 1 else [])
        return ", ".join(bits) + f", ZeRO-{p.zero}, micro-batch {self.micro_batch} x {p.microbatches}" + \
            (", recompute" if self.recompute else "")


def divisors(n: int) -> list[int]:
    """The divisors of n, ascending (n up to 2^31: a trial division to sqrt(n))."""
    small = [k for k in range(1, int(n**0.5) + 1) if n % k == 0]
    return sorted(set(small + [n // k for k in small]))


@dataclass(frozen=True)
class Shape:
    """What the plan arithmetic needs of the model, read once from the IR."""

    layers: int
    width: int
    stacks: tuple[tuple[str, int, bool, bool, int], ...]  # name, layers, has attention, has routed experts, KV bytes a token
    experts: int  # routed experts of a MoE layer (0: none)
    top_k: int
    vocab: int = 0


def model_shape(lowered: Lowered) -> Shape:
    numeric = lowered.binding.numeric()
    value = lambda e: int(sympy.sympify(e).xreplace(numeric))  # noqa: E731
    stacks, experts, top_k = [], 0, 0
    for _, node in lowered.root.walk():
        if not isinstance(node.attrs, Block):
            continue
        attn = moe = None
        for _, child in node.walk():
            if isinstance(child.attrs, Attention) and not child.attrs.cross and attn is None:
                attn = child.attrs
            if isinstance(child.attrs, MoE):
                moe = child.attrs
        kv = 0
        if isinstance(attn, LatentAttention):
            kv = value(attn.kv_rank + attn.rope_width)
        elif attn is not None:
            kv = value(attn.kv_heads) * (value(attn.head_width) + value(attn.value_width))
        if moe is not None:
            experts, top_k = value(moe.experts), value(moe.top_k)
        stacks.append((node.name, value(node.repeat), attn is not None, moe is not None, kv))
    return Shape(sum(s[1] for s in stacks), value(lowered.root.attrs.width), tuple(stacks), experts, top_k,
                 value(lowered.root.attrs.vocab))


def candidates(job: Job, cluster: Cluster) -> list[tuple[Plan, int, bool]]:
    """Every plan that divides the GPUs and the batch and that the model's shapes allow (see the module's text)."""
    n, shape = cluster.gpus, model_shape(job.lowered)
    out = []
    for tp in divisors(n):
        if tp > cluster.per_node or not _tp_ok(job.lowered, tp):
            continue
        for cp in (c for c in divisors(n // tp) if c & (c - 1) == 0):
            if cp > 1 and (job.seq_len % cp or job.seq_len // cp < MIN_CP_TOKENS):
                continue
            for pp in divisors(n // (tp * cp)):
                dp = n // (tp * cp * pp)
                if pp > shape.layers or job.global_batch % dp:
                    continue
                for ep in ([1] if not shape.experts else [e for e in divisors(dp) if shape.experts % e == 0]):
                    for zero in (1, 3):
                        for b in (b for b in MICRO_BATCHES if (job.global_batch // dp) % b == 0):
                            plan = Plan(dp=dp, zero=zero, tp=tp, sp=tp > 1, pp=pp, cp=cp, ep=ep,
                                        microbatches=job.global_batch // dp // b)
                            out += [(plan, b, False), (plan, b, True)]
                            if len(out) > MAX_PLANS:
                                raise UsageError(f"more than {MAX_PLANS:,} plans for {n:,} GPUs; give fewer GPUs or a "
                                                 "larger --global-batch")
    return out


def _tp_ok(lowered: Lowered, tp: int) -> bool:
    try:
        check_tensor_parallel(lowered, tp)
    except UsageError:
        return False
    return True


class Planner:
    """Memory and communication of each candidate, with what is shared between candidates worked out once."""

    def __init__(self, job: Job, cluster: Cluster, layout: str = "megatron"):
        self.job, self.cluster, self.shape = job, cluster, model_shape(job.lowered)
        self.layout = layout  # "megatron": fused projections; "generated": archcalc's generated module (DTensor)
        self.tp_collectives = tp_collectives(job.lowered, layout)
        counted = flops(job.lowered.binding, job.seq_len, 1, lowered=job.lowered)
        self.forward = counted.forward_matmul_causal if job.causal else counted.forward_matmul  # one sequence
        self.acts = cache(lambda batch, mixed: activations(job.lowered, job.seq_len, batch, mixed=mixed))
        self.states = cache(lambda plan, routed=None: states_by_stage(job.lowered, plan, routed=routed))
        self.root_states = cache(lambda plan, routed=None: states_by_stage(job.lowered, plan, outside=True, routed=routed))
        self.per_stage = cache(lambda pp: _layers_by_stack(job.lowered, self.shape, pp))
        self.stage_layers = cache(lambda pp: [sum(n[s] for n in self.per_stage(pp).values()) for s in range(pp)])

    @property
    def model_flops(self) -> int:
        """Matmul FLOPs of one step without recomputation (forward + backward = 3 forwards)."""
        return 3 * self.forward * self.job.global_batch

    def candidate(self, plan: Plan, micro_batch: int, recompute: bool) -> Candidate:
        per_replica = self.job.global_batch // plan.dp
        key = Plan(dp=plan.dp, zero=plan.zero, tp=plan.tp, pp=plan.pp, ep=plan.ep, precision=plan.precision)
        states = self.states(key)
        layers = self.stage_layers(plan.pp)
        acts = self.acts(per_replica, plan.precision == "mixed")
        held = _recomputed(acts, plan, layers) if recompute else activations_by_stage(acts, plan, layers)
        stage = max(range(plan.pp), key=lambda s: sum(states[s]) + held[s])
        memory = {"weights_bytes": states[stage][0], "gradients_bytes": states[stage][1],
                  "optimizer_bytes": states[stage][2], "activations_bytes": held[stage]}
        memory["total_bytes"] = sum(memory.values())
        memory["pipeline_stage"] = stage
        usable = self.cluster.hardware.memory * (1 - self.job.reserve)
        c = Candidate(plan, micro_batch, recompute, memory, memory["total_bytes"] <= usable)
        c.comm = self.communication(plan, micro_batch, recompute)
        return c

    def communication(self, plan: Plan, b: int, recompute: bool) -> dict[str, dict]:
        """Bytes each GPU sends in one step, by collective (the busiest pipeline stage's), exact."""
        shape, job, m = self.shape, self.job, plan.microbatches
        tokens = b * job.seq_len // plan.cp  # of one micro-batch on one rank (before sequence parallelism)
        wire = WIRE_BYTES[plan.precision]
        act = tokens * shape.width * wire
        per_stage = self.per_stage(plan.pp)
        out: dict[str, dict] = {}
        if plan.tp > 1:
            out["tensor parallel"] = self._tensor_parallel(plan, per_stage, act, tokens, wire, recompute)
        if plan.pp > 1:
            split = plan.tp if plan.sp else 1  # sequence parallelism sends each tp rank's share only
            out["pipeline"] = _volume(2 * m * act, split, 2 * plan.tp * plan.cp * plan.dp,  # to the next stage's rank
                                      "point-to-point activations and their gradients")
        if plan.dp > 1:
            out["data parallel"] = self._data_parallel(plan)
        moe_layers = max(sum(per_stage[name][s] for name, _, _, moe, _ in shape.stacks if moe) for s in range(plan.pp))
        if plan.ep > 1 and moe_layers:
            passes = 6 if recompute else 4
            routed = tokens // (plan.tp if plan.sp else 1) * shape.top_k * shape.width * wire
            out["expert parallel"] = _volume(moe_layers * m * passes * routed * (plan.ep - 1), plan.ep,
                                             plan.tp * plan.cp * plan.ep, "all-to-all of routed tokens, there and back")
        if plan.cp > 1:
            kv = max(sum(per_stage[name][s] * _kv_per_rank(k, plan) for name, _, _, _, k in shape.stacks)
                     for s in range(plan.pp))
            out["context parallel"] = _volume(3 * m * kv * tokens * wire * (plan.cp - 1), 1, plan.tp * plan.cp,
                                              "ring exchange of keys and values (forward once, backward twice)")
        return out

    def _data_parallel(self, plan: Plan) -> dict:
        """ZeRO-1: the gradients reduce-scattered and the updated weights all-gathered once a step. ZeRO-3 (FSDP2):
        every micro-batch all-gathers the blocks' weights for its forward and again for its backward, the rest (the
        root module, which FSDP2 keeps gathered from forward to backward) once; the gradients reduce-scattered once
        a step (no sync until the last micro-batch). Sizes as held before ZeRO shards them. Under expert parallelism
        the routed experts go over their own group: the dp / ep ranks that hold the same experts."""
        whole = Plan(dp=plan.dp, tp=plan.tp, pp=plan.pp, ep=plan.ep, precision=plan.precision)
        split = plan.ep > 1 and self.shape.experts > 0
        groups = [(None, plan.dp)] if not split else [(False, plan.dp), (True, plan.dp // plan.ep)]
        per_stage = [0] * plan.pp
        for routed, ranks in groups:
            if ranks == 1:
                continue
            weights = self.states(whole, routed)
            if plan.zero == 3:
                root = self.root_states(whole, routed)
                rounds = [plan.microbatches * (2 * w[0] - r[0]) + w[0] for w, r in zip(weights, root, strict=True)]
            else:
                rounds = [2 * w[0] for w in weights]
            per_stage = [sent + -(-r * (ranks - 1) // ranks) for sent, r in zip(per_stage, rounds, strict=True)]
        what = ("ZeRO-3: all-gather the weights each micro-batch, reduce-scatter the gradients" if plan.zero == 3 else
                "ZeRO-1: reduce-scatter the gradients, all-gather the weights")
        if split:
            what += f"; the routed experts over the {plan.dp // plan.ep} ranks holding the same ones"
        return _volume(max(per_stage), 1, plan.tp * plan.cp * plan.dp, what)

    def _tensor_parallel(self, plan: Plan, per_stage: dict, act: int, tokens: int, wire: int, recompute: bool) -> dict:
        """Per micro-batch: each layer's all-reduces of its activations (forward, again when recomputed, backward),
        the vocabulary-parallel embedding's (forward) and head's (backward) on their stages; the generated module
        also gathers the logits (Megatron-LM's vocabulary-parallel loss exchanges a few scalars a token instead)."""
        def stage_reduces(s: int) -> int:
            out = 0
            for name, *_ in self.shape.stacks:
                forward, backward = self.tp_collectives.get(name, (0, 0))
                out += per_stage[name][s] * (forward * (2 if recompute else 1) + backward)
            return out + (s == 0) + (s == plan.pp - 1)
        reduces = max(stage_reduces(s) for s in range(plan.pp))
        sent = reduces * plan.microbatches * act * 2 * (plan.tp - 1)  # ring all-reduce: 2(t - 1)/t of the buffer
        if self.layout == "generated":  # the logits' all-gather on the last stage: (t - 1) shards of V / t
            sent += plan.microbatches * tokens * self.shape.vocab * wire * (plan.tp - 1)
        what = "all-gathers and reduce-scatters of activations (sequence parallel)" if plan.sp else "all-reduces of activations"
        return _volume(sent, plan.tp, plan.tp, what)

    def prepare(self, c: Candidate) -> None:
        """Work out what the candidate's step time needs, once: its compute at full efficiency, its bubble ratio, the
        seconds of each collective (those hidden behind compute apart)."""
        plan, n = c.plan, self.cluster.gpus
        hardware_flops = (4 if c.recompute else 3) * self.forward * self.job.global_batch
        uneven = Fraction(-(-self.shape.layers // plan.pp) * plan.pp, self.shape.layers)
        seconds = {}
        for name, v in c.comm.items():
            bandwidth = self.cluster.bandwidth(v["span"])
            v["seconds"] = v["bytes"] / bandwidth if bandwidth else None
            seconds[name] = v["seconds"] or 0.0
        hidden = sum(t for name, t in seconds.items() if name in HIDDEN)
        c.cost = (float(Fraction(hardware_flops, n * self.cluster.peak) * uneven), float(c.bubble / (1 - c.bubble)),
                  sum(t for name, t in seconds.items() if name not in HIDDEN), hidden, seconds)

    def time(self, c: Candidate, efficiency: float) -> None:
        """Set the candidate's step time, its parts and its MFU at a matmul efficiency."""
        full, ratio, _, hidden, seconds = c.cost
        compute = full / efficiency
        parts = {"compute": compute, "pipeline bubble": compute * ratio}
        parts.update((name, t) for name, t in seconds.items() if name not in HIDDEN)
        parts["data/context parallel beyond compute"] = max(0.0, hidden - compute)
        c.parts = parts
        c.step_seconds = step_seconds(c, efficiency)
        c.mfu = self.model_flops / (self.cluster.gpus * self.cluster.peak * c.step_seconds)


HIDDEN = ("data parallel", "context parallel")  # collectives that overlap compute


def step_seconds(c: Candidate, efficiency: float) -> float:
    full, ratio, fixed, hidden, _ = c.cost
    compute = full / efficiency
    return compute * (1 + ratio) + fixed + max(0.0, hidden - compute)


def tp_collectives(lowered: Lowered, layout: str) -> dict[str, tuple[int, int]]:
    """Each block stack's tensor-parallel all-reduces of a layer, (forward, backward): Megatron-LM reduces once after
    each row-parallel sub-layer (attention, MLP, mixer) forward and once at each sub-layer's input backward; the
    generated module (DTensor, separate projections) backward once per column-parallel projection."""
    from archcalc.backends.sharding import tensor_parallel_plan

    plan = tensor_parallel_plan(lowered.root, fused=True)[0]
    out: dict[str, tuple[int, int]] = {}
    for name, *_ in model_shape(lowered).stacks:
        inside = {p[len(name) + 3:]: style for p, style in plan.items() if p.startswith(f"{name}.*.") and ".experts." not in p}
        sublayers = len({p.split(".")[0] for p, style in inside.items() if style == "rowwise"})
        columns = sum(style == "colwise" for style in inside.values())
        out[name] = (sublayers, sublayers if layout == "megatron" else columns)
    return out


def _layers_by_stack(lowered: Lowered, shape: Shape, pp: int) -> dict[str, list[int]]:
    """Each block stack's layers on each pipeline stage."""
    offsets, size = _placement(lowered, pp)
    return {name: _on_stages(*offsets[name], size, pp) for name, *_ in shape.stacks}


def _recomputed(acts: Activations, plan: Plan, layers: list[int]) -> list[int]:
    """Activation bytes a stage keeps with full recomputation: each layer's input (split over tp with sequence
    parallelism) for its in-flight micro-batches, one layer's saved tensors while it is recomputed, the head's."""
    split = lambda items: sum(b // plan.tp if (inside or plan.sp) else b for _, b, inside in items)  # noqa: E731
    one_layer, outside = split(acts.per_layer), split(acts.outside)
    block_input = acts.block_input_bytes // (plan.tp if plan.sp else 1)
    out = []
    for s, n in enumerate(layers):
        in_flight = min(plan.pp - s, plan.microbatches) if plan.pp > 1 else 1
        kept = n * block_input * in_flight + one_layer + (outside if s == plan.pp - 1 else 0)
        out.append(-(-kept // (plan.microbatches * plan.cp)))
    return out


def _kv_per_rank(per_token: int, plan: Plan) -> int:
    return per_token // plan.tp if per_token else 0


def _volume(numerator: int, ranks: int, span: int, what: str) -> dict:
    """Bytes a GPU sends (numerator / ranks, rounded up), the group's span of consecutive ranks, what it is."""
    return {"bytes": -(-numerator // ranks), "span": span, "what": what}


def check_model(lowered: Lowered) -> None:
    lowered.require_attention_only("a training plan", modelled=MIXERS)


@dataclass
class TrainingPlan:
    """The plans ranked, best first, and what the run takes under the best."""

    job: Job
    cluster: Cluster
    efficiency: float  # matmul efficiency the times assume
    efficiency_from: str  # how it was set
    model_flops: int  # one step, no recomputation
    ranked: list[Candidate]  # the plans that fit, fastest first
    rejected: list[Candidate]  # the plans that do not fit, least memory first
    notes: list[str] = field(default_factory=list)

    @property
    def best(self) -> Candidate:
        return self.ranked[0]

    @property
    def train_seconds(self) -> float:
        return self.job.steps * self.best.step_seconds

    def gpu_hours(self) -> float:
        return self.cluster.gpus * self.train_seconds / 3600

    def tokens_per_second(self) -> float:
        return self.job.global_batch * self.job.seq_len / self.best.step_seconds


def plan_training(job: Job, cluster: Cluster, mfu: Fraction | None = None, efficiency: Fraction | None = None,
                  efficiency_from: str = "") -> TrainingPlan:
    """Rank the plans (see the module's text). Give ``mfu`` (the best plan's end-to-end MFU) or ``efficiency``."""
    check_model(job.lowered)
    planner = Planner(job, cluster)
    found = [planner.candidate(*c) for c in candidates(job, cluster)]
    for c in found:
        planner.prepare(c)
    if not found:
        raise UsageError(f"no parallel plan divides {cluster.gpus:,} GPUs and a global batch of {job.global_batch:,} "
                         f"sequences (data-parallel degrees must divide it): try another --gpus or --global-batch")
    fitting = [c for c in found if c.fits]
    if not fitting:
        least = min(found, key=lambda c: c.memory["total_bytes"])
        usable = cluster.hardware.memory * (1 - job.reserve)
        raise UsageError(f"no plan fits in {cluster.hardware.name}'s memory: the leanest ({least.label()}) needs "
                         f"{least.memory['total_bytes'] / 2**30:,.1f} GiB a GPU of {float(usable) / 2**30:,.1f} GiB usable; "
                         "give more GPUs, a shorter --seq-len or a smaller --global-batch")
    notes = []
    if efficiency is None:
        e, note = _solve_efficiency(planner, fitting, mfu)
        efficiency_from = (f"solved so that the best plan's MFU is {float(mfu):.1%} (--mfu)" if not note else
                           f"held at the peak, as --mfu {float(mfu):.1%} is beyond every plan (see the note)")
        notes += [note] if note else []
    else:
        e = float(efficiency)
    for c in found:
        planner.time(c, e)
    fitting.sort(key=lambda c: (c.step_seconds, c.memory["total_bytes"]))
    rejected = sorted((c for c in found if not c.fits), key=lambda c: c.memory["total_bytes"])
    for c in fitting[1:]:
        c.why = _why(c, fitting[0])
    if cluster.link is None or (cluster.network is None and cluster.gpus > cluster.per_node):
        notes.append(f"{cluster.hardware.name}: no interconnect figures in archcalc's table: communication is counted "
                     "in bytes but not timed (give --link-gb-s and --network-gb-s)")
    return TrainingPlan(job, cluster, e, efficiency_from, planner.model_flops, fitting, rejected, notes)


def _solve_efficiency(planner: Planner, fitting: list[Candidate], mfu: Fraction) -> tuple[float, str]:
    """The matmul efficiency at which the fastest plan reaches ``mfu`` (bisection: every step time falls as the
    efficiency rises); 1 with a note where even kernels at peak cannot."""
    n, peak = planner.cluster.gpus, planner.cluster.peak
    target = planner.model_flops / (n * peak * float(mfu))

    def fastest(e: float) -> float:
        return min(step_seconds(c, e) for c in fitting)

    if fastest(1.0) > target:
        best = min(fitting, key=lambda c: step_seconds(c, 1.0))
        planner.time(best, 1.0)
        return 1.0, (f"--mfu {float(mfu):.1%} is beyond this model of the run: with matmuls at the full peak the best "
                     f"plan reaches {best.mfu:.1%} (its bubble and exposed communication); times assume the peak")
    low, high = 1e-6, 1.0
    for _ in range(48):  # to 2^-48: far finer than the model
        mid = (low + high) / 2
        low, high = (low, mid) if fastest(mid) <= target else (mid, high)
    return high, ""


def _why(c: Candidate, best: Candidate) -> str:
    """What makes a plan slower than the best: how much in all, and its largest extra part of the step (each as a
    share of the best step)."""
    keys = set(c.parts) | set(best.parts)
    extra = {k: c.parts.get(k, 0.0) - best.parts.get(k, 0.0) for k in keys}
    key = max(extra, key=lambda k: extra[k])
    if extra[key] <= 0:
        return "as fast as the best"
    what = "recomputation" if key == "compute" and c.recompute and not best.recompute else \
        "uneven pipeline stages" if key == "compute" else key if "bubble" in key or "beyond" in key else f"{key} traffic"
    total = (c.step_seconds - best.step_seconds) / best.step_seconds
    return f"+{total:.1%} in all; {what} +{extra[key] / best.step_seconds:.0%}"
