"""``archcalc count``: exact parameter counts, formulas and breakdowns, as tables or JSON."""

from __future__ import annotations

import argparse
import json

from archcalc.backends.count import CountResult, count_spec, pretty
from archcalc.cli.table import num, percent, table

ROLE_LABELS = {
    "token_embedding": "token emb", "position_embedding": "pos emb", "attention": "attention", "mixer": "mixer",
    "mlp": "mlp", "norm": "norm", "lm_head": "lm head", "other": "other",
    "vision_tower": "vision", "projector": "projector",  # --with-vision (archcalc/cli/vision_opt.py)
}


def register(sub) -> None:
    from archcalc.cli.args import add_size_options
    from archcalc.cli.mtp_args import add_mtp_options
    from archcalc.cli.vision_opt import add_vision_option

    p = sub.add_parser(
        "count", help="exact parameter counts, the formula, and shares by role and tensor",
        description=(
            "Count the parameters of every size of a spec (or of --size NAME) exactly: the total, "
            "the figure the authors reported and the relative error, the symbolic formula and its "
            "leading term, and the split by role (embeddings, attention, MLP, norms, head). With one "
            "size it also lists every tensor. A tied head adds no parameters; buffers are not counted."
        ),
    )
    add_size_options(p)
    add_mtp_options(p)
    add_vision_option(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from archcalc.cli import vision_opt
    from archcalc.cli.args import spec_from_args
    from archcalc.spec.bind import parse_overrides

    spec = spec_from_args(args)
    overrides = parse_overrides(spec, args.overrides)
    vision = vision_opt.vision_of(args)  # --with-vision: a wrapper's vision tower and projector join the count
    results = count_spec(spec, args.size, overrides)
    if vision is not None:
        text_totals, results = [r.total for r in results], [vision_opt.merged(r, vision) for r in results]
    if args.json:
        payload = {
            "command": "count", "spec": spec.name, "title": spec.title, "source": spec.source,
            "overrides": {k: v.text for k, v in overrides.items()},
            "results": [r.to_json() for r in results],
        }
        if vision is not None:
            payload["results"] = [vision_opt.add_json(e, t, vision) for e, t in zip(payload["results"], text_totals)]
        print(json.dumps(payload, indent=2, ensure_ascii=False))
    else:
        print(render_text(spec, f"HF config {args.hf}" if args.hf else _shown_path(args.spec), results))
        if vision is not None:
            print("\n" + vision_opt.render(vision, results[-1].total, text_totals[-1]))
        if overrides and any(spec.sizes[r.size].reported for r in results if r.size in spec.sizes):
            print("\n(reported figures are not compared when --set changes a size)")
    return 0


def _shown_path(name: str) -> str:
    from pathlib import Path

    from archcalc.spec import resolve_spec_path

    shown = resolve_spec_path(name)[1]
    if Path(name).is_file():
        return shown
    # the library's own folder name, not the machine's path to it: output (and the docs built from it) the same anywhere
    return f"bundled spec {name} ({Path(shown).parent.name}/{Path(shown).name})"


def render_text(spec, shown: str, results: list[CountResult]) -> str:
    """The terminal report: header, formula, sizes table, role shares, (one size:) tensors, warnings."""
    out = [f"{spec.title or spec.name} — {shown}"]
    if spec.source:
        out.append(spec.source)
    out.append("")
    formulas: dict[str, list[str]] = {}
    for r in results:
        formulas.setdefault(r.formula_text, []).append(r.size)
    for text, sizes in formulas.items():
        label = "params" if len(formulas) == 1 else f"params ({', '.join(sizes)})"
        out.append(f"{label} = {text}")
    leads = dict.fromkeys(pretty(r.leading) for r in results)
    out.append(f"leading term for large sizes: {', '.join(leads)}")
    out.append("")
    out.append(_sizes_table(results))
    if len(results) == 1:
        out += ["", _roles_table(results[0]), "", _tensor_table(results[0])]
    else:
        out += ["", "share by role (counts per role: --size NAME or --json)", _shares_table(results)]
    warnings = [(r.size, w) for r in results for w in r.warnings]
    if warnings:
        out += ["", "warnings:"] + [f"  {size}: {w}" for size, w in warnings]
    return "\n".join(out)


def _sizes_table(results: list[CountResult]) -> str:
    shown = []  # hyperparameters given by a size or --set: the ones that tell sizes apart
    for r in results:
        spec_size = r.binding.spec.sizes.get(r.size)
        for name in list(spec_size.values if spec_size else {}) + list(r.binding.overrides):
            if name not in shown:
                shown.append(name)
    moe = any(leaf.tensor.active not in (0, 1) for r in results for leaf in r.leaves)
    header = ["size", *shown, "total", *(["active"] if moe else []), "reported", "error"]
    rows = []
    for r in results:
        cells = [r.size] + [_value(r.binding.values[n]) for n in shown] + [num(r.total)]
        if moe:
            cells.append(num(r.active))
        rel = r.rel_error
        cells += [num(r.reported), percent(float(rel) * 100, signed=True) if rel is not None else "—"]
        rows.append(cells)
    return table(header, rows)


def _value(v) -> str:
    return str(v).lower() if isinstance(v, bool) else f"{v:,}"


def _roles_table(r: CountResult) -> str:
    rows = [[role, num(n), percent(r.share(n))] for role, n in r.by_role.items() if n]
    rows.append(["total", num(r.total), percent(100.0)])
    if "lm_head" not in r.by_role:
        rows.insert(-1, ["lm_head", "tied", "—"])
    return table(["role", "params", "share"], rows)


def _shares_table(results: list[CountResult]) -> str:
    roles = [role for role in ROLE_LABELS if any(r.by_role.get(role) for r in results)]
    rows = [[r.size] + [percent(r.share(r.by_role[role])) if role in r.by_role else "tied" for role in roles]
            for r in results]
    return table(["size"] + [ROLE_LABELS[role] for role in roles], rows)


def _tensor_table(r: CountResult) -> str:
    numeric = r.binding.numeric()
    rows = []
    for leaf in r.leaves:
        shape = " × ".join(f"{int(s.xreplace(numeric)):,}" for s in leaf.tensor.shape)
        formula = " × ".join(str(s) for s in leaf.tensor.shape)
        repeat = int(leaf.repeat.xreplace(numeric))
        if leaf.tensor.tied_to:
            rows.append([leaf.path, leaf.tensor.role, f"{formula}", shape, "", f"tied to {leaf.tensor.tied_to}", ""])
            continue
        n = int(leaf.count.xreplace(numeric))
        rows.append([leaf.path, leaf.tensor.role, formula, shape, f"×{repeat:,}" if repeat != 1 else "",
                     num(n), percent(r.share(n))])
    return table(["tensor", "role", "shape", "", "repeat", "params", "share"], rows, left=3)
