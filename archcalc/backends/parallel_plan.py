"""Memory per GPU under the parallel plan people use: data parallel with ZeRO, tensor (and sequence) parallel,
pipeline, context and expert parallel. Every figure is exact for the conventions below, and given for the fullest
GPU (tensor rank 0, data rank 0 and the pipeline stage that holds the most).

- Weights, gradients, optimizer state: the tensors tensor parallelism splits (:mod:`archcalc.backends.sharding`:
  q, k, v, gate, up column-wise, out and down row-wise, the embedding and head by vocabulary rows) in
  ``torch.chunk`` pieces, the rest whole on every tp rank; ZeRO-1 (optimizer state), 2 (+ gradients), 3 (+ weights;
  FSDP2) then split each rank's tensors along dim 0 over the data-parallel ranks. ``precision``: ``mixed`` (the
  ZeRO paper's 16 bytes a parameter: bf16 weights 2, bf16 gradients 2, fp32 master weights and AdamW's two moments
  12) or ``fp32`` (4 + 4 + 8: a plain fp32 run such as ``archcalc run --nproc`` on the CPU). ``padded``: FSDP2
  allocates each shard padded to ceil(n / dp) rows; by default the rows a rank holds are counted. The split
  embedding's gradient is whole on every tp rank unless the head is tied to it (torch 2.13's DTensor) or FSDP2
  shards it (ZeRO 2 or 3 over dp > 1: the weight's shard's shape).
- Pipeline parallelism (``pp`` stages): the blocks, in order, in ``torch.chunk`` pieces; the embeddings on the first
  stage, the final norm and the head on the last (a tied head keeps a copy there, as Megatron-LM does). Under 1F1B
  with ``microbatches`` M, stage s keeps the activations of min(pp − s, M) micro-batches of batch / M sequences.
- Sequence parallelism (``sp``, with tp) splits the activations outside attention and MLP (norm inputs, the residual
  stream) over the tp ranks too; context parallelism (``cp``) splits every sequence's tokens: activations and the KV
  cache. Expert parallelism (``ep``, dividing dp) puts each layer's routed experts on ep ranks in ``torch.chunk``
  pieces; their ZeRO sharding then runs over dp / ep ranks.
- The KV cache (inference) per GPU: its layers on the stage, split by tp (key/value heads) and cp (tokens); each
  data-parallel replica keeps its own batch's.
"""

from __future__ import annotations

from dataclasses import dataclass
from fnmatch import fnmatchcase

import sympy

from archcalc.backends.activations import Activations
from archcalc.backends.sharding import PRECISION, SPLIT, chunk, tensor_parallel_plan
from archcalc.errors import UsageError
from archcalc.ir import Lowered, leaves
from archcalc.ir.attrs import Attention, Block, LatentAttention, MoE
from archcalc.ir.mtp import mtp_layers
from archcalc.ir.ops import index_key_width


@dataclass(frozen=True)
class Plan:
    dp: int = 1
    zero: int = 0
    tp: int = 1
    sp: bool = False
    pp: int = 1
    microbatches: int = 1
    cp: int = 1
    ep: int = 1
    precision: str = "mixed"
    padded: bool = False

    def check(self) -> None:
        if self.zero not in (0, 1, 2, 3):
            raise UsageError(f"--zero {self.zero}: expected a ZeRO stage 0, 1, 2 or 3")
        if self.sp and self.tp == 1:
            raise UsageError("--sp: sequence parallelism splits activations over the tensor-parallel ranks; give --tp too")
        if self.dp % self.ep:
            raise UsageError(f"--ep {self.ep} must divide --dp {self.dp}: the data-parallel ranks carry the experts")
        if self.precision not in PRECISION:
            raise UsageError(f"--precision {self.precision!r}: expected one of {', '.join(PRECISION)}")

    def notes(self) -> list[str]:
        """Flags that change nothing under this plan: harmless, so said in a line each rather than refused."""
        out = []
        if self.zero and self.dp == 1:
            out.append(f"--zero {self.zero} has no effect with --dp 1: ZeRO shards over the data-parallel ranks (give --dp N)")
        if self.padded and not (self.zero == 3 and self.dp > 1):
            out.append("--padded has no effect without --zero 3 and --dp > 1: only ZeRO-3 (FSDP2) shards the weights it pads")
        return out

    def summary(self, batch: int) -> str:
        """The plan in words, degrees above 1 only: ``data parallel 8 (ZeRO 3), pipeline 2 (4 micro-batches of 2
        sequences)``; ``no parallelism (one GPU)`` when there are none."""
        def many(n: int, what: str) -> str:
            return f"{n:,} {what}" + ("" if n == 1 else "es" if what.endswith("batch") else "s")

        micro = f"{many(self.microbatches, 'micro-batch')} of {many(batch // self.microbatches, 'sequence')}"
        parts = [f"data parallel {self.dp}" + (f" (ZeRO {self.zero})" if self.zero else "") if self.dp > 1 else "",
                 f"tensor parallel {self.tp}" + (" + sequence parallel" if self.sp else "") if self.tp > 1 else "",
                 f"pipeline {self.pp} ({micro})" if self.pp > 1 else f"gradient accumulation ({micro})" if self.microbatches > 1 else "",
                 f"context parallel {self.cp}" if self.cp > 1 else "", f"expert parallel {self.ep}" if self.ep > 1 else ""]
        return ", ".join(p for p in parts if p) or "no parallelism (one GPU)"

    def conventions(self) -> list[str]:
        weights = "weights counted as FSDP2 allocates them, padded to ceil(n / dp) rows" if self.padded else \
            "weights counted as the rows each rank holds (FSDP2 pads its buffers to ceil(n / dp) rows: --padded)"
        return [f"precision {self.precision}: " + ("bf16 weights and gradients, fp32 master weights and AdamW moments (16 B a parameter)"
                                                   if self.precision == "mixed" else "fp32 weights, gradients and AdamW moments (16 B a parameter)"),
                weights, "the fullest GPU: tensor rank 0, data rank 0, the fullest pipeline stage",
                "pipeline: 1F1B, stage s keeps min(pp - s, micro-batches) micro-batches of activations"]


