"""Generation, from ``templates/generation.py``: the ``KVCache`` of one attention layer, sampling, and ``generate``.

The cache holds exactly what ``archcalc memory`` counts as the KV cache: for every cached layer, the keys
and values of ``length`` tokens at the layer's key/value heads (GQA and MQA share them), the compressed
latent and rotary key for latent attention, and at most ``window`` tokens for a sliding-window layer,
whose cache is a ring (token p in slot p % window). It is allocated once, for the prompt and every new
token, so after generating its bytes equal ``memory``'s ``kv_cache_bytes`` at that batch and length.
"""

from __future__ import annotations

from archcalc.codegen.template import unit

KV_CACHE = unit("generation", "KVCache")
SAMPLE = unit("generation", "sample") + "\n\n\n" + unit("generation", "check_generate")
PARALLEL_CACHE = unit("generation", "ParallelCache")
SEQ2SEQ_NEW_CACHE = unit("generation", "Seq2Seq.new_cache")
SEQ2SEQ_GENERATE = unit("generation", "Seq2Seq.generate")


def generate_method(learned_positions: bool, longrope_rerun: bool = False) -> str:
    """The decoder model's ``generate``; with a learned position table it refuses to go past its length;
    ``longrope_rerun``: it runs the sequence again once it outgrows LongRoPE's original context (transformers'
    Phi-3 drops its cache then and runs the whole sequence again, so that every key gets the long factors)."""
    return unit("generation", "Decoder.generate", {"context_check": learned_positions, "longrope_rerun": longrope_rerun})


def new_cache_method(stacks: list[str], interleaved: bool = False, mixers: bool = False, hybrid: bool = False,
                     mlp_alone: bool = False, parallel: bool = False, shared: bool = False) -> str:
    """The decoder model's ``new_cache``: one KVCache per attention layer, in the order the layers run (``interleaved``:
    the model's ``layer_list`` gives it); ``mixers``: one MixerCache per state-mixer layer (a model of mixers only,
    in the order they run too: two kinds of mixer interleave);
    ``hybrid``: state-space and attention layers, each with its own kind of cache; ``mlp_alone`` (with ``hybrid``):
    layers of an MLP alone too (Nemotron-H's), which keep nothing (None); ``parallel``: every layer attention and a
    mixer side by side (Falcon-H1's), a ParallelCache each; ``shared``: Mamba2 layers, some running a shared
    transformer block first (Zamba2's), a MixerCache each and with it, in those, a KVCache (a ParallelCache)."""
    blocks = " + ".join(f"list(self.{name})" for name in stacks) if len(stacks) > 1 else f"self.{stacks[0]}"
    names = {"self.blocks": "self.layer_list" if interleaved else blocks}
    if shared:
        return unit("generation", "SharedDecoder.new_cache", names=names)
    if parallel:
        return unit("generation", "ParallelDecoder.new_cache", names=names)
    if hybrid:
        return unit("generation", "HybridDecoder.new_cache", {"mlp_alone": mlp_alone}, names)
    return unit("generation", "MixerDecoder.new_cache" if mixers else "Decoder.new_cache", names=names)
