"""Writing files from the command line, and the command line's number types.

:func:`write_output` is the one way a command writes a file the user named with ``-o``:

- only a regular file is ever replaced, and without ``--force`` only one archcalc wrote and nobody changed since:
  the command's marker on its first lines is followed by ``sha256:`` and the first 32 hex digits of the SHA-256 of
  the file without that stamp (:func:`stamp`), and the file must still hash to it (:func:`replaceable`). A file
  that merely contains the marker (notes quoting it, a checkpoint's config.json that transformers saved after
  loading an exported one), an edited file and a file from an archcalc that wrote no hash are refused, each in
  one line naming ``--force``; a directory, FIFO, device, socket or symbolic link is refused even with
  ``--force`` (``-o /dev/null --force`` as root would otherwise replace the device node);
- ``-o newdir/`` (a trailing slash) names a folder, not a file, and is refused;
- the text goes to a temporary file beside the target, which is synced and renamed over it, so a reader sees
  the old file or the new one, never half of one; the new file gets the mode of the file it replaces, or the
  usual ``0666 & ~umask`` (not mkstemp's 0600);
- temporary files are named ``.NAME.archcalc-PID-RANDOM.tmp``: one left behind by a killed run (``kill -9``) is
  removed by the next run that writes the same file, once no process with that PID is alive;
- every failure of the file system (a missing folder, no permission, ``/proc``) is one line and exit status 2.

>>> import tempfile, pathlib
>>> folder = pathlib.Path(tempfile.mkdtemp())
>>> write_output(str(folder / "m.py"), "# made by archcalc\\nx = 1\\n", "made by archcalc", False, "written by archcalc")
>>> (folder / "m.py").read_text()
'# made by archcalc sha256:b10b75e5fa6ef7a86d6c70a5dfc20984\\nx = 1\\n'
>>> replaceable(folder / "m.py", "made by archcalc", "written by archcalc") is None  # unedited: archcalc may replace it
True
>>> _ = (folder / "m.py").write_text((folder / "m.py").read_text() + "y = 2\\n")
>>> replaceable(folder / "m.py", "made by archcalc", "written by archcalc")[:60]
'was written by archcalc but has been edited since (it no lon'
"""

from __future__ import annotations

import argparse
import errno
import hashlib
import os
import re
import secrets
import stat
from collections.abc import Callable
from pathlib import Path

from archcalc import cleanup
from archcalc.errors import UsageError

MAX_CLI_INT = 10**18  # no batch, sequence length, step count or parallel degree comes near this
_DECIMAL = re.compile(r"[0-9]+(?:_[0-9]+)*", re.ASCII)
_HEAD_BYTES = 4096  # how much of an existing file is read to look for a marker without a hash ('archcalc docs')
_WINDOW = 1 << 20  # where a marker with a hash may end: a generated module's docstring (its formula) comes first
_STAMP = re.compile(rb" sha256:([0-9a-f]{32})(?![0-9a-f])", re.ASCII)  # right after the marker: see stamp()
_STAMP_BYTES = 8 + 32
_MAX_OWN_BYTES = 64 << 20  # archcalc writes nothing near this size; a larger file is not its own (and is not read)
Normalize = Callable[[str], str] | None
_TEMP = re.compile(r"\.(?P<name>.+)\.archcalc-(?P<pid>[0-9]{1,10})-[0-9a-f]{8}\.tmp", re.ASCII)
_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISLNK, "a symbolic link"))


def positive_int(text: str) -> int:
    """A whole number from 1 to 10^18 written in ASCII digits (``1_000`` allowed), for argparse's ``type=``."""
    digits = text.strip().replace("_", "")
    if not _DECIMAL.fullmatch(text.strip()):
        raise argparse.ArgumentTypeError(f"expected a positive integer such as 8, got {text[:40]!r}")
    if len(digits.lstrip("0")) > 19 or not 1 <= int(digits) <= MAX_CLI_INT:  # int() of 5,000 digits is an error
        shown = digits if len(digits) <= 24 else f"a number of {len(digits):,} digits"
        raise argparse.ArgumentTypeError(f"expected a positive integer of at most 10^18, got {shown}")
    return int(digits)


