"""Parity with transformers: for each supported model type, a tiny random transformers model (fp32, CPU,
eager attention) and the module archcalc generates from the same config (through the HF importer) give
the same logits once ``load_hf_state_dict`` has copied the weights: relative error (max abs difference /
max abs value) below 1e-4. Every parameter is perturbed first, so norms and biases that transformers
initialises to ones and zeros are tested too (and DeepSeek-V3's e_score_correction_bias buffer)."""

from __future__ import annotations

import pytest
import torch

transformers = pytest.importorskip("transformers")

from tests.codegen.hf_cases import CASES, TOLERANCE  # noqa: E402
from tests.codegen.hf_cases import configs as _configs  # noqa: E402
from tests.codegen.hf_cases import generated as _generated  # noqa: E402
from tests.codegen.hf_cases import hf_model as _hf_model  # noqa: E402
from tests.codegen.hf_cases import rel as _rel  # noqa: E402


@pytest.mark.parametrize("fused", [False, True], ids=["as-specified", "fused"])
@pytest.mark.parametrize("case", list(CASES))
def test_logits_match_transformers(case, fused):
    """``fused``: with --fuse-projections (one qkv, one gate_up), loaded from transformers' separate tensors."""
    config, seq = _configs(case)
    hf = _hf_model(config)
    module = _generated(config, fused)
    model = module.build().eval()
    module.load_hf_state_dict(model, hf.state_dict())
    ids = torch.randint(0, config.vocab_size, (2, seq), generator=torch.Generator().manual_seed(1))
    if config.model_type == "t5":  # encoder and decoder inputs of different lengths
        dec = torch.randint(0, config.vocab_size, (2, seq - 3), generator=torch.Generator().manual_seed(2))
        with torch.no_grad():
            ours, out = model(ids, dec), hf(input_ids=ids, decoder_input_ids=dec)
        assert ours.shape == out.logits.shape and _rel(ours, out.logits) < TOLERANCE
        return
    with torch.no_grad():
        ours = model(ids)
        out = hf(ids)
    if config.model_type == "bert":
        assert _rel(ours, out.last_hidden_state) < TOLERANCE
        assert _rel(model.pooler(ours), out.pooler_output) < TOLERANCE
    else:
        assert ours.shape == out.logits.shape
        assert _rel(ours, out.logits) < TOLERANCE


def test_a_wrong_shape_or_a_leftover_tensor_is_an_error():
    config, _ = _configs("llama")
    hf, module = _hf_model(config), _generated(config)
    model = module.build()
    state = dict(hf.state_dict())
    state["model.layers.0.self_attn.q_proj.weight"] = state["model.layers.0.self_attn.q_proj.weight"][:, :-1]
    with pytest.raises(ValueError, match="blocks.0.attn.q.weight"):
        module.load_hf_state_dict(model, state)
    state = dict(hf.state_dict(), extra=torch.zeros(1))
    with pytest.raises(ValueError, match="extra"):
        module.load_hf_state_dict(model, state)


def test_fused_projections_are_one_parameter_loaded_from_three():
    config, _ = _configs("llama")
    hf, module = _hf_model(config), _generated(config, fused=True)
    model = module.build()
    names = {name for name, _ in model.named_parameters()}
    assert "blocks.0.attn.qkv.weight" in names and "blocks.0.mlp.gate_up.weight" in names
    assert not {"blocks.0.attn.q.weight", "blocks.0.mlp.gate.weight"} & names
    module.load_hf_state_dict(model, hf.state_dict())
    state = hf.state_dict()
    q, k, v = (state[f"model.layers.1.self_attn.{p}_proj.weight"] for p in "qkv")
    assert torch.equal(model.blocks[1].attn.qkv.weight, torch.cat([q, k, v]))


def _has_experts(case: str) -> bool:
    from archcalc.hf import spec_from_hf_config
    from archcalc.ir import lower
    from archcalc.spec.bind import bind

    spec = spec_from_hf_config(_configs(case)[0].to_dict(), "tiny.json")
    return any(c.kind == "moe" for _, c in lower(bind(spec, next(iter(spec.sizes)))).root.walk())


