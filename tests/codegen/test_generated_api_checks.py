"""What a generated module's public functions refuse, each in one clear ValueError (never torch's internal error, and
never a silently different answer):

- forward's targets must have input_ids' shape (decoder_input_ids' for an encoder-decoder) and be int64; input_ids
  must be (B, T) int64/int32 token ids. Shapes and dtypes only: forward reads no value (no wait for the device, no
  graph break), so it still runs on the meta device and compiles to one graph.
- Token ids outside the vocabulary: refused where a generation starts (the prompt), once per generate() call.
- A mixture of experts' forward on the meta device (its routing is data-dependent) says so, for every routing kind.
- load_hf_state_dict compares each HF_COPIES key (the second name of a tied tensor) with the tensor it copies: the same
  tensor or equal values load, anything else is refused naming the key.
"""

from __future__ import annotations

import pytest
import torch

from tests.helpers import TINY, codegen_spec, module

LLAMA = dict(V=97, L=2, d=32, H=4, KV=2, d_ff=48)
T5 = dict(V=101, L=2, d=32, H=4, d_head=6, d_ff=40, buckets=8)
TARGETS = "targets must be int64 token ids shaped like"


def _one_line(error: pytest.ExceptionInfo) -> str:
    message = str(error.value)
    assert "\n" not in message
    return message


def _models():
    """A decoder with learned positions, one with rotary positions, a mixture of experts, an encoder (masked-LM loss)."""
    return {"gpt2": module("gpt2", "small", **TINY).build(), "llama": module("llama", None, **LLAMA).build(),
            "moe": module(codegen_spec("moe"), None).build(), "encoder": module(codegen_spec("encoder"), None).build()}


@pytest.fixture(scope="module")
def models():
    torch.manual_seed(0)
    return _models()


@pytest.mark.parametrize("name", ["gpt2", "llama", "moe", "encoder"])
@pytest.mark.parametrize("targets", ["transposed", "shorter", "float", "int32", "one-hot"])
def test_targets_of_another_shape_or_dtype_are_refused(models, name, targets):
    model = models[name]
    ids = torch.randint(0, 90, (2, 5))
    good = torch.randint(0, 90, (2, 5))
    bad = {"transposed": good.T.contiguous(), "shorter": good[:, :4], "float": good.float(), "int32": good.int(),
           "one-hot": torch.nn.functional.one_hot(good, 97)}[targets]
    with pytest.raises(ValueError, match=TARGETS) as error:
        model(ids, targets=bad)
    assert f"got {bad.dtype} of shape {tuple(bad.shape)}" in _one_line(error)
    output, loss = model(ids, targets=good)  # the same call with good targets works
    assert torch.isfinite(loss)


@pytest.mark.parametrize("ids", [torch.zeros(2, 5), torch.zeros(5, dtype=torch.long), torch.zeros(2, 0, dtype=torch.long),
                                 torch.zeros(2, 5, dtype=torch.int16)], ids=["float", "1-d", "empty", "int16"])
def test_input_ids_of_another_shape_or_dtype_are_refused(models, ids):
    for model in models.values():
        with pytest.raises(ValueError, match=r"input_ids must be a \(B, T\) tensor of token ids \(int64 or int32\)"):
            model(ids)


def test_the_encoder_decoder_checks_its_decoder_targets():
    model = module("t5", None, **T5).build()
    ids, decoder_ids = torch.randint(0, 101, (2, 7)), torch.randint(0, 101, (2, 4))
    with pytest.raises(ValueError, match=TARGETS + " decoder_input_ids, \\(2, 4\\)"):
        model(ids, decoder_ids, targets=torch.randint(0, 101, (4, 2)))
    with pytest.raises(ValueError, match="targets must be"):
        model(ids, decoder_ids, targets=ids)  # the encoder's shape is not the decoder's
    with pytest.raises(ValueError, match="decoder_input_ids must be a \\(B, T\\) tensor"):
        model(ids, decoder_ids.float())
    logits, loss = model(ids, decoder_ids, targets=torch.randint(0, 101, (2, 4)))
    assert logits.shape == (2, 4, 101) and torch.isfinite(loss)