def positive_real(text: str) -> float:
    """A finite number above zero written in ASCII (``989``, ``1.5e3``), for argparse's ``type=``."""
    if not re.fullmatch(r"\s*[0-9]+(?:\.[0-9]*)?(?:[eE][-+]?[0-9]{1,3})?\s*", text, re.ASCII):
        raise argparse.ArgumentTypeError(f"expected a positive number such as 989, got {text[:40]!r}")
    value = float(text)
    if not 1e-6 <= value <= 1e18:  # also refuses 0, 1e-320 and 1e999 (inf)
        raise argparse.ArgumentTypeError(f"expected a number from 1e-6 to 1e18, got {text.strip()[:40]}")
    return value


def stamp(text: str, marker: str, normalize: Normalize = None) -> str:
    """``text`` with `` sha256:HASH`` right after its first ``marker``: HASH is the first 32 hex digits of the SHA-256
    of ``text`` (UTF-8), so a file holding the result is archcalc's, unedited, exactly when it still hashes to HASH
    with the stamp taken out. Text that already carries a valid stamp is returned as it is (a command may stamp what
    it prints, and write the same text). The marker must end within the first MiB (where the writer looks).
    ``normalize``: what the hash covers is ``normalize(text)`` (a writer whose texts vary by machine in ways that do
    not count as a change, such as the docs' timings, masks them; the reader must pass the same function).

    >>> stamp("# by archcalc\\n", "by archcalc")
    '# by archcalc sha256:7e2d23404ecd8fc15cd032af49ff1702\\n'
    >>> stamp(_, "by archcalc") == _
    True
    """
    data = text.encode("utf-8")
    mark = marker.encode("utf-8")
    at = data.find(mark, 0, _WINDOW)
    if at < 0:
        raise ValueError(f"the marker {marker!r} is not in the first {_WINDOW} bytes of the text")
    end = at + len(mark)
    if (m := _STAMP.match(data, end)) and _digest(data[:end] + data[m.end():], normalize) == m.group(1):
        return text
    return (data[:end] + b" sha256:" + _digest(data, normalize) + data[end:]).decode("utf-8")


def _digest(content: bytes, normalize: Normalize) -> bytes:
    """The stamp's hash of ``content`` (unstamped): the first 32 hex digits of its SHA-256, or of its normalized text."""
    if normalize is not None:
        content = normalize(content.decode("utf-8", errors="replace")).encode("utf-8")
    return hashlib.sha256(content).hexdigest()[:32].encode("ascii")


def replaceable(path: Path, marker: str, what: str, hashed: bool = True, normalize: Normalize = None) -> str | None:
    """None if the regular file at ``path`` is archcalc's to replace without --force; else why not (a clause that
    follows the file name, ending with how to overwrite it anyway). ``hashed``: its marker must carry the stamp of
    :func:`stamp` (with the same ``normalize``) and the file must still hash to it (else the marker alone, in the
    first 4 KiB, decides). Reads the first MiB and, once a stamp is found there, the rest of the file (at most 64
    MiB: no larger file is archcalc's). Opened without following a symbolic link or waiting on a FIFO."""
    force = "pass --force to overwrite it"
    shown = str(path)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
        with open(fd, "rb") as f:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return "exists and is not a regular file; archcalc only replaces regular files it wrote"
            window = _WINDOW if hashed else _HEAD_BYTES
            head = f.read(window + _STAMP_BYTES)
            mark = marker.encode("utf-8")
            at = head.find(mark, 0, window)
            if at < 0:
                return f"exists and was not {what}; {force}"
            if not hashed:
                return None
            end = at + len(mark)
            m = _STAMP.match(head, end)
            if m is None:
                return (f"exists and its marker holds no content hash (an earlier archcalc wrote it, or it only quotes the "
                        f"marker), so archcalc cannot tell whether it was edited; {force}")
            if os.fstat(fd).st_size > _MAX_OWN_BYTES:
                return f"exists and was not {what} (it is larger than anything archcalc writes); {force}"
            rest = f.read(_MAX_OWN_BYTES)
    except OSError as e:
        raise UsageError(f"{shown}: exists and cannot be read ({e.strerror or e}); archcalc will not replace it") from None
    if _digest(head[:end] + head[m.end():] + rest, normalize) != m.group(1):
        return (f"was {what} but has been edited since (it no longer matches the content hash in its marker); "
                f"{force}")
    return None


