"""Inference analysis: exact generation FLOPs and bytes, and roofline bounds on one accelerator type.

A roofline bound takes each phase (the prefill; each decode step) to last max(FLOPs / peak, bytes / bandwidth):
the time if the kernels ran at the device's dense peak or at its memory bandwidth, whichever limits. It ignores
kernel launch overhead, communication between GPUs (tensor parallelism only reports the all-reduce bytes),
scheduling and batching policies, and any compute below the peak: real runs are slower. See
:mod:`archcalc.backends.infer.flops` and :mod:`archcalc.backends.infer.traffic` for what is counted.

>>> from archcalc.spec import load_spec
>>> from archcalc.spec.bind import bind
>>> r = infer(bind(load_spec("llama"), "2-7b"), "a100-80gb", batch=1, prompt=512, new_tokens=128)
>>> r.flops.generate == r.flops.prefill + r.flops.decode, int(r.kv_cache_bytes)
(True, 335544320)
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from archcalc.backends.infer.decode import Line, decode_sums
from archcalc.backends.infer.flops import GenerationFlops, generation_flops
from archcalc.backends.infer.hardware import ALIASES, Hardware, hardware
from archcalc.backends.infer.traffic import WeightBytes, kv_terms, matmul_io, weight_bytes
from archcalc.backends.memory import DTYPES, state_elements
from archcalc.errors import UsageError
from archcalc.ir import lower
from archcalc.ir.attrs import MIXERS, Attention, Block, StateMixer
from archcalc.spec.bind import Binding

MAX_TOKENS = 10**18  # prompt + new tokens; the decode steps are summed in closed form, so any number costs the same

CONVENTIONS = (
    "FLOPs: 2 per multiply-accumulate, matmuls only; attention pairs over the causal triangle (prefill_matmul_dense: the "
    "full P x P square, as torch's FlopCounterMode counts SDPA); the LM head at the last prompt position only",
    "weights read once per forward pass; embedding lookups read their rows; a mixture of experts reads at most "
    "min(E, tokens x top_k) experts",
    "quantized weights (--weights-dtype): linear layers' matrices only; int8/int4 with one --dtype scale per 128 "
    "weights, fp8 with one float32 scale per output row",
    "KV cache read whole each step (a window at most), written once per token; activation bytes are an estimate "
    "(every matmul reads its input and writes its output once)",
    "roofline: each phase takes max(FLOPs / peak, bytes / bandwidth); no launch overhead, communication time, "
    "scheduling or efficiency below peak: real runs are slower",
)
#: what each kind of state mixer keeps and costs when generating (its letters: docs/conventions.md)
MIXER_CONVENTIONS = {
    "mamba2": "Mamba2 layers: a recurrent state of C·(K-1) + H·N·P elements per layer and sequence in the KV cache dtype, "
              "whatever the context; written by the prefill, read and written once by each decode step; the prefill "
              "runs the chunked scan (conv and chunked mixing in the matmul FLOPs); a decode step's conv 2·C·K and state "
              "read-out 2·H·N·P per token and layer are in the matmul FLOPs, its state update (3·H·N·P element "
              "operations) apart",
    "mamba": "Mamba layers: a recurrent state of I·(K-1) + I·N elements per layer and sequence in the KV cache dtype, "
             "whatever the context; written by the prefill, read and written once by each decode step; the prefill runs "
             "the sequential scan (conv 2·I·K and state read-out 2·I·N per token and layer in the matmul FLOPs); a "
             "decode step the same per token; the state update (3·I·N element operations per token and layer) apart, in "
             "no matmul total",
    "gated_deltanet": "Gated DeltaNet layers: a recurrent state of C·(K-1) + H·Dk·Dv elements per layer and sequence "
                      "in the KV cache dtype, whatever the context; written by the prefill, read and written once by "
                      "each decode step; the prefill runs the chunked delta rule (its products in the matmul FLOPs; "
                      "the triangular solve is not a matmul); a decode step's conv 2·C·K and its products with the "
                      "state 6·H·Dk·Dv per token and layer are in the matmul FLOPs, the state's decay and update "
                      "(3·H·Dk·Dv element operations) apart",
    "short_conv": "short-convolution layers (LFM2): a state of d·(K-1) elements per layer and sequence (the conv's "
                  "last K - 1 inputs) in the KV cache dtype, whatever the context; a token's conv 2·d·K in the matmul "
                  "FLOPs, its gates element-wise",
}


def dtype_bytes(name: str) -> Fraction:
    name = ALIASES.get(name, name)
    table = {"bfloat16": 2, "float16": 2, "float32": 4, "float8": 1, "int8": 1, "int4": Fraction(1, 2)}
    if name not in table and name not in DTYPES:
        raise UsageError(f"unknown dtype {name!r}; expected one of: bfloat16, float16, float32, float8, int8, int4")
    return Fraction(table.get(name, DTYPES.get(name, 0)))


@dataclass(frozen=True)
class Phase:
    flops: int
    bytes: Fraction
    seconds: Fraction
    bound: str  # "compute" | "memory"


@dataclass(frozen=True)
class InferResult:
    binding: Binding
    hardware: Hardware
    peak: int
    bandwidth: int
    capacity: int
    batch: int
    prompt: int
    new_tokens: int
    dtype: str
    kv_dtype: str
    weights_dtype: str | None
    tp: int
    flops: GenerationFlops
    weights: WeightBytes
    kv_cache_bytes: Fraction
    prefill: Phase
    decode: Phase  # all decode steps together
    decode_kv_read: Fraction
    decode_activations: Fraction
    prefill_activations: Fraction
    compute_bound_batch: int | None
    largest_batch: int
    allreduce_bytes_per_step: Fraction
    kv_prefill: Fraction = Fraction(0)  # KV cache written by the prefill
    kv_written: Fraction = Fraction(0)  # KV cache written by one decode step
    state_bytes: Fraction = Fraction(0)  # the state-mixer layers' recurrent state of the batch (constant in the context)
    state_layers: int = 0  # state-mixer layers (Mamba2, Mamba, Gated DeltaNet, short convolution)
    state_kinds: tuple[str, ...] = ()  # their kinds: "mamba2", "mamba", "gated_deltanet", "short_conv"

    @property
    def mixer_conventions(self) -> tuple[str, ...]:
        """The conventions of the model's state-space layers (none without them)."""
        return tuple(MIXER_CONVENTIONS[kind] for kind in self.state_kinds)

    @property
    def decode_state_bytes(self) -> Fraction:
        """The recurrent state read and written by the decode steps, all of them together."""
        return 2 * self.state_bytes * self.steps

    @property
    def steps(self) -> int:
        return self.new_tokens - 1

    @property
    def tokens_per_second(self) -> Fraction | None:
        """Decode throughput of the batch: tokens generated by the decode steps per second of them."""
        return Fraction(self.batch * self.steps) / self.decode.seconds if self.steps else None

    @property
    def end_to_end_tokens_per_second(self) -> Fraction:
        return Fraction(self.batch * self.new_tokens) / (self.prefill.seconds + self.decode.seconds)

    @property
    def needed_bytes_per_gpu(self) -> Fraction:
        return (self.weights.total + self.kv_cache_bytes + self.state_bytes) / self.tp

    def by_component(self) -> dict[str, dict[str, dict]]:
        """FLOPs, bytes and arithmetic intensity of each role's matmuls in the prefill and over the decode steps: the
        weights they read (the attention products: the KV cache they read and write; a state mixer's mixing
        and state read-out: the recurrent state written, read and written); activations left out."""
        steps = self.new_tokens - 1
        out: dict[str, dict[str, dict]] = {}
        for phase, flops, weights, kv in (
                ("prefill", self.flops.prefill_by_role, self.weights.read_by_role(self.batch * self.prompt), self.kv_prefill),
                ("decode", self.flops.decode_by_role, {r: b * steps for r, b in self.weights.read_by_role(self.batch).items()},
                 self.decode_kv_read + self.kv_written * steps)):
            rows = {}
            for role, f in flops.items():
                b = kv if role in ("attention_products", "indexer_scores") else weights.get(role, Fraction(0))
                if role in ("mixer_chunked_mixing", "mixer_state_read_out", "mixer_delta_rule"):
                    b = self.state_bytes if phase == "prefill" else self.decode_state_bytes
                rows[role] = {"flops": f, "bytes": b, "intensity": float(Fraction(f) / b) if b else None}
            out[phase] = rows
        return out