DENSE = [case for case in CASES if not _has_experts(case)]  # from the tiny models themselves: no list to keep up


@pytest.mark.parametrize("case", DENSE)
def test_fused_dense_families_compile_to_one_graph(case):
    """torch.compile sees one graph, no breaks, for every family without experts (MoE layers dispatch tokens with
    data-dependent shapes and break the graph there; see docs/training.md). Where CUDA is, the chunked scans (Mamba2,
    Gated DeltaNet) run their cumsums eagerly (Inductor fails on some there): a break at each, no other."""
    config, seq = _configs(case)
    module = _generated(config, fused=True)
    model = module.build()
    ids = torch.randint(0, config.vocab_size, (2, seq))
    args = (ids, ids[:, :5]) if config.model_type == "t5" else (ids,)
    explanation = torch._dynamo.explain(model)(*args)
    eager = ["cumsum"] if torch.cuda.is_available() and hasattr(module, "cumsum") else []
    assert explanation.graph_count == explanation.graph_break_count + 1
    assert all(any(f"function {name} at" in r.reason for name in eager) for r in explanation.break_reasons)
    assert (explanation.graph_break_count > 0) == bool(eager)


@pytest.mark.parametrize("case", list(CASES))
def test_reset_parameters_initialises_a_model_materialised_from_meta(case):
    """build(device="meta"), to_empty, reset_parameters: every parameter and buffer is written, and those that
    build() sets to a constant (norm weights, biases, sinks, DeepSeek's score bias) get that constant."""
    config, _ = _configs(case)
    module = _generated(config, fused=True)
    torch.manual_seed(0)
    built = module.build()
    model = module.build(device="meta").to_empty(device="cpu")
    with torch.no_grad():
        for t in [*model.parameters(), *model.buffers()]:
            t.fill_(float("nan"))
        model.reset_parameters()
    reference = dict(built.state_dict())
    for name, tensor in model.state_dict().items():
        assert torch.isfinite(tensor).all(), name
        expected = reference[name]
        if expected.numel() > 1 and bool((expected == expected.flatten()[0]).all()):
            assert torch.equal(tensor, expected), name  # a constant: ones or zeros
        elif expected.numel() > 100:
            assert 0.5 < tensor.std().item() / expected.std().item() < 2, name  # the same random init
    built_buffers = dict(built.named_buffers())  # rotary frequencies: computed, the same
    assert all(torch.equal(buffer, built_buffers[name]) for name, buffer in model.named_buffers())


