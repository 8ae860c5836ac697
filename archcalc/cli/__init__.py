"""The ``archcalc`` command line.

Exit status: 0 ok, 1 a check failed, 2 bad input or usage (one line on stderr, never a traceback).
Symbolic commands never import torch.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from archcalc import __version__
from archcalc.errors import ArchcalcError, UsageError, one_line

SPEC_HELP = (
    "a spec file (e.g. spec/gpt2.yaml) or the name of a bundled spec (e.g. gpt3); "
    "run 'archcalc specs' to list the bundled ones"
)

DESCRIPTION = """\
archcalc compiles a declarative transformer spec into exact symbolic formulas.

Specs are YAML files naming hyperparameters (symbols such as L, d, H), the model's
components, and named sizes. Every number archcalc prints is an exact integer
derived from the spec; reported figures from papers are shown beside them.
"""

EPILOG = """\
examples:
  archcalc count gpt3                          every GPT-3 size, with errors vs. the paper
  archcalc count gpt2 --size small --json      one size as JSON
  archcalc count spec/gpt2.yaml --size small --set qkv_bias=false --set tie_embeddings=false
  archcalc flops gpt2 --size small --seq-len 1024   exact FLOPs and the 6N/Kaplan/Chinchilla/PaLM ratios
  archcalc memory gpt3 --size 175b --seq-len 2048 --batch 1 --dp 64 --zero 3 --tp 8
  archcalc solve gpt3 --target-params 100T --fix L=512   the width of a 100T GPT-3 with 512 layers
  archcalc generate gpt2 --size small -o gpt2_small.py   a readable PyTorch module
  archcalc verify gpt3                         every GPT-3 size built on the meta device vs. the count
  archcalc run gpt2 --size small --steps 20    train on random tokens, report tokens/s
  archcalc count --hf config.json              a transformers config, counted as transformers builds it
  archcalc import-hf config.json -o model.yaml the spec of a transformers config, to read or edit
  archcalc docs && mkdocs build --strict       the documentation site

exit status: 0 ok, 1 a check failed (verify), 2 bad input or usage (a one-line message on stderr).
"""


class _Parser(argparse.ArgumentParser):
    """argparse that raises UsageError (one line, exit 2) instead of printing usage and exiting."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"{self.prog}: {message} (see {self.prog} --help)")


def build_parser() -> argparse.ArgumentParser:
    from archcalc.cli import codegen_cmd, count_cmd, docs_cmd, flops_cmd, hf_cmd, memory_cmd, run_cmd, solve_cmd

    parser = _Parser(
        prog="archcalc", description=DESCRIPTION, epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"archcalc {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    count_cmd.register(sub)
    flops_cmd.register(sub)
    memory_cmd.register(sub)
    solve_cmd.register(sub)
    codegen_cmd.register(sub)
    run_cmd.register(sub)
    hf_cmd.register(sub)
    docs_cmd.register(sub)
    specs = sub.add_parser(
        "specs", help="list the bundled specs and their sizes",
        description="List the bundled specs (usable by name, e.g. 'archcalc count gpt3') and their sizes.",
    )
    specs.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    specs.set_defaults(run=_list_specs)
    return parser


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

        return spec_from_hf_file(hf)
    from archcalc.spec import load_spec

    return load_spec(spec)


def add_size_options(p: argparse.ArgumentParser, json_flag: bool = True) -> None:
    """The options shared by every command that binds sizes: SPEC (or --hf), --size, --set, --json."""
    add_spec_argument(p)
    p.add_argument(
        "--size", metavar="NAME", action="append",
        help="a size defined in the spec (repeatable; default: every size)",
    )
    p.add_argument(
        "--set", metavar="NAME=VALUE", action="append", default=[], dest="overrides",
        help="override a hyperparameter, e.g. --set L=24, --set d_ff=4*d or --set qkv_bias=false "
             "(repeatable; values are integers, true/false, or expressions over other hyperparameters)",
    )
    if json_flag:
        p.add_argument("--json", action="store_true", help="print one JSON object on stdout instead of tables")


def _list_specs(args: argparse.Namespace) -> int:
    import json

    from archcalc.spec import load_spec
    from archcalc.spec.library import bundled_names, library_dir

    items = []
    for name in bundled_names():
        spec = load_spec(name)
        items.append({"name": name, "title": spec.title, "sizes": list(spec.sizes), "source": spec.source})
    if args.json:
        print(json.dumps({"library": str(library_dir()), "specs": items}, indent=2))
    else:
        for item in items:
            print(f"{item['name']:<12} {item['title']:<16} sizes: {', '.join(item['sizes'])}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        if not getattr(args, "run", None):
            parser.print_help()
            return 2
        return int(args.run(args) or 0)
    except ArchcalcError as e:
        print(one_line(str(e)), file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 0
    except KeyboardInterrupt:
        print("archcalc: interrupted", file=sys.stderr)
        return 130
    except Exception as e:  # a bug: say so in one line (ARCHCALC_DEBUG=1 shows the traceback)
        if os.environ.get("ARCHCALC_DEBUG"):
            raise
        print(one_line(f"archcalc: internal error ({type(e).__name__}: {e}); please report it, "
                       "and run with ARCHCALC_DEBUG=1 for the traceback"), file=sys.stderr)
        return 3
