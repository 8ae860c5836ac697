"""``archcalc infer``'s output: a terminal report and the JSON object (exact integers; fractions as "p/q")."""

from __future__ import annotations

from fractions import Fraction

from archcalc.backends.count import render as render_formula
from archcalc.backends.infer import CONVENTIONS, InferResult
from archcalc.backends.infer.flops import STEP_LIST_LIMIT, B, N, P
from archcalc.ir.attrs import KINDS


def exact(value) -> int | str:
    value = Fraction(value)
    return value.numerator if value.denominator == 1 else f"{value.numerator}/{value.denominator}"


def _seconds(value: Fraction) -> str:
    s = float(value)
    return f"{s * 1e3:,.3g} ms" if s < 1 else f"{s:,.3g} s"


def _gb(value) -> str:
    return f"{float(value) / 1e9:,.2f} GB"


def to_json(r: InferResult) -> dict:
    g = r.flops
    text, latex = render_formula(g.formula, (B, P, N))
    tps = r.tokens_per_second
    return {
        "size": r.binding.size,
        "hardware": {"key": r.hardware.key, "name": r.hardware.name, "peak_flops": r.peak, "bandwidth_bytes_per_s": r.bandwidth,
                     "memory_bytes": r.capacity, "source": r.hardware.source},
        "batch": r.batch, "prompt": r.prompt, "new_tokens": r.new_tokens, "dtype": r.dtype, "kv_dtype": r.kv_dtype,
        "weights_dtype": r.weights_dtype, "tensor_parallel": r.tp,
        "prefill_matmul": g.prefill, "prefill_matmul_dense": g.prefill_dense, "decode_matmul": g.decode,
        "generate_matmul": g.generate,
        # each step's FLOPs for runs of up to STEP_LIST_LIMIT steps (null beyond: never a list of millions); the first
        # and last step's always, and decode_matmul their exact sum
        "decode_step_matmul": g.decode_steps if g.steps <= STEP_LIST_LIMIT else None,
        "decode_step_matmul_limit": STEP_LIST_LIMIT,
        "decode_step_matmul_first_last": [g.step_at(r.prompt), g.step_at(r.prompt + g.steps - 1)] if g.steps else [],
        "prefill_by_role": g.prefill_by_role, "decode_by_role": g.decode_by_role,
        # DeepSeek Sparse Attention: the attention products dense latent attention would add (every earlier key)
        "sparse_attention_saving": dict(zip(("prefill", "decode"), g.sparse_saving)) if g.sparse_saving else None,
        "formula": text, "formula_latex": latex,
        "bytes": {
            "weights": exact(r.weights.total), "quantization_scales": exact(r.weights.scales),
            "kv_cache_bytes": exact(r.kv_cache_bytes),
            "prefill": exact(r.prefill.bytes), "decode": exact(r.decode.bytes), "decode_kv_read": exact(r.decode_kv_read),
            "prefill_activations_estimate": exact(r.prefill_activations), "decode_activations_estimate": exact(r.decode_activations),
        },
        "arithmetic_intensity": {"prefill": float(Fraction(r.prefill.flops) / r.prefill.bytes),
                                 "decode": float(Fraction(r.decode.flops) / r.decode.bytes) if r.decode.bytes else None},
        "by_component": {phase: {role: {"flops": v["flops"], "bytes": exact(v["bytes"]), "intensity": v["intensity"]}
                                 for role, v in rows.items()} for phase, rows in r.by_component().items()},
        "roofline": {
            "prefill_seconds": float(r.prefill.seconds), "time_to_first_token_seconds": float(r.prefill.seconds),
            "prefill_bound": r.prefill.bound, "decode_seconds": float(r.decode.seconds), "decode_bound": r.decode.bound,
            "tokens_per_second": float(tps) if tps is not None else None,
            "end_to_end_tokens_per_second": float(r.end_to_end_tokens_per_second),
            "compute_bound_batch": r.compute_bound_batch,
        },
        "memory": {"needed_bytes_per_gpu": exact(r.needed_bytes_per_gpu), "capacity_bytes": r.capacity,
                   "fits": r.needed_bytes_per_gpu <= r.capacity, "largest_batch": r.largest_batch},
        "tensor_parallel_allreduce_bytes_per_step_per_gpu": exact(r.allreduce_bytes_per_step),
        "conventions": list(CONVENTIONS) + list(r.mixer_conventions),
        **(_mixer_json(r) if r.state_layers else {}),
    }


def _mixer_json(r: InferResult) -> dict:
    """The state-space layers' own figures (only for a model with them; every other key is as for attention alone)."""
    return {"recurrent_state": {
        "layers": r.state_layers,
        "state_bytes": exact(r.state_bytes),
        "kv_cache_bytes_attention_layers": exact(r.kv_cache_bytes),
        "decode_state_read_written_bytes": exact(r.decode_state_bytes),
        "decode_state_update_ops": r.flops.decode_state_update,
        "note": "; ".join(_note(KINDS[k]) for k in r.state_kinds)}}


