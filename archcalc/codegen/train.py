"""Train a generated module for a few steps on random tokens and measure it.

Each step is a forward pass, a cross-entropy loss on next-token targets, a backward pass and an AdamW
step. On CUDA the forward runs under bf16 autocast. The first ``warmup`` steps (compilation, kernel
selection, allocator growth) are not timed.
"""

from __future__ import annotations

import os
import resource
import statistics
import sys
import time
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F


@dataclass
class RunReport:
    device: str
    device_name: str
    batch: int
    seq_len: int
    steps: int
    compiled: bool
    losses: list[float] = field(default_factory=list)
    step_seconds: list[float] = field(default_factory=list)
    peak_bytes: int = 0
    peak_kind: str = ""

    @property
    def tokens_per_second(self) -> float:
        timed = self.step_seconds or [float("nan")]
        return self.batch * self.seq_len / statistics.median(timed)


def device_name(device: str) -> str:
    if device.startswith("cuda"):
        return torch.cuda.get_device_name(torch.device(device))
    return f"CPU ({os.cpu_count()} cores)"


def train(model: torch.nn.Module, vocab: int, *, device: str, batch: int, seq_len: int, steps: int,
          compile: bool = False, warmup: int = 2, lr: float = 3e-4, seed: int = 0, progress: bool = False) -> RunReport:
    """Run ``steps`` optimizer steps on one fixed batch of random tokens; returns losses and timings."""
    if not hasattr(model, "head"):
        from archcalc.codegen.errors import UnsupportedError

        raise UnsupportedError("run trains language models on next-token logits; this model has no head "
                               "(an encoder returns hidden states)")
    torch.manual_seed(seed)
    cuda = device.startswith("cuda")
    step_model = torch.compile(model) if compile else model
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, fused=cuda)
    tokens = torch.randint(0, vocab, (batch, seq_len + 1), device=device)
    inputs, targets = tokens[:, :-1], tokens[:, 1:]
    report = RunReport(device, device_name(device), batch, seq_len, steps, compile)
    if cuda:
        torch.cuda.reset_peak_memory_stats(device)
    for step in range(steps):
        start = time.perf_counter()
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=cuda):
            # an encoder-decoder model reads the tokens in its encoder and predicts the next ones in its decoder
            if hasattr(model, "mtp"):  # multi-token prediction: the model's loss, with the MTP modules'
                loss = step_model(inputs, targets=targets)[1]
            else:
                logits = step_model(inputs, inputs) if hasattr(model, "decoder") else step_model(inputs)
                loss = F.cross_entropy(logits.float().view(-1, logits.shape[-1]), targets.reshape(-1))
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        value = loss.item()  # synchronises, so the time below is the whole step
        elapsed = time.perf_counter() - start
        report.losses.append(value)
        if step >= min(warmup, steps - 1):
            report.step_seconds.append(elapsed)
        if progress:
            _bar(step + 1, steps, value)
    if progress and sys.stderr.isatty():
        print(file=sys.stderr)  # end the bar's line
    if cuda:
        report.peak_bytes, report.peak_kind = torch.cuda.max_memory_allocated(device), "torch.cuda.max_memory_allocated"
    else:
        report.peak_bytes, report.peak_kind = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, "peak RSS of the process"
    return report


def _bar(done: int, total: int, loss: float, width: int = 30) -> None:
    """A bar redrawn in place on a terminal; elsewhere (a log, a pipe) about ten plain lines, as ``\r`` frames
    would make one long line of a log."""
    if not sys.stderr.isatty():
        if done == total or done % max(1, total // 10) == 0:
            sys.stderr.write(f"step {done}/{total}  loss {loss:.4f}\n")
            sys.stderr.flush()
        return
    filled = width * done // total
    sys.stderr.write(f"\r[{'#' * filled}{'.' * (width - filled)}] step {done}/{total}  loss {loss:.4f}")
    sys.stderr.flush()
