"""How many users fit, at what context: a serving plan with a paged KV cache (``archcalc serve``).

The model as a paged server holds it (vLLM, SGLang):

- **Weights** at ``dtype``, or with ``weight_format`` (:mod:`archcalc.backends.formats`) for the linear layers'
  matrices (embeddings, norms, biases and the head stay at ``dtype``), split evenly over ``tp`` GPUs.
- **KV cache** in blocks of ``block_size`` tokens (16 by default, as vLLM and SGLang): a sequence of T tokens holds
  ceil(T / block) blocks in each full-attention layer, and in a sliding-window layer of window w the blocks that
  cover its last min(T, w) tokens. A block of one layer is block_size x (that layer's key and value elements a token)
  x the KV dtype's bytes; a latent-attention layer caches its latent (and the indexer's key) for all heads, whole on
  every tensor-parallel rank, other layers' key/value heads split over the ranks. The recurrent state of
  state-space layers is a fixed number of bytes a sequence, whatever T (not paged).
- **Budget**: ``utilization`` of each GPU's memory (vLLM's ``gpu_memory_utilization``, 0.9 by default), less the
  weights, the activation peak of the largest prefill chunk and a stated runtime reserve (CUDA graphs, the CUDA
  context: an input, 0 by default). The activation peak is an estimate: a chunk of C tokens keeps its residual
  stream, one layer's widest intermediates (q, k, v and the attention output; or the MLP's gate, up and their
  product, top_k experts' worth for a mixture) at the activation dtype, and fp32 logits for up to ``max_seqs``
  sequences.

Every byte figure is exact for these conventions (integers, or Fractions of a byte for 4-bit formats rounded up to
whole bytes per tensor).

>>> from archcalc.spec import load_spec
>>> from archcalc.spec.bind import bind
>>> from archcalc.ir import lower
>>> kv_bytes_per_token(lower(bind(load_spec("opt"), "13b")), Fraction(2))  # the PagedAttention paper's ~800 KB
Fraction(819200, 1)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction

import sympy

from archcalc.backends.formats import Format
from archcalc.backends.infer.hardware import Hardware
from archcalc.backends.infer.traffic import EMBEDDINGS
from archcalc.backends.memory import state_elements
from archcalc.backends.parallel_plan import places_by_window
from archcalc.errors import UsageError
from archcalc.ir import Lowered, leaves
from archcalc.ir.attrs import MLP, Attention, LatentAttention, MoE
from archcalc.ir.ops import index_key_width

MAX_CONTEXT = 10**12  # tokens: the search for the largest context is a bisection, so any bound costs ~40 steps


@dataclass(frozen=True)
class KvGroup:
    """Layers that cache alike: ``layers`` of them, ``elements`` a token each (on one GPU), ``window`` or None."""

    layers: int
    elements: int
    window: int | None


def kv_groups(lowered: Lowered, tp: int = 1) -> list[KvGroup]:
    """The cached layers by window, with the key/value elements one token adds to one of them on one GPU."""
    numeric = lowered.binding.numeric()
    value = lambda e: int(sympy.sympify(e).xreplace(numeric))  # noqa: E731
    groups: dict[tuple[int, int | None], int] = {}

    def visit(node, repeat: int) -> None:
        repeat *= value(node.repeat)
        a = node.attrs
        if isinstance(a, Attention) and (a.causal or a.cross) and not a.kv_shared:
            if isinstance(a, LatentAttention):  # one latent for all heads: whole on every rank
                per_token = value(a.kv_rank + a.rope_width + index_key_width(node))
            else:
                heads = value(a.kv_heads)
                if heads % tp:
                    raise UsageError(f"--tp {tp} does not divide the {heads} key/value heads; tensor parallelism splits them")
                per_token = heads // tp * (value(a.head_width) + value(a.value_width))
            period = len(a.pattern)
            for window, places in places_by_window(a.layer_windows).items():
                w = value(window) if window is not None else None
                key = (per_token, w)
                groups[key] = groups.get(key, 0) + sum(len(range(j, repeat, period)) for j in places)
            return
        for child in node.children:
            visit(child, repeat)

    visit(lowered.root, 1)
    return [KvGroup(n, e, w) for (e, w), n in groups.items() if n]


def kv_bytes_per_token(lowered: Lowered, kv_width: Fraction, tp: int = 1) -> Fraction:
    """Bytes one token adds to the KV cache over all layers (a sliding-window layer's too: before its window fills)."""
    return sum((g.layers * g.elements for g in kv_groups(lowered, tp)), 0) * kv_width


def blocks_held(tokens: int, window: int | None, block: int) -> int:
    """Blocks of ``block`` tokens that one layer keeps for a sequence of ``tokens``: all of them, or those covering
    the last ``window`` positions (a window that straddles a block boundary keeps both ends' blocks)."""
    if tokens <= 0:
        return 0
    first = 0 if window is None else max(0, tokens - window)
    return (tokens - 1) // block - first // block + 1


def sequence_bytes(groups: list[KvGroup], tokens: int, block: int, kv_width: Fraction, state: Fraction) -> Fraction:
    """KV cache (whole blocks) and recurrent state of one sequence of ``tokens`` on one GPU."""
    paged = sum((g.layers * blocks_held(tokens, g.window, block) * block * g.elements for g in groups), 0)
    return paged * kv_width + state


@dataclass
class ServePlan:
    """What one GPU holds and how many sequences fit (see the module's text)."""

    hardware: Hardware
    tp: int
    utilization: Fraction
    block_size: int
    weights_bytes: Fraction  # per GPU
    activation_bytes: int  # per GPU, an estimate
    reserve_bytes: int
    kv_bytes_per_token: Fraction  # per GPU, all layers
    block_bytes: Fraction  # one block of every cached layer, per GPU
    state_bytes_per_sequence: Fraction
    budget: Fraction  # for the KV cache and the states, per GPU
    groups: list[KvGroup] = field(default_factory=list)
    kv_width: Fraction = Fraction(2)
    max_context: int = MAX_CONTEXT
    shared_prefix: int = 0  # tokens every sequence starts with, cached once (prefix caching)

    @property
    def blocks(self) -> int:
        """KV blocks the budget holds (a block: block_size tokens of every cached layer)."""
        return int(self.budget // self.block_bytes) if self.block_bytes and self.budget > 0 else 0

    def per_sequence(self, tokens: int) -> Fraction:
        return sequence_bytes(self.groups, tokens, self.block_size, self.kv_width, self.state_bytes_per_sequence)

    def shared_bytes(self, tokens: int) -> Fraction:
        """What the sequences share with prefix caching: the whole blocks of the shared prefix in the full-attention
        layers (a sliding-window layer's blocks leave its window; a partly shared block is copied)."""
        blocks = min(self.shared_prefix, tokens) // self.block_size
        return sum((g.layers * blocks * self.block_size * g.elements for g in self.groups if g.window is None), 0) * self.kv_width

    def concurrency(self, tokens: int) -> int:
        """Sequences of ``tokens`` tokens that fit at once (the shared prefix's blocks held once)."""
        shared = self.shared_bytes(tokens)
        need = self.per_sequence(tokens) - shared
        if self.budget < shared + need or not need:
            return 0
        return int((self.budget - shared) // need)

    def largest_context(self, sequences: int) -> int:
        """The longest context at which ``sequences`` sequences fit (0: not even one token; max_context: no limit)."""
        fits = lambda t: sequences * (self.per_sequence(t) - self.shared_bytes(t)) + self.shared_bytes(t) <= self.budget  # noqa: E731
        if self.budget <= 0 or not fits(1):
            return 0
        if fits(self.max_context):
            return self.max_context
        lo, hi = 1, self.max_context  # fits(lo), not fits(hi): the bytes grow with the context
        while hi - lo > 1:
            mid = (lo + hi) // 2
            lo, hi = (mid, hi) if fits(mid) else (lo, mid)
        return lo


def plan_serving(lowered: Lowered, hw: Hardware, tp: int = 1, utilization: Fraction = Fraction(9, 10),
                 dtype_width: Fraction = Fraction(2), kv_width: Fraction = Fraction(2), weight_format: Format | None = None,
                 block_size: int = 16, prefill_chunk: int = 8192, max_seqs: int = 256, reserve: int = 0,
                 capacity: int | None = None, shared_prefix: int = 0, draft: Lowered | None = None) -> ServePlan:
    """``draft``: a draft model for speculative decoding, on the same GPUs: its weights (at ``dtype_width``) beside
    the target's, its KV cache (and state) beside each sequence's."""
    models = [lowered] if draft is None else [lowered, draft]
    groups = [g for m in models for g in kv_groups(m, tp)]
    state = sum((n * e for m in models for _, n, e in state_elements(m)), 0) * kv_width
    weights = model_weight_bytes(lowered, dtype_width, weight_format) / tp
    if draft is not None:
        weights += model_weight_bytes(draft, dtype_width, None) / tp
    acts = activation_peak(lowered, prefill_chunk, max_seqs, dtype_width, tp)
    budget = (capacity or hw.memory) * utilization - weights - acts - reserve
    per_token = sum((g.layers * g.elements for g in groups), 0) * kv_width
    context = lowered.binding.values.get("T")
    return ServePlan(hw, tp, utilization, block_size, weights, acts, reserve, per_token, block_size * per_token, state,
                     budget, groups, kv_width, int(context) if isinstance(context, int) and context > 0 else MAX_CONTEXT,
                     shared_prefix)


def model_weight_bytes(lowered: Lowered, dtype_width: Fraction, weight_format: Format | None) -> Fraction:
    """Every parameter at ``dtype_width`` bytes, or the linear layers' matrices in ``weight_format``."""
    numeric = lowered.binding.numeric()
    value = lambda e: int(sympy.sympify(e).xreplace(numeric))  # noqa: E731
    total = Fraction(0)
    for leaf in leaves(lowered.root):
        if leaf.tensor.tied_to:
            continue
        shape, copies = [value(s) for s in leaf.tensor.shape], value(leaf.repeat)
        matrix = len(shape) == 2 and leaf.tensor.role not in (*EMBEDDINGS, "lm_head")
        if weight_format is not None and matrix:
            total += copies * weight_format.bytes(*shape)
        else:
            numel = copies * (sympy.prod(shape) if shape else 1)
            total += int(numel) * dtype_width
    return total


def activation_peak(lowered: Lowered, chunk: int, max_seqs: int, width: Fraction, tp: int) -> int:
    """The estimate of the module's text: a prefill chunk's residual stream and widest layer intermediates, and the
    fp32 logits of the sequences it samples (intermediates split over tp)."""
    numeric = lowered.binding.numeric()
    value = lambda e: int(sympy.sympify(e).xreplace(numeric))  # noqa: E731
    widest = 0
    for _, node in lowered.root.walk():
        a = node.attrs
        if isinstance(a, MoE):
            widest = max(widest, 3 * value(a.hidden) * value(a.top_k))
        elif isinstance(a, MLP):
            widest = max(widest, 3 * value(a.hidden))
        elif isinstance(a, Attention) and not isinstance(a, LatentAttention):
            widest = max(widest, (2 * value(a.heads) + 2 * value(a.kv_heads)) * value(a.head_width))
    root = lowered.root.attrs
    residual = chunk * value(root.width) * width
    return int(residual + Fraction(chunk * widest, tp) * width) + min(chunk, max_seqs) * value(root.vocab) * 4


#: serving's weight formats that ``archcalc infer``'s byte model reads the same way (others: no latency yet)
INFER_WEIGHTS = {"fp8": "fp8", "int8": "int8", "int4": "int4"}


@dataclass(frozen=True)
class Latency:
    """Roofline bounds of a request mix (``archcalc infer``'s model: real runs are slower)."""

    sequences: int
    prompt: int
    output: int
    ttft: Fraction  # seconds: one request's prompt, alone
    itl: Fraction  # seconds: the mean decode step with ``sequences`` running
    tokens_per_second: Fraction  # decode tokens/s of all the sequences, per GPU
    compute_bound_batch: int | None
    marginal_intensity: Fraction  # FLOPs per byte that one more sequence adds to the decode steps
    ridge: Fraction  # peak FLOP/s over bandwidth: the intensity where compute starts to limit
    tp: int = 1


def latency(binding, hardware_key: str, sequences: int, prompt: int, output: int, dtype: str, kv_dtype: str,
            weights_format: str | None, tp: int) -> Latency:
    """Time to first token, inter-token latency and throughput at ``sequences`` concurrent requests of ``prompt``
    tokens generating ``output``; the batch where decode turns compute-bound, or, where none does, the intensity that
    keeps it memory-bound: each added sequence brings its KV cache read along with its FLOPs."""
    from archcalc.backends.infer import infer

    if output < 2:
        raise UsageError(f"--output {output}: expected at least 2 tokens (one decode step after the prompt's)")
    weights = INFER_WEIGHTS.get(weights_format) if weights_format else None
    if weights_format and weights is None:
        raise UsageError(f"--weights-format {weights_format}: latency bounds read int8, int4 or fp8 weights only (so far)")
    kwargs = dict(dtype=dtype, kv_dtype=kv_dtype, weights_dtype=weights, tp=tp)
    first = infer(binding, hardware_key, 1, prompt, 1, **kwargs)
    r = infer(binding, hardware_key, sequences, prompt, output, **kwargs)
    more = infer(binding, hardware_key, 2 * sequences, prompt, output, **kwargs)
    steps = output - 1
    marginal = Fraction(more.decode.flops - r.decode.flops) / (more.decode.bytes - r.decode.bytes)
    return Latency(sequences, prompt, output, first.prefill.seconds, r.decode.seconds / steps,
                   Fraction(sequences * steps) / r.decode.seconds / tp, r.compute_bound_batch, marginal,
                   Fraction(r.peak, r.bandwidth), tp)