def check_against_model(lowered: Lowered, plan: Plan, seq_len: int) -> list[str]:
    """Refuse (UsageError) what the plan cannot do with this model and sequence length: more expert-parallel ranks
    than a layer's routed experts (a rank would hold none), more context-parallel ranks than tokens (a rank would get
    none). Returns the notes: :meth:`Plan.notes`, and expert parallelism over a model without routed experts."""
    numeric = lowered.binding.numeric()
    name = f"{lowered.binding.spec.name} {lowered.binding.size}"
    if plan.cp > seq_len:
        raise UsageError(f"--cp {plan.cp}: more context-parallel ranks than the {seq_len:,} tokens of --seq-len; "
                         f"expected at most {seq_len:,} (each rank takes a share of every sequence's tokens)")
    experts = [(path, int(sympy.sympify(node.attrs.experts).xreplace(numeric)))
               for path, node in lowered.root.walk() if isinstance(node.attrs, MoE)]
    notes = plan.notes()
    if plan.ep > 1 and not experts:
        notes.append(f"--ep {plan.ep} has no effect: the model has no routed experts to place")
    for path, n in experts:
        if plan.ep > n:
            raise UsageError(f"--ep {plan.ep}: more expert-parallel ranks than the {n:,} routed experts of {path} ({name}); "
                             f"expected at most {n:,}")
    return notes


def _stacks(lowered: Lowered) -> list[tuple[str, int]]:
    """The block stacks in pipeline order, each with its number of layers."""
    numeric = lowered.binding.numeric()
    root = lowered.root
    holders = [root.find(t) for t in ("encoder", "decoder")] if root.attrs.architecture == "encoder-decoder" else [root]
    return [(f"{h.name}.{c.name}" if h.name else c.name, int(sympy.sympify(c.repeat).xreplace(numeric)))
            for h in holders for c in h.children if isinstance(c.attrs, Block)]


