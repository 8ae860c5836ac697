"""The hyperparameters a solve names (``--fix``, ``--free``, ``--multiple-of``, ``--range``), checked against the
spec before anything is built: an unknown name is one line with the closest, a switch where a number is wanted or
a value out of its range is refused.

>>> from archcalc.spec import load_spec
>>> check_names(load_spec("llama"), {}, {"dd": 256}, {}, None)
Traceback (most recent call last):
...
archcalc.errors.UsageError: --multiple-of dd=256: llama has no hyperparameter 'dd' (did you mean 'd'?); it has: V, L, d, H, KV, d_head, d_ff, tie_embeddings
"""

from __future__ import annotations

from archcalc.errors import UsageError
from archcalc.spec import Spec
from archcalc.spec.schema import MAX_VALUE
from archcalc.spec.suggest import did_you_mean


def check_names(spec: Spec, fixed: dict, multiple_of: dict, ranges: dict, free: list[str] | None) -> None:
    """Every name ``--multiple-of``, ``--range`` and ``--free`` take is an integer hyperparameter of the spec (else
    one line naming the closest), and ``--free`` names none that ``--fix`` holds."""
    kinds = spec.kinds()

    def known(option: str, name: str) -> None:
        if name not in kinds:
            raise UsageError(f"{option}: {spec.name} has no hyperparameter {name!r}{did_you_mean(name, kinds)}; "
                             f"it has: {', '.join(kinds)}")
        if kinds[name] == "bool":
            raise UsageError(f"{option}: {name} is a switch (true or false); expected an integer hyperparameter of "
                             f"{spec.name}: {', '.join(n for n, k in kinds.items() if k == 'int')}")

    for name, step in multiple_of.items():
        if name != "*":
            known(f"--multiple-of {name}={step}", name)
    for num, den in ranges:
        known(f"--range {num}/{den}", num)
        known(f"--range {num}/{den}", den)
        if num == den:
            raise UsageError(f"--range {num}/{den}: expected the ratio of two different hyperparameters")
    for name in free or []:
        known(f"--free {name}", name)
        if name in fixed:
            raise UsageError(f"--free {name} and --fix {name}={str(fixed[name]).lower()} contradict each other; "
                             f"give {name} in one of them")


def check_fixed(spec: Spec, fixed: dict) -> None:
    """Every ``--fix NAME=VALUE`` names a hyperparameter of the spec and gives a value of its type, in its range."""
    kinds = spec.kinds()
    for name, value in fixed.items():
        if name not in kinds:
            raise UsageError(f"--fix {name}: {spec.name} has no hyperparameter {name!r}{did_you_mean(name, kinds)}; "
                             f"it has: {', '.join(kinds)}")
        hp = spec.hyperparameters[name]
        if hp.type == "bool":
            if not isinstance(value, bool):
                raise UsageError(f"--fix {name}={value}: {name} is a switch; expected true or false")
            continue
        if isinstance(value, bool) or not isinstance(value, int):
            raise UsageError(f"--fix {name}={value}: expected an integer")
        top = min(hp.max if hp.max is not None else MAX_VALUE, MAX_VALUE)
        if not hp.min <= value <= top:
            shown = f"{value:,}" if len(str(value)) <= 30 else f"a {len(str(abs(value)))}-digit number"
            raise UsageError(f"--fix {name}={shown}: expected an integer from {hp.min} to {top:,}")
