"""Commands run for real when the pages are built: the home page's examples and the tutorial.

A script is a list of steps (write a file, run a command, show the head of a file), run in order in a
fresh temporary folder, so every output on the page is what the program printed. Commands that need
torch (``verify``, ``run``, a training script) of every script run in one child process, each in a forked
copy of it (torch imported once; each command's memory its own): ``archcalc docs`` itself never imports torch. Their output (timings, losses, core counts) and the install path that
``count`` prints vary by machine: it goes between ``<!-- varies -->`` markers, inside which page
comparisons ignore digits and absolute paths.

The site imports no command line (``archcalc docs`` imports the site): the docs command hands it over as a
:class:`Program`.

>>> from archcalc.cli import build_parser, main
>>> out = run_script((Write("a.txt", "x"), Run(("specs",))), Program(build_parser, main, "archcalc.cli.docs_child"))
>>> out[1].status, "gpt2" in out[1].text
(0, True)
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import io
import json
import os
import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from archcalc import cleanup

VARIES, END_VARIES = "<!-- varies -->", "<!-- /varies -->"


@dataclass(frozen=True)
class Program:
    """The command line that the pages show and run, handed over by ``archcalc docs``: ``parser()`` builds its argument
    parser (the reference pages), ``main(argv)`` runs a command in this process, and ``child`` is the module that runs
    the commands needing torch in a child process (``python -m CHILD``; see :func:`serve_child`)."""

    parser: Callable[[], argparse.ArgumentParser]
    main: Callable[[list[str]], int]
    child: str


@dataclass(frozen=True)
class Write:
    """The reader writes ``name`` with ``text`` (shown on the page unless ``show`` is false)."""

    name: str
    text: str
    show: bool = True


@dataclass(frozen=True)
class Run:
    """``archcalc ARGV`` (or ``python ARGV`` when ``python``), run in the script's folder."""

    argv: tuple[str, ...]
    torch: bool = False
    varies: bool = False
    python: bool = False

    @property
    def line(self) -> str:
        return shlex.join(["python" if self.python else "archcalc", *self.argv])


@dataclass(frozen=True)
class Head:
    """``head -n LINES NAME``."""

    name: str
    lines: int

    @property
    def line(self) -> str:
        return f"head -n {self.lines} {self.name}"


@dataclass(frozen=True)
class Output:
    status: int
    text: str


Step = Write | Run | Head


class _Child:
    """The one child process that runs the torch commands of every script prefetched before :func:`launch` (one
    import of torch for all of them), each command in its script's folder. It starts before it has them (see
    :func:`start`): it imports torch while this process runs the other commands, then reads its commands on stdin."""

    def __init__(self, program: Program):
        self.child = program.child
        self.count = 0
        self.results: list[Output] | None = None
        # its working folder (nothing in it to import), then the process: each undo is registered before the thing it
        # undoes exists, since a signal may come at any point (Popen is Python code: stop() takes what is there)
        self.home, self.home_key = cleanup.temporary_folder("archcalc-docs-")
        self.process: subprocess.Popen | None = None
        self.undo = cleanup.register(self.stop)
        self.process = _start_child(program.child, self.home)

    def send(self, requests: list[tuple[Run, str]]) -> None:
        self.count = len(requests)
        data = json.dumps([{"argv": list(s.argv), "python": s.python, "folder": folder} for s, folder in requests])
        stdin, self.process.stdin = self.process.stdin, None  # closed here: communicate() must not flush it
        try:
            stdin.write(data)  # type: ignore[union-attr]
            stdin.close()  # type: ignore[union-attr]
        except OSError:  # it has ended already (torch missing): outputs() says why
            pass

    def outputs(self) -> list[Output]:
        if self.results is None:
            try:
                self.results = _finish_child(self.process, self.count)
            finally:
                self.stop()
        return self.results

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)
        shutil.rmtree(self.home, ignore_errors=True)
        cleanup.unregister(self.undo)
        cleanup.unregister(self.home_key)