def test_the_encoder_decoder_generate_checks_the_ids_and_the_start_token():
    model = module("t5", None, **T5).build().eval()
    with pytest.raises(ValueError, match=r"token ids must lie in \[0, 101\), the vocabulary; got ids from 1 to 101"):
        model.generate(torch.tensor([[1, 101]]), 2)
    with pytest.raises(ValueError, match=r"start_token must lie in \[0, 101\), the vocabulary; got -1"):
        model.generate(torch.tensor([[1, 2]]), 2, start_token=-1)
    assert model.generate(torch.tensor([[0, 100]]), 2, temperature=0).shape == (1, 3)


def test_shape_checks_leave_the_meta_device_and_int32_ids_working():
    model = module("gpt2", "small", **TINY).build(device="meta")
    ids = torch.zeros(2, 5, dtype=torch.long, device="meta")
    logits, loss = model(ids, targets=ids)
    assert logits.shape == (2, 5, 97) and loss.is_meta
    model = module("gpt2", "small", **TINY).build()
    assert torch.equal(model(torch.arange(5).view(1, 5).int()), model(torch.arange(5).view(1, 5)))


@pytest.mark.parametrize("name", ["gpt2", "llama", "moe"])
@pytest.mark.parametrize("bad", ["negative", "vocab"])
def test_generate_refuses_token_ids_outside_the_vocabulary(models, name, bad):
    model = models[name]
    vocab = model.cfg.vocab
    prompt = torch.tensor([[1, 2, -1 if bad == "negative" else vocab]])
    with pytest.raises(ValueError, match=f"token ids must lie in \\[0, {vocab}\\), the vocabulary; got ids from") as error:
        model.generate(prompt, 2)
    assert str(prompt.min().item()) in _one_line(error) and str(prompt.max().item()) in _one_line(error)
    assert model.generate(torch.tensor([[0, vocab - 1]]), 2, temperature=0).shape == (1, 4)


def test_the_checks_of_a_training_forward_read_no_value(models):
    """Training's forward checks shapes and dtypes only: with targets it still compiles to one graph (reading a value,
    as a range check does, would break it and wait for the device every step); the range is checked on a generation's
    prompt."""
    ids = torch.randint(0, 97, (2, 8))
    torch._dynamo.reset()
    compiled = torch.compile(models["gpt2"], backend="eager", fullgraph=True)  # any value read is an error here
    logits, loss = compiled(ids, targets=ids)
    assert torch.allclose(loss, models["gpt2"](ids, targets=ids)[1])
    with pytest.raises(ValueError, match=TARGETS):  # compiled as usual, a refusal is still the one clear ValueError
        torch.compile(models["gpt2"], backend="eager")(ids, targets=ids.T.contiguous())


# -- a mixture of experts on the meta device ------------------------------------------------------------------------


@pytest.mark.parametrize("case", ["mixtral", "olmoe", "deepseek_v3", "llama4_text-scout"])
def test_a_mixture_of_experts_on_meta_says_routing_needs_values(case):
    """Every routing kind (Mixtral's softmax over the chosen, a softmax over all, DeepSeek's sigmoid, Llama 4's weighted
    input) refuses the meta device with the reason and what to do, not torch's data-dependent NotImplementedError."""
    from tests.codegen.hf_cases import configs, generated  # skips without transformers

    config, _ = configs(case)
    model = generated(config).build(device="meta")
    with pytest.raises(ValueError) as error:
        model(torch.zeros(1, 4, dtype=torch.long, device="meta"))
    message = _one_line(error)
    assert "routes each token by value" in message and "build it on the CPU or a GPU" in message and "archcalc flops" in message


# -- load_hf_state_dict and the second names of tied tensors --------------------------------------------------------


@pytest.mark.parametrize("case", ["gpt2", "gemma", "bloom", "t5"])
def test_a_tied_copy_is_compared_not_skipped(case):
    from tests.codegen.hf_cases import configs, generated, hf_model  # skips without transformers

    config, _ = configs(case)
    hf, module_ = hf_model(config), generated(config)
    model = module_.build()
    state = dict(hf.state_dict())
    assert module_.HF_COPIES and set(module_.HF_COPIES) <= set(state)
    module_.load_hf_state_dict(model, state)  # transformers lists the tied tensor itself under both names
    module_.load_hf_state_dict(model, {k: v.clone() for k, v in state.items()})  # equal values, other tensors
    for copy in module_.HF_COPIES:
        for bad in (state[copy] + 1, torch.zeros(5, 5)):
            with pytest.raises(ValueError, match=f"{copy} differs from {module_.HF_COPIES[copy]}") as error:
                module_.load_hf_state_dict(model, dict(state, **{copy: bad}))
            assert "tied" in _one_line(error)
