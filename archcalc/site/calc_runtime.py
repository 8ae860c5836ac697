"""The calculator's memory and inference figures: for each size, the numbers `archcalc memory` and `archcalc infer`
compose with a run's inputs (batch, tokens, dtype, dp/ZeRO/tp, GPU), exported once so the page composes them the same way.

Everything here comes from the backends the command line runs (count, weight_bytes, kv_terms, state_elements,
matmul_io, generation_flops, the tensor-parallel plan), evaluated at the size's hyperparameters: what is left to
the browser is arithmetic in the run's inputs (archcalc.js's memory() and infer(), the same closed forms as
archcalc.backends.memory and archcalc.backends.infer). A page's hyperparameters typed away from every size have no
figures here; the page says so and names the command. Rationals travel as ``[numerator, denominator]`` strings.

>>> from archcalc.spec import load_spec
>>> from archcalc.spec.bind import bind
>>> r = size_runtime(bind(load_spec("gpt2"), "small"))
>>> r["params"], r["kv"], r["infer"]["step"]
('124439808', [['18432', None, True]], ['247064064', [['36864', None]]])
"""

from __future__ import annotations

from fractions import Fraction
from html import escape

import sympy

from archcalc.backends.count import count
from archcalc.backends.infer import infer, tp_heads
from archcalc.backends.infer.flops import _SHOWN, generation_flops
from archcalc.backends.infer.hardware import ALIASES, table
from archcalc.backends.infer.traffic import matmul_io, weight_bytes
from archcalc.backends.memory import DTYPES, memory, state_elements
from archcalc.backends.memory import tp_widths as memory_tp_widths
from archcalc.backends.parallel_plan import Plan, _copies, _placement, places_by_window, tp_split
from archcalc.backends.sharding import tensor_parallel_plan
from archcalc.cli.infer_show import _gb, _seconds  # the CLI's own formatting: the page's figures read as it prints them
from archcalc.cli.memory_cmd import gib
from archcalc.errors import ArchcalcError
from archcalc.ir import Lowered, leaves, lower
from archcalc.ir.attrs import MIXERS, Attention, LatentAttention
from archcalc.ir.ops import index_key_width
from archcalc.site.exprjson import from_sympy
from archcalc.spec import Spec
from archcalc.spec.bind import Binding, bind

DEFAULT_HARDWARE = "h100-sxm"
DEFAULT_PROMPT, DEFAULT_NEW = 512, 128  # docs/inference.md's example run


def q(value: Fraction | int) -> list[str]:
    """A rational for the page: ``[numerator, denominator]``."""
    value = Fraction(value)
    return [str(value.numerator), str(value.denominator)]


def runtime_data(spec: Spec) -> dict:
    """The dtypes, the hardware table and each size's figures (or why the command line refuses that size)."""
    rows = {h.key: h for h in table().values()}  # the table's aliases name the same rows
    return {"dtypes": {name: q(width) for name, width in DTYPES.items()}, "aliases": ALIASES,
            "hardware": [[h.key, h.name, str(h.memory), str(h.bandwidth), {d: str(p) for d, p in h.peaks.items()}]
                         for h in rows.values()],
            "sizes": {size: size_runtime(bind(spec, size)) for size in spec.sizes}}


def size_runtime(binding: Binding) -> dict:
    """One size: its bound values (the page matches them) and the memory and inference constants."""
    values = {k: v if isinstance(v, bool) else str(v) for k, v in binding.values.items()}
    try:
        lowered = lower(binding)
        lowered.require_attention_only("the memory (a recurrent state in place of a KV cache)", modelled=MIXERS)
    except ArchcalcError as e:
        return {"values": values, "error": str(e)}
    out = {"values": values, "params": str(count(binding).total), "kv": kv_split(lowered),
           "state": str(sum(n * e for _, n, e in state_elements(lowered))), "leaves": state_leaves(lowered),
           "tp": tp_widths(lowered)}
    try:
        out["infer"] = infer_constants(binding, lowered)
    except ArchcalcError as e:
        out["infer_error"] = str(e)
    return out


def kv_split(lowered: Lowered) -> list[list]:
    """The KV cache as [elements one token adds over the layers, window, split by tp]: kv_terms' sum, with each
    term marked as archcalc.backends.parallel_plan.kv_by_stage splits it (key/value heads over the tp ranks; a
    latent, one for all heads, whole). The tests check both against archcalc memory."""
    numeric = lowered.binding.numeric()
    value = lambda e: int(sympy.sympify(e).xreplace(numeric))  # noqa: E731
    terms: dict[tuple, int] = {}
    for node, repeat in _attention_stacks(lowered.root):
        a = node.attrs
        latent = isinstance(a, LatentAttention)
        per_token = value(a.kv_rank + a.rope_width + index_key_width(node)) if latent else \
            value(a.kv_heads) * (value(a.head_width) + value(a.value_width))
        period, layers = len(a.pattern), value(repeat)
        for window, places in places_by_window(a.layer_windows).items():
            key = (value(window) if window is not None else None, not latent)
            terms[key] = terms.get(key, 0) + sum(len(range(j, layers, period)) for j in places) * per_token
    return [[str(e), str(w) if w is not None else None, split] for (w, split), e in terms.items()]


