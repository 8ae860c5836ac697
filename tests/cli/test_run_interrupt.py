"""Ctrl-C and SIGTERM during ``archcalc run --nproc`` (issue 26): one line, exit 130 (143), no process of the run left
and no temporary file -- torch's launcher, run in archcalc's own process, used to take the signal over: the ranks'
tracebacks, a 30 s wait and exit 2 ("Process N got signal: 2").

Every process of the run inherits a marker in its environment; after archcalc has exited, none may be left (a killed
process whose parent was killed too is a zombie until init reaps it: it runs nothing, and its environment is empty)."""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import time
import uuid
from pathlib import Path

import pytest

pytest.importorskip("torch.distributed")

ROOT = Path(__file__).resolve().parents[2]
TINY = ["-m", "archcalc", "run", "gpt2", "--size", "small", "--set", "L=2", "--set", "d=32", "--set", "H=4", "--set", "V=97",
        "--set", "T=32", "--nproc", "2", "--device", "cpu", "--batch", "2", "--seq-len", "8", "--steps", "1000000"]
STARTED = "2 processes started"
PATIENCE = 600  # seconds to wait for the ranks to start (a bound against a hang, not a timing assertion)


def _marked(marker: str) -> list[int]:
    """Processes whose environment holds ``marker``."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if marker.encode() in Path(f"/proc/{pid}/environ").read_bytes():
                found.append(int(pid))
        except OSError:  # gone meanwhile, or not ours to read
            pass
    return found


def _read_until(stream, text: str) -> str:
    """What ``stream`` says up to and including the line that holds ``text`` (or everything, if it ends first)."""
    selector = selectors.DefaultSelector()
    selector.register(stream, selectors.EVENT_READ)
    seen, deadline = "", time.monotonic() + PATIENCE
    while not (text in seen and "\n" in seen[seen.index(text):]) and time.monotonic() < deadline:  # the whole line
        if selector.select(timeout=1):
            chunk = os.read(stream.fileno(), 4096).decode()
            if not chunk:
                break
            seen += chunk
    return seen


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="reads /proc")
@pytest.mark.parametrize("signum, status, line", [(signal.SIGINT, 130, "archcalc: interrupted"),
                                                  (signal.SIGTERM, 143, "archcalc: terminated")], ids=["SIGINT", "SIGTERM"])
def test_a_signal_during_a_sharded_run_ends_every_rank_in_one_line(process, tmp_path, signum, status, line):
    marker = uuid.uuid4().hex
    env = {**os.environ, "ARCHCALC_TEST_MARKER": marker, "TMPDIR": str(tmp_path)}
    proc = process.popen(TINY, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    try:
        before = _read_until(proc.stderr, STARTED)
        assert STARTED in before, before[-2000:]
        assert len(_marked(marker)) >= 4  # archcalc, the launcher and the two ranks
        proc.send_signal(signum)
        out, err = proc.communicate(timeout=PATIENCE)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == status, err
    assert err.decode() == line + "\n" and out == b""
    assert _marked(marker) == []
    assert list(tmp_path.iterdir()) == []  # the launcher's logs and the ranks' files went under TMPDIR, and are gone


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="reads /proc")
def test_ctrl_c_at_the_terminal_reaches_archcalc_alone(process, tmp_path):
    """A terminal sends SIGINT to its whole foreground process group: the ranks, in a session of their own, do not get
    it (no tracebacks of theirs); archcalc ends them."""
    marker = uuid.uuid4().hex
    env = {**os.environ, "ARCHCALC_TEST_MARKER": marker, "TMPDIR": str(tmp_path)}
    proc = process.popen(TINY, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    try:
        assert STARTED in _read_until(proc.stderr, STARTED)
        os.killpg(proc.pid, signal.SIGINT)  # archcalc's own group, as the terminal's Ctrl-C
        out, err = proc.communicate(timeout=PATIENCE)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 130 and err.decode() == "archcalc: interrupted\n", err
    assert _marked(marker) == [] and list(tmp_path.iterdir()) == []
