"""The exact calculator on every model page: the spec's formulas as JSON, evaluated in the browser.

The page carries, for each combination of the spec's boolean switches, the IR's parameter formulas by
role, the active-parameter formula and the forward-pass matmul FLOPs (in S); and the spec's own
default and size expressions. ``assets/archcalc.js`` binds the inputs as ``archcalc count --set``
does (typed value, else the size's, else the default; whole, within bounds), checks the widths the
lowering checks, and evaluates everything in exact BigInt rationals: no server, no floats. The command line's
bounds come with the data (``max_value``, ``max_digits`` of a hyperparameter, ``max_int`` of the tokens field, as
``--seq-len``): the script refuses a longer text before reading it as a number, in the CLI's words.

>>> from archcalc.spec import load_spec
>>> data = calculator_data(load_spec("gpt2"), 1024)
>>> [h["name"] for h in data["hyperparameters"]][:4], len(data["combos"])
(['V', 'T', 'L', 'd'], 4)
"""

from __future__ import annotations

import itertools
import json
from html import escape

import sympy

from archcalc.backends.count import count
from archcalc.backends.flops import flops
from archcalc.errors import ArchcalcError
from archcalc.ir import ROLES, Lowered, leaves, lower
from archcalc.ir.attrs import Attention, MoE, StateMixer
from archcalc.ir.ops import BATCH, forward_ops
from archcalc.site.calc_runtime import run_html, runtime_data
from archcalc.site.exprjson import from_expr, from_sympy
from archcalc.site.text import ROLE_NAMES, n
from archcalc.spec import Spec
from archcalc.spec.bind import bind, parse_overrides
from archcalc.spec.expr import MAX_DIGITS
from archcalc.spec.schema import MAX_VALUE

WIDTH_ATTRS = ("heads", "kv_heads", "head_width", "value_width", "rope_width", "hidden", "experts", "top_k",
               "groups", "group_top_k", "width", "vocab")
MAX_TOKENS = 10**18  # the tokens field's bound: --seq-len's (archcalc.cli.output.MAX_CLI_INT; the site imports no command line)


def calculator_data(spec: Spec, seq_len: int) -> dict:
    """Everything the browser needs to count any size of ``spec`` exactly."""
    hps = []
    for name, hp in spec.hyperparameters.items():
        hps.append({"name": name, "type": hp.type, "doc": hp.doc, "min": hp.min, "max": hp.max, "multiple_of": hp.multiple_of,
                    "default": from_expr(hp.default) if hp.default is not None else None})
    sizes = {name: {k: from_expr(v) for k, v in size.values.items()} for name, size in spec.sizes.items()}
    bools = [name for name, hp in spec.hyperparameters.items() if hp.type == "bool"]
    first = next(iter(spec.sizes), None)
    combos = []
    for values in itertools.product((True, False), repeat=len(bools)):
        settings = [f"{b}={str(v).lower()}" for b, v in zip(bools, values)]
        try:
            lowered = lower(bind(spec, first, parse_overrides(spec, settings)))
        except ArchcalcError:
            continue  # this combination does not lower at all (the page says so if it is chosen)
        combos.append({"when": dict(zip(bools, values)), **_formulas(lowered)})
    return {"spec": spec.name, "max_value": str(MAX_VALUE), "max_digits": MAX_DIGITS, "max_int": str(MAX_TOKENS),
            "seq_len": seq_len, "hyperparameters": hps, "sizes": sizes, "combos": combos, "runtime": runtime_data(spec)}


def _formulas(lowered: Lowered) -> dict:
    roles: dict[str, sympy.Expr] = {}
    active = sympy.Integer(0)
    for leaf in leaves(lowered.root):
        active += leaf.active_count
        if not leaf.tensor.tied_to:
            roles[leaf.tensor.role] = roles.get(leaf.tensor.role, sympy.Integer(0)) + leaf.count
    forward = sum((op.total_full for op in forward_ops(lowered)), sympy.Integer(0)).xreplace({BATCH: sympy.Integer(1)})
    candidates: dict[sympy.Expr, None] = {}  # each width once, in order (most recur in every tensor of a layer)
    divides, at_most = [], []
    for _, node in lowered.root.walk():
        candidates |= dict.fromkeys([node.repeat, *(dim for t in node.tensors for dim in t.shape)])
        candidates |= dict.fromkeys(v for v in (getattr(node.attrs, name, None) for name in WIDTH_ATTRS) if isinstance(v, sympy.Expr))
        a = node.attrs
        if isinstance(a, Attention):
            divides.append([from_sympy(a.heads), from_sympy(a.kv_heads), "heads", "kv_heads"])
        if isinstance(a, StateMixer):  # Mamba2's heads and groups, Gated DeltaNet's key heads
            divides += [[from_sympy(whole), from_sympy(part), wn, pn] for whole, part, wn, pn in a.divisors if whole != part]
        if isinstance(a, MoE):
            at_most.append([from_sympy(a.top_k), from_sympy(a.experts), "top_k", "experts"])
            if a.groups is not None:
                divides.append([from_sympy(a.experts), from_sympy(a.groups), "experts", "groups"])
                at_most.append([from_sympy(a.group_top_k), from_sympy(a.groups), "group_top_k", "groups"])
    widths: dict[str, sympy.Expr] = {}
    for expr in candidates:
        if isinstance(expr, sympy.Expr) and expr.free_symbols:
            widths.setdefault(str(expr), expr)
    return {"roles": {role: from_sympy(roles[role]) for role in ROLES if role in roles},
            "active": from_sympy(active), "forward": from_sympy(forward),
            "widths": [[from_sympy(e), text] for text, e in widths.items()], "divides": divides, "at_most": at_most}


