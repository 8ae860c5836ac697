"""Template of the functions beside the classes of a generated file (archcalc.codegen.emit)."""

from dataclasses import dataclass

import torch
from torch import nn

from archcalc.codegen.templates.names import Transformer, train_step_flops


@dataclass(frozen=True)
class Config:
    """The generated file's config dataclass."""


def build(
    device: str | torch.device | None = None,
    dtype: torch.dtype | None = None,
    cfg: Config = Config(),
) -> nn.Module:
    """The model with freshly initialised weights; on device="meta" it holds shapes only."""
    with torch.device(device if device is not None else "cpu"):
        model = Transformer(cfg)
    return model.to(dtype) if dtype is not None else model


def flops_per_token(seq_len: int) -> float:
    """Matmul FLOPs per token of one training step (forward and backward, no recomputation) on
    sequences of seq_len tokens with causal attention, exactly as `archcalc flops` counts them
    (train_step_matmul_causal / seq_len). MFU = flops_per_token(S) * tokens/s / peak FLOP/s."""
    return train_step_flops(seq_len) / seq_len
