"""The memory planner: weights, KV cache, training state and activations, and their split over GPUs.

- Weights at a dtype: parameters × bytes per element.
- KV cache for inference: per self-attention layer K and V for every cached token, kv_heads wide
  (GQA/MQA aware), a compressed latent for MLA, and at most ``window`` tokens for sliding-window layers:
  Llama-style it is exactly 2·L·kv_heads·d_head·T·B·bytes.
- Recurrent state for inference (state-mixer layers, which keep no KV cache): per layer and sequence the conv's last
  K − 1 inputs and the recurrent state, in the KV cache's dtype, whatever the context length; reported beside the KV
  cache (which a hybrid's attention layers keep as before): C·(K − 1) + H·N·P elements for a Mamba2 layer (C = I +
  2·G·N), I·(K − 1) + I·N for a Mamba layer (an N-wide state per channel), C·(K − 1) + H·Dk·Dv for a Gated DeltaNet
  layer (C = 2·Hk·Dk + H·Dv; a Dk × Dv state per value head), d·(K − 1) for a short convolution (its window only).
- Training state under mixed-precision AdamW: 16 bytes a parameter (bf16 weights 2 + bf16 gradients 2
  + fp32 master weights 4 + Adam's two moments 8), as in the ZeRO paper.
- Activations: the tensors autograd saves for the backward pass of the generated module, counted
  tensor by tensor (see :mod:`archcalc.backends.activations`), with flash attention (no S×S matrix
  kept) and with full recomputation (only each block's input kept, plus one block's worth).
- Per GPU: data parallel with ZeRO stage 1 (optimizer state sharded), 2 (+ gradients), 3 (+ weights), tensor
  (and sequence), pipeline, context and expert parallelism, exactly for the fullest GPU (see
  :mod:`archcalc.backends.parallel_plan` for the conventions).

>>> from archcalc.spec import load_spec
>>> from archcalc.spec.bind import bind
>>> m = memory(bind(load_spec("gpt2"), "small"), seq_len=1024, batch=1, dtype="float32")
>>> m.weights_bytes
497759232
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import sympy

from archcalc.backends.activations import Activations, activations
from archcalc.backends.count import count
from archcalc.backends.parallel_plan import (
    Plan,
    _on_stages,
    _placement,
    activations_by_stage,
    check_against_model,
    kv_by_stage,
    places_by_window,
    stage_of,
    states_by_stage,
)
from archcalc.errors import UsageError
from archcalc.ir import Component, Lowered, lower
from archcalc.ir.attrs import MIXERS, MLP, Attention, LatentAttention, MoE, StateMixer
from archcalc.ir.ops import index_key_width
from archcalc.spec.bind import Binding

#: Bytes an element, exactly (int4 packs two elements a byte: Fraction(1, 2), never the float 0.5, whose products
#: lose digits above 2^53).
DTYPES: dict[str, Fraction] = {name: Fraction(b) for name, b in {
    "float32": 4, "fp32": 4, "bfloat16": 2, "bf16": 2, "float16": 2, "fp16": 2, "float8": 1, "fp8": 1, "int8": 1,
    "int4": Fraction(1, 2)}.items()}
ADAMW_MIXED = {"weights": 2, "gradients": 2, "optimizer": 12}  # bytes a parameter; 16 in all


def dtype_bytes(name: str) -> Fraction:
    if name not in DTYPES:
        raise UsageError(f"unknown dtype {name!r}; expected one of: {', '.join(DTYPES)}")
    return DTYPES[name]


def bytes_of(elements: int, width: Fraction) -> int:
    """Whole bytes holding ``elements`` of ``width`` bytes each (a packed int4 tensor of 3 elements needs 2)."""
    return -(-elements * width.numerator // width.denominator)


@dataclass(frozen=True)
class MemoryResult:
    binding: Binding
    seq_len: int
    batch: int
    dtype: str
    parameters: int
    weights_bytes: int
    kv_cache_bytes: int
    acts: Activations
    plan: Plan = Plan()
    lowered: Lowered | None = None
    notes: tuple[str, ...] = ()  # plan flags that change nothing here (parallel_plan.check_against_model)
    state_bytes: int = 0  # state-mixer layers' recurrent state (conv + state), constant in seq_len; 0 without
    state_layers: tuple[tuple[str, int, int], ...] = ()  # (path, layers, elements per layer and sequence)

    @property
    def data_parallel(self) -> int:
        return self.plan.dp

    @property
    def zero(self) -> int:
        return self.plan.zero

    @property
    def tensor_parallel(self) -> int:
        return self.plan.tp

    @property
    def states_bytes(self) -> int:
        return 16 * self.parameters

    def per_gpu(self) -> dict[str, int]:
        """The fullest GPU under the plan (see :mod:`archcalc.backends.parallel_plan`): weights, gradients, optimizer
        state and activations of training, and the KV cache of inference."""
        lowered = self.lowered or lower(self.binding)
        states = states_by_stage(lowered, self.plan)
        _, layers = stage_of(lowered, self.plan.pp)
        acts = activations_by_stage(self.acts, self.plan, layers)
        width = dtype_bytes(self.dtype)
        kv = [bytes_of(e, width) for e in kv_by_stage(lowered, self.plan, self.seq_len, self.batch)]
        stage = max(range(self.plan.pp), key=lambda s: sum(states[s]) + acts[s])
        out = {"weights_bytes": states[stage][0], "gradients_bytes": states[stage][1], "optimizer_bytes": states[stage][2],
               "activations_bytes": acts[stage]}
        out["total_bytes"] = sum(out.values())
        out["pipeline_stage"] = stage
        out["kv_cache_bytes"] = max(kv)
        if self.state_layers:  # the recurrent state of the mixer layers of the fullest stage, not split by tp
            offsets, size = _placement(lowered, self.plan.pp)
            per = [0] * self.plan.pp
            for path, _, elements in self.state_layers:
                for s, n in enumerate(_on_stages(*offsets[path.rsplit(".", 1)[0]], size, self.plan.pp)):
                    per[s] += n * elements * self.batch
            out["recurrent_state_bytes"] = max(bytes_of(e, width) for e in per)
        return out

    def _state_convention(self) -> str:
        return state_convention(self.lowered or lower(self.binding))

    def state_labels(self) -> str:
        """The kinds of state mixer in the model, as prose names them ("Mamba2 and Gated DeltaNet")."""
        return " and ".join(k.label for k in state_kinds(self.lowered or lower(self.binding)))

    def state_json(self) -> dict:
        """The mixer layers' recurrent state (only for a model with them)."""
        width = dtype_bytes(self.dtype)
        return {"recurrent_state_bytes": self.state_bytes,
                "recurrent_state": {
                    "layers": sum(n for _, n, _ in self.state_layers),
                    "by_layer_kind": [{"path": path, "layers": n, "elements_per_layer_per_sequence": e,
                                       "bytes_per_layer": bytes_of(e * self.batch, width)}
                                      for path, n, e in self.state_layers],
                    "convention": self._state_convention()},
                "kv_cache_layers": kv_layers(self.lowered or lower(self.binding)),
                "inference_cache_bytes": self.kv_cache_bytes + self.state_bytes}

    def to_json(self) -> dict:
        return {
            "size": self.binding.size, "seq_len": self.seq_len, "batch": self.batch, "dtype": self.dtype,
            "parameters": self.parameters,
            "weights_bytes": self.weights_bytes,
            "kv_cache_bytes": self.kv_cache_bytes,
            **(self.state_json() if self.state_layers else {}),
            "training": {
                "states_bytes": self.states_bytes,
                "weights_bytes": 2 * self.parameters, "gradients_bytes": 2 * self.parameters,
                "optimizer_bytes": 12 * self.parameters,
                "activations_bytes": self.acts.total_bytes(),
                "activations_per_layer_bytes": self.acts.per_layer_bytes(),
                "activations_recompute_bytes": self.acts.recompute_bytes(),
                "activations_breakdown_bytes": self.acts.breakdown(),
                "activation_convention": self.acts.convention,
            },
            "parallel": {"data_parallel": self.plan.dp, "zero_stage": self.plan.zero, "tensor_parallel": self.plan.tp,
                         "sequence_parallel": self.plan.sp, "pipeline_parallel": self.plan.pp,
                         "microbatches": self.plan.microbatches, "context_parallel": self.plan.cp,
                         "expert_parallel": self.plan.ep, "precision": self.plan.precision,
                         "per_gpu": self.per_gpu(), "conventions": self.plan.conventions(), "notes": list(self.notes)},
        }


