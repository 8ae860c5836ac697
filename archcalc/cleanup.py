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


def temporary_folder(prefix: str) -> tuple[str, int]:
    """A new, empty folder in the temporary directory, and the key of its removal: registered before the folder is
    made, so a signal at any point leaves nothing behind (between ``tempfile.mkdtemp`` returning and a ``register``
    call after it, one would). The caller removes the folder and unregisters the key when done.

    >>> import os, shutil
    >>> path, key = temporary_folder("archcalc-doctest-")
    >>> os.path.isdir(path) and os.listdir(path) == []
    True
    >>> shutil.rmtree(path); unregister(key)
    """
    import os
    import secrets
    import shutil
    import tempfile

    path = os.path.join(tempfile.gettempdir(), prefix + secrets.token_hex(8))
    while os.path.lexists(path):  # (64 random bits: in practice never)
        path = os.path.join(tempfile.gettempdir(), prefix + secrets.token_hex(8))
    key = register(lambda: shutil.rmtree(path, ignore_errors=True))
    try:
        os.mkdir(path, 0o700)
    except BaseException:
        unregister(key)
        raise
    return path, key


def torch_cache_tidier() -> Callable[[], None]:
    """A function that removes torch's compile cache folder from the temporary directory if it was not there when
    this was called and is still empty then. torch creates ``<tmp>/torchinductor_<user>`` as soon as ``torch._dynamo``
    is imported (torch 2.13: building a module on the meta device does), even when nothing is compiled; archcalc
    leaves nothing behind in the temporary directory. A folder torch filled (a compiled run) is its cache and is kept,
    as is one the user named with TORCHINDUCTOR_CACHE_DIR.

    >>> import os
    >>> tidy = torch_cache_tidier()
    >>> tidy()  # nothing was created: nothing to do
    """
    import getpass
    import os
    import re
    import tempfile

    if "TORCHINDUCTOR_CACHE_DIR" in os.environ:
        return lambda: None
    try:
        user = re.sub(r'[\\/:*?"<>|]', "_", getpass.getuser())  # as torch's default_cache_dir names it
    except (KeyError, ModuleNotFoundError, OSError):
        return lambda: None
    folder = os.path.join(tempfile.gettempdir(), "torchinductor_" + user)
    if os.path.lexists(folder):
        return lambda: None

    def tidy() -> None:
        try:
            os.rmdir(folder)  # only an empty folder: a filled cache stays
        except OSError:
            pass

    return tidy
