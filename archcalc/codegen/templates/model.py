"""Template of the model (archcalc.codegen.model fills it): the token checks, and the Transformer
of a decoder or an encoder. ``reset_parameters`` (templates/init.py), the stacks' modules and the
generation methods (templates/generation.py) are rendered apart and go in at the ``# insert:``
lines or after the class."""

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from archcalc.codegen.templates.names import (
    BLOCKS,
    FINAL_NORM,
    HEAD_BIAS,
    HEAD_WIDTH,
    LAYERS,
    MTP,
    ORDER,
    Alibi,
    Embeddings,
    KVCache,
    LocalRotary,
    Rotary,
    checkpoint,
)


@dataclass(frozen=True)
class Config:
    """The generated file's config dataclass."""


# forward() checks what it is given by shape and dtype only: free, no value read (no wait for the
# device, no graph break under torch.compile). The ids' range needs their values (a reduction and a
# wait for the device): a decoder checks it once per generation, on the prompt, and never in a
# training step.
def check_tokens(
    input_ids: torch.Tensor, targets: torch.Tensor | None = None, name: str = "input_ids"
) -> None:
    """One clear error for token ids forward() cannot use: input_ids (B, T) of int64 or int32,
    T >= 1; targets of the same shape, int64 (-100: no target). Shapes and dtypes only: reading the
    values would wait for the device."""
    integers = (torch.int64, torch.int32)
    token_ids = isinstance(input_ids, torch.Tensor) and input_ids.dtype in integers
    if not token_ids or input_ids.dim() != 2 or input_ids.shape[1] < 1:
        raise ValueError(
            f"{name} must be a (B, T) tensor of token ids (int64 or int32) with T >= 1, "
            f"got {described(input_ids)}"
        )
    if targets is not None and not (
        isinstance(targets, torch.Tensor)
        and targets.dtype == torch.int64
        and targets.shape == input_ids.shape
    ):
        raise ValueError(
            f"targets must be int64 token ids shaped like {name}, {tuple(input_ids.shape)} "
            f"(-100: no target), got {described(targets)}"
        )


def described(x) -> str:
    """A tensor's dtype and shape (anything else: its type), for an error message."""
    if isinstance(x, torch.Tensor):
        return f"{x.dtype} of shape {tuple(x.shape)}"
    return type(x).__name__


def check_vocab(input_ids: torch.Tensor, vocab: int) -> None:
    """Token ids must lie in [0, vocab): one clear error instead of the embedding's index error (on
    a GPU, a device-side assert). It reads the values, a reduction and a wait for the device:
    forward calls it on a generation's prompt only."""
    if input_ids.numel() and not input_ids.is_meta:
        low, high = (int(v) for v in input_ids.aminmax())
        if low < 0 or high >= vocab:
            raise ValueError(
                f"token ids must lie in [0, {vocab}), the vocabulary; got ids from {low} to {high}"
            )


class Pooler(nn.Module):
    """BERT's pooler: tanh(dense(x)) of the first token's final hidden state; model.pooler(hidden)
    -> (B, d)."""

    def __init__(self, cfg: Config):
        super().__init__()
        self.dense = nn.Linear(cfg.width, cfg.width, bias=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, T, d)
        return torch.tanh(self.dense(x[:, 0]))  # (B, d)


