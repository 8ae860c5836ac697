"""The ``archcalc`` command line.

Exit status: 0 ok, 1 a check failed, 2 bad input or usage (one line on stderr, never a traceback).
Symbolic commands never import torch.
"""

from __future__ import annotations

import argparse
import io
import os
import signal
import sys
from collections.abc import Sequence

from archcalc import __version__, cleanup
from archcalc.cli.args import SPEC_HELP, add_size_options, add_spec_argument, spec_from_args
from archcalc.errors import ArchcalcError, UsageError, one_line

__all__ = ["SPEC_HELP", "add_size_options", "add_spec_argument", "build_parser", "main", "spec_from_args"]

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
  archcalc count gpt2 --size small --set qkv_bias=false --set tie_embeddings=false
  archcalc flops gpt2 --size small --seq-len 1024   exact FLOPs and the 6N/Kaplan/Chinchilla/PaLM ratios
  archcalc memory gpt3 --size 175b --seq-len 2048 --batch 1 --dp 64 --zero 3 --tp 8
  archcalc infer llama --size 2-7b --hardware a100-80gb --batch 1 --prompt 512 --new-tokens 128
  archcalc solve gpt3 --target-params 100T --fix L=512   the width of a 100T GPT-3 with 512 layers
  archcalc plan llama --size 3.1-405b --gpus 16384 --hardware h100 --tokens 15.6T --seq-len 8192
                                               the parallel plans that fit, ranked; days, GPU-hours, cost
  archcalc serve llama --size 3-8b --hardware h100 --context 8192   paged KV blocks: how many sequences fit
  archcalc generate gpt2 --size small -o gpt2_small.py   a readable PyTorch module
  archcalc verify gpt3                         every GPT-3 size built on the meta device vs. the count
  archcalc run gpt2 --size small --steps 20    train on random tokens, report tokens/s
  archcalc count --hf config.json              a transformers config, counted as transformers builds it
  archcalc import-hf config.json -o model.yaml the spec of a transformers config, to read or edit
  archcalc export-hf llama --size 3-8b -o config.json   the other way: a size as a transformers config.json
  archcalc docs && mkdocs build --strict       the documentation site

exit status: 0 ok, 1 a check failed (verify), 2 bad input or usage (a one-line message on stderr).
"""


class _Parser(argparse.ArgumentParser):
    """argparse that raises UsageError (one line, exit 2) instead of printing usage and exiting."""

    _argv: list[str] = []

    def parse_known_args(self, args=None, namespace=None):  # type: ignore[override]
        self._argv = list(sys.argv[1:] if args is None else args)  # what error() quotes back
        return super().parse_known_args(args, namespace)

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"{self.prog}: {_dashed_value(message, self._argv) or message} (see {self.prog} --help)")


def _dashed_value(message: str, argv: list[str]) -> str | None:
    """argparse reads a value that starts with '-' (``--target-params -3B``) as an option and says only "expected
    one argument": name the value, and how to pass one that starts with '-'."""
    prefix, suffix = "argument ", ": expected one argument"
    if not (message.startswith(prefix) and message.endswith(suffix)):
        return None
    option = message[len(prefix):-len(suffix)].split("/")[-1]
    following = next((argv[i + 1] for i, a in enumerate(argv[:-1]) if a == option), None)
    if following is None or not following.startswith("-") or following.startswith("--"):
        return None
    return (f"{option} {following}: expected a value after {option}, but {following!r} starts with '-' and reads as an "
            f"option (to give it as the value anyway: {option}={following})")


