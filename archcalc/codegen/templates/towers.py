"""Template of an encoder-decoder model (archcalc.codegen.blocks and archcalc.codegen.model fill
it): T5's relative position bias, the two towers and the model around them."""

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from archcalc.codegen.templates.names import (
    FINAL_NORM,
    HEAD_BIAS,
    Block,
    Embeddings,
    KVCache,
    checkpoint,
)


@dataclass(frozen=True)
class Config:
    """The generated file's config dataclass."""


class RelativeBias(nn.Embedding):
    """T5's relative position bias: a learned score per head for each bucket of key - query
    distances.

    Nearby distances get a bucket each, farther ones share logarithmically wider buckets up to
    max_distance; bidirectional (encoder) buckets tell keys before the query from keys after it,
    causal (decoder) ones only look back. One table per tower, computed once and added to every
    layer's scores."""

    def __init__(self, cfg: Config, bidirectional: bool):
        super().__init__(cfg.rel_buckets, cfg.heads)  # (buckets, H)
        self.bidirectional, self.max_distance = bidirectional, cfg.rel_max_distance

    def bucket(self, distance: torch.Tensor) -> torch.Tensor:
        """The bucket of each key - query distance (as transformers'
        T5Attention._relative_position_bucket)."""
        buckets, offset = self.num_embeddings, torch.zeros_like(distance)
        if self.bidirectional:
            buckets //= 2
            offset = (distance > 0).long() * buckets  # keys after the query use the upper half
            distance = distance.abs()
        else:
            distance = -distance.clamp(max=0)  # only keys at or before the query
        exact = buckets // 2
        scaled = torch.log(distance.float() / exact) / math.log(self.max_distance / exact)
        far = exact + (scaled * (buckets - exact)).long()
        far = far.clamp(max=buckets - 1)
        return offset + torch.where(distance < exact, distance, far)

    def forward(self, start: int, T: int, S: int) -> torch.Tensor:
        """The bias of T queries at positions start .. start + T - 1 over the keys at 0 .. S - 1:
        (1, H, T, S)."""
        i = torch.arange(start, start + T, device=self.weight.device)
        j = torch.arange(S, device=self.weight.device)
        return super().forward(self.bucket(j[None, :] - i[:, None])).permute(2, 0, 1).unsqueeze(0)


class Encoder(nn.Module):
    """DOC"""

    def __init__(self, cfg: Config):
        super().__init__()
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.encoder_layers))
        # True: keep only each block's input, recompute the rest in backward
        self.checkpointing = False
        # region: rel_bias
        self.rel_bias = RelativeBias(cfg, bidirectional=True)  # shared by every block
        # endregion
        # region: final_norm
        self.final_norm = FINAL_NORM
        # endregion

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, T, d)
        # region: rel_bias
        T = x.shape[1]
        bias = self.rel_bias(0, T, T)  # (1, H, T, T): computed once for all blocks
        # endregion
        for block in self.blocks:
            if self.checkpointing:
                x = checkpoint(block, x, bias, use_reentrant=False)
            else:
                x = block(x, bias)
        # region: final_norm
        return self.final_norm(x)  # (B, T, d)
        # endregion
        # region: !final_norm
        return x  # (B, T, d)
        # endregion


