"""What ``archcalc solve`` prints: the JSON object (exact integers; rel_error also as an exact fraction) and
the text report (assumptions, the searched box, the constraints, then the shapes best first)."""

from __future__ import annotations

import shlex
from fractions import Fraction

from archcalc.cli.table import num, table


def payload(spec, solution, plan, compute: int | None, given: list[str] | None = None) -> dict:
    """``given``: how the user named the spec (``["my1b.yaml"]``, ``["llama"]``, ``["--hf", "config.json"]``), for the
    follow-up command (``check``: the argv of ``archcalc count`` that prints the first shape, and only it)."""
    from archcalc.backends.solve.plan import annotate

    def entry(c) -> dict:
        out = {"values": c.values, "total": c.total, "rel_error": float(c.rel_error),
               "rel_error_exact": _fraction(c.rel_error), "error": c.error, "derived": c.derived,
               "ratio": {c.ratio_name: float(c.ratio)} if c.ratio_name else {}, "aspect": c.aspect,
               "in_range": c.in_range}
        if c.outside:
            out["outside"] = c.outside
        if plan.flops or plan.memory:
            out |= annotate(spec, c.values, c.total, plan)
        return out

    r = solution.ratio
    body = {
        "solved": solution.solved, "solved_for": solution.solved_for, "free": solution.free,
        "exact": solution.exact, "real_value": solution.real_value,
        "ratio": None if r is None else {"name": r.name, "min": float(r.lo), "max": float(r.hi),
                                         "min_exact": _fraction(r.lo), "max_exact": _fraction(r.hi),
                                         "source": solution.ratio_source},
        "aspect_range": list(solution.aspect_range) if solution.aspect_range else None,
        "grids": solution.grids, "grid_reasons": solution.grid_reasons, "assumptions": solution.assumptions,
        "held": solution.held, "defaults": solution.defaults,
        "constraints": solution.constraints, "searched": solution.searched, "exhaustive": solution.exhaustive,
        "reference_size": solution.reference, "notes": solution.notes,
    }
    if compute is not None:
        body["from_flops"] = {"flops": compute, "tokens": plan.tokens,
                              "tokens_per_param": None if plan.tokens else _fraction(plan.tokens_per_param or Fraction(20)),
                              "rule": "N = C // (6·D)" if plan.tokens else "N = floor(sqrt(C / (6·R))), D = R·N"}
    if plan.flops or plan.memory:
        body["plan"] = {"seq_len": plan.seq_len, "batch": plan.batch, "dtype": plan.dtype,
                        "memory_budget": plan.memory_budget, "memory_for": plan.memory_for}
    best = solution.candidates[0]
    check = count_command(spec, best.values, best.total, given or [spec.name], solution.reference)
    out = {"command": "solve", "spec": spec.name, "target": solution.target, "fixed": solution.fixed,
           "solution": body, "candidates": [entry(c) for c in solution.candidates],
           "outside": [entry(c) for c in solution.outside], "check": check}
    out["results"] = [body | {"candidates": out["candidates"], "outside": out["outside"]}]
    return out


def show(spec, solution, plan, data: dict) -> str:
    lines = _heading(spec, solution, data) + _solved(solution)
    lines += ["", _shapes(solution, plan, data)]
    if plan.flops or plan.memory:
        lines.append(f"\nmemory at {plan.batch} × {plan.seq_len:,} tokens, {plan.dtype}; training bytes: 16 a parameter "
                     "(AdamW, mixed precision) + activations" + ("; train FLOPs: the exact matmul FLOPs of the tokens, in "
                                                                "sequences of that length (6·N·D in --json)" if plan.flops else ""))
    if plan.memory_budget is not None and data["candidates"] and not data["candidates"][0]["memory"]["fits"]:
        lines.append(_over_budget(plan, data["candidates"][0]))
    if data.get("check"):
        lines.append(f"\ncheck the first: {shlex.join(data['check'])}")
    return "\n".join(lines)


def _heading(spec, solution, data: dict) -> list[str]:
    """The target (and the compute it came from), what is fixed, the defaults and the assumptions."""
    lines = [f"{spec.title or spec.name}: target {solution.target:,} parameters"]
    if "from_flops" in data["solution"]:
        f = data["solution"]["from_flops"]
        how = f"D = {f['tokens']:,}" if f["tokens"] else f"D = {f['tokens_per_param']}·N"
        lines[0] += f" ({f['rule'].split(',')[0]} with C = {f['flops']:,}, {how})"
    if solution.fixed:
        lines.append("fixed: " + ", ".join(f"{k} = {_value(v)}" for k, v in solution.fixed.items()))
    if solution.defaults:
        lines.append("defaults: " + ", ".join(f"{k} = {v}" for k, v in solution.defaults.items()))
    for text in solution.assumptions:
        lines.append(f"assumed: {text} (--fix {text.split()[0]}=... to choose)")
    return lines