def _note(kind) -> str:
    """What one kind of state mixer's figures hold."""
    return (f"state: per {kind.label} layer and sequence {kind.state_formula} elements in the KV cache dtype, constant "
            f"in the context; decode_state_update_ops: {kind.update_formula} element operations per token and layer, "
            "in no matmul total")


def _which(r: InferResult) -> str:
    return " and ".join(KINDS[k].label for k in r.state_kinds) or "Mamba2"


def render(spec, r: InferResult) -> str:
    g = r.flops
    tps = r.tokens_per_second
    steps = g.steps
    quant = f", weights {r.weights_dtype}" if r.weights_dtype else ""
    lines = [
        f"{spec.title or spec.name} {r.binding.size} on {r.hardware.name}"
        + (f" x {r.tp} (tensor parallel)" if r.tp > 1 else "") + f" ({r.dtype}{quant}; KV cache {r.kv_dtype})",
        f"batch {r.batch}, prompt {r.prompt:,} tokens, {r.new_tokens:,} new tokens",
        "",
        f"matmul FLOPs (exact)        prefill                decode ({steps:,} steps)       generate",
        f"  total            {g.prefill:>22,}  {g.decode:>22,}  {g.generate:>22,}",
        f"  per step                                {(g.step_at(r.prompt) if steps else 0):>22,} first, "
        f"{(g.step_at(r.prompt + steps - 1) if steps else 0):,} last",
        *([f"  state update ({_which(r)} decode, element operations, not in the matmul totals): "
           f"{g.decode_state_update:,}"] if r.state_layers else []),
        *(_sparse(g) if g.sparse_saving else []),
        "",
        "bytes moved",
        f"  weights          {_gb(r.weights.total)} ({_gb(r.weights.read(r.batch))} read per decode step)",
        f"  KV cache         {_gb(r.kv_cache_bytes)} at {r.prompt + r.new_tokens:,} tokens; decode reads {_gb(r.decode_kv_read)} in all",
        *([f"  recurrent state  {int(r.state_bytes):,} B ({r.state_layers} {_which(r)} layers, constant in the context); "
           f"decode reads and writes {_gb(r.decode_state_bytes)} in all"] if r.state_layers else []),
        f"  prefill {_gb(r.prefill.bytes)}, decode {_gb(r.decode.bytes)} (activations an estimate)",
        "",
        f"roofline bound ({r.peak / 1e12:,.1f} TFLOP/s, {r.bandwidth / 1e12:,.3g} TB/s per GPU; real runs are slower)",
        f"  time to first token   {_seconds(r.prefill.seconds)}   {r.prefill.bound}-bound",
    ]
    if tps is not None:
        lines.append(f"  decode                {_seconds(r.decode.seconds)}   {r.decode.bound}-bound   "
                     f"{float(tps):,.1f} tokens/s ({_seconds(r.decode.seconds / steps)} a step)")
    lines.append(f"  end to end            {float(r.end_to_end_tokens_per_second):,.1f} tokens/s")
    crossover = (f"batch {r.compute_bound_batch:,}" if r.compute_bound_batch is not None
                 else "never (at this context one sequence's KV cache read outlasts its FLOPs)")
    lines += [
        f"  decode turns compute-bound at: {crossover}",
        "",
        f"memory per GPU: {_gb(r.needed_bytes_per_gpu)} of {_gb(r.capacity)} (weights + KV cache"
        f"{' + recurrent state' if r.state_layers else ''}): fits; "
        f"largest batch {r.largest_batch:,}",
    ]
    if r.tp > 1:
        lines.append(f"tensor parallel: {_gb(r.allreduce_bytes_per_step)} all-reduced per GPU per decode step (not timed)")
    parts = r.by_component()
    lines += ["", "arithmetic intensity (FLOP per byte of weights; attention products: of KV cache)   prefill     decode"]
    for role in dict.fromkeys([*parts["prefill"], *parts["decode"]]):
        shown = [parts[phase].get(role, {}).get("intensity") for phase in ("prefill", "decode")]
        lines.append(f"  {role:<20}" + "".join(f"{v:>16,.1f}" if v is not None else f"{'—':>16}" for v in shown))
    text, _ = render_formula(g.formula, (B, P, N))
    lines += ["", f"generate_matmul = {text}", "  (B sequences, P prompt tokens, N new tokens)"]
    return "\n".join(lines)


def _sparse(g) -> list[str]:
    """DeepSeek Sparse Attention: what the indexers cost and what reading the top-k keys only saves."""
    (saved_prefill, saved_decode), pre, dec = g.sparse_saving, g.prefill_by_role, g.decode_by_role
    return [f"  sparse attention (top-k keys)   {pre['attention_products']:>22,}  {dec['attention_products']:>22,}",
            f"  indexer scores (every key)      {pre['indexer_scores']:>22,}  {dec['indexer_scores']:>22,}",
            f"  saved against dense attention   {saved_prefill:>22,}  {saved_decode:>22,}  (net of the indexer: "
            f"{saved_prefill + saved_decode - pre['indexer_scores'] - dec['indexer_scores']:,})"]