def _on_stages(offset: int, n: int, size: int, pp: int, period: int = 1, phase: int = 0) -> list[int]:
    """How many of a stack's layers offset .. offset + n - 1 each stage holds (stage s: layers s·size .. s·size +
    size - 1 of the whole model), counting only the stack's layers i with i % period == phase. Arithmetic, not a
    loop over layers: a size scaled a millionfold costs what the published one does."""
    def upto(k: int) -> int:  # stack layers i < k with i % period == phase
        return max(0, (k - phase + period - 1) // period) if k > 0 else 0

    out = []
    for s in range(pp):
        lo, hi = max(0, s * size - offset), min(n, (s + 1) * size - offset)
        out.append(upto(hi) - upto(lo) if hi > lo else 0)
    return out


def stage_of(lowered: Lowered, pp: int):
    """A function name -> pipeline stage, and the number of blocks on each stage."""
    stacks = _stacks(lowered)
    total = sum(n for _, n in stacks)
    if pp > total:
        raise UsageError(f"--pp {pp}: more pipeline stages than the model's {total} blocks")
    size = -(-total // pp)
    offsets, start = {}, 0
    for name, n in stacks:
        offsets[name], start = start, start + n
    per_stage = [chunk(total, pp, s) if size * s < total else 0 for s in range(pp)]

    def stage(name: str) -> int:
        for stack, offset in offsets.items():
            if name.startswith(stack + "."):
                return (offset + int(name[len(stack) + 1:].split(".")[0])) // size
        return 0 if name.startswith("embed.") else pp - 1

    return stage, per_stage


def _placement(lowered: Lowered, pp: int) -> tuple[dict[str, tuple[int, int]], int]:
    """Each stack's (first layer, layers) in the whole model, and the layers a pipeline stage holds."""
    stage_of(lowered, pp)  # refuses more stages than blocks
    stacks, offsets, start = _stacks(lowered), {}, 0
    for name, n in stacks:
        offsets[name], start = (start, n), start + n
    return offsets, -(-start // pp)


def _copies(leaf, offsets: dict[str, tuple[int, int]], size: int, plan: Plan, numeric, ep_rank: int) -> list[int]:
    """How many copies of ``leaf`` each pipeline stage holds on one GPU: its stack's layers there, times its other
    repeats, its routed experts cut to those of expert-parallel rank ``ep_rank`` (torch.chunk pieces)."""
    stack = next((name for name in offsets if leaf.path.startswith(name + ".")), None)
    others, per_stage = 1, None
    for prefix, count in leaf.repeats:
        n = int(count.xreplace(numeric))
        if prefix == stack:
            per_stage = _on_stages(*offsets[stack], size, plan.pp)
        elif prefix.endswith(".experts") and plan.ep > 1:
            piece = -(-n // plan.ep)
            others *= max(0, min(n, (ep_rank + 1) * piece) - ep_rank * piece)
        else:
            others *= n
    if per_stage is None:  # outside the stacks: the embeddings on the first stage, the rest on the last
        per_stage = [0] * plan.pp
        per_stage[0 if leaf.path.startswith("embed.") else plan.pp - 1] = 1
    return [c * others for c in per_stage]


def _is_routed(leaf, numeric: dict) -> bool:
    """Whether a tensor belongs to a routed expert (one that only some tokens pass through)."""
    return ".experts" in leaf.path and leaf.tensor.active.xreplace(numeric) != 1


def states_by_stage(lowered: Lowered, plan: Plan, tp_rank: int = 0, dp_rank: int = 0, outside: bool | None = None,
                    routed: bool | None = None) -> list[list[int]]:
    """[weights, gradients, optimizer] bytes of the rank (tp_rank, dp_rank) on every pipeline stage (rank 0 of each is
    the fullest: torch.chunk gives the first pieces the most rows). ``outside``: only the tensors outside the block
    stacks (True: embeddings, final norm, head), or only those inside (False). ``routed``: only the routed experts'
    tensors (True), or only the others (False)."""
    per = PRECISION[plan.precision]
    tp_plan = tensor_parallel_plan(lowered.root, fused=True)[0] if plan.tp > 1 else {}
    numeric = lowered.binding.numeric()
    offsets, size = _placement(lowered, plan.pp)
    tied = any(leaf.tensor.tied_to for leaf in leaves(lowered.root))
    totals = [[0, 0, 0] for _ in range(plan.pp)]
    for leaf in leaves(lowered.root):
        if leaf.tensor.tied_to and plan.pp == 1:
            continue  # the embedding itself
        is_routed = _is_routed(leaf, numeric)
        if outside is not None and outside == any(leaf.path.startswith(name + ".") for name in offsets) or \
                routed is not None and routed != is_routed:
            continue
        shape = [int(sympy.sympify(s).xreplace(numeric)) for s in leaf.tensor.shape]
        copies = _copies(leaf, offsets, size, plan, numeric, dp_rank % plan.ep)
        if leaf.tensor.tied_to:
            copies[0] = 0  # the first stage holds the embedding itself
        dp, data_rank = plan.dp, dp_rank
        if is_routed and plan.ep > 1:
            dp, data_rank = dp // plan.ep, dp_rank // plan.ep
        style, dim = tp_split(leaf, tp_plan, len(shape))
        local = list(shape)
        if dim is not None:
            local[dim] = chunk(local[dim], plan.tp, tp_rank)
        # the split embedding's gradient is whole (torch 2.13's DTensor) unless FSDP2 reduce-scatters it into the
        # shape of the weight's shard (ZeRO 2 and 3 over dp > 1)
        sharded_grad = plan.zero >= 2 and plan.dp > 1
        grad = shape if style == "vocab" and not tied and not sharded_grad else local
        for j, (held, zero_stage) in enumerate(((local, 3), (grad, 2), (local, 1))):
            rows = held[0] if held else 1
            if dp > 1 and plan.zero >= zero_stage and held:
                rows = -(-rows // dp) if (j == 0 and plan.padded) else chunk(rows, dp, data_rank)
            for s, n in enumerate(copies):
                totals[s][j] += n * rows * _rest(held) * per[j]
    return totals


def tp_split(leaf, tp_plan: dict[str, str], ndim: int) -> tuple[str | None, int | None]:
    """The tensor-parallel style of ``leaf``'s module under ``tp_plan`` and the dimension of the tensor it splits
    (None: whole); the calculator of the model pages exports the same (archcalc/site/calc_runtime.py)."""
    module, kind = leaf.path.rsplit(".", 1)
    # the plan's patterns name layers by index (blocks.*.attn.q): match them with any index in place
    indexed = module
    for prefix, _ in sorted(leaf.repeats, key=lambda r: -len(r[0])):
        indexed = indexed[: len(prefix)] + ".0" + indexed[len(prefix):]
    style = next((v for pattern, v in tp_plan.items() if fnmatchcase(indexed, pattern)), None)
    dim = SPLIT[style][0 if kind == "weight" else 1] if style is not None else None
    return style, dim if dim is not None and dim < ndim else None


def kv_by_stage(lowered: Lowered, plan: Plan, seq_len: int, batch: int) -> list[int]:
    """KV cache elements of each pipeline stage's layers on one GPU (split by tp and cp)."""
    numeric = lowered.binding.numeric()
    value = lambda e: int(sympy.sympify(e).xreplace(numeric))  # noqa: E731
    offsets, size = _placement(lowered, plan.pp)
    out = [0] * plan.pp
    tokens = -(-seq_len // plan.cp)
    for path, node in lowered.root.walk():
        a = node.attrs
        if not isinstance(a, Attention) or not (a.causal or a.cross) or a.kv_shared:
            continue
        if isinstance(a, LatentAttention):  # one latent for all heads: not split by tp
            per_token = value(a.kv_rank + a.rope_width + index_key_width(node))  # + the indexer's key (DSA)
        else:
            per_token = chunk(value(a.kv_heads), plan.tp, 0) * (value(a.head_width) + value(a.value_width))
        windows = a.layer_windows  # layer i of the stack has window windows[i % len(windows)]
        for window, places in places_by_window(windows).items():  # once per window, not per place of a long cycle
            cached = min(tokens, value(window)) if window is not None else tokens
            if path.rsplit(".", 1)[0] in offsets:
                layers = _on_stages_cycle(*offsets[path.rsplit(".", 1)[0]], size, plan.pp, len(windows), places)
            else:  # an MTP module's block: after the stacks, on the last stage
                layers = [0] * (plan.pp - 1) + [value(mtp_layers(lowered.root)) * len(places) // len(windows)]
            for s, n in enumerate(layers):
                out[s] += n * per_token * cached * batch
    return out


def places_by_window(windows: tuple) -> dict:
    """The places of a cycle of layer windows, grouped by window (each window expression once)."""
    out: dict = {}
    for j, window in enumerate(windows):
        out.setdefault(window, []).append(j)
    return out


def _on_stages_cycle(offset: int, n: int, size: int, pp: int, period: int, places: list[int]) -> list[int]:
    """:func:`_on_stages` for the stack's layers i with i % period in ``places``: O(period + pp), whatever the
    number of places (a cycle of 10,000 layers over 10,000 stages is not 10^8 steps)."""
    before = [0] * (period + 1)  # before[k]: places below k
    for j in places:
        before[j + 1] += 1
    for k in range(period):
        before[k + 1] += before[k]

    def upto(k: int) -> int:  # stack layers i < k at the places
        cycles, rest = divmod(max(k, 0), period)
        return cycles * before[period] + before[rest]

    out = []
    for s in range(pp):
        lo, hi = max(0, s * size - offset), min(n, (s + 1) * size - offset)
        out.append(upto(hi) - upto(lo) if hi > lo else 0)
    return out


def activations_by_stage(acts: Activations, plan: Plan, per_stage_layers: list[int]) -> list[int]:
    """Activation bytes of each pipeline stage on one GPU: its layers, for its in-flight micro-batches (1F1B); what the
    head keeps on the last stage; split by tp (inside attention and MLP; everything with sp) and by cp (tokens)."""
    def part(items) -> int:
        return sum(b // plan.tp if (inside or plan.sp) else b for _, b, inside in items)

    layer, outside = part(acts.per_layer), part(acts.outside)
    out = []
    for s, layers in enumerate(per_stage_layers):
        in_flight = min(plan.pp - s, plan.microbatches) if plan.pp > 1 else 1  # without pp: one micro-batch at a time
        held = layers * layer + (outside if s == plan.pp - 1 else 0)
        out.append(-(-held * in_flight // (plan.microbatches * plan.cp)))  # M micro-batches of batch / M sequences
    return out


def _rest(shape: list[int]) -> int:
    out = 1
    for n in shape[1:]:
        out *= n
    return out

