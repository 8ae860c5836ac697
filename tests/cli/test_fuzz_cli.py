"""Property tests of the command line (issue 15): random output paths and random numbers.

Whatever the path after ``-o`` (existing files of every kind, missing folders, trailing slashes, odd names) and
whatever the numbers (digits, signs, scripts, sizes up to 10^30 and beyond), a command exits 0 or 2, prints one
line on stderr when it refuses, writes only the file it was pointed at, never changes anything it did not write,
leaves no temporary file, and its counts are exact integers.
"""

from __future__ import annotations

import json
import os
import stat
from fractions import Fraction
from pathlib import Path

from hypothesis import HealthCheck, given
from hypothesis import strategies as st

from archcalc.cli import main
from archcalc.codegen.emit import MARKER as OURS  # generate's marker
from tests.helpers import examples

SETTINGS = examples(120, suppress_health_check=[HealthCheck.function_scoped_fixture])


def run(capsys, *argv: str) -> tuple[int, str, str]:
    status = main(list(argv))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def snapshot(folder: Path) -> dict[str, tuple[int, bytes | None]]:
    """Every entry under ``folder``: its kind and, for regular files, its bytes."""
    out = {}
    for path in sorted(folder.rglob("*")):
        info = os.lstat(path)
        out[str(path.relative_to(folder))] = (stat.S_IFMT(info.st_mode), path.read_bytes() if stat.S_ISREG(info.st_mode) else None)
    return out


NAMES = st.one_of(
    st.sampled_from(["m.py", "a b.py", "x\ny.py", "-", "ü.py", ".hidden.py", "x" * 255, "x" * 256, "m.py.archcalc-1-00000000.tmp"]),
    st.text(alphabet=st.characters(codec="utf-8", exclude_characters="/\x00"), min_size=1, max_size=20),
)
EXISTING = st.sampled_from(["nothing", "ours", "theirs", "directory", "fifo", "symlink", "dangling-symlink", "file-parent"])


def make(folder: Path, name: str, kind: str) -> None:
    path = folder / name
    if kind == "ours":
        path.write_text(OURS + "\n")
    elif kind == "theirs":
        path.write_text("my own notes\n")
    elif kind == "directory":
        path.mkdir()
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "symlink":
        (folder / "elsewhere.txt").write_text("elsewhere\n")
        path.symlink_to(folder / "elsewhere.txt")
    elif kind == "dangling-symlink":
        path.symlink_to(folder / "missing.txt")


@SETTINGS
@given(name=NAMES, kind=EXISTING, force=st.booleans(), slash=st.booleans(), parent=st.sampled_from(["", "sub/", "missing/", "../"]))
def test_output_paths(capsys, tmp_path_factory, name, kind, force, slash, parent):
    root = tmp_path_factory.mktemp("out")
    folder = root / "work"
    (folder / "sub").mkdir(parents=True)
    where = folder / parent.rstrip("/") if parent and parent != "missing/" else folder
    if kind == "file-parent":
        (folder / "plain").write_text("x")
        parent, kind = "plain/", "nothing"
    if len(name.encode()) <= 255 and name not in ("-", ".", "..") and where.exists():
        try:
            make(where, name, kind)
        except OSError:
            kind = "nothing"
    before = snapshot(root)
    target = str(folder / parent / name) + ("/" if slash else "")
    argv = ["generate", "gpt2", "--size", "small", "--set", "L=1", "-o", target] + (["--force"] if force else [])
    status, out, err = run(capsys, *argv)
    assert status in (0, 2), (status, err)
    assert "Traceback" not in err
    after = snapshot(root)
    named = os.path.relpath(os.path.realpath(target), os.path.realpath(root)) if status == 0 else None
    assert not [p for p in after if ".archcalc-" in p and p not in before and p != named], after  # no temporary file
    if status == 2:
        assert err.count("\n") == 1 and out == "", err
        assert after == before  # nothing changed
        return
    written = Path(target)
    assert written.is_file() and not written.is_symlink()
    changed = {p for p in set(after) | set(before) if after.get(p) != before.get(p)}
    assert changed == {str(written.resolve().relative_to(root.resolve()))}, changed
    old = before.get(str(written.resolve().relative_to(root.resolve())))
    assert old is None or old[1].startswith(OURS.encode()) or force  # replaced only what it wrote, or --force


CLI_NUMBERS = st.one_of(
    st.integers(min_value=-5, max_value=10**30).map(str),
    st.integers(min_value=1, max_value=4096).map(str),
    st.sampled_from(["0", "-1", "1e3", "1.5", "0x10", "1__2", "1_024", "١٢", "１２", "nan", "inf", "", " 8 ", "+8",
                     "9" * 19, "1" + "0" * 18, "1" + "0" * 4000]),
    st.text(max_size=8),
)


@SETTINGS
@given(seq=CLI_NUMBERS, batch=CLI_NUMBERS, tp=st.sampled_from(["1", "2", "3", "4", "6", "12", "5", "0", "١"]))
def test_numbers_on_the_command_line(capsys, seq, batch, tp):
    for argv in (["memory", "gpt2", "--size", "small", "--seq-len", seq, "--batch", batch, "--tp", tp, "--json"],
                 ["flops", "gpt2", "--size", "small", "--seq-len", seq, "--batch", batch, "--json"]):
        status, out, err = run(capsys, *argv)
        assert status in (0, 2), (status, err)
        assert "Traceback" not in err
        if status == 2:
            assert err.count("\n") == 1 and out == "", err
            continue
        result = json.loads(out)["results"][0]
        counts = [result.get(k) for k in ("weights_bytes", "kv_cache_bytes", "forward_matmul", "train_step_matmul")]
        assert all(isinstance(v, int) for v in counts if v is not None)
        if argv[0] == "flops":
            tokens = int(seq.replace("_", "")) * int(batch.replace("_", ""))
            assert Fraction(result["per_token"]["forward_matmul"]) * tokens == result["forward_matmul"]