def _attention_stacks(node, repeat=1):
    """(node, repeat) of each attention that keeps a KV cache (not another layer's), as kv_terms walks them."""
    repeat = repeat * node.repeat
    a = node.attrs
    if isinstance(a, Attention) and (a.causal or a.cross):
        if not a.kv_shared:
            yield node, repeat
        return
    for child in node.children:
        yield from _attention_stacks(child, repeat)


def state_leaves(lowered: Lowered) -> list[list]:
    """The training state's tensors for archcalc.backends.parallel_plan.states_by_stage (one pipeline stage, no
    expert parallelism): [shape, copies, the dimension tp splits (-1: none), a vocab-split embedding whose gradient
    stays whole]; tensors alike in all four merged (their bytes add)."""
    numeric = lowered.binding.numeric()
    plan = Plan()
    tp_plan = tensor_parallel_plan(lowered.root, fused=True)[0]
    offsets, size = _placement(lowered, 1)
    tied = any(leaf.tensor.tied_to for leaf in leaves(lowered.root))
    merged: dict[tuple, int] = {}
    for leaf in leaves(lowered.root):
        if leaf.tensor.tied_to:
            continue  # the embedding itself (one stage)
        shape = tuple(int(sympy.sympify(s).xreplace(numeric)) for s in leaf.tensor.shape)
        style, dim = tp_split(leaf, tp_plan, len(shape))
        key = (shape, -1 if dim is None else dim, style == "vocab" and not tied)
        merged[key] = merged.get(key, 0) + _copies(leaf, offsets, size, plan, numeric, 0)[0]
    return [[[str(n) for n in shape], str(copies), dim, vocab] for (shape, dim, vocab), copies in merged.items()]


def tp_widths(lowered: Lowered) -> list[list[str]]:
    """What --tp must divide (archcalc.backends.memory.tp_widths, which check_tensor_parallel reads): [what, value]."""
    return [[what, str(v)] for what, v in memory_tp_widths(lowered)]


def infer_constants(binding: Binding, lowered: Lowered) -> dict:
    """archcalc infer's per-model numbers at one byte an element (the page scales them by the dtype's width):
    weight bytes, activation elements per token, the decode step's FLOPs line and the prefill's FLOPs in B and P."""
    lowered.require_attention_only("inference", modelled=MIXERS)
    w = weight_bytes(lowered, Fraction(1), None)
    g = generation_flops(binding, 1, DEFAULT_PROMPT, DEFAULT_NEW, lowered)  # the default run: computed for the page anyway
    batch, prompt, _ = _SHOWN
    prefill = g.prefill_formula
    names = {batch: sympy.Symbol("B"), prompt: sympy.Symbol("P")}
    body, head = matmul_io(lowered)
    return {"w": [q(w.total), q(w.embeddings), q(w.embedding_row), q(w.experts), q(w.expert_share), w.tied_head],
            "io": [str(body), str(head)],
            "step": [str(g.step_fixed), [[str(k), str(win) if win is not None else None] for k, win in g.step_terms]],
            "prefill": from_sympy(prefill.xreplace(names)), "heads": _heads(lowered)}


def _heads(lowered: Lowered) -> list[list[str]]:
    """What infer's --tp must divide (archcalc.backends.infer.tp_heads, which its check reads): [what, value]."""
    return [[what, str(v)] for what, v in tp_heads(lowered)]


def default_run(binding: Binding, seq_len: int) -> dict:
    """The run the page opens with: one sequence, bfloat16, on an H100, tensor-parallel over the fewest GPUs
    (a power of two up to 64) that hold the weights and the KV cache, as archcalc infer requires."""
    run = {"batch": 1, "seq": seq_len, "dtype": "bfloat16", "dp": 1, "zero": 0, "tp": 1, "hardware": DEFAULT_HARDWARE,
           "prompt": DEFAULT_PROMPT, "new_tokens": DEFAULT_NEW}
    for tp in (1, 2, 4, 8, 16, 32, 64):
        try:
            infer(binding, DEFAULT_HARDWARE, 1, DEFAULT_PROMPT, DEFAULT_NEW, tp=tp, must_fit=True)
            memory(binding, seq_len, 1, plan=Plan(tp=tp))
        except ArchcalcError:
            continue
        return run | {"tp": tp}
    return run