def write_output(target: str | Path, text: str, marker: str, force: bool, what: str, hashed: bool = True,
                 normalize: Normalize = None) -> None:
    """Write ``text`` to ``target`` atomically, replacing only a regular file that archcalc wrote and nobody changed
    since (:func:`replaceable`; any regular file with ``force``); UsageError (exit 2) for everything else. ``what``
    says who writes such files. ``hashed`` (the default): the text is written with its content hash after ``marker``
    (:func:`stamp`, with ``normalize``), and an existing file must match its own; otherwise the marker alone decides."""
    shown = str(target)
    if shown.endswith(("/", os.sep)) or shown in ("", ".", ".."):
        raise UsageError(f"-o {shown}: names a folder; expected a file name, e.g. {shown.rstrip('/') or '.'}/out.py")
    path = Path(shown)
    folder = path.parent
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        info = None
    except OSError as e:
        raise UsageError(f"{shown}: cannot write here: {e.strerror or e}") from None
    if info is not None:
        if not stat.S_ISREG(info.st_mode):
            kind = next((name for test, name in _KINDS if test(info.st_mode)), "not a regular file")
            raise UsageError(f"{shown}: exists and is {kind}; archcalc only replaces regular files it wrote "
                             "(--force does not change that); pick another file name")
        if not force and (why := replaceable(path, marker, what, hashed, normalize)) is not None:
            raise UsageError(f"{shown}: {why}")
    try:
        if not folder.is_dir():
            raise UsageError(f"{shown}: folder {folder} does not exist (or is not a folder); create it first")
    except OSError as e:
        raise UsageError(f"{shown}: cannot write here: {e.strerror or e}") from None
    _remove_stale_temporaries(path)
    mode = stat.S_IMODE(info.st_mode) if info is not None else 0o666 & ~_umask()
    write_atomically(path, stamp(text, marker, normalize) if hashed else text, mode)


def write_atomically(target: Path, text: str, mode: int | None = None) -> None:
    """Write ``text`` to a temporary file beside ``target``, sync it and rename it over ``target``."""
    folder = target.parent
    temp = folder / f".{target.name[:100]}.archcalc-{os.getpid()}-{secrets.token_hex(4)}.tmp"
    try:
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
    except OSError as e:
        raise UsageError(f"{target}: cannot write here: {e.strerror or e}") from None
    undo = cleanup.register(lambda: temp.unlink(missing_ok=True))  # interrupted mid-write: remove it
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            os.fchmod(f.fileno(), 0o666 & ~_umask() if mode is None else mode)
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(temp, target)
    except BaseException as e:
        temp.unlink(missing_ok=True)
        cleanup.unregister(undo)
        if isinstance(e, OSError):
            reason = "the disk is full" if e.errno == errno.ENOSPC else e.strerror or str(e)
            raise UsageError(f"{target}: cannot write here: {reason}") from None
        raise
    cleanup.unregister(undo)
    _sync_folder(folder)


def _umask() -> int:
    mask = os.umask(0o022)  # the only way to read it; put it straight back
    os.umask(mask)
    return mask


def _sync_folder(folder: Path) -> None:
    """Make the rename durable (best effort: some file systems cannot open a folder)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _remove_stale_temporaries(target: Path) -> None:
    """Remove the temporary files a killed run (kill -9) left while writing ``target``: named after it, and their
    process is gone. Only these: a file of another name is never touched."""
    prefix = f".{target.name[:100]}.archcalc-"
    try:
        entries = [e for e in os.scandir(target.parent) if e.name.startswith(prefix)]
    except OSError:
        return
    for entry in entries:
        m = _TEMP.fullmatch(entry.name)
        if m is None or m["name"] != target.name[:100] or int(m["pid"]) == os.getpid() or _alive(int(m["pid"])):
            continue
        try:
            info = entry.stat(follow_symlinks=False)
            if stat.S_ISREG(info.st_mode) and info.st_uid == os.geteuid():
                os.unlink(entry.path)
        except OSError:
            pass  # gone already, or not ours to remove


def _alive(pid: int) -> bool:
    if pid <= 0:
        return True  # not a process id: leave the file alone
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True
    return True
