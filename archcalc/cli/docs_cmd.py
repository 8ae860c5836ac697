"""``archcalc docs``: write the documentation site, a complete mkdocs project, under one folder."""

from __future__ import annotations

import argparse
import contextlib
import gc
import shlex
from collections.abc import Callable
from pathlib import Path

from archcalc.errors import UsageError

CHILD = "archcalc.cli.docs_child"  # the module that runs the examples needing torch, in a child process


def register(sub, build_parser: Callable[[], argparse.ArgumentParser], main: Callable[[list[str]], int]) -> None:
    """The docs command; ``build_parser`` and ``main`` are the command line the pages document and run (handed over
    so that the site imports no command line)."""
    p = sub.add_parser(
        "docs", help="write the documentation site: mkdocs.yml and every generated page, under -o DIR",
        description=(
            "Write the documentation site as a complete mkdocs project under DIR (default: the current folder): "
            "DIR/mkdocs.yml and DIR/docs/ with the home page, the tutorial, one page per bundled spec (each with an exact "
            "calculator), the GPT-3 and reference pages and their assets. Every number is computed from the specs now. "
            "Nothing is written outside DIR, each file atomically; a file that 'archcalc docs' did not write is only "
            "replaced with --force. Then run 'mkdocs build -f DIR/mkdocs.yml' (needs pip install 'archcalc[docs]'): the "
            "site works offline, served or opened from disk. With --check nothing is written and the exit status is 1 "
            "if a file is missing or out of date."
        ),
    )
    p.add_argument("-o", "--output", default=".", metavar="DIR", help="the site's folder (default: the current folder)")
    p.add_argument("--check", action="store_true", help="write nothing; exit 1 if a file is missing or out of date")
    p.add_argument("--force", action="store_true", help="replace files that archcalc docs did not write (regular files only)")
    p.set_defaults(run=run, program=(build_parser, main))


def run(args: argparse.Namespace) -> int:
    from archcalc.site.examples import Program

    root = Path(args.output)
    if root.exists() and not root.is_dir():
        raise UsageError(f"{root}: exists and is not a folder; -o names the folder of the site")
    files = site_files(root, Program(*args.program, child=CHILD))
    try:
        return _check(root, files) if args.check else _write(root, files, args.force)
    except OSError as e:  # a folder we may not read or write: one line, exit 2
        raise UsageError(f"{e.filename or root}: {e.strerror or e}") from None


def site_files(root: Path, program) -> dict[Path, str]:
    """Every file of the site under ``root``, as 'archcalc docs' writes it: each with the hash of what it says (timings
    aside) after its marker, so a later run replaces it only while nobody has edited it (archcalc.cli.output)."""
    from archcalc.cli.output import stamp
    from archcalc.site import machine_independent, render_all
    from archcalc.site.project import MARKER

    with rare_collections():
        pages = render_all(root, program)
    return {path: stamp(text, MARKER, normalize=machine_independent) for path, text in pages.items()}


@contextlib.contextmanager
def rare_collections(young: int = 50_000):
    """Python's cycle collector every ``young`` new objects, not every 700, until the block ends. Rendering the site
    makes millions of short-lived sympy objects that form no cycles: at 700, collections took about 4% of its CPU.

    >>> before = gc.get_threshold()
    >>> with rare_collections():
    ...     gc.get_threshold()[0]
    50000
    >>> gc.get_threshold() == before
    True
    """
    threshold = gc.get_threshold()
    gc.set_threshold(young, threshold[1], threshold[2])
    try:
        yield
    finally:
        gc.set_threshold(*threshold)


def _check(root: Path, files: dict[Path, str]) -> int:
    from archcalc.site import stale

    out_of_date = stale(files)
    for path in out_of_date:
        print(f"out of date: {path}")
    print(f"{len(out_of_date)} of {len(files)} file(s) out of date; run 'archcalc docs -o {shlex.quote(str(root))}'" if out_of_date
          else f"all {len(files)} files under {root} are up to date")
    return 1 if out_of_date else 0


def _write(root: Path, files: dict[Path, str], force: bool) -> int:
    from archcalc.site import report, stale

    todo = stale(files)
    for path in todo:  # refuse before writing anything: a half-written site is worse than none
        _check_target(root, path, force)
    from archcalc.cli.output import write_output
    from archcalc.site import machine_independent
    from archcalc.site.project import MARKER

    for path in todo:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_output(path, files[path], MARKER, force, "written by archcalc docs", hashed=True, normalize=machine_independent)
    for line in report(root, todo, len(files) - len(todo)):
        print(line)
    return 0


def _check_target(root: Path, path: Path, force: bool) -> None:
    """``path`` must stay under ``root`` (no symbolic link on the way out of it) and be ours to replace."""
    base = root.resolve()
    for folder in reversed(path.parents):
        if folder == root or root not in folder.parents:
            continue
        if folder.is_symlink():
            raise UsageError(f"{folder}: is a symbolic link; archcalc docs writes only inside {root}")
        if folder.exists() and not folder.is_dir():
            raise UsageError(f"{folder}: exists and is not a folder")
    if path.is_symlink() or (path.exists() and not path.is_file()):
        raise UsageError(f"{path}: exists and is not a regular file; archcalc docs replaces only its own files")
    if not path.resolve().is_relative_to(base):
        raise UsageError(f"{path}: is outside {root}")
    if path.exists() and not force:
        from archcalc.cli.output import replaceable
        from archcalc.site import machine_independent
        from archcalc.site.project import MARKER

        if (why := replaceable(path, MARKER, "written by archcalc docs", normalize=machine_independent)) is not None:
            raise UsageError(f"{path}: {why}")
