"""Training a generated module sharded across local processes: FSDP2 (ZeRO-3) and DTensor tensor parallelism.

:func:`launch` starts ``nproc`` processes with torch.distributed's elastic launcher (what ``torchrun`` runs;
gloo on the CPU, NCCL on CUDA). Each runs :func:`rank_main`: it imports the generated source, builds the model
(on the device with a fixed seed, so that every rank and a single process start from the same weights; or on
the meta device, then ``to_empty`` and ``reset_parameters`` after sharding, for models that fit no device),
shards it with the file's ``parallelize(model, tp, dp)``, and trains ``steps`` AdamW steps on fixed random
tokens: every data-parallel rank takes its rows of the global batch, the tensor-parallel ranks of one
data-parallel rank take the same rows. Each rank reports its losses (averaged over the data-parallel ranks)
and the bytes it holds: parameters, gradients and AdamW's two moments (their step counters left out), counted
from the local shards.
"""

from __future__ import annotations

import os
import socket
import uuid
from dataclasses import asdict, dataclass, field


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
           sequence_parallel: bool = False) -> list[RankReport]:
    """Train the generated ``source`` on ``nproc`` local processes (tp x dp = nproc); one report per rank."""
    from torch.distributed.launcher.api import LaunchConfig, elastic_launch

    if nproc % tp:
        raise ValueError(f"--tp {tp} does not divide --nproc {nproc}")
    dp = nproc // tp
    if batch % dp:
        raise ValueError(f"--batch {batch} does not split evenly over {dp} data-parallel ranks")
    config = LaunchConfig(min_nodes=1, max_nodes=1, nproc_per_node=nproc, run_id=uuid.uuid4().hex,
                          rdzv_backend="c10d", rdzv_endpoint=f"127.0.0.1:{_free_port()}", max_restarts=0,
                          monitor_interval=0.1)
    job = dict(source=source, tp=tp, dp=dp, steps=steps, batch=batch, seq_len=seq_len, vocab=vocab, device=device,
               lr=lr, seed=seed, meta=meta, sequence_parallel=sequence_parallel)
    results = elastic_launch(config, rank_main)(job)
    return [RankReport(**results[rank]) for rank in sorted(results)]


def rank_main(job: dict) -> dict:
    """One rank's work (run by :func:`launch` in its own process)."""
    import torch
    import torch.distributed as dist

    from codegen.load import load_source

    cuda = job["device"].startswith("cuda")
    rank = int(os.environ["RANK"])
    if cuda:
        torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    dist.init_process_group("nccl" if cuda else "gloo")
    try:
        module = load_source(job["source"])
        device = f"cuda:{os.environ['LOCAL_RANK']}" if cuda else "cpu"
        torch.manual_seed(job["seed"])
        model = module.build(device="meta" if job["meta"] else device)
        model = module.parallelize(model, tp=job["tp"], dp=job["dp"], device_type="cuda" if cuda else "cpu",
                                   sequence_parallel=job["sequence_parallel"])
        if job["meta"]:
            model.to_empty(device=device)
            model.reset_parameters()
        report = RankReport(rank, parameter_bytes=_bytes(model.parameters()))
        optimizer = torch.optim.AdamW(model.parameters(), lr=job["lr"], foreach=False)
        generator = torch.Generator().manual_seed(job["seed"] + 1)
        tokens = torch.randint(0, job["vocab"], (job["batch"], job["seq_len"] + 1), generator=generator).to(device)
        rows = job["batch"] // job["dp"]
        mine = tokens[rank // job["tp"] * rows:][:rows]  # this data-parallel rank's rows; its tp ranks share them
        for step in range(job["steps"]):
            _, loss = model(mine[:, :-1], targets=mine[:, 1:])
            loss.backward()
            if step == 0:
                report.gradient_bytes = _bytes(p.grad for p in model.parameters() if p.grad is not None)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            mean = loss.detach().clone()
            dist.all_reduce(mean)
            report.losses.append(mean.item() / dist.get_world_size())
        report.optimizer_bytes = _bytes(t for state in optimizer.state.values() for key, t in state.items() if key != "step")
        return asdict(report)
    finally:
        dist.destroy_process_group()


def _bytes(tensors) -> int:
    """Bytes of the local shards of ``tensors`` (a DTensor counts what this rank holds)."""
    total = 0
    for t in tensors:
        local = t.to_local() if hasattr(t, "to_local") else t
        total += local.numel() * local.element_size()
    return total