class Transformer(nn.Module):
    """DOC"""

    def __init__(self, cfg: Config = Config()):
        super().__init__()
        self.cfg = cfg
        # True: keep only each block's input, recompute the rest in backward
        self.checkpointing = False
        self.embed = Embeddings(cfg)
        # region: rotary
        # no parameters: the tables are computed in forward, from frequencies kept as a buffer
        self.rotary = Rotary(cfg)
        # endregion
        # region: local_rotary
        # the sliding-window layers' own tables (their own base)
        self.rotary_local = LocalRotary(cfg)
        # endregion
        # region: alibi
        self.alibi = Alibi(cfg)  # no parameters, no buffers: the bias is computed in forward
        # endregion
        # insert: stacks
        # region: final_norm
        self.final_norm = FINAL_NORM
        # endregion
        # region: pooler
        # not part of forward: model.pooler(hidden) gives BERT's pooled output
        self.pooler = Pooler(cfg)
        # endregion
        # region: interleaved
        # the stacks' layers interleaved: layer i comes from stack order[i % len(order)]
        order = ORDER
        stacks = {name: iter(getattr(self, name)) for name in order}
        # every layer, in order
        self.layer_list = [next(stacks[order[i % len(order)]]) for i in range(LAYERS)]
        # endregion
        # region: project_out
        # down to the token table's width
        self.project_out = nn.Linear(cfg.width, cfg.token_width, bias=False)
        # endregion
        # region: head
        self.head = nn.Linear(HEAD_WIDTH, cfg.vocab, bias=HEAD_BIAS)
        # region: tied
        self.head.weight = self.embed.token.weight  # tied: one matrix, counted once
        # endregion
        # region: head_scale
        # T5 v1.0 scales the decoder output by d**-0.5 before the tied head
        self.head_scale = cfg.width**-0.5
        # endregion
        # region: logit_multiplier
        # Cohere's logit_scale; Granite's 1 / logits_scaling
        self.logit_multiplier = cfg.logit_multiplier
        # endregion
        # region: logit_softcap
        self.softcap = cfg.logit_softcap
        # endregion
        # endregion
        # region: mtp
        # multi-token prediction (training only: forward with targets; generation and the logits
        # ignore them), module k predicting the token k + 1 ahead of the next
        self.mtp = nn.ModuleList(
            MTP(cfg, self.embed.token, self.head) for _ in range(cfg.mtp_modules)
        )
        # endregion
        # on the meta device there are only shapes: nothing to initialise
        if not self.embed.token.weight.is_meta:
            self.reset_parameters()

    # insert: reset_parameters

    # insert: mtp_loss

    def forward(
        self,
        input_ids: torch.Tensor,
        # region: token_types
        token_type_ids: torch.Tensor | None = None,
        # endregion
        targets: torch.Tensor | None = None,
        # region: causal
        cache: list[KVCache] | None = None,
        # endregion
    ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        # region: causal
        """Next-token logits (B, T, V) of input_ids (B, T); given targets (B, T), the token that
        should follow each position (-100: none), also their mean cross-entropy: (logits, loss).
        With a cache (see generate), the tokens continue the cached ones and only the last
        position's logits come back: (B, 1, V)."""
        # endregion
        # region: encoder_head
        """Logits (B, T, V) of input_ids (B, T); given targets (B, T) (-100: no target), also their
        mean cross-entropy: (logits, loss)."""
        # endregion
        # region: encoder
        """Hidden states (B, T, d) of input_ids (B, T); given targets (B, T), the original tokens at
        masked positions (-100 elsewhere), also the masked-LM cross-entropy of the hidden states
        against the token embeddings: (hidden, loss)."""
        # endregion
        check_tokens(input_ids, targets)  # shapes and dtypes: free
        # region: causal
        if cache is not None and cache[0].seen == 0:  # a generation's prompt: the ids' range, once
            check_vocab(input_ids, self.cfg.vocab)
        # endregion
        # region: start
        start = cache[0].seen if cache is not None else 0  # the position of the first token here
        # endregion
        x = self.embed(input_ids, token_type_ids, start)  # (B, T, d)
        # region: shared
        embeddings = x  # the shared blocks read them beside each hybrid layer's input
        # endregion
        # region: per_layer
        # each layer's per-layer input, (B, T, P), in the order the layers run
        per_layers = iter(self.embed.per_layer_inputs(input_ids, x).unbind(2))
        # endregion
        # region: kv
        # the keys and values of the last layer of each kind (its window) that computes its own:
        # the last layers reuse them
        kv = {}
        # endregion
        # region: rotary
        # (cos, sin), each (T, rotary_width)
        rope = self.rotary(start, input_ids.shape[1], input_ids.device)
        # endregion
        # region: alibi
        # (1, H, T, S), with the causal mask
        bias = self.alibi(start, input_ids.shape[1], x.device, x.dtype)
        # endregion
        # region: local_rotary
        # the sliding layers' tables
        rope_local = self.rotary_local(start, input_ids.shape[1], input_ids.device)
        # endregion
        # region: several
        blocks = BLOCKS  # every layer, in order
        # endregion
        # region: causal
        caches = cache if cache is not None else [None] * len(blocks)
        # region: shortcut
        later = 0  # a shortcut mixture's routed experts' output, added after the next block
        # endregion
        for block, layer_cache in zip(blocks, caches, strict=True):
            # region: local_rotary
            # a sliding layer: its own tables
            layer_rope = rope_local if block.attn.window is not None else rope
            # endregion
            # region: per_layer
            per_layer = next(per_layers)  # (B, T, P)
            # endregion
            # training: keep the block's input, recompute the rest
            if self.checkpointing and layer_cache is None:
                x = checkpoint(
                    block, x, embeddings, per_layer, layer_rope, bias, kv, use_reentrant=False
                )
            else:
                x = block(x, embeddings, per_layer, layer_rope, bias, kv, layer_cache)
            # region: shortcut
            if isinstance(x, tuple):  # (x, routed): the routed experts' output waits a block
                x, later = x
            else:
                x, later = x + later, 0
            # endregion
        # endregion
        # region: !causal
        for block in blocks:
            # region: local_rotary
            # a sliding layer: its own tables
            layer_rope = rope_local if block.attn.window is not None else rope
            # endregion
            if self.checkpointing:
                x = checkpoint(block, x, embeddings, layer_rope, bias, use_reentrant=False)
            else:
                x = block(x, embeddings, layer_rope, bias)
        # endregion
        # region: final_norm
        x = self.final_norm(x)
        # endregion
        # region: project_out
        x = self.project_out(x)  # (B, T, token_width)
        # endregion
        # region: causal
        if cache is not None:
            x = x[:, -1:]  # generating: only the next token's logits are needed
        # endregion
        # region: head
        # region: head_scale
        x = x * self.head_scale
        # endregion
        logits = self.head(x)  # (B, T, V)
        # region: logit_multiplier
        logits = logits * self.logit_multiplier
        # endregion
        # region: logit_softcap
        logits = self.softcap * torch.tanh(logits / self.softcap)  # soft-capped logits
        # endregion
        if targets is None:
            return logits
        # mean over targets != -100
        loss = F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten(), ignore_index=-100)
        # region: mtp
        loss = loss + self.mtp_loss(x, input_ids, targets, rope)  # + mtp_weight x the MTP losses
        # endregion
        return logits, loss
        # endregion
        # region: !head
        if targets is None:
            return x  # (B, T, d): the hidden states
        # masked LM: the hidden states scored against the token embeddings (BertModel has no MLM
        # head to use)
        logits = x @ self.embed.token.weight.T  # (B, T, V)
        # mean over targets != -100
        loss = F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten(), ignore_index=-100)
        return x, loss
        # endregion