class Decoder(nn.Module):
    """DOC"""

    def __init__(self, cfg: Config):
        super().__init__()
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.decoder_layers))
        # True: keep only each block's input, recompute the rest in backward
        self.checkpointing = False
        # region: rel_bias
        self.rel_bias = RelativeBias(cfg, bidirectional=False)  # shared by every block
        # endregion
        # region: final_norm
        self.final_norm = FINAL_NORM
        # endregion

    def forward(
        self,
        x: torch.Tensor,
        memory: torch.Tensor,
        cache: list[tuple[KVCache, KVCache]] | None = None,
    ) -> torch.Tensor:  # (B, T, d)
        # region: rel_bias
        start = cache[0][0].seen if cache is not None else 0  # the position of the first token here
        T = x.shape[1]
        i = torch.arange(start, start + T, device=x.device)
        j = torch.arange(start + T, device=x.device)
        causal = j[None, :] > i[:, None]
        bias = self.rel_bias(start, T, start + T).masked_fill(causal, float("-inf"))  # (1, H, T, S)
        # endregion
        caches = cache if cache is not None else [None] * len(self.blocks)
        for block, layer_cache in zip(self.blocks, caches, strict=True):
            # training: keep the block's input, recompute the rest
            if self.checkpointing and layer_cache is None:
                x = checkpoint(block, x, memory, bias, use_reentrant=False)
            else:
                x = block(x, memory, bias, layer_cache)
        # region: final_norm
        return self.final_norm(x)  # (B, T, d)
        # endregion
        # region: !final_norm
        return x  # (B, T, d)
        # endregion


class Seq2Seq(nn.Module):
    """The whole model: one embedding, the encoder, the decoder, head."""

    def __init__(self, cfg: Config = Config()):
        super().__init__()
        self.cfg = cfg
        self.embed = Embeddings(cfg)  # shared by the encoder and the decoder
        self.encoder = Encoder(cfg)
        self.decoder = Decoder(cfg)
        self.head = nn.Linear(cfg.width, cfg.vocab, bias=HEAD_BIAS)
        # region: tied
        self.head.weight = self.embed.token.weight  # tied: one matrix, counted once
        # endregion
        # region: head_scale
        # T5 v1.0 scales the decoder output by d**-0.5 before the tied head
        self.head_scale = cfg.width**-0.5
        # endregion
        # on the meta device there are only shapes: nothing to initialise
        if not self.embed.token.weight.is_meta:
            self.reset_parameters()

    # insert: reset_parameters

    def forward(
        self,
        input_ids: torch.Tensor,
        decoder_input_ids: torch.Tensor,
        targets: torch.Tensor | None = None,
    ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        """Logits (B, T, V) of the decoder tokens decoder_input_ids (B, T) given the encoder tokens
        input_ids (B, S); given targets (B, T), the token each decoder position should produce
        (transformers' labels; decoder_input_ids are usually the targets shifted right behind the
        start token), also their mean cross-entropy: (logits, loss)."""
        check_tokens(input_ids)  # shapes and dtypes: free
        check_tokens(decoder_input_ids, targets, "decoder_input_ids")
        memory = self.encoder(self.embed(input_ids))  # (B, S, d)
        logits = self.decode(decoder_input_ids, memory)
        if targets is None:
            return logits
        # mean over targets != -100
        loss = F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten(), ignore_index=-100)
        return logits, loss

    def decode(
        self,
        decoder_input_ids: torch.Tensor,
        memory: torch.Tensor,
        cache: list[tuple[KVCache, KVCache]] | None = None,
    ) -> torch.Tensor:
        """The decoder's logits (B, T, V) of decoder_input_ids (B, T) over the encoder output memory
        (B, S, d). With a cache (see generate), the tokens continue the cached ones and only the
        last position's logits come back."""
        # region: start
        start = cache[0][0].seen if cache is not None else 0  # the position of the first token here
        # endregion
        x = self.decoder(self.embed(decoder_input_ids, start), memory, cache)  # (B, T, d)
        if cache is not None:
            x = x[:, -1:]  # generating: only the next token's logits are needed
        # region: head_scale
        x = x * self.head_scale
        # endregion
        logits = self.head(x)  # (B, T, V)
        return logits

    # insert: generation

    @property
    def checkpointing(self) -> bool:
        """True: both towers keep only each block's input and recompute the rest in backward."""
        return self.encoder.checkpointing and self.decoder.checkpointing

    @checkpointing.setter
    def checkpointing(self, on: bool) -> None:
        self.encoder.checkpointing = self.decoder.checkpointing = on


def check_tokens(
    input_ids: torch.Tensor, targets: torch.Tensor | None = None, name: str = ""
) -> None:
    """The generated file's token checks (templates/model.py)."""
