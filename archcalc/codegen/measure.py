"""Measure what a training step keeps for the backward pass: the bytes of every distinct tensor autograd
saves, parameters excluded (a storage shared by several saved views counts once).

>>> import torch
>>> lin = torch.nn.Linear(4, 3)
>>> saved_activation_bytes(lambda: lin(torch.ones(2, 4, requires_grad=True)).sum(), params=list(lin.parameters()))
32
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import torch


def saved_activation_bytes(step: Callable[[], torch.Tensor], params: Iterable[torch.Tensor] = (),
                           weight_copies: bool = False) -> int:
    """Run ``step`` (a forward pass returning a loss) and total the storages autograd saved for backward.

    With ``weight_copies`` false, tensors shaped like a parameter are skipped too: under autocast these
    are the bf16 copies of the weights, which the mixed-precision state accounting already holds.
    """
    params = list(params)
    skip = {p.untyped_storage().data_ptr() for p in params}
    shapes = {tuple(p.shape) for p in params if p.dim() == 2}
    storages: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        storage = t.untyped_storage()
        ptr = storage.data_ptr()
        copy = not weight_copies and t.dtype != torch.float32 and tuple(t.shape) in shapes
        if ptr not in skip and not copy and t.device.type != "meta":
            storages[ptr] = max(storages.get(ptr, 0), storage.nbytes())
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        loss = step()
    del loss
    return sum(storages.values())