def build_parser() -> argparse.ArgumentParser:
    from archcalc.cli import (
        codegen_cmd,
        count_cmd,
        docs_cmd,
        flops_cmd,
        hf_cmd,
        infer_cmd,
        memory_cmd,
        plan_cmd,
        run_cmd,
        serve_cmd,
        solve_cmd,
    )

    parser = _Parser(
        prog="archcalc", description=DESCRIPTION, epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"archcalc {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    count_cmd.register(sub)
    flops_cmd.register(sub)
    memory_cmd.register(sub)
    infer_cmd.register(sub)
    solve_cmd.register(sub)
    plan_cmd.register(sub)
    serve_cmd.register(sub)
    codegen_cmd.register(sub)
    run_cmd.register(sub)
    hf_cmd.register(sub)
    docs_cmd.register(sub, build_parser, main)  # the pages document this parser and run main's commands
    specs = sub.add_parser(
        "specs", help="list the bundled specs and their sizes",
        description="List the bundled specs (usable by name, e.g. 'archcalc count gpt3') and their sizes.",
    )
    specs.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    specs.set_defaults(run=_list_specs)
    return parser


_BUILT: list = []  # [(build_parser as it was, its parser)]


def _parser() -> argparse.ArgumentParser:
    """The parser, built once a process by :func:`build_parser` (looked up at each call, so that a replaced one is
    used): a docs build runs some twenty commands in its own process. Parsing leaves no state behind but the argv
    that :class:`_Parser` quotes in its errors, set again by every parse."""
    if not _BUILT or _BUILT[0][0] is not build_parser:
        _BUILT[:] = [(build_parser, build_parser())]
    return _BUILT[0][1]


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
        name_width = max(len(item["name"]) for item in items)
        title_width = max(len(item["title"] or "") for item in items)
        for item in items:  # columns as wide as the longest name and title, so every row lines up
            print(f"{item['name']:<{name_width}}  {item['title'] or '':<{title_width}}  sizes: {', '.join(item['sizes'])}")
    return 0


def _on_interrupt(signum, frame) -> None:
    """Ctrl-C (or SIGTERM): undo what :mod:`archcalc.cleanup` holds (the temporary file of a write in progress, the
    docs' example folders and their child process), say so in one line, and leave with status 130 (143 for SIGTERM).
    Exiting here rather than raising KeyboardInterrupt: raised in the middle of an import it can surface as another
    exception (pydantic_core panics when ``datetime`` is cut short) or in a callback Python only reports."""
    try:
        cleanup = sys.modules.get("archcalc.cleanup")  # not imported yet: nothing registered to undo
        if cleanup is not None:
            cleanup.undo_all()
        # the docs' examples run archcalc in this process with stderr captured in a StringIO: say it on the real one
        stream = sys.__stderr__ if isinstance(sys.stderr, io.StringIO) and sys.__stderr__ is not None else sys.stderr
        stream.write("archcalc: interrupted\n" if signum == signal.SIGINT else "archcalc: terminated\n")
        stream.flush()
    finally:
        os._exit(130 if signum == signal.SIGINT else 128 + signum)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status. Ctrl-C at any point, even while the parser is being built or
    sympy and pydantic are imported (the first half second), is one line and status 130, never a traceback."""
    previous: dict[int, object] = {}
    tidy = cleanup.torch_cache_tidier()
    tidy_key = cleanup.register(tidy)  # also on Ctrl-C
    try:
        try:
            for signum in (signal.SIGINT, signal.SIGTERM):
                previous[signum] = signal.signal(signum, _on_interrupt)
        except ValueError:  # not the main thread: leave signals alone
            pass
        return _main(argv)
    except KeyboardInterrupt:  # before the handler was in place, or raised by other code
        print("archcalc: interrupted", file=sys.stderr)
        return 130
    finally:
        tidy()  # torch's empty compile-cache folder, if this run made it
        cleanup.unregister(tidy_key)
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def _main(argv: Sequence[str] | None) -> int:
    args = None
    try:
        parser = _parser()
        args = parser.parse_args(argv)
        if not getattr(args, "run", None):
            commands = ", ".join(sorted(parser._subparsers._group_actions[0].choices))  # type: ignore[union-attr]
            raise UsageError(f"archcalc: expected a command, one of: {commands} (see archcalc --help)")
        return int(args.run(args) or 0)
    except ArchcalcError as e:
        print(one_line(_located(e, args)), file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 0
    except Exception as e:  # a bug: say so in one line (ARCHCALC_DEBUG=1 shows the traceback)
        if os.environ.get("ARCHCALC_DEBUG"):
            raise
        print(one_line(f"archcalc: internal error ({type(e).__name__}: {e}); please report it, "
                       "and run with ARCHCALC_DEBUG=1 for the traceback"), file=sys.stderr)
        return 3


def _located(error: ArchcalcError, args: argparse.Namespace | None) -> str:
    """The error's message; a refusal from the code generator (which knows no file) gets the spec file's place:
    the field it names (``error.loc``, a path in the spec) or the ``model:`` section, as ``FILE:LINE:COL:``."""
    spec = getattr(args, "loaded_spec", None)
    if type(error).__module__ != "archcalc.codegen.errors" or spec is None:
        return str(error)
    from archcalc.spec.loader import where

    return f"{where(spec, tuple(getattr(error, 'loc', None) or ('model',)))}: {error}"
