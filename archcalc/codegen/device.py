"""Where a generated module may be built, and whether it fits there: checked before anything is allocated.

``verify`` and ``run`` build real modules. A device that does not exist here (``--device cuda`` without CUDA), a
model whose weights (and, for ``run``, training state and activations) exceed the free memory, or one with so many
parameter tensors that building it takes minutes (``--set L=100000``), is a usage error (exit 2) that says what
would not fit -- not an assertion, an out-of-memory traceback or a process the kernel kills.

>>> check_device("meta")
'meta'
>>> need_text(3 * 2**30, 2**30, "cpu")
'3.0 GiB on cpu, which has 1.0 GiB free'
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from archcalc.errors import UsageError

#: Parameter tensors a module may have (DeepSeek-V3's 45,337 build on the meta device in about 17 s on 2 shared cores,
#: about 0.3 ms a tensor: see benchmarks/limits.py). Beyond this, building is minutes of Python, not a check.
MAX_TENSORS = 60_000
_DEVICE = re.compile(r"(meta|cpu|cuda(:[0-9]{1,2})?)", re.ASCII)


def check_device(device: str, torch=None, meta: bool = True) -> str:
    """``device`` if it names one that exists here (meta -- unless not ``meta`` --, cpu, cuda or cuda:N); else a
    UsageError."""
    if not _DEVICE.fullmatch(device) or (device == "meta" and not meta):
        kinds = "meta, cpu, cuda or cuda:N" if meta else "cpu or cuda (or cuda:N): it trains on real tensors"
        raise UsageError(f"--device {device[:40]!r}: expected {kinds}")
    if device.startswith("cuda"):
        if torch is None:
            import torch
        if not torch.cuda.is_available():
            raise UsageError(f"--device {device}: no CUDA device is available here; use --device cpu (or meta)")
        index = int(device.partition(":")[2] or 0)
        if index >= torch.cuda.device_count():
            raise UsageError(f"--device {device}: this machine has {torch.cuda.device_count()} CUDA device(s)")
    return device


def free_bytes(device: str, torch=None) -> int | None:
    """Memory free for new tensors on ``device`` (the meta device: None, it allocates nothing)."""
    if device == "meta":
        return None
    if device.startswith("cuda"):
        if torch is None:
            import torch
        return int(torch.cuda.mem_get_info(torch.device(device))[0])
    return _cpu_free_bytes()


def _cpu_free_bytes() -> int:
    """MemAvailable, or the room left under this process's cgroup limit if that is smaller."""
    free = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES")
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                free = int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        limit = Path("/sys/fs/cgroup/memory.max").read_text().strip()
        used = int(Path("/sys/fs/cgroup/memory.current").read_text().strip())
        if limit != "max":
            free = min(free, int(limit) - used)
    except (OSError, ValueError):
        pass
    return max(free, 0)


def need_text(need: int, free: int, device: str) -> str:
    return f"{need / 2**30:,.1f} GiB on {device}, which has {free / 2**30:,.1f} GiB free"


def check_fits(need: int, what: str, device: str, advice: str, torch=None) -> None:
    """Refuse (exit 2) when ``need`` bytes for ``what`` exceed what ``device`` has free."""
    free = free_bytes(device, torch)
    if free is not None and need > free:
        raise UsageError(f"{what} need at least {need_text(need, free, device)}; {advice}")


def check_processes(nproc: int, device: str, torch=None) -> None:
    """Refuse more ranks than the machine runs side by side (before any is started): one per CPU core this process may
    use on the CPU, one per visible GPU on CUDA (rank r takes cuda:r)."""
    if device.startswith("cuda"):
        if ":" in device:
            raise UsageError(f"--device {device} with --nproc: rank r takes cuda:r; give --device cuda")
        if torch is None:
            import torch
        have, what = torch.cuda.device_count(), "CUDA device(s)"
    else:
        have, what = usable_cores(), "CPU core(s) this process may use"
    if nproc > have:
        raise UsageError(f"--nproc {nproc:,}: one process per {'GPU' if device.startswith('cuda') else 'core'}, and this "
                         f"machine has {have} {what}; give --nproc {have} or fewer")


def usable_cores() -> int:
    """The CPU cores this process may run on (its affinity), or fewer under a cgroup CPU quota."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    try:
        quota, period = Path("/sys/fs/cgroup/cpu.max").read_text().split()[:2]
        if quota != "max":
            cores = min(cores, max(1, -(-int(quota) // int(period))))
    except (OSError, ValueError):
        pass
    return cores


def check_tensor_count(tensors: int, what: str) -> None:
    """Refuse a module with more than :data:`MAX_TENSORS` parameter tensors (building it would take minutes)."""
    if tensors > MAX_TENSORS:
        raise UsageError(f"{what} has {tensors:,} parameter tensors; archcalc builds modules of at most "
                         f"{MAX_TENSORS:,} (more takes minutes); 'archcalc count' gives its numbers without building it")


def is_out_of_memory(error: BaseException) -> bool:
    """Does ``error`` say an allocation failed (torch's CUDA OutOfMemoryError, or the CPU allocator's RuntimeError)?"""
    text = str(error).lower()
    return (type(error).__name__ == "OutOfMemoryError" or isinstance(error, MemoryError)
            or (isinstance(error, RuntimeError) and ("out of memory" in text or "can't allocate memory" in text
                                                      or "not enough memory" in text)))