def _solved(solution) -> list[str]:
    """What was solved (and the ratio's range), exact and real solutions, the grids, the constraints, the search."""
    r = solution.ratio
    if r is not None:
        source = "given with --range" if solution.ratio_source == "--range" else \
            f"{solution.ratio_source}; --range {r.name}=MIN:MAX to change it"
        lines = [f"solved: {' and '.join(solution.solved)}, with {r.name} in [{float(r.lo):.2f}, {float(r.hi):.2f}] "
                 f"({source})"]
    else:
        lines = [f"solved: {solution.solved[0]}"]
    for text in solution.exact:
        lines.append(f"exact: {text}")
    if solution.real_value is not None:
        lines.append(f"real solution: {solution.solved[0]} ≈ {solution.real_value:,.2f}")
    grids = "; ".join(f"{k} on multiples of {v:,}" + (f" ({solution.grid_reasons[k]})" if solution.grid_reasons.get(k) else "")
                      for k, v in solution.grids.items() if v > 1)
    if grids:
        lines.append(f"grid: {grids}")
    if solution.constraints:
        lines.append("kept whole: " + "; ".join(solution.constraints))
    proof = ("exhaustive: the first row is the nearest shape in this box" if solution.exhaustive
             else "not exhaustive: the first row is the nearest shape found")
    lines.append(f"searched: {solution.searched} ({proof})")
    return lines + list(solution.notes)


def _shapes(solution, plan, data: dict) -> str:
    """The table of shapes, best first, then those outside the range (with tokens, FLOPs and bytes when planned)."""
    r = solution.ratio
    rows = list(zip(data["candidates"], solution.candidates)) + list(zip(data["outside"], solution.outside))
    names = [n for n in rows[0][1].values if n not in solution.fixed and n not in solution.held]
    derived = [n for n in rows[0][1].derived if n not in names]
    header = [*names, *derived, "total", "error"] + ([r.name] if r else [])
    if plan.flops:
        header += ["tokens", "train FLOPs"]
    if plan.memory:
        header += ["inference bytes", "training bytes"] + (["fits"] if plan.memory_budget is not None else [])
    body = []
    for entry, c in rows:
        row = [*(_value(c.values[n]) for n in names), *(_value(c.derived[n]) for n in derived), num(c.total),
               _percent(c.rel_error)] + ([f"{float(c.ratio):.2f}" + ("" if c.in_range else " (outside)")] if r else [])
        if plan.flops:
            row += [num(entry["tokens"]), num(entry["train_flops_matmul"])]
        if plan.memory:
            m = entry["memory"]
            row += [num(m["inference_bytes"]), num(m["training_bytes"])]
            if plan.memory_budget is not None:
                row.append("yes" if m["fits"] else "no")
        body.append(row)
    return table(header, body, left=0)


def _over_budget(plan, first: dict) -> str:
    """Why the best shape does not fit the memory budget, and about how many parameters would."""
    from archcalc.backends.solve.plan import fitting_params

    holds = fitting_params(plan, first)
    other = ("activations", first["memory"]["activations_bytes"]) if plan.memory_for == "training" else \
        ("KV cache", first["memory"]["kv_cache_bytes"])
    return f"the best shape does not fit {plan.memory_budget:,} bytes for {plan.memory_for}; " + (
        f"with its {other[0]} that budget holds about {holds:,} parameters" if holds else
        f"its {other[0]} alone take {other[1]:,} bytes at {plan.batch} × {plan.seq_len:,} tokens")


def count_command(spec, values: dict, total: int, given: list[str], reference: str | None = None) -> list[str] | None:
    """The argv of ``archcalc count`` that prints exactly one row, the shape ``values`` (as the solver binds it: no
    size, its defaults) with its ``total``: the spec as the user named it; for a spec with sizes, the size that
    needs the fewest other ``--set`` (a size's own values, such as Llama 3's KV = 8, would otherwise leak in)
    and those ``--set``. Checked here by binding and counting it; None if no size reproduces the shape."""
    from archcalc.backends.count import count
    from archcalc.backends.solve.problem import overrides
    from archcalc.errors import ArchcalcError
    from archcalc.spec.bind import bind

    def sets(chosen: dict) -> list[str]:
        return [word for k, v in chosen.items() for word in ("--set", f"{k}={_plain(v)}")]

    want = bind(spec, None, overrides(spec, values)).values
    base = ["archcalc", "count", *given]
    if not spec.sizes:
        return base + sets(values)
    options = []
    for i, size in enumerate(spec.sizes):
        try:
            bound = bind(spec, size, overrides(spec, values)).values
            extra = {n: want[n] for n in want if n not in values and bound.get(n) != want[n]}
        except ArchcalcError:  # the size's own values break the shape (KV = 8 with H = 30): set all it gives
            extra = {n: want[n] for n in spec.sizes[size].values if n not in values}
        options.append((len(extra), size != reference, i, size, extra))
    for _, _, _, size, extra in sorted(options):
        chosen = {**values, **extra}
        try:
            binding = bind(spec, size, overrides(spec, chosen))
        except ArchcalcError:
            continue
        if binding.values == want and count(binding).total == total:
            return base + ["--size", size] + sets(chosen)
    return None


def _plain(v) -> str:
    return str(v).lower() if isinstance(v, bool) else str(v)


def _percent(x: Fraction) -> str:
    """+0.0677%; errors too small for four decimals in scientific notation (+3.0e-21%), never a false 0."""
    shown = f"{100 * float(x):+.4f}%"
    return shown if x == 0 or float(shown[:-1]) != 0 else f"{100 * float(x):+.1e}%"


def _value(v) -> str:
    return str(v).lower() if isinstance(v, bool) else f"{v:,}"


def _fraction(x: Fraction | None) -> str | None:
    if x is None:
        return None
    return str(x.numerator) if x.denominator == 1 else f"{x.numerator}/{x.denominator}"
