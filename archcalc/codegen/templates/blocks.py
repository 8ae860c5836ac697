"""Template of a block (archcalc.codegen.blocks fills it): its per-layer settings and its inputs in
regions; its modules and its residual arrangement go in at the ``# insert:`` lines."""

import torch
from torch import nn

from archcalc.codegen.templates.names import BlockCache, BlockOutput, Config


class Block(nn.Module):
    """DOC"""

    def __init__(
        self,
        cfg: Config,
        # region: banded
        window: int | None = None,
        # endregion
        # region: nope
        rotary: bool = True,
        # endregion
        # region: chunked
        chunk: int | None = None,
        # endregion
    ):
        super().__init__()
        # insert: modules

    # region: layer_scalar
    def reset_parameters(self) -> None:
        """layer_scalar back to 1 (its modules reset themselves)."""
        nn.init.ones_(self.layer_scalar)

    # endregion
    def forward(
        self,
        x: torch.Tensor,
        # region: cross
        memory: torch.Tensor,
        # endregion
        # region: embeddings
        embeddings: torch.Tensor,
        # endregion
        # region: per_layer
        per_layer: torch.Tensor,  # (B, T, P): this layer's per-layer input
        # endregion
        # region: rotary
        rope: tuple[torch.Tensor, torch.Tensor],
        # endregion
        # region: bias
        bias: torch.Tensor,
        # endregion
        # region: kv
        kv: dict[int | None, tuple[torch.Tensor, torch.Tensor]],
        # endregion
        # region: cached
        cache: BlockCache | None = None,
        # endregion
    ) -> BlockOutput:  # (B, T, d)
        # insert: body
        # region: !shortcut
        return x
        # endregion
