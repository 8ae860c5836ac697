"""Template of DeepSeek-V3's multi-token prediction modules (archcalc.codegen.mtp fills it): the
MTP class, and the Transformer's mtp_loss method that forward adds to the loss given targets."""

import torch
import torch.nn.functional as F
from torch import nn

from archcalc.codegen.templates.names import MTP_NORM, Block, Config


class MTP(nn.Module):
    """Multi-token prediction module (DeepSeek-V3, arXiv 2412.19437 section 2.2): the embedding of
    the token k ahead (enorm) and the previous depth's hidden state (hnorm), concatenated and
    projected 2d -> d (eh_proj), a block of the model's last kind, a norm (shared_head.norm), and
    the model's own head. The embedding and the head are the model's modules: no tensor of their
    own."""

    def __init__(self, cfg: Config, embed: nn.Embedding, head: nn.Linear):
        super().__init__()
        self.embed = embed  # the model's token embedding (the same module)
        self.enorm = MTP_NORM
        self.hnorm = MTP_NORM
        self.eh_proj = nn.Linear(2 * cfg.width, cfg.width, bias=False)
        self.block = nn.ModuleList(Block(cfg) for _ in range(cfg.mtp_layers))
        self.norm = MTP_NORM
        self.head = head  # the model's output head (the same module)

    def forward(
        self, h: torch.Tensor, input_ids: torch.Tensor, rope: tuple[torch.Tensor, torch.Tensor]
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """h (B, T, d): the previous depth's hidden state at each position; input_ids (B, T): the
        token k ahead of each. Returns this depth's hidden state (B, T, d) and its logits (B, T, V).
        """
        # [embedding; hidden], as the checkpoints' eh_proj reads them (vLLM's and Megatron-LM's
        # order; the paper writes the hidden state first)
        x = torch.cat((self.enorm(self.embed(input_ids)), self.hnorm(h)), dim=-1)  # (B, T, 2d)
        x = self.eh_proj(x)  # (B, T, d)
        for block in self.block:
            x = block(x, rope)
        x = self.norm(x)  # the next depth reads it normed too, as Megatron-LM's MTP does
        return x, self.head(x)


class Transformer(nn.Module):
    def mtp_loss(
        self,
        h: torch.Tensor,
        input_ids: torch.Tensor,
        targets: torch.Tensor,
        rope: tuple[torch.Tensor, torch.Tensor],
    ) -> torch.Tensor:
        """cfg.mtp_weight x the mean of the MTP modules' losses (DeepSeek-V3's lambda x L_MTP):
        module k = 1, 2, ... reads the previous depth's hidden state at position i (h (B, T, d):
        the model's, after its final norm) and the embedding of token i + k, and predicts token
        i + k + 1. Ids and targets move k places left, the last k positions padded (token 0, no
        target: causal attention keeps the padding from the other positions), so that each module
        runs over all T positions, as Megatron-LM's does."""
        T, losses = input_ids.shape[1], []
        for k, module in enumerate(self.mtp, start=1):
            ids = F.pad(input_ids[:, k:], (0, min(k, T)), value=0)  # token i + k at position i
            wanted = F.pad(targets[:, k:], (0, min(k, T)), value=-100)  # token i + k + 1
            h, logits = module(h, ids, rope)
            scored = (wanted != -100).sum().clamp(min=1)  # a sum over targets, 0 where none is left
            loss = F.cross_entropy(
                logits.flatten(0, 1).float(), wanted.flatten(), ignore_index=-100, reduction="sum"
            )
            losses.append(loss / scored)
        return self.cfg.mtp_weight * torch.stack(losses).mean()