class _Pending:
    """A script under way: the steps that need no torch have run; the child process runs the others."""

    def __init__(self, steps: tuple[Step, ...], program: Program):
        later = [i for i, s in enumerate(steps) if isinstance(s, Run) and s.torch]
        written_before = {s.name for s in steps[: later[0]] if isinstance(s, Write)} if later else set()
        if later and any(isinstance(s, Write) and s.name in written_before for s in steps[later[0]:]):
            raise ValueError("a file the torch commands may read is rewritten after them (they run last, together)")
        self.steps, self.later, self.program = steps, later, program
        self.out: list[Output | None] = [None] * len(steps)
        self.child: _Child | None = None
        self.first = 0  # this script's first request in its child's
        # interrupted, os._exit runs no finalizer: the folder's removal is registered before it exists, and then the
        # child's stop (undone newest first: the child stops before its folder goes)
        self.folder, self.folder_key = cleanup.temporary_folder("archcalc-docs-")
        self.undo = cleanup.register(self._stop_child)
        folder = self.folder
        for i, step in enumerate(steps):
            if isinstance(step, Write):
                Path(folder, step.name).write_text(step.text, encoding="utf-8")
            elif isinstance(step, Head):
                lines = Path(folder, step.name).read_text(encoding="utf-8").splitlines()[: step.lines]
                self.out[i] = Output(0, "\n".join(lines))
            elif not step.torch:
                self.out[i] = _in_process(step, folder, program.main)

    def finish(self) -> list[Output | None]:
        try:
            if self.later and self.child is None:
                launch()
            if self.child is not None:
                results = self.child.outputs()[self.first: self.first + len(self.later)]
                for i, result in zip(self.later, results, strict=True):
                    self.out[i] = result
        finally:
            shutil.rmtree(self.folder, ignore_errors=True)
            cleanup.unregister(self.undo)
            cleanup.unregister(self.folder_key)
        return self.out

    def _stop_child(self) -> None:
        """Interrupted: stop the child (it writes into the folder, which its own undo removes next)."""
        if self.child is not None:
            self.child.stop()


_CACHE: dict[str, list[Output | None]] = {}
_PENDING: dict[str, _Pending] = {}


def prefetch(steps: tuple[Step, ...], program: Program) -> None:
    """Run the steps that need no torch now; their torch commands wait for :func:`launch`, which starts one child
    process for those of every script prefetched before it, without waiting for it."""
    key = repr(steps)
    if key not in _CACHE and key not in _PENDING:
        _PENDING[key] = _Pending(steps, program)


_STARTED: list[_Child] = []  # a child process started by start(), waiting for its commands


def stop_started() -> None:
    """Stop the child process :func:`start` started, if no :func:`launch` took it (and remove its folder)."""
    while _STARTED:
        _STARTED.pop().stop()


atexit.register(stop_started)  # a build that failed before launch(): the child and its folder go with this process


def start(program: Program) -> None:
    """Start the child process for the torch commands now (it imports torch meanwhile); :func:`launch` gives it the
    commands of the scripts prefetched by then."""
    if not _STARTED:
        _STARTED.append(_Child(program))


def launch() -> None:
    """Give the child process (the one :func:`start` started, else a new one) the torch commands of the prefetched
    scripts that have none yet, in the order they were prefetched: they run while the pages render."""
    waiting = [p for p in _PENDING.values() if p.later and p.child is None]
    if not waiting:  # every script ran before (or needs no torch): the child started for them is not needed
        stop_started()
        return
    requests: list[tuple[Run, str]] = []
    for pending in waiting:
        pending.first = len(requests)
        requests += [(pending.steps[i], pending.folder) for i in pending.later]
    started = _STARTED.pop() if _STARTED else None
    child = started if started is not None and started.child == waiting[0].program.child else _Child(waiting[0].program)
    if started is not None and started is not child:
        started.stop()
    child.send(requests)
    for pending in waiting:
        pending.child = child


def run_script(steps: tuple[Step, ...], program: Program) -> list[Output | None]:
    """Each step's output (None for a write), from one run in a new temporary folder (cached per process)."""
    key = repr(steps)
    if key not in _CACHE:
        prefetch(steps, program)
        _CACHE[key] = _PENDING.pop(key).finish()
    return _CACHE[key]


def _in_process(step: Run, folder: str, main: Callable[[list[str]], int]) -> Output:
    stdout, stderr = io.StringIO(), io.StringIO()
    here = os.getcwd()
    try:
        os.chdir(folder)
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
            status = main(list(step.argv))
    finally:
        os.chdir(here)
    return Output(status, _shown(status, stdout.getvalue(), stderr.getvalue()))


def _shown(status: int, out: str, err: str) -> str:
    """What a reader sees: the output, and on failure the one-line error (progress bars on stderr left out)."""
    return (out + (err if status else "")).rstrip("\n")