def run_figures(binding: Binding, run: dict) -> tuple[dict, dict]:
    """The figures the page shows for ``run`` (keys as archcalc.js's), worked out by the backends the command line
    runs and written as it writes them; and, for memory or inference, why not (the command line's refusal).

    >>> from archcalc.spec import load_spec
    >>> small = bind(load_spec("gpt2"), "small")
    >>> out, notes = run_figures(small, default_run(small, 1024))
    >>> out["mem:weights"], out["inf:ttft"], notes
    (248879616, '0.125 ms   memory-bound', {})
    """
    out: dict = {}
    notes: dict[str, str] = {}
    try:
        m = memory(binding, run["seq"], run["batch"], run["dtype"], plan=Plan(dp=run["dp"], zero=run["zero"], tp=run["tp"]))
        g = m.per_gpu()
        out |= {"mem:weights": m.weights_bytes, "mem:kv": m.kv_cache_bytes, "mem:state": m.state_bytes,
                "mem:gpu_weights": g["weights_bytes"], "mem:gpu_gradients": g["gradients_bytes"],
                "mem:gpu_optimizer": g["optimizer_bytes"],
                "mem:gpu_train": g["weights_bytes"] + g["gradients_bytes"] + g["optimizer_bytes"],
                "mem:gpu_kv": g["kv_cache_bytes"]}
    except ArchcalcError as e:
        notes["memory"] = str(e)
    try:
        r = infer(binding, run["hardware"], run["batch"], run["prompt"], run["new_tokens"], run["dtype"], tp=run["tp"],
                  must_fit=True)
        out["inf:ttft"] = f"{_seconds(r.prefill.seconds)}   {r.prefill.bound}-bound"
        if r.steps:
            out["inf:tps"] = f"{float(r.tokens_per_second):,.1f} tokens/s   {r.decode.bound}-bound"
            out["inf:step"] = _seconds(r.decode.seconds / r.steps)
        out["inf:fits"] = f"{_gb(r.needed_bytes_per_gpu)} of {_gb(r.capacity)}; largest batch {r.largest_batch:,}"
    except ArchcalcError as e:
        notes["inference"] = str(e)
    return out, notes


MEMORY_ROWS = (("mem:weights", "weights"), ("mem:kv", "KV cache"), ("mem:state", "recurrent state"),
               ("mem:gpu_weights", "per GPU: weights"), ("mem:gpu_gradients", "per GPU: gradients"),
               ("mem:gpu_optimizer", "per GPU: optimizer state"),
               ("mem:gpu_train", "per GPU: training state"), ("mem:gpu_kv", "per GPU: KV cache"))
INFER_ROWS = (("inf:ttft", "time to first token"), ("inf:tps", "decode"), ("inf:step", "a decode step"),
              ("inf:fits", "memory per GPU"))


def run_html(spec: Spec, binding: Binding, seq_len: int) -> tuple[str, str]:
    """The run's inputs (each named by its command-line option, the label errors use) and the memory and inference
    results, prefilled with the default run's figures."""
    run = default_run(binding, seq_len)
    out, notes = run_figures(binding, run)
    number = lambda name, option, doc: (  # noqa: E731
        f'<label><code>{option}</code><input name="run-{name}" data-label="{option}" inputmode="numeric" autocomplete="off" '
        f'spellcheck="false" value="{run[name]}"><small>{doc}</small></label>')
    select = lambda name, option, options, doc: (  # noqa: E731
        f'<label><code>{option}</code><select name="run-{name}">'
        + "".join(f'<option value="{v}"{" selected" if v == str(run[name]) else ""}>{escape(t)}</option>' for v, t in options)
        + f'</select><small>{doc}</small></label>')
    hardware = {h.key: h for h in table().values()}
    fields = [number("batch", "--batch", "sequences (per GPU for the split)"),
              select("dtype", "--dtype", [(d, d) for d in DTYPES], "weights, KV cache and activations"),
              number("dp", "--dp", "data-parallel degree"),
              select("zero", "--zero", [(str(z), str(z)) for z in range(4)], "ZeRO stage: 1 optimizer, 2 + gradients, 3 + weights"),
              number("tp", "--tp", "tensor-parallel degree (memory and inference)"),
              select("hardware", "--hardware", [(k, h.name) for k, h in hardware.items()], "the GPU (archcalc infer --list-hardware)"),
              number("prompt", "--prompt", "prompt tokens per sequence"),
              number("new_tokens", "--new-tokens", "tokens generated per sequence")]
    results = []
    for part, rows, command in (("memory", MEMORY_ROWS, "memory"), ("inference", INFER_ROWS, "infer")):
        cells = "".join(_row(key, label, out.get(key), hidden=key == "mem:state" and not out.get(key)) for key, label in rows)
        note = notes.get(part, "")
        results.append(f'<h4>{part} <small>(archcalc {command})</small></h4>'
                       f'<p class="archcalc-calc__note" data-archcalc-note="{part}" role="status"{"" if note else " hidden"}>{escape(note)}</p>'
                       f'<dl class="archcalc-calc__out" aria-live="polite">{cells}</dl>')
    return "".join(fields), "".join(results)


def _row(key: str, label: str, value, hidden: bool) -> str:
    text = "—" if value is None else value if isinstance(value, str) else f"{value:,}"
    near = gib(value) if isinstance(value, int) else ""
    return (f'<div{" hidden" if hidden else ""}><dt>{label}</dt><dd data-archcalc="{key}">{escape(text)}</dd>'
            f'<dd class="archcalc-calc__approx" data-approx="{key}">{near}</dd></div>')