def memory(binding: Binding, seq_len: int, batch: int, dtype: str = "bfloat16", data_parallel: int = 1,
           zero: int = 0, tensor_parallel: int = 1, plan: Plan | None = None) -> MemoryResult:
    """The memory plan of ``batch`` sequences of ``seq_len`` tokens at ``binding``'s size (``batch`` per data-parallel
    replica); ``plan`` gives the whole parallel plan (else ``data_parallel``, ``zero``, ``tensor_parallel``)."""
    width = dtype_bytes(dtype)
    plan = plan or Plan(dp=data_parallel, zero=zero, tp=tensor_parallel)
    plan.check()
    lowered = lower(binding)
    lowered.require_attention_only("the memory (a recurrent state in place of a KV cache)", modelled=MIXERS)
    check_tensor_parallel(lowered, plan.tp)
    notes = check_against_model(lowered, plan, seq_len)
    total = count(binding).total
    states = tuple(state_elements(lowered))
    return MemoryResult(
        binding=binding, seq_len=seq_len, batch=batch, dtype=dtype, parameters=total,
        weights_bytes=bytes_of(total, width),
        kv_cache_bytes=bytes_of(kv_cache_elements(lowered.root, binding, seq_len, batch), width),
        acts=activations(lowered, seq_len, batch, mixed=dtype in ("bfloat16", "bf16", "float16", "fp16")),
        plan=plan, lowered=lowered, notes=tuple(notes),
        state_bytes=bytes_of(batch * sum(n * e for _, n, e in states), width), state_layers=states,
    )


