"""Generation with a KV cache: the generated module's ``generate()`` against transformers' and against itself.

- Greedy tokens equal transformers' ``generate(do_sample=False)`` for a tiny random model of every model type
  we import, weights loaded with ``load_hf_state_dict``, generating past the sliding windows (ring caches wrap).
- The cache is used: the prompt runs once, then one token per call; FlopCounterMode counts far fewer FLOPs than
  re-running the growing sequence, and the tokens are the same as that re-run's argmax.
- The cache's bytes after generating equal ``archcalc memory``'s ``kv_cache_bytes`` at that batch and length.
- Bad arguments and a learned position table too short for prompt + new tokens are clear ``ValueError``s.
"""

from __future__ import annotations

import pytest
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

transformers = pytest.importorskip("transformers")

from archcalc.backends.memory import memory  # noqa: E402
from archcalc.hf import spec_from_hf_config  # noqa: E402
from archcalc.spec.bind import bind  # noqa: E402
from tests.codegen.hf_cases import CASES, T5, configs, generated, hf_model  # noqa: E402
from tests.helpers import TINY, cache_bytes, generate_keeping_cache, module  # noqa: E402

LLAMA = dict(V=97, L=2, d=32, H=4, KV=2, d_ff=48)
DECODERS = [case for case in CASES if not case.startswith(("t5", "bert"))]
PROMPT, NEW = 6, 12  # 18 tokens: past every window of the cases (5)


def _pair(config):
    hf = hf_model(config)
    gen = generated(config)
    model = gen.build().eval()
    gen.load_hf_state_dict(model, hf.state_dict())
    hf.generation_config.eos_token_id = None  # never stop early: both produce exactly NEW tokens
    hf.generation_config.pad_token_id = 0
    hf.generation_config.decoder_start_token_id = 0
    return hf, gen, model


@pytest.mark.parametrize("case", DECODERS)
def test_greedy_tokens_equal_transformers(case):
    config, _ = configs(case)
    hf, _, model = _pair(config)
    ids = torch.randint(0, config.vocab_size, (2, PROMPT), generator=torch.Generator().manual_seed(1))
    theirs = hf.generate(ids, do_sample=False, max_new_tokens=NEW)
    ours = model.generate(ids, NEW, temperature=0)
    assert ours.shape == (2, PROMPT + NEW) and torch.equal(ours, theirs)


@pytest.mark.parametrize("gated", [False, True], ids=["t5", "t5-gated"])
def test_encoder_decoder_greedy_tokens_equal_transformers(gated):
    """T5: the decoder's tokens from the start token (0), as transformers returns them. (Equal encoder and decoder
    depths: transformers' T5 cache assumes them.)"""
    extra = {"feed_forward_proj": "gated-gelu", "tie_word_embeddings": False} if gated else {}
    config = transformers.T5Config(**{**T5, "num_decoder_layers": 2, **extra})
    hf, _, model = _pair(config)
    ids = torch.randint(0, config.vocab_size, (2, 9), generator=torch.Generator().manual_seed(1))
    theirs = hf.generate(ids, do_sample=False, max_new_tokens=NEW)
    ours = model.generate(ids, NEW, temperature=0)
    assert ours.shape == (2, 1 + NEW) and torch.equal(ours, theirs)


@pytest.mark.parametrize("case", DECODERS)
def test_the_cache_holds_what_archcalc_memory_counts(case):
    """After generating, the KV cache's bytes (GQA/MQA heads, MLA latents, windows kept as rings) equal
    `archcalc memory --seq-len PROMPT+NEW --batch 2 --dtype float32`'s kv_cache_bytes, and the state mixers' (their conv
    windows and states) its recurrent state bytes."""
    config, _ = configs(case)
    gen = generated(config)
    model = gen.build().eval()
    cache = generate_keeping_cache(model, torch.randint(0, config.vocab_size, (2, PROMPT)), NEW)
    spec = spec_from_hf_config(config.to_dict(), "tiny.json")
    m = memory(bind(spec, next(iter(spec.sizes))), seq_len=PROMPT + NEW, batch=2, dtype="float32")
    assert cache_bytes(cache) == (m.kv_cache_bytes, m.state_bytes)


