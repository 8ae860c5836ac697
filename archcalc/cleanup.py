"""What to undo if the process is stopped midway (Ctrl-C, SIGTERM): temporary files and folders, child processes.

Code that creates such a thing (the writer's temporary file, the docs' example folders and their child process)
registers a function that removes it, and unregisters it once the thing is gone; the command line's signal handler
(:func:`archcalc.cli._on_interrupt`) calls :func:`undo_all` before it exits with ``os._exit``, which runs no
finalizers (a ``tempfile.TemporaryDirectory`` would otherwise stay behind).

>>> import tempfile, pathlib, shutil
>>> folder = tempfile.mkdtemp()
>>> key = register(lambda: shutil.rmtree(folder, ignore_errors=True))
>>> undo_all()
>>> pathlib.Path(folder).exists()
False
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

_undo: dict[int, Callable[[], None]] = {}
_keys = itertools.count()


def register(undo: Callable[[], None]) -> int:
    """Remember ``undo`` (called at most once, on interruption); the key unregisters it."""
    key = next(_keys)
    _undo[key] = undo
    return key


def unregister(key: int) -> None:
    _undo.pop(key, None)


def undo_all() -> None:
    """Call every registered function, newest first; one that fails does not stop the others."""
    for key in sorted(_undo, reverse=True):
        undo = _undo.pop(key, None)
        try:
            if undo is not None:
                undo()
        except Exception:  # best effort: the process is exiting
            pass
