"""The arguments every command shares: SPEC (or ``--hf CONFIG.json`` in its place), ``--size``, ``--set`` and
``--json``, and the spec they name. The commands' modules import them from here (not from the package, which
imports the commands).

>>> import argparse
>>> p = argparse.ArgumentParser()
>>> add_size_options(p)
>>> args = p.parse_args(["gpt2", "--size", "small", "--set", "L=2"])
>>> args.spec, args.size, args.overrides, spec_from_args(args).name
('gpt2', ['small'], ['L=2'], 'gpt2')
"""

from __future__ import annotations

import argparse
import sys
from fractions import Fraction

from archcalc.errors import UsageError

SPEC_HELP = (
    "a spec file (e.g. my_model.yaml) or the name of a bundled spec (e.g. gpt2, gpt3); "
    "run 'archcalc specs' to list the bundled ones"
)


def add_spec_argument(p: argparse.ArgumentParser, help: str = SPEC_HELP) -> None:
    """SPEC, or ``--hf CONFIG.json`` in its place; :func:`spec_from_args` reads whichever was given."""
    p.add_argument("spec", metavar="SPEC", nargs="?", help=f"{help} (or give --hf CONFIG.json instead)")
    p.add_argument("--hf", metavar="CONFIG.json",
                   help="a transformers config.json in place of SPEC: imported as with 'archcalc import-hf' "
                        "and counted as transformers instantiates it")


def spec_from_args(args: argparse.Namespace):
    """The spec a command works on: the SPEC argument or the config given with ``--hf`` (exactly one)."""
    spec, hf = getattr(args, "spec", None), getattr(args, "hf", None)
    if (spec is None) == (hf is None):
        what = "give SPEC or --hf CONFIG.json, not both" if spec is not None else "give a SPEC (a spec file or bundled name) or --hf CONFIG.json"
        raise UsageError(f"archcalc {getattr(args, 'command', '')}: {what}")
    if hf is not None:
        from archcalc.hf import spec_from_hf_file
        from archcalc.hf.build import WRAPPER_NOTE

        loaded = spec_from_hf_file(hf)
        wrapped = next((s for s in (loaded.notes or "").split(". ") if WRAPPER_NOTE in s), None)
        if wrapped is not None and not getattr(args, "with_vision", False):  # a multimodal config: say, in one line,
            # which part of it is counted (with --with-vision, count says it counts the rest: archcalc/cli/vision_opt.py)
            print(f"archcalc: {hf}: {wrapped.rstrip('.')}", file=sys.stderr)
    else:
        from archcalc.spec import load_spec

        loaded = load_spec(spec)
    from archcalc.cli.mtp_args import apply_mtp

    loaded = apply_mtp(args, loaded)  # --with-mtp, --mtp-copies (count, flops, memory, infer)
    args.loaded_spec = loaded  # so a later refusal (codegen's) can name the file: see _located
    return loaded


def add_size_options(p: argparse.ArgumentParser, json_flag: bool = True, one_size: bool = False) -> None:
    """The options shared by every command that binds sizes: SPEC (or --hf), --size, --set, --json.
    ``one_size``: the command works on exactly one size (generate, run)."""
    add_spec_argument(p)
    p.add_argument(
        "--size", metavar="NAME", action="append",
        help="the size to use, one of the spec's (needed when the spec has several)" if one_size
        else "a size defined in the spec (repeatable; default: every size)",
    )
    p.add_argument(
        "--set", metavar="NAME=VALUE", action="append", default=[], dest="overrides",
        help="override a hyperparameter, e.g. --set L=24, --set d_ff=4*d or --set qkv_bias=false "
             "(repeatable; values are integers, true/false, or expressions over other hyperparameters)",
    )
    if json_flag:
        p.add_argument("--json", action="store_true", help="print one JSON object on stdout instead of tables")


def one_size(args: argparse.Namespace, spec=None):
    """The spec (``spec``, else SPEC or --hf) bound at the one size a command works on (--size, or the spec's only
    size) with its --set overrides, and lowered: (spec, lowered, overrides)."""
    from archcalc.ir import lower
    from archcalc.spec.bind import bind, parse_overrides

    spec = spec if spec is not None else spec_from_args(args)
    overrides = parse_overrides(spec, args.overrides)
    sizes = args.size or []
    if len(sizes) > 1:
        raise UsageError(f"{args.command} works on one size; got --size {' --size '.join(sizes)}")
    if not sizes and len(spec.sizes) > 1:
        raise UsageError(f"{spec.name} has several sizes; pick one with --size ({', '.join(spec.sizes)})")
    size = sizes[0] if sizes else next(iter(spec.sizes), None)
    return spec, lower(bind(spec, size, overrides)), overrides


def fraction(text: str | None, what: str, low: Fraction = Fraction(0), high: Fraction | None = None) -> Fraction | None:
    """A decimal or percentage from the command line, exactly (``0.4``, ``40%``), within (low, high]."""
    if text is None:
        return None
    given = text.strip()
    scale = Fraction(1, 100) if given.endswith("%") else Fraction(1)
    try:
        value = Fraction(given.rstrip("%").strip()) * scale if len(given) <= 40 else None
    except (ValueError, ZeroDivisionError):
        value = None
    if value is None or value <= low or (high is not None and value > high):
        bound = f" and at most {high}" if high is not None else ""
        raise UsageError(f"{what} {text[:40]!r}: expected a number above {low}{bound}, e.g. {what} 0.4")
    return value
