"""Bytes a rank sends through torch.distributed's collectives, counted as they run: the measurement that
``archcalc plan``'s communication volumes (:mod:`archcalc.backends.training_plan`) are checked against.

:class:`CommCounter` is a ``TorchDispatchMode``: every collective op reaches the dispatcher (FSDP2's all-gathers and
reduce-scatters as ``c10d`` ops, DTensor's redistributions as functional collectives), with its tensors and its
process group. Each is charged what a ring algorithm sends from one rank: an all-reduce of B bytes over n ranks
2(n - 1)/n x B, an all-gather (n - 1) x its input, a reduce-scatter (n - 1)/n x its input, an all-to-all (n - 1)/n x
its input. Counted per kind, exactly (integers, rounded up per call).
"""

from __future__ import annotations

from collections import Counter

import torch
from torch.utils._python_dispatch import TorchDispatchMode

c10d = torch.ops.c10d
funcol = torch.ops._c10d_functional

KINDS = {  # op -> (kind, the argument holding the tensor whose bytes are charged, ring factor as (numerator(n), n))
    c10d.allreduce_: ("all_reduce", 0, lambda n: (2 * (n - 1), n)),
    c10d._allgather_base_: ("all_gather", 1, lambda n: (n - 1, 1)),
    c10d._reduce_scatter_base_: ("reduce_scatter", 1, lambda n: (n - 1, n)),
    c10d.alltoall_base_: ("all_to_all", 1, lambda n: (n - 1, n)),
    funcol.all_reduce: ("all_reduce", 0, lambda n: (2 * (n - 1), n)),
    funcol.all_gather_into_tensor: ("all_gather", 0, lambda n: (n - 1, 1)),
    funcol.reduce_scatter_tensor: ("reduce_scatter", 0, lambda n: (n - 1, n)),
    funcol.all_to_all_single: ("all_to_all", 0, lambda n: (n - 1, n)),
}


class CommCounter(TorchDispatchMode):
    """Counts the bytes this rank sends, by collective kind, while active (``with CommCounter() as c: ...``)."""

    def __init__(self):
        super().__init__()
        self.sent: Counter[str] = Counter()
        self.calls: Counter[str] = Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if isinstance(func, torch._ops.OpOverload) and func.overloadpacket in KINDS:
            kind, where, factor = KINDS[func.overloadpacket]
            tensor = args[where][0] if isinstance(args[where], (list, tuple)) else args[where]
            num, den = factor(_group_size(func, args, kwargs))
            self.sent[kind] += -(-tensor.numel() * tensor.element_size() * num // den)
            self.calls[kind] += 1
        return func(*args, **kwargs)


def _group_size(func, args, kwargs) -> int:
    """The number of ranks of the collective's process group."""
    from torch.distributed import ProcessGroup
    from torch.distributed.distributed_c10d import _resolve_process_group

    for value in (*args, *kwargs.values()):
        if isinstance(value, str):  # a functional collective's group name
            try:
                return _resolve_process_group(value).size()
            except (RuntimeError, ValueError, KeyError):
                continue
        if isinstance(value, torch.ScriptObject) and "ProcessGroup" in value._type().qualified_name():
            return ProcessGroup.unbox(value).size()  # a c10d op's process group, boxed for the dispatcher
    raise ValueError(f"{func}: no process group among its arguments")


def _rank(rank: int, world: int, source: str, tp: int, batch: int, seq_len: int, port: int, queue) -> None:
    """One rank: the generated model parallelized as ``parallelize(model, tp, dp)``, one forward and backward of its
    rows of a fixed batch, the bytes it sent put on ``queue``."""
    import os

    import torch.distributed as dist

    from archcalc.codegen.load import load_source

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        module = load_source(source)
        torch.manual_seed(0)
        model = module.build()
        vocab = model.cfg.vocab
        model = module.parallelize(model, tp=tp, dp=world // tp, device_type="cpu")
        rows = batch // (world // tp)
        tokens = torch.randint(0, vocab, (batch, seq_len), generator=torch.Generator().manual_seed(0))
        mine = tokens[(rank // tp) * rows:(rank // tp + 1) * rows]
        with CommCounter() as counter:
            _, loss = model(mine, targets=mine)
            loss.backward()
        queue.put((rank, dict(counter.sent), dict(counter.calls)))
    finally:
        dist.destroy_process_group()


def measure(source: str, nproc: int, tp: int, batch: int, seq_len: int) -> list[dict]:
    """Each rank's bytes sent by collective kind for one training step (forward and backward) of ``source``."""
    import socket

    import torch.multiprocessing as mp

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    context = mp.get_context("spawn")
    queue = context.SimpleQueue()
    mp.start_processes(_rank, args=(nproc, source, tp, batch, seq_len, port, queue), nprocs=nproc, start_method="spawn")
    found = sorted(queue.get() for _ in range(nproc))
    return [{"rank": rank, "sent": sent, "calls": calls} for rank, sent, calls in found]


def main(argv: list[str] | None = None) -> int:
    """``python -m archcalc.codegen.comm_count MODEL.py --nproc 2 --tp 2 --batch 2 --seq-len 16``: one JSON line."""
    import argparse
    import json
    from pathlib import Path

    p = argparse.ArgumentParser(prog="python -m archcalc.codegen.comm_count", description=main.__doc__)
    p.add_argument("source")
    p.add_argument("--nproc", type=int, default=2)
    p.add_argument("--tp", type=int, default=1)
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--seq-len", type=int, default=16)
    args = p.parse_args(argv)
    print(json.dumps(measure(Path(args.source).read_text(encoding="utf-8"), args.nproc, args.tp, args.batch, args.seq_len)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