def check_tensor_parallel(lowered, degree: int) -> None:
    """Megatron-style tensor parallelism gives each rank whole attention heads, whole key/value heads and an equal
    slice of each MLP's hidden width: ``degree`` must divide all of them (UsageError otherwise)."""
    if degree == 1:
        return
    for what, value in tp_widths(lowered):
        if value % degree:
            raise UsageError(f"--tp {degree}: tensor parallelism splits attention heads, key/value heads and MLP "
                             f"widths evenly over the ranks, and {degree} does not divide {what} = {value:,} "
                             f"({lowered.binding.spec.name} {lowered.binding.size})")


def tp_widths(lowered: Lowered) -> list[tuple[str, int]]:
    """What a tensor-parallel degree must divide, in the model's order, each (what, value) once: every attention's
    heads and key/value heads, every MLP's (or expert's) hidden width."""
    numeric = lowered.binding.numeric()
    out: dict[tuple[str, int], None] = {}
    for _, node in lowered.root.walk():
        widths = []
        if isinstance(node.attrs, Attention):
            widths = [("attention heads", node.attrs.heads), ("key/value heads", node.attrs.kv_heads)]
        elif isinstance(node.attrs, (MLP, MoE)):
            widths = [("MLP hidden width", node.attrs.hidden)]
        for what, expr in widths:
            out[(what, int(sympy.sympify(expr).xreplace(numeric)))] = None
    return list(out)