def calculator_html(spec: Spec, seq_len: int) -> str:
    """The calculator: inputs named by the spec's symbols, prefilled with its first size, and the results of
    that size computed here (so the page reads right before the script runs, and without it)."""
    data = calculator_data(spec, seq_len)
    first = next(iter(spec.sizes), None)
    binding = bind(spec, first)
    given = spec.sizes[first].values if first is not None else {}
    counted = count(binding)
    f = flops(binding, seq_len, 1, counted=counted)
    sizes = "".join(f'<option value="{escape(s)}">{escape(s)}</option>' for s in spec.sizes)
    fields = []
    for name, hp in spec.hyperparameters.items():
        doc = escape(hp.doc or name)
        if hp.type == "bool":
            checked = " checked" if binding.values[name] else ""
            fields.append(f'<label class="archcalc-calc__bool"><input type="checkbox" name="{name}"{checked}> '
                          f'<code>{name}</code><small>{doc}</small></label>')
            continue
        shown = given.get(name)
        value = f' value="{binding.values[name]}"' if shown is not None and shown.constant else ""
        hint = "" if value else f' placeholder="{binding.values[name]}"'
        fields.append(f'<label><code>{name}</code><input name="{name}" inputmode="numeric" autocomplete="off" '
                      f'spellcheck="false"{value}{hint}><small>{doc}</small></label>')
    seq_name = "S" if "S" not in spec.hyperparameters else "seq_len"
    fields.append(f'<label><code>{seq_name}</code><input name="{seq_name}" data-archcalc-seq inputmode="numeric" '
                  f'autocomplete="off" value="{seq_len}"><small>tokens per sequence (FLOPs; memory: --seq-len)</small></label>')
    run_fields, run_out = run_html(spec, binding, seq_len)
    per_token = sympy.Rational(f.train_step_matmul, seq_len)
    rows = [("total", "parameters", n(counted.total)), ("active", "active per token", n(counted.active)),
            ("train_flops_per_token", "training FLOPs per token", _q(per_token)),
            ("bf16_bytes", "bf16 weights (bytes)", n(2 * counted.total))]
    roles = [role for role in ROLES if any(role in combo["roles"] for combo in data["combos"])]  # every role any switch gives
    rows += [(f"role:{role}", ROLE_NAMES[role], n(counted.by_role.get(role, 0))) for role in roles]
    exact = {"total": counted.total, "active": counted.active, "train_flops_per_token": per_token,
             "bf16_bytes": 2 * counted.total, **{f"role:{role}": counted.by_role.get(role, 0) for role in roles}}
    out = "".join(f'<div{" hidden" if value == "0" else ""}><dt>{label}</dt><dd data-archcalc="{key}">{value}</dd>'
                  f'<dd class="archcalc-calc__approx" data-approx="{key}">{readable(key, exact[key])}</dd></div>'
                  for key, label, value in rows)
    payload = json.dumps(data, separators=(",", ":")).replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    return (f'<div class="archcalc-calc" data-search-exclude><script type="application/json" class="archcalc-calc__data">{payload}</script>'
            f'<form class="archcalc-calc__form" autocomplete="off"><label class="archcalc-calc__size">size '
            f'<select name="size">{sizes}</select></label><div class="archcalc-calc__inputs">{"".join(fields)}</div>'
            f'<h4>run</h4><div class="archcalc-calc__inputs">{run_fields}</div>'
            f'<button type="submit" class="md-button archcalc-calc__go">Update</button></form>'
            f'<p class="archcalc-calc__error" data-archcalc="error" role="alert" hidden></p>'
            f'<h4>parameters and FLOPs <small>(archcalc count, flops)</small></h4>'
            f'<dl class="archcalc-calc__out" aria-live="polite">{out}</dl>{run_out}</div>')


def readable(key: str, value) -> str:
    """An exact figure in readable units, beside its digits (archcalc.js's readable() writes the same): bytes in
    KiB to PiB, other figures in K, M, B, T; three significant digits; nothing under 1,000.

    >>> readable("total", 6_738_415_616), readable("bf16_bytes", 13_476_831_232), readable("total", 999)
    ('6.74 B', '12.6 GiB', '')
    """
    x = float(value)
    if abs(x) < 1000:
        return ""
    base, units = (1024, ("KiB", "MiB", "GiB", "TiB", "PiB")) if key.endswith("bytes") else (1000, ("K", "M", "B", "T"))
    for unit in units:
        x /= base
        if abs(x) < 1000 or unit == units[-1]:
            return f"{_js_precision(x)} {unit}"
    return ""


def _js_precision(x: float) -> str:
    """``x`` to three significant digits as JavaScript's toPrecision(3) writes it (1.06e+17, 79.7, 100)."""
    text = f"{x:.2e}"
    mantissa, exponent = text.split("e")
    power = int(exponent)
    if -7 < power < 3:
        return f"{x:.{2 - power}f}"
    return f"{mantissa}e{'+' if power >= 0 else '-'}{abs(power)}"


def _q(value: sympy.Rational) -> str:
    """An exact rational as the calculator prints it: 1,234 or 1,234/7."""
    return n(int(value.p)) if value.q == 1 else f"{n(int(value.p))}/{n(int(value.q))}"