@pytest.mark.parametrize("case", ["llama", "gemma2", "deepseek_v3", "gpt2"])
def test_generation_runs_the_prompt_once_then_one_token_at_a_time(case):
    """The forward calls of generate() get the prompt, then single tokens; the tokens equal the argmax of re-running
    the whole sequence without a cache, and that re-run costs several times the FLOPs (FlopCounterMode)."""
    config, _ = configs(case)
    model = generated(config).build().eval()
    ids = torch.randint(0, config.vocab_size, (1, 8), generator=torch.Generator().manual_seed(2))
    lengths = []
    handle = model.register_forward_pre_hook(lambda _, args, kwargs: lengths.append(args[0].shape[1]), with_kwargs=True)
    with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as cached:
        tokens = model.generate(ids, 16, temperature=0)
    handle.remove()
    assert lengths == [8] + [1] * 15
    rerun = ids
    with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as uncached, torch.no_grad():
        for _ in range(16):
            rerun = torch.cat((rerun, model(rerun)[:, -1:].argmax(-1)), dim=1)
    assert torch.equal(tokens, rerun)
    assert cached.get_total_flops() * 4 < uncached.get_total_flops()


def test_sampling_with_top_k_1_is_greedy_and_seeded_sampling_repeats():
    model = module("llama", None, **LLAMA).build().eval()
    ids = torch.randint(0, LLAMA["V"], (2, 4))
    greedy = model.generate(ids, 6, temperature=0)
    assert torch.equal(model.generate(ids, 6, temperature=0.7, top_k=1), greedy)
    torch.manual_seed(5)
    first = model.generate(ids, 6, temperature=1.3, top_k=20)
    torch.manual_seed(5)
    assert torch.equal(model.generate(ids, 6, temperature=1.3, top_k=20), first)
    assert torch.equal(model.generate(ids, 0), ids)


@pytest.mark.parametrize("kwargs, message", [
    (dict(max_new_tokens=-1), "max_new_tokens must be a whole number >= 0"),
    (dict(max_new_tokens=2.5), "max_new_tokens must be a whole number >= 0"),
    (dict(max_new_tokens=True), "max_new_tokens must be a whole number >= 0"),
    (dict(max_new_tokens=3, top_k=0), "top_k must be None or a whole number >= 1"),
    (dict(max_new_tokens=3, top_k=-2), "top_k must be None or a whole number >= 1"),
    (dict(max_new_tokens=3, temperature=-0.5), "temperature must be a number >= 0"),
    (dict(max_new_tokens=3, temperature=float("nan")), "temperature must be a number >= 0"),
])
def test_bad_generate_arguments_are_clear_errors(kwargs, message):
    model = module("gpt2", "small", **TINY).build()
    with pytest.raises(ValueError, match=message):
        model.generate(torch.zeros(1, 3, dtype=torch.long), **kwargs)


@pytest.mark.parametrize("ids", [torch.zeros(1, 3), torch.zeros(3, dtype=torch.long), torch.zeros(1, 0, dtype=torch.long)],
                         ids=["float", "1-d", "empty"])
def test_input_ids_must_be_a_2d_integer_tensor(ids):
    model = module("gpt2", "small", **TINY).build()
    with pytest.raises(ValueError, match="input_ids must be a \\(B, T\\) tensor of token ids"):
        model.generate(ids, 2)


def test_a_learned_position_table_bounds_prompt_plus_new_tokens():
    model = module("gpt2", "small", **TINY).build()  # T = 32 positions
    assert model.generate(torch.zeros(1, 30, dtype=torch.long), 2).shape == (1, 32)
    with pytest.raises(ValueError, match="30 prompt tokens \\+ 3 new ones exceed the 32 positions"):
        model.generate(torch.zeros(1, 30, dtype=torch.long), 3)


def test_a_cache_takes_the_prompt_then_single_tokens():
    model = module("llama", None, **LLAMA).build()
    cache = model.new_cache(1, 10)
    model(torch.zeros(1, 4, dtype=torch.long), cache=cache)
    with pytest.raises(ValueError, match="takes the prompt at once, then one token at a time"):
        model(torch.zeros(1, 2, dtype=torch.long), cache=cache)
    for _ in range(6):
        model(torch.zeros(1, 1, dtype=torch.long), cache=cache)
    with pytest.raises(ValueError, match="holds 10 tokens; 11 do not fit"):
        model(torch.zeros(1, 1, dtype=torch.long), cache=cache)
