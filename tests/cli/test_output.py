"""Where commands write (issue 15): only where pointed, atomically, never over what archcalc did not write, no
temporary files left (also after kill -9), the usual umask-derived mode, and every refusal one line and exit 2."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
from pathlib import Path

import pytest

from archcalc.cli.output import write_output

ROOT = Path(__file__).resolve().parents[2]
CONFIG = {"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 4,
          "num_hidden_layers": 2, "intermediate_size": 128, "vocab_size": 100}


def writers(tmp_path: Path) -> dict[str, list[str]]:
    """Every command that writes a file with -o, as argv without the -o value."""
    config = tmp_path / "config.json"
    config.write_text(json.dumps(CONFIG))
    return {
        "generate": ["generate", "gpt2", "--size", "small", "--set", "L=1", "-o"],
        "import-hf": ["import-hf", str(config), "-o"],
        "export-hf": ["export-hf", "gpt2", "--size", "small", "-o"],
    }


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if ".archcalc-" in p.name or p.name.endswith(".tmp"))


def one_line_exit_2(run) -> str:
    assert run.status == 2, (run.status, run.err)
    assert run.out == "" and "Traceback" not in run.err and run.err.count("\n") == 1, run.err
    return run.err.strip()


TARGETS = {  # id: (make the target in tmp_path -> the -o text, --force?, words the message must hold)
    "fifo": (lambda d: (os.mkfifo(d / "f"), str(d / "f"))[1], False, "FIFO"),
    "fifo-force": (lambda d: (os.mkfifo(d / "f"), str(d / "f"))[1], True, "FIFO"),
    "directory-force": (lambda d: ((d / "adir").mkdir(), str(d / "adir"))[1], True, "directory"),
    "dev-null-force": (lambda d: "/dev/null", True, "character device"),
    "symlink-force": (lambda d: ((d / "l.py").symlink_to(d / "gone.py"), str(d / "l.py"))[1], True, "symbolic link"),
    "trailing-slash-new": (lambda d: str(d / "newdir") + "/", False, "names a folder"),
    "trailing-slash-existing": (lambda d: ((d / "adir").mkdir(), str(d / "adir") + "/")[1], True, "names a folder"),
    "missing-folder": (lambda d: str(d / "nope" / "x.py"), False, "does not exist"),
    "file-as-folder": (lambda d: ((d / "file").write_text("x"), str(d / "file" / "x.py"))[1], False, "Not a directory"),
    "proc": (lambda d: "/proc/archcalc-x.py", False, "cannot write"),
    "not-ours": (lambda d: ((d / "mine.py").write_text("my notes\n"), str(d / "mine.py"))[1], False, "--force"),
}


@pytest.mark.parametrize("make, force, words", TARGETS.values(), ids=TARGETS.keys())
@pytest.mark.parametrize("command", ["generate", "import-hf", "export-hf"])
def test_refused_targets_are_left_alone(cli, tmp_path, command, make, force, words):
    folder = tmp_path / "work"
    folder.mkdir()
    target = make(folder)
    before = sorted((p.name, stat.S_IFMT(os.lstat(p).st_mode)) for p in folder.iterdir())
    argv = writers(tmp_path)[command] + [target] + (["--force"] if force else [])
    message = one_line_exit_2(cli(*argv))
    assert words in message, message
    assert sorted((p.name, stat.S_IFMT(os.lstat(p).st_mode)) for p in folder.iterdir()) == before
    assert leftovers(folder) == []
    if (folder / "mine.py").exists():
        assert (folder / "mine.py").read_text() == "my notes\n"


@pytest.mark.parametrize("command", ["generate", "import-hf", "export-hf"])
def test_written_atomically_with_the_umask_mode_and_rewritten_when_ours(cli, tmp_path, command):
    target = tmp_path / "out.file"
    argv = writers(tmp_path)[command]
    old = os.umask(0o027)
    try:
        run = cli(*argv, str(target))
    finally:
        os.umask(old)
    assert run.status == 0, run.err
    assert stat.S_IMODE(target.stat().st_mode) == 0o640  # 0666 & ~027, not mkstemp's 0600
    target.chmod(0o604)
    assert cli(*argv, str(target)).status == 0  # ours: replaced without --force, keeping its mode
    assert stat.S_IMODE(target.stat().st_mode) == 0o604
    assert leftovers(tmp_path) == []


def test_force_replaces_a_regular_file_only(cli, tmp_path):
    target = tmp_path / "notes.py"
    target.write_text("my notes\n")
    assert cli("generate", "gpt2", "--size", "small", "-o", str(target), "--force").status == 0
    assert "archcalc" in target.read_text()


def test_a_refused_write_leaves_no_temporary_file(cli, tmp_path, monkeypatch):
    """A failure after the temporary file exists (the rename) removes it and is one line, exit 2."""

    def refuse(src, dst):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(os, "replace", refuse)
    message = one_line_exit_2(cli("generate", "gpt2", "--size", "small", "-o", str(tmp_path / "m.py")))
    assert "Permission denied" in message
    assert list(tmp_path.iterdir()) == []


KILLED_WRITER = """
import os, sys, time
import archcalc.cli.output as out
real_replace = os.replace
def hang(src, dst):
    print("written", flush=True)
    time.sleep(120)
os.replace = hang
out.write_output(sys.argv[1], "# by archcalc\\n", "by archcalc", False, "written by archcalc")
"""


def test_kill_9_mid_write_leaves_a_temporary_file_the_next_run_removes(process, cli, tmp_path):
    target = tmp_path / "m.py"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = process.popen(["-c", KILLED_WRITER, str(target)], stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert proc.stdout.readline().strip() == "written"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
    stale = leftovers(tmp_path)
    assert len(stale) == 1 and f"archcalc-{proc.pid}-" in stale[0] and not target.exists()
    other = tmp_path / ".m.py.archcalc-1-0123abcd.tmp"  # "pid 1" is alive: not a file of a dead run
    other.write_text("x")
    assert cli("generate", "gpt2", "--size", "small", "-o", str(target)).status == 0
    assert leftovers(tmp_path) == [other.name] and "archcalc" in target.read_text()


def test_the_writer_api_refuses_in_one_line(tmp_path):
    from archcalc.errors import UsageError

    (tmp_path / "d").mkdir()
    with pytest.raises(UsageError, match="directory"):
        write_output(tmp_path / "d", "x", "m", True, "written by archcalc")
    os.mkfifo(tmp_path / "f")
    with pytest.raises(UsageError, match="FIFO"):
        write_output(str(tmp_path / "f"), "x", "m", False, "written by archcalc")  # never opened (that would block)


INTERRUPTED_WRITER = """
import os, sys, time
real_replace = os.replace
def hang(src, dst):
    print("written", flush=True)
    time.sleep(120)
os.replace = hang
from archcalc.cli import main
sys.exit(main(["generate", "gpt2", "--size", "small", "-o", sys.argv[1]]))
"""


def test_ctrl_c_mid_write_removes_the_temporary_file(process, tmp_path):
    target = tmp_path / "m.py"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = process.popen(["-c", INTERRUPTED_WRITER, str(target)], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=env)
    assert proc.stdout.readline().strip() == "written"
    assert len(leftovers(tmp_path)) == 1
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=60) == 130
    assert proc.stderr.read() == "archcalc: interrupted\n"
    assert list(tmp_path.iterdir()) == []