def state_elements(lowered: Lowered) -> list[tuple[str, int, int]]:
    """Each stack of state-mixer layers: (path, layers, elements of one layer's state for one sequence), the conv's
    last K − 1 inputs and the recurrent state (:attr:`archcalc.ir.attrs.StateMixer.state_elements`: C·(K − 1) + H·N·P
    of a Mamba2 layer, I·(K − 1) + I·N of a Mamba layer, C·(K − 1) + H·Dk·Dv of a Gated DeltaNet layer, d·(K − 1) of
    a short convolution)."""
    numeric = lowered.binding.numeric()
    value = lambda e: int(sympy.sympify(e).xreplace(numeric))  # noqa: E731
    out = []

    def visit(node: Component, prefix: str, repeat: int) -> None:
        path = f"{prefix}.{node.name}" if prefix and node.name else prefix or node.name
        repeat *= value(node.repeat)
        if isinstance(node.attrs, StateMixer):
            out.append((path, repeat, value(node.attrs.state_elements)))
            return
        for child in node.children:
            visit(child, path, repeat)

    visit(lowered.root, "", 1)
    return out


def state_kinds(lowered: Lowered) -> list[type[StateMixer]]:
    """The kinds of state mixer in the model, in order."""
    return list(dict.fromkeys(type(node.attrs) for _, node in lowered.root.walk() if isinstance(node.attrs, StateMixer)))


def state_convention(lowered: Lowered) -> str:
    """What the recurrent state of each kind of state mixer in the model holds, per layer and sequence."""
    kinds = state_kinds(lowered)
    text = [f"per {k.label} layer and sequence {k.state_formula} elements (conv inputs" + (" + state)" if k.mixing else ")")
            for k in kinds]
    return "; ".join(text) + " in the KV cache dtype, constant in the context length"


def kv_layers(lowered: Lowered) -> int:
    """Layers that keep a KV cache (causal self-attention or cross-attention)."""
    numeric = lowered.binding.numeric()
    return sum(int(sympy.sympify(r).xreplace(numeric)) for path, node, r in _with_repeats(lowered.root)
               if isinstance(node.attrs, Attention) and (node.attrs.causal or node.attrs.cross) and not node.attrs.kv_shared)


def _with_repeats(node: Component, prefix: str = "", repeat=1):
    path = f"{prefix}.{node.name}" if prefix and node.name else prefix or node.name
    repeat = repeat * node.repeat
    yield path, node, repeat
    for child in node.children:
        yield from _with_repeats(child, path, repeat)


def kv_cache_elements(root: Component, binding: Binding, seq_len: int, batch: int) -> int:
    """Cached key/value elements for ``batch`` sequences of ``seq_len`` tokens, over every layer."""
    numeric = binding.numeric()
    value = lambda e: int(sympy.sympify(e).xreplace(numeric))  # noqa: E731
    total = 0

    def visit(node: Component, repeat: int) -> None:
        nonlocal total
        repeat *= value(node.repeat)
        a = node.attrs
        if isinstance(a, Attention) and (a.causal or a.cross):
            if a.kv_shared:  # an earlier layer's keys and values: no cache of its own (Gemma 4)
                return
            if isinstance(a, LatentAttention):
                # compressed latent + the shared rotary key (+ the indexer's key, DeepSeek Sparse Attention)
                per_token = value(a.kv_rank + a.rope_width + index_key_width(node))
            else:
                per_token = value(a.kv_heads) * (value(a.head_width) + value(a.value_width))
            period = len(a.pattern)
            for window, places in places_by_window(a.layer_windows).items():  # each window once, not once a place
                layers = sum(len(range(j, repeat, period)) for j in places)
                cached = min(seq_len, value(window)) if window is not None else seq_len
                total += layers * per_token * cached * batch
            return
        for child in node.children:
            visit(child, repeat)

    visit(root, 1)
    return total
