"""Template of generation (archcalc.codegen.cache fills it): the ``KVCache`` of one attention layer,
sampling, and the model's ``new_cache`` and ``generate`` (the decoder's in ``Decoder``, the
encoder-decoder's in ``Seq2Seq``).

The cache holds exactly what ``archcalc memory`` counts as the KV cache: for every cached layer, the
keys and values of ``length`` tokens at the layer's key/value heads (GQA and MQA share them), the
compressed latent and rotary key for latent attention, and at most ``window`` tokens for a
sliding-window layer, whose cache is a ring (token p in slot p % window). It is allocated once, for
the prompt and every new token, so after generating its bytes equal ``memory``'s ``kv_cache_bytes``
at that batch and length."""

import torch
from torch import nn

from archcalc.codegen.templates.names import MixerCache, check_vocab


class KVCache:
    """The keys and values of the tokens one attention layer has seen, kept for generation.

    Allocated once, for every token of the generation: (B, KV, slots, width) each. A sliding-window
    layer keeps only its last `window` tokens, in a ring (token p in slot p % window): attention
    does not depend on the order of its keys, whose positions are already in them. The prompt goes
    in at once, then one token at a time."""

    def __init__(self, k: torch.Tensor, v: torch.Tensor, ring: bool = False):
        self.k, self.v, self.ring = k, v, ring
        self.seen = 0  # tokens written so far: the position of the next one

    def update(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Store the keys and values of T new tokens (B, KV, T, width); return those of every token
        they may see."""
        T, slots = k.shape[2], self.k.shape[2]
        if self.seen and T > 1:
            raise ValueError("a KVCache takes the prompt at once, then one token at a time")
        if not self.ring and self.seen + T > slots:
            raise ValueError(f"the KVCache holds {slots} tokens; {self.seen + T} do not fit")
        kept = min(T, slots)  # a ring keeps the last `slots` tokens of a long prompt
        where = torch.arange(self.seen + T - kept, self.seen + T, device=k.device) % slots
        self.k[:, :, where] = k[:, :, T - kept :].to(self.k.dtype)
        self.v[:, :, where] = v[:, :, T - kept :].to(self.v.dtype)
        self.seen += T
        if T > 1:
            return k, v  # the prompt attends to itself, under its causal mask
        filled = min(self.seen, slots)
        return self.k[:, :, :filled], self.v[:, :, :filled]


def sample(logits: torch.Tensor, temperature: float, top_k: int | None) -> torch.Tensor:
    """The next token of each row of logits (B, V): the most likely at temperature 0, else drawn
    from the softmax of logits / temperature, among the top_k most likely only if top_k is given.
    (B, 1) token ids."""
    if temperature == 0:
        return logits.argmax(dim=-1, keepdim=True)
    logits = logits.float() / temperature
    if top_k is not None:
        top = logits.topk(min(top_k, logits.shape[-1]), dim=-1).values
        kth = top[:, -1:]  # (B, 1): the k-th largest
        logits = logits.masked_fill(logits < kth, float("-inf"))
    return torch.multinomial(logits.softmax(dim=-1), num_samples=1)


def check_generate(
    input_ids: torch.Tensor, max_new_tokens: int, temperature: float, top_k: int | None
) -> None:
    """One clear error for each argument of generate() that cannot work."""
    if (
        not isinstance(input_ids, torch.Tensor)
        or input_ids.dim() != 2
        or input_ids.shape[1] < 1
        or input_ids.is_floating_point()
    ):
        raise ValueError(
            "input_ids must be a (B, T) tensor of token ids (an integer dtype) with T >= 1"
        )
    if (
        isinstance(max_new_tokens, bool)
        or not isinstance(max_new_tokens, int)
        or max_new_tokens < 0
    ):
        raise ValueError(f"max_new_tokens must be a whole number >= 0, got {max_new_tokens!r}")
    if (
        isinstance(temperature, bool)
        or not isinstance(temperature, (int, float))
        or not temperature >= 0
    ):
        raise ValueError(f"temperature must be a number >= 0 (0: greedy), got {temperature!r}")
    if top_k is not None and (isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1):
        raise ValueError(f"top_k must be None or a whole number >= 1, got {top_k!r}")


class Layer(nn.Module):
    def new_cache(self, batch: int, length: int) -> KVCache:
        # region: !ring
        """An empty cache for `batch` sequences of up to `length` tokens."""
        weight = self.out.weight  # the cache takes the layer's device and dtype
        like = {"device": weight.device, "dtype": weight.dtype}  # (a local tensor under FSDP2)
        k = torch.zeros(batch, self.kv_heads, length, self.head_width, **like)
        v = torch.zeros(batch, self.kv_heads, length, self.value_width, **like)
        return KVCache(k, v)
        # endregion
        # region: ring
        """An empty cache for `batch` sequences of up to `length` tokens (a window or a chunked
        layer keeps only its last tokens)."""
        # region: banded_only
        span = self.window
        # endregion
        # region: chunked_only
        span = self.chunk
        # endregion
        # region: banded_chunked
        span = self.window if self.window is not None else self.chunk
        # endregion
        slots = length if span is None else min(length, span)
        weight = self.out.weight  # the cache takes the layer's device and dtype
        like = {"device": weight.device, "dtype": weight.dtype}  # (a local tensor under FSDP2)
        k = torch.zeros(batch, self.kv_heads, slots, self.head_width, **like)
        v = torch.zeros(batch, self.kv_heads, slots, self.value_width, **like)
        return KVCache(k, v, ring=span is not None)
        # endregion


class SharingLayer(nn.Module):
    def new_cache(self, batch: int, length: int) -> None:
        """None: this layer keeps no cache; it reads an earlier layer's keys and values."""
        return None


class Decoder(nn.Module):
    def new_cache(self, batch: int, length: int) -> list[KVCache]:
        """An empty KV cache for `batch` sequences of up to `length` tokens: one KVCache per
        layer."""
        blocks = self.blocks
        return [block.attn.new_cache(batch, length) for block in blocks]

    @torch.no_grad()
    def generate(
        self,
        input_ids: torch.Tensor,
        max_new_tokens: int,
        temperature: float = 1.0,
        top_k: int | None = None,
    ) -> torch.Tensor:
        """Continue each row of input_ids (B, T) by max_new_tokens tokens: (B, T + max_new_tokens)
        token ids.

        The prompt runs once and fills the cache (new_cache); then each new token runs alone,
        reading it. temperature=0 takes the most likely token (greedy); top_k samples among the k
        most likely only."""
        check_generate(input_ids, max_new_tokens, temperature, top_k)
        # region: context_check
        if input_ids.shape[1] + max_new_tokens > self.cfg.context:
            raise ValueError(
                f"{input_ids.shape[1]} prompt tokens + {max_new_tokens} new ones exceed the "
                f"{self.cfg.context} positions of the learned position table"
            )
        # endregion
        tokens = input_ids
        cache = self.new_cache(input_ids.shape[0], input_ids.shape[1] + max_new_tokens)
        # (B, V): the prompt, once
        logits = self(input_ids, cache=cache)[:, -1] if max_new_tokens else None
        for step in range(max_new_tokens):
            next_token = sample(logits, temperature, top_k)  # (B, 1)
            tokens = torch.cat((tokens, next_token), dim=1)
            # region: !longrope_rerun
            if step + 1 < max_new_tokens:
                logits = self(next_token, cache=cache)[:, -1]  # one token, reading the cache
            # endregion
            # region: longrope_rerun
            if (
                step + 1 < max_new_tokens
                and tokens.shape[1] == self.cfg.rotary_original_context + 1
            ):
                # LongRoPE, as transformers' Phi-3 generates: past the original context, run the
                # whole sequence again (every cached key was rotated with the short factors; now
                # all use the long ones)
                cache = self.new_cache(input_ids.shape[0], input_ids.shape[1] + max_new_tokens)
                logits = self(tokens, cache=cache)[:, -1]
            elif step + 1 < max_new_tokens:
                logits = self(next_token, cache=cache)[:, -1]  # one token, reading the cache
            # endregion
        return tokens


class MixerDecoder(nn.Module):
    def new_cache(self, batch: int, length: int) -> list[MixerCache]:
        """An empty state for `batch` sequences: one MixerCache per layer, of one size whatever the
        `length`."""
        return [block.mixer.new_cache(batch) for block in self.blocks]


class HybridDecoder(nn.Module):
    def new_cache(self, batch: int, length: int) -> list[KVCache | MixerCache]:
        """An empty cache for `batch` sequences of up to `length` tokens, one per layer in the order
        they run: a KVCache for an attention layer, a MixerCache (of one size whatever the
        `length`) for a state-space layer."""
        blocks = self.blocks
        # region: !mlp_alone
        return [
            block.mixer.new_cache(batch)
            if hasattr(block, "mixer")
            else block.attn.new_cache(batch, length)
            for block in blocks
        ]
        # endregion
        # region: mlp_alone
        return [
            block.mixer.new_cache(batch)
            if hasattr(block, "mixer")
            else block.attn.new_cache(batch, length)
            if hasattr(block, "attn")
            else None  # a layer of an MLP alone keeps nothing
            for block in blocks
        ]
        # endregion


class ParallelCache:
    """What one layer of attention and a mixer keeps for generation: the attention's keys and
    values (a KVCache) and the mixer's state (a MixerCache)."""

    def __init__(self, kv: KVCache, state: MixerCache):
        self.kv, self.state = kv, state

    @property
    def seen(self) -> int:  # tokens so far
        return self.kv.seen


class ParallelDecoder(nn.Module):
    def new_cache(self, batch: int, length: int) -> list[ParallelCache]:
        """An empty cache for `batch` sequences of up to `length` tokens: per layer, a KVCache for
        its attention and a MixerCache (of one size whatever the `length`) for its mixer."""
        blocks = self.blocks
        return [
            ParallelCache(block.attn.new_cache(batch, length), block.mixer.new_cache(batch))
            for block in blocks
        ]


class SharedDecoder(nn.Module):
    def new_cache(self, batch: int, length: int) -> list[ParallelCache | MixerCache]:
        """An empty cache for `batch` sequences of up to `length` tokens, one per layer in the order
        they run: a MixerCache (of one size whatever the `length`) for its Mamba2; a layer that
        runs a shared block keeps with it a KVCache of its own for that block's attention."""
        blocks = self.blocks
        return [
            ParallelCache(block.shared.attn.new_cache(batch, length), block.mixer.new_cache(batch))
            if hasattr(block, "shared")
            else block.mixer.new_cache(batch)
            for block in blocks
        ]


class Seq2Seq(nn.Module):
    def new_cache(
        self, batch: int, length: int, memory_length: int
    ) -> list[tuple[KVCache, KVCache]]:
        """An empty cache for each decoder block: its self-attention's `length` tokens and the keys
        and values of the encoder output's `memory_length` tokens."""
        return [
            (block.attn.new_cache(batch, length), block.cross_attn.new_cache(batch, memory_length))
            for block in self.decoder.blocks
        ]

    @torch.no_grad()
    def generate(
        self,
        input_ids: torch.Tensor,
        max_new_tokens: int,
        temperature: float = 1.0,
        top_k: int | None = None,
        start_token: int = 0,
    ) -> torch.Tensor:
        """The decoder's tokens for each row of input_ids (B, S): start_token, then max_new_tokens
        generated tokens, (B, 1 + max_new_tokens), as transformers' generate() returns them for T5
        (whose start token is 0, the pad token).

        The encoder runs once; the decoder runs the start token, then one token at a time, attending
        to a KV cache of its own tokens and to the encoder output's keys and values, computed once.
        temperature=0 is greedy."""
        check_generate(input_ids, max_new_tokens, temperature, top_k)
        check_vocab(input_ids, self.cfg.vocab)  # the ids' range, once per generation
        if not 0 <= start_token < self.cfg.vocab:
            raise ValueError(
                f"start_token must lie in [0, {self.cfg.vocab}), the vocabulary; got {start_token}"
            )
        memory = self.encoder(self.embed(input_ids))  # (B, S, d)
        tokens = input_ids.new_full((input_ids.shape[0], 1), start_token)  # (B, 1)
        cache = self.new_cache(input_ids.shape[0], 1 + max_new_tokens, memory.shape[1])
        logits = self.decode(tokens, memory, cache)[:, -1] if max_new_tokens else None  # (B, V)
        for step in range(max_new_tokens):
            next_token = sample(logits, temperature, top_k)  # (B, 1)
            tokens = torch.cat((tokens, next_token), dim=1)
            if step + 1 < max_new_tokens:
                logits = self.decode(next_token, memory, cache)[:, -1]
        return tokens
