"""The later sections of a model page: where the parameters go, FLOPs and memory per size, and the
generated source (kept out of the search index: it would crowd out every prose result)."""

from __future__ import annotations

from archcalc.backends.count import CountResult
from archcalc.backends.flops import flops
from archcalc.backends.memory import memory
from archcalc.errors import ArchcalcError
from archcalc.ir import lower
from archcalc.site import svg
from archcalc.site.text import ROLE_NAMES, ident, md, n
from archcalc.spec import Spec


def breakdown_section(r: CountResult) -> list[str]:
    numeric = r.binding.numeric()
    parts = [(ROLE_NAMES[role], v) for role, v in r.by_role.items() if v]
    out = [f"## Where the parameters go — size {r.size}", "", svg.pie_chart(parts, f"Parameters of size {r.size} by role"), "",
           "| role | parameters | share |", "|---|---:|---:|"]
    out += [f"| {label} | {n(v)} | {100 * v / r.total:.2f}% |" for label, v in parts]
    out += [f"| **total** | **{n(r.total)}** | 100% |", "",
            "By tensor: one row per tensor of a stack, with its repeat count. The generated module's `state_dict()` "
            "key adds the layer index after the stack name (`blocks.3.attn.out.weight` for the row `blocks.attn.out.weight`).", "",
            "| tensor | role | shape | repeat | parameters | share |", "|---|---|---|---:|---:|---:|"]
    for leaf in r.leaves:
        shape = " × ".join(f"{int(s.xreplace(numeric)):,}" for s in leaf.tensor.shape)
        repeat = int(leaf.repeat.xreplace(numeric))
        if leaf.tensor.tied_to:
            out.append(f"| {ident(leaf.path)} | {leaf.tensor.role} | {shape} | {repeat:,} | tied to {ident(leaf.tensor.tied_to)} | — |")
        else:
            count = int(leaf.count.xreplace(numeric))
            out.append(f"| {ident(leaf.path)} | {leaf.tensor.role} | {shape} | {repeat:,} | {n(count)} | {100 * count / r.total:.2f}% |")
    return out + [""]


def flops_section(results: list[CountResult], seq: int, seq_text: str, figures: list | None = None) -> list[str]:
    """The FLOPs tables; ``figures``: each size's ``flops`` at ``seq``, where the page has them already."""
    figures = figures or [flops(r.binding, seq, 1, counted=r) for r in results]
    out = ["## FLOPs per token", "",
           f"At {seq_text}. Matmul FLOPs per token of one sequence, 2 per multiply-accumulate (see [conventions](../conventions.md)): a forward "
           "pass over the full S × S attention square (what torch's FlopCounterMode counts), over the causal triangle only, "
           "and a training step (forward and backward).", "",
           "| size | forward | forward, causal | training step |", "|---|---:|---:|---:|"]
    approx = ["", "The usual approximations of the training step, as a ratio to the exact figure above:", "",
              "| size | 6N | Kaplan | Chinchilla | PaLM |", "|---|---:|---:|---:|---:|"]
    for r, f in zip(results, figures):
        out.append(f"| {r.size} | {n(f.forward_matmul // seq)} | {n(f.forward_matmul_causal // seq)} | {n(f.train_step_matmul // seq)} |")
        ratios = " | ".join(f"{f.approximations[k]['ratio']:.3f}×" if k in f.approximations else "—"  # state mixers: 6N alone
                            for k in ("6N", "kaplan", "chinchilla", "palm"))
        approx.append(f"| {r.size} | {ratios} |")
    return out + approx + [""]


def memory_section(results: list[CountResult], seq: int, seq_text: str) -> list[str]:
    gib = lambda b: f"{b / 2**30:,.2f} GiB"  # noqa: E731
    weights = ["## Memory", "", f"One sequence at {seq_text}. Weights at three precisions:", "",
               "| size | fp32 | bf16 | fp8 |", "|---|---:|---:|---:|"]
    training = ["", "Inference and training, in bf16:", "",
                "| size | KV cache | training state (16 B/param) | activations |", "|---|---:|---:|---:|"]
    state = ["", "Where the inference state goes, in bf16, one sequence: the attention layers' KV cache grows with the "
             "context; the state-mixer layers keep a fixed-size state (their conv window and recurrent state) whatever "
             "the context (see [conventions](../conventions.md)):", "",
             "| size | KV cache (attention layers) | recurrent state (mixer layers) | state, per layer kind |",
             "|---|---:|---:|---|"]
    for r in results:
        m = memory(r.binding, seq, 1, "bfloat16")
        weights.append(f"| {r.size} | {gib(4 * r.total)} | {gib(2 * r.total)} | {gib(r.total)} |")
        training.append(f"| {r.size} | {gib(m.kv_cache_bytes)} | {gib(m.states_bytes)} | {gib(m.acts.total_bytes())} |")
        kinds = "; ".join(f"{ident(path)}: {layers} × {n(2 * elements)} B" for path, layers, elements in m.state_layers)
        state.append(f"| {r.size} | {gib(m.kv_cache_bytes)} | {gib(m.state_bytes)} | {kinds} |")
    return weights + training + (state if any(row.count("×") for row in state[5:]) else []) + [""]


def source_section(spec: Spec, r: CountResult) -> list[str]:
    from archcalc.codegen.emit import emit

    command = f"archcalc generate {spec.name} --size {r.size} -o FILE.py"
    try:
        source = emit(lower(r.binding), command)
    except ArchcalcError as e:
        return ["## Generated PyTorch source", "", f"Not generated yet: {md(str(e))}.", ""]
    # a plain block, not Python-highlighted: Pygments' spans over 36 modules of ~500 lines doubled the site's build
    # time (12 s against 6 s with mkdocs build --strict), for a block a reader opens to copy or skim
    return ["## Generated PyTorch source", "",
            f'<details class="example" data-search-exclude markdown="1"><summary>The module for size {r.size} '
            f"(<code>{command}</code>)</summary>", "", "```text", source.rstrip("\n"), "```", "", "</details>", ""]