def infer(binding: Binding, hardware_name: str, batch: int, prompt: int, new_tokens: int, dtype: str = "bfloat16",
          kv_dtype: str | None = None, weights_dtype: str | None = None, tp: int = 1, peak: int | None = None,
          bandwidth: int | None = None, capacity: int | None = None, must_fit: bool = False) -> InferResult:
    """Generation of ``new_tokens`` after a ``prompt``-token prompt for ``batch`` sequences, bounded on the hardware.
    ``must_fit``: refuse (UsageError), before any FLOPs are counted, when the weights and the KV cache at
    ``prompt + new_tokens`` tokens do not fit the GPUs' memory. The work does not grow with the number of tokens."""
    for what, n in (("--batch", batch), ("--prompt", prompt), ("--new-tokens", new_tokens), ("--tp", tp)):
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise UsageError(f"{what} {n!r}: expected a whole number of at least 1")
    for what, n in (("--batch", batch), ("--prompt + --new-tokens", prompt + new_tokens), ("--tp", tp)):
        if n > MAX_TOKENS:
            raise UsageError(f"{what} = {n:,}: expected at most 10^18 (no run comes near; the arithmetic stays cheap)")
    hw = hardware(hardware_name)
    dtype = ALIASES.get(dtype, dtype)
    kv_dtype = ALIASES.get(kv_dtype or dtype, kv_dtype or dtype)
    act, kv_width = dtype_bytes(dtype), dtype_bytes(kv_dtype)
    peak = peak if peak is not None else hw.peak(weights_dtype_compute(dtype, weights_dtype))
    bandwidth, capacity = bandwidth or hw.bandwidth, capacity or hw.memory
    lowered = lower(binding)
    lowered.require_attention_only("inference", modelled=MIXERS)
    _check_tp(lowered, tp)
    w = weight_bytes(lowered, act, weights_dtype)
    terms = kv_terms(lowered)
    states = state_elements(lowered)
    state_per_sequence = sum(n * e for _, n, e in states) * kv_width  # the state mixers' state, whatever the context

    def kv(tokens: int, sequences: int = batch) -> Fraction:
        """KV cache bytes of ``sequences`` sequences of ``tokens`` tokens (a window keeps at most its own)."""
        return sequences * sum(e * (tokens if w is None else min(tokens, w)) for w, e in terms) * kv_width

    per_sequence_kv = kv(prompt + new_tokens, 1) + state_per_sequence
    largest_batch = max(0, int((capacity * tp - w.total) // per_sequence_kv)) if per_sequence_kv else 0
    needed = (w.total + kv(prompt + new_tokens) + batch * state_per_sequence) / tp
    if must_fit and needed > capacity:
        raise UsageError(f"{binding.spec.name} {binding.size}: weights + KV cache{' + recurrent state' if states else ''} need {float(needed) / 1e9:,.1f} GB "
                         f"per GPU, {hw.key} has {capacity / 1e9:,.0f} GB; the largest batch that fits is "
                         f"{largest_batch} (or raise --tp, or quantize with --weights-dtype / --kv-dtype)")
    g = generation_flops(binding, batch, prompt, new_tokens, lowered)
    body_io, head_io = matmul_io(lowered)
    per_gpu = Fraction(1, tp)

    state = batch * state_per_sequence
    prefill_bytes = w.read(batch * prompt) + kv(prompt) + state + batch * (prompt * body_io + head_io) * act
    prefill = _phase(g.prefill * per_gpu, prefill_bytes * per_gpu, peak, bandwidth)
    # the step of the token at position p sees x = p + 1 keys: FLOPs and bytes are c0 + Σ c·min(x, w), summed in closed
    # form over x = P + 1 .. P + N - 1 (archcalc.backends.infer.decode)
    written = kv(1)
    step_flops = Line(batch * g.step_fixed, tuple((batch * k, window) for k, window in g.step_terms))
    kv_line = Line(0, tuple((batch * e * kv_width, window) for window, e in terms))  # kv(x): the cache a step reads whole
    # + the KV read and written; the recurrent state read and written once
    step_bytes = Line(w.read(batch) + batch * (body_io + head_io) * act + 2 * state, kv_line.terms)
    first, last = prompt + 1, prompt + new_tokens - 1
    sums = decode_sums(step_flops, step_bytes, first, last, peak, bandwidth)
    decode_flops, decode_bytes = sums.flops, Fraction(sums.bytes)
    assert decode_flops == g.decode, "the decode steps' closed forms disagree"
    kv_read = Fraction(kv_line.total(first, last)) - written * g.steps
    compute_steps, memory_steps = sums.compute_flops, sums.memory_bytes
    decode_seconds = (Fraction(compute_steps, peak) + Fraction(memory_steps) / bandwidth) * per_gpu
    decode = Phase(decode_flops, decode_bytes, decode_seconds,
                   "compute" if compute_steps and not memory_steps else "memory" if memory_steps and not compute_steps
                   else "mixed" if decode_flops else "none")
    layers = _allreduces(lowered)
    allreduce = Fraction(2 * (tp - 1), tp) * layers * batch * int(lowered.root.attrs.width.xreplace(binding.numeric())) * act
    last = prompt + max(new_tokens - 2, 0)
    return InferResult(
        binding, hw, peak, bandwidth, capacity, batch, prompt, new_tokens, dtype, kv_dtype, weights_dtype, tp, g, w,
        kv(prompt + new_tokens), prefill, decode, kv_read, batch * (new_tokens - 1) * (body_io + head_io) * act,
        batch * (prompt * body_io + head_io) * act,
        _crossover(g, w, last, peak, bandwidth, lambda t, b: kv(t, b) + 2 * b * state_per_sequence, body_io + head_io, act),
        largest_batch,
        allreduce if tp > 1 else Fraction(0), kv(prompt), written, Fraction(state), sum(n for _, n, _ in states),
        tuple(dict.fromkeys(node.attrs.kind for _, node in lowered.root.walk() if isinstance(node.attrs, StateMixer))),
    )


def weights_dtype_compute(dtype: str, weights_dtype: str | None) -> str:
    """The dtype the matmuls run in: fp8 weights run fp8 matmuls where the device has them; int8/int4 weights are
    dequantized to ``dtype`` (weight-only quantization)."""
    return "float8" if weights_dtype == "fp8" else dtype


def _phase(flops: Fraction, bytes_: Fraction, peak: int, bandwidth: int) -> Phase:
    compute, memory = Fraction(flops) / peak, Fraction(bytes_) / bandwidth
    return Phase(int(flops), bytes_, max(compute, memory), "compute" if compute >= memory else "memory")


def _crossover(g: GenerationFlops, w: WeightBytes, position: int, peak: int, bandwidth: int, kv, io: int,
               act: Fraction) -> int | None:
    """The smallest batch at which a decode step at ``position`` is compute-bound (None if none up to 2^40)."""
    one = g.step_at(position, 1)

    def compute_bound(b: int) -> bool:
        bytes_ = w.read(b) + kv(position + 1, b) + b * io * act
        return b * one * bandwidth >= bytes_ * peak

    if not compute_bound(2**40):
        return None
    lo, hi = 1, 2**40
    while lo < hi:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if compute_bound(mid) else (mid + 1, hi)
    return lo


def _check_tp(lowered, tp: int) -> None:
    if tp == 1:
        return
    for what, n in tp_heads(lowered):
        if n % tp:
            raise UsageError(f"--tp {tp} does not divide the {n} {what} of the attention layers; tensor parallelism splits heads")


def tp_heads(lowered) -> list[tuple[str, int]]:
    """What infer's --tp must divide, in the model's order, each (what, value) once: every attention's heads and
    key/value heads."""
    numeric = lowered.binding.numeric()
    out: dict[tuple[str, int], None] = {}
    for _, node in lowered.root.walk():
        if isinstance(node.attrs, Attention):
            for what, width in (("heads", node.attrs.heads), ("key/value heads", node.attrs.kv_heads)):
                out[(what, int(width.xreplace(numeric)))] = None
    return list(out)


def _allreduces(lowered) -> int:
    """All-reduces of one forward pass under tensor parallelism: one after attention and one after the MLP, per layer."""
    numeric = lowered.binding.numeric()
    return sum(2 * int(node.repeat.xreplace(numeric)) for _, node in lowered.root.walk() if isinstance(node.attrs, Block))