@pytest.mark.parametrize("fused", [False, True], ids=["as-specified", "fused"])
@pytest.mark.parametrize("case", list(CASES))
def test_to_hf_state_dict_is_the_inverse_of_loading(case, fused):
    """Load transformers' weights, export them again: every tensor of transformers' state_dict comes back equal, under
    its name, and transformers loads the export with strict=True (also after our weights change)."""
    config, _ = _configs(case)
    hf = _hf_model(config)
    module = _generated(config, fused)
    model = module.build()
    module.load_hf_state_dict(model, hf.state_dict())
    exported = module.to_hf_state_dict(model)
    reference = hf.state_dict()
    assert set(exported) == set(reference)
    for name, tensor in reference.items():
        assert exported[name].shape == tensor.shape and torch.equal(exported[name], tensor), name
    with torch.no_grad():  # new weights of ours: transformers loads them strictly and computes the same outputs
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    hf.load_state_dict(module.to_hf_state_dict(model), strict=True)
    ids = torch.randint(0, config.vocab_size, (2, 7), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        if config.model_type == "t5":
            ours, theirs = model(ids, ids[:, :5]), hf(input_ids=ids, decoder_input_ids=ids[:, :5]).logits
        elif config.model_type == "bert":
            ours, theirs = model(ids), hf(ids).last_hidden_state
        else:
            ours, theirs = model(ids), hf(ids).logits
    assert _rel(ours, theirs) < TOLERANCE


@pytest.mark.parametrize("case", list(CASES))
def test_the_loss_equals_transformers(case):
    """forward(..., targets=...) gives transformers' loss: a decoder's next-token cross-entropy (transformers shifts
    `labels` itself), T5's with labels (its decoder inputs are the labels shifted right behind the start token 0);
    BERT, which has no loss in BertModel, the masked-LM loss of its hidden states against the token embeddings."""
    config, seq = _configs(case)
    hf = _hf_model(config)
    module = _generated(config)
    model = module.build().eval()
    module.load_hf_state_dict(model, hf.state_dict())
    ids = torch.randint(0, config.vocab_size, (2, seq), generator=torch.Generator().manual_seed(4))
    with torch.no_grad():
        if config.model_type == "t5":
            labels = ids[:, :6].contiguous()  # transformers views it
            decoder_ids = torch.cat([torch.zeros_like(labels[:, :1]), labels[:, :-1]], dim=1)
            logits, loss = model(ids, decoder_ids, targets=labels)
            reference = hf(input_ids=ids, decoder_input_ids=decoder_ids, labels=labels).loss  # transformers' own shift needs
            assert abs(loss.item() - reference.item()) < 1e-4  # decoder_start_token_id, which a bare T5Config lacks
        elif config.model_type == "bert":
            targets = torch.full_like(ids, -100)
            targets[:, 3] = ids[:, 3]  # one masked position per row
            hidden, loss = model(ids, targets=targets)
            reference = torch.nn.functional.cross_entropy(hidden[:, 3] @ model.embed.token.weight.T, ids[:, 3])
            assert torch.equal(hidden, model(ids)) and abs(loss.item() - reference.item()) < 1e-6
        else:
            logits, loss = model(ids[:, :-1], targets=ids[:, 1:])
            assert abs(loss.item() - hf(ids, labels=ids).loss.item()) < 1e-4


def _fused_checkpoint(case: str) -> bool:
    """Whether the case's checkpoints store q, k and v in one tensor (the weight map cuts q out of it)."""
    from archcalc.hf.build import family_of
    from archcalc.hf.weights import LAYOUTS

    def cuts(recipe) -> bool:
        return isinstance(recipe, tuple) and (str(recipe[0]).startswith("qkv_") or any(cuts(r) for r in recipe[1:]))

    layout = LAYOUTS[family_of(_configs(case)[0].model_type).origin.weights]
    return cuts(layout.weights.get("blocks.{i}.attn.q.weight"))


FUSED_CHECKPOINTS = [case for case in CASES if _fused_checkpoint(case)]  # GPT-2, NeoX, Falcon, Phi-3: from the maps


@pytest.mark.parametrize("case", FUSED_CHECKPOINTS)
def test_separate_projections_load_and_export_fused_checkpoints(case):
    """--separate-projections (what tensor parallelism splits) on families whose checkpoints fuse q/k/v: the thirds
    of GPT-2's c_attn, NeoX's and Falcon's per-group query_key_value, Phi-3's qkv_proj and gate_up_proj."""
    from archcalc.codegen.emit import emit
    from archcalc.codegen.load import load_source
    from archcalc.hf import spec_from_hf_config
    from archcalc.ir import lower
    from archcalc.spec.bind import bind
    from archcalc.spec.transform import separate_projections

    config, seq = _configs(case)
    hf = _hf_model(config)
    spec = separate_projections(spec_from_hf_config(config.to_dict(), "tiny.json"))
    module = load_source(emit(lower(bind(spec, next(iter(spec.sizes)))), "test"))
    model = module.build().eval()
    assert "blocks.0.attn.q.weight" in dict(model.named_parameters())
    module.load_hf_state_dict(model, hf.state_dict())
    ids = torch.randint(0, config.vocab_size, (2, seq), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        assert _rel(model(ids), hf(ids).logits) < TOLERANCE
    exported = module.to_hf_state_dict(model)
    assert all(torch.equal(exported[k], v) for k, v in hf.state_dict().items())