def _start_child(child: str, home: str) -> subprocess.Popen:
    package_root = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [package_root, os.environ.get("PYTHONPATH")])),
           "OMP_NUM_THREADS": "1",  # one thread: on a busy machine more threads make a tiny model several times slower
           # a fixed mmap threshold: glibc's sliding one (up to 32 MB) keeps training's freed tensors in the heap, where
           # they fragment it; the tutorial's training script peaked at 745 MB with it, 581 MB without (glibc only)
           "MALLOC_MMAP_THRESHOLD_": "131072",
           # those mapped blocks on huge pages where the kernel gives them on request (transparent_hugepage=madvise):
           # the training script alone 858,000 -> 281,000 page faults, 5.1 -> 4.6 s, its peak within 10 MB (glibc 2.35+;
           # older ones ignore it)
           "GLIBC_TUNABLES": ":".join(filter(None, [os.environ.get("GLIBC_TUNABLES"), "glibc.malloc.hugetlb=1"]))}
    return subprocess.Popen([sys.executable, "-m", child], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=home, env=env)


def _finish_child(child: subprocess.Popen, count: int) -> list[Output]:
    try:
        stdout, stderr = child.communicate(timeout=600)
    except subprocess.TimeoutExpired:
        child.kill()
        stdout, stderr = child.communicate()
    if child.returncode != 0:
        reason = stderr.strip().splitlines()[-1:] or ["no output"]
        return [Output(1, f"(not run when this page was built: {reason[0]})") for _ in range(count)]
    return [Output(r["status"], r["text"]) for r in json.loads(stdout)]


def serve_child(main: Callable[[list[str]], int], prepare: Callable[[], object] | None = None) -> None:
    """The child process: import torch and warm it up, then run the commands it reads on stdin (JSON) with ``main``
    (this process may import torch); print their outputs as JSON. ``prepare()`` runs once before the commands (what
    every command would otherwise do again in its forked copy: build the parser, import the command modules)."""
    import runpy

    import torch  # noqa: F401  (fails here, once, when torch is missing)

    def serve(r: dict) -> dict:  # in a forked copy: its folder and import path are its own
        os.chdir(r["folder"])
        sys.path.insert(0, r["folder"])
        if r["python"]:
            stdout = io.StringIO()
            with contextlib.redirect_stdout(stdout):
                runpy.run_path(r["argv"][0], run_name="__main__")
            return {"status": 0, "text": stdout.getvalue().rstrip("\n")}
        out = _in_process(Run(tuple(r["argv"])), r["folder"], main)
        return {"status": out.status, "text": out.text}

    import gc

    warm_up()
    if prepare is not None:
        prepare()
    requests = json.loads(sys.stdin.read() or "[]")  # the commands, once the parent has them (none: it was stopped)
    gc.freeze()  # the objects so far stay out of the collector's sweeps: the forked copies share their pages
    print(json.dumps([_in_fork(serve, r) for r in requests]))


def warm_up() -> None:
    """One tiny training step, so that torch's first-use set-up (its kernels, the optimizer's) is done once here, not
    again in every forked copy."""
    import torch

    layer = torch.nn.Linear(8, 8)
    optimizer = torch.optim.AdamW(layer.parameters())
    layer(torch.ones(2, 8)).square().mean().backward()
    optimizer.step()


def _in_fork(work: Callable[[dict], dict], request: dict) -> dict:
    """``work(request)`` in a forked copy of this process (torch imported once, before): each command's memory is its
    own, freed when it ends, so the peak RSS that ``run`` reports is that command's, not the sum of the ones before."""
    if not hasattr(os, "fork"):
        return work(request)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the copy: its result goes back through the pipe, then it ends without running any cleanup
        os.close(read)
        try:
            data = json.dumps(work(request))
        except BaseException as e:  # noqa: BLE001 - reported on the page, as a failed command is
            data = json.dumps({"status": 1, "text": f"(not run when this page was built: {type(e).__name__}: {e})"})
        with os.fdopen(write, "w", encoding="utf-8") as f:
            f.write(data)
        os._exit(0)
    os.close(write)
    with os.fdopen(read, encoding="utf-8") as f:
        data = f.read()
    os.waitpid(pid, 0)
    return json.loads(data)


def markdown(steps: tuple[Step, ...], outputs: list[Output | None], index: int) -> list[str]:
    """Step ``index`` as the page shows it: the file, or the command (copyable) and what it printed."""
    step, result = steps[index], outputs[index]
    if isinstance(step, Write):
        lang = {"yaml": "yaml", "json": "json", "py": "python"}.get(step.name.rsplit(".", 1)[-1], "text")
        return [f'```{lang} title="{step.name}"', step.text.rstrip("\n"), "```", ""]
    assert result is not None
    varies = isinstance(step, Run) and (step.varies or step.torch)
    block = [f'```{"python" if isinstance(step, Head) else "text"}', result.text or "(no output)", "```"]
    if varies:
        block = [VARIES, *block, END_VARIES]
    return ["```bash", step.line, "```", "", *block, ""]
