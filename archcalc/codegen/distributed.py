"""Training a generated module sharded across local processes: FSDP2 (ZeRO-3), DTensor tensor parallelism, pipeline
stages (torch.distributed.pipelining's 1F1B schedule) and expert parallelism (routed experts over data-parallel ranks).

:func:`launch` starts ``nproc`` processes with torch.distributed's elastic launcher (what ``torchrun`` runs;
gloo on the CPU, NCCL on CUDA). Each runs :func:`rank_main`: it imports the generated source, builds the model
(on the device with a fixed seed, so that every rank and a single process start from the same weights; or on
the meta device, then ``to_empty`` and ``reset_parameters`` after sharding, for models that fit no device),
shards it with the file's ``parallelize(model, tp, dp, pp=..., microbatches=..., ep=...)``, and trains ``steps``
AdamW steps on fixed random tokens: every data-parallel rank takes its rows of the global batch, the tensor-parallel
ranks and pipeline stages of one data-parallel rank take the same rows (a stage's ``step`` runs the micro-batches'
forwards and backwards). Each rank reports its losses (averaged over the ranks of the last stage, which compute them)
and the bytes it holds: parameters, gradients and AdamW's two moments (their step counters left out), counted
from the local shards.

:func:`launch_isolated` runs :func:`launch` in a child process of its own session (``archcalc run --nproc``): the
terminal's Ctrl-C reaches archcalc alone, which kills the launcher and every rank at once (their process group),
removes their temporary files (everything goes under one folder: TMPDIR) and exits 130 -- torch's launcher would
otherwise take over SIGINT, wait 30 s for the ranks and print their tracebacks.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path


@dataclass
class RankReport:
    rank: int
    losses: list[float] = field(default_factory=list)
    parameter_bytes: int = 0
    gradient_bytes: int = 0
    optimizer_bytes: int = 0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(source: str, nproc: int, tp: int = 1, steps: int = 3, batch: int = 4, seq_len: int = 16, vocab: int = 2,
           device: str = "cpu", lr: float = 1e-3, seed: int = 0, meta: bool = False,
           sequence_parallel: bool = False, progress: bool = False, pp: int = 1,
           microbatches: int | None = None, ep: int = 1) -> list[RankReport]:
    """Train the generated ``source`` on ``nproc`` local processes (pp x dp x tp = nproc; rank = (pipeline stage ·
    dp + data rank) · tp + tensor rank); one report per rank. ``microbatches``: with pp > 1, the 1F1B schedule's
    (default pp). ``ep``: expert-parallel ranks (dividing dp), each holding a piece of every layer's routed experts.
    ``progress``: rank 0 says on stderr when every rank has started, then how the loss goes."""
    from torch.distributed.elastic.multiprocessing import DefaultLogsSpecs
    from torch.distributed.launcher.api import LaunchConfig, elastic_launch

    if nproc % (tp * pp):
        raise ValueError(f"--tp {tp} x --pp {pp} does not divide --nproc {nproc}")
    dp = nproc // (tp * pp)
    microbatches = microbatches or pp
    if batch % (dp * microbatches):
        raise ValueError(f"--batch {batch} does not split evenly over {dp} data-parallel ranks x {microbatches} "
                         "micro-batches")
    if dp % ep:
        raise ValueError(f"--ep {ep} does not divide the {dp} data-parallel ranks")
    job = dict(source=source, tp=tp, dp=dp, pp=pp, microbatches=microbatches, ep=ep, steps=steps, batch=batch,
               seq_len=seq_len, vocab=vocab, device=device, lr=lr, seed=seed, meta=meta,
               sequence_parallel=sequence_parallel, progress=progress)
    with tempfile.TemporaryDirectory(prefix="archcalc-ranks-") as logs:  # the launcher's log folders: removed after
        config = LaunchConfig(min_nodes=1, max_nodes=1, nproc_per_node=nproc, run_id=uuid.uuid4().hex,
                              rdzv_backend="c10d", rdzv_endpoint=f"127.0.0.1:{_free_port()}", max_restarts=0,
                              monitor_interval=0.1, logs_specs=DefaultLogsSpecs(log_dir=logs))
        results = elastic_launch(config, rank_main)(job)
    return [RankReport(**results[rank]) for rank in sorted(results)]


#: The launcher's process: launch() on the job's file.
CHILD = "import sys; from archcalc.codegen.distributed import child_main; sys.exit(child_main(sys.argv[1]))"


def launch_isolated(**job) -> list[RankReport]:
    """:func:`launch` (same arguments) in a child process of its own session, its temporary files in a folder of its
    own: both undone by :mod:`archcalc.cleanup` if archcalc is interrupted. A failed rank is a RuntimeError whose
    message is one line (the first failure)."""
    from archcalc import cleanup

    folder = tempfile.mkdtemp(prefix="archcalc-nproc-")
    Path(folder, "job.json").write_text(json.dumps(job), encoding="utf-8")
    root = str(Path(__file__).resolve().parent.parent)  # where codegen and archcalc are imported from
    env = {**os.environ, "TMPDIR": folder, "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))}
    child: list[int] = []  # the launcher's pid once started: its process group holds every rank
    key = cleanup.register(lambda: _end(child, folder))
    status = None
    try:
        with _signals_held():  # an interrupt waits until archcalc knows the launcher's pid, which its handler kills
            proc = subprocess.Popen([sys.executable, "-c", CHILD, folder], stdin=subprocess.DEVNULL, stdout=2,
                                    env=env, start_new_session=True)  # stdout on stderr: prints must not reach a JSON result
            child.append(proc.pid)
        status = proc.wait()
        result = Path(folder, "result.json")
        if not result.exists():
            raise RuntimeError(f"the launcher process ended with status {status} before any rank reported")
        data = json.loads(result.read_text(encoding="utf-8"))
        if "error" in data:
            raise RuntimeError(data["error"])
        return [RankReport(**r) for r in data["reports"]]
    finally:
        _end(child if status != 0 else [], folder)  # a launcher that ended well has ended its ranks: nothing to kill
        cleanup.unregister(key)


@contextlib.contextmanager
def _signals_held():
    """SIGINT and SIGTERM, while the block runs, are noted and then raised again once it has ended (the handlers in
    place before then see them). Only the main thread sets handlers; elsewhere the block runs as it is."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    noted: list[int] = []
    before = {s: signal.signal(s, lambda signum, frame: noted.append(signum)) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for signum, handler in before.items():
            signal.signal(signum, handler if handler is not None else signal.SIG_DFL)
        if noted:
            signal.raise_signal(noted[0])


def _end(child: list[int], folder: str) -> None:
    """Kill the launcher's process group (the launcher and every rank), reap the launcher, wait (5 s at most) until no
    process of the group is left, and remove the folder. Safe in a signal handler (no lock of subprocess's is taken)."""
    for pid in child:
        try:
            os.killpg(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            os.waitpid(pid, 0)
        except ChildProcessError:  # reaped already
            pass
        for _ in range(500):
            if not _group_alive(pid):
                break
            time.sleep(0.01)
    shutil.rmtree(folder, ignore_errors=True)


def _group_alive(group: int) -> bool:
    """Is a process of ``group`` still running? (Killed ranks whose parent was killed too are zombies until the
    system's init reaps them: they count as gone.)"""
    try:
        os.killpg(group, 0)
    except (ProcessLookupError, PermissionError):
        return False
    if not os.path.isdir("/proc"):
        return True
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:  # it ended meanwhile
            continue
        fields = stat.rpartition(")")[2].split()  # "pid (command) state ppid pgrp ...": the command may hold spaces
        if int(fields[2]) == group and fields[0] != "Z":
            return True
    return False


def child_main(folder: str) -> int:
    """The launcher's process: run the job in ``folder``/job.json, write the reports (or the first failure) to
    ``folder``/result.json."""
    job = json.loads(Path(folder, "job.json").read_text(encoding="utf-8"))
    if not os.environ.get("ARCHCALC_DEBUG"):  # a failed rank is one line (archcalc's), not torch's logged tracebacks
        for name in ("torch.distributed.elastic", "torch.multiprocessing"):
            logging.getLogger(name).setLevel(logging.CRITICAL)
    try:
        reports = launch(**job)
    except Exception as e:  # noqa: BLE001 - a rank failed: every rank has ended; say why in one line
        Path(folder, "result.json").write_text(json.dumps({"error": first_failure(e)}), encoding="utf-8")
        return 1
    Path(folder, "result.json").write_text(json.dumps({"reports": [asdict(r) for r in reports]}), encoding="utf-8")
    return 0


def first_failure(error: Exception) -> str:
    """The message of the first failed rank (the launcher's error holds each rank's exception)."""
    failures = getattr(error, "failures", None) or {}
    for rank in sorted(failures):
        message = getattr(failures[rank], "message", "")
        if isinstance(message, dict):
            message = message.get("message", "")
        text = str(message).strip().splitlines()
        if text:
            return f"rank {rank}: {text[-1][:300]}"
    return str(error).strip().splitlines()[0][:300] if str(error).strip() else type(error).__name__


def rank_main(job: dict) -> dict:
    """One rank's work (run by :func:`launch` in its own process)."""
    import torch
    import torch.distributed as dist

    from archcalc.codegen.load import load_source

    cuda = job["device"].startswith("cuda")
    rank = int(os.environ["RANK"])
    if cuda:
        torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    dist.init_process_group("nccl" if cuda else "gloo")
    progress = job.get("progress", False) and rank == 0
    if progress:  # every rank has joined: say so (a test waits for this line before it interrupts the run)
        print(f"{dist.get_world_size()} processes started ({'NCCL' if cuda else 'gloo'}), training {job['steps']} steps",
              file=sys.stderr, flush=True)
    try:
        module = load_source(job["source"])
        device = f"cuda:{os.environ['LOCAL_RANK']}" if cuda else "cpu"
        torch.manual_seed(job["seed"])
        model = module.build(device="meta" if job["meta"] else device)
        # only the degrees in use: a file generated before pipeline and expert parallelism takes tp and dp alone
        degrees = {k: job[k] for k in ("pp", "ep") if job.get(k, 1) > 1}
        degrees |= {"microbatches": job["microbatches"]} if "pp" in degrees else {}
        model = module.parallelize(model, tp=job["tp"], dp=job["dp"], device_type="cuda" if cuda else "cpu",
                                   sequence_parallel=job["sequence_parallel"], **degrees)
        if job["meta"]:
            model.to_empty(device=device)
            model.reset_parameters()
        report = RankReport(rank, parameter_bytes=_bytes(model.parameters()))
        optimizer = torch.optim.AdamW(model.parameters(), lr=job["lr"], foreach=False)
        generator = torch.Generator().manual_seed(job["seed"] + 1)
        tokens = torch.randint(0, job["vocab"], (job["batch"], job["seq_len"] + 1), generator=generator).to(device)
        rows = job["batch"] // job["dp"]
        # this data-parallel rank's rows; its tp ranks and pipeline stages share them
        mine = tokens[rank // job["tp"] % job["dp"] * rows:][:rows]
        for step in range(job["steps"]):
            loss = _forward_backward(model, mine)
            if step == 0:
                report.gradient_bytes = _bytes(p.grad for p in model.parameters() if p.grad is not None)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            # the mean over the ranks that computed it: every rank of the last pipeline stage
            mean = loss.detach().clone() if loss is not None else torch.zeros((), device=device)
            dist.all_reduce(mean)
            report.losses.append(mean.item() / (dist.get_world_size() // job.get("pp", 1)))
            if progress:
                from archcalc.codegen.train import _bar

                _bar(step + 1, job["steps"], report.losses[-1])
        if progress and sys.stderr.isatty():
            print(file=sys.stderr)  # end the bar's line
        report.optimizer_bytes = _bytes(t for state in optimizer.state.values() for key, t in state.items() if key != "step")
        return asdict(report)
    finally:
        dist.destroy_process_group()


def _forward_backward(model, tokens):
    """One step's forward and backward on ``tokens`` (B, T + 1); the loss (None on a pipeline stage before the last,
    which never sees it)."""
    if hasattr(model, "schedule"):  # a pipeline stage: the 1F1B schedule runs forward and backward
        return model.step(tokens[:, :-1], tokens[:, 1:])
    _, loss = model(tokens[:, :-1], targets=tokens[:, 1:])
    loss.backward()
    return loss


def _bytes(tensors) -> int:
    """Bytes of the local shards of ``tensors`` (a DTensor counts what this rank holds)."""
    total = 0
    for t in tensors:
        local = t.to_local() if hasattr(t, "to_local") else t
        total += local.numel() * local.element_size()
    return total
