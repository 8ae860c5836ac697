"""Multi-token prediction modules in the generated module (``archcalc generate --with-mtp``): the parameters are
``archcalc count --with-mtp``'s, name by name; forward with targets and a training step cost exactly what ``archcalc
flops --with-mtp`` counts (FlopCounterMode); the modules learn; with their weight at 0 the loss is the plain model's;
the weights go to the checkpoint's layout (module k as ``model.layers.{L + k}``) and back.

The configs are hf_cases' tiny ones (MTP_CASES: the specs with a ``model.mtp`` section). transformers builds no MTP
module, so its models are the oracle of the main model only (test_hf_parity.py)."""

from __future__ import annotations

import dataclasses
import functools
import json

import pytest
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

from archcalc.backends.count import count
from archcalc.backends.flops import flops
from archcalc.codegen.emit import emit
from archcalc.codegen.verify import verify
from archcalc.hf import spec_from_hf_config
from archcalc.ir import leaves, lower
from archcalc.ir.mtp import with_mtp
from archcalc.spec.bind import bind
from archcalc.spec.transform import fuse_projections
from tests.codegen.hf_cases import MTP_CASES, build_hf, configs
from tests.helpers import loaded

SEQ = 9  # tokens per sequence: more than the modules look ahead


@functools.cache
def _lowered(case: str, modules: int = 1, mtp: bool = True, fused: bool = False, dense: int | None = None):
    """The IR of the tiny config of ``case`` with ``modules`` MTP modules, counted (``mtp``) or not (``dense``: its
    first_k_dense_replace instead)."""
    config, _ = configs(case)
    data = json.loads(config.to_json_string(use_diff=False)) | {"num_nextn_predict_layers": modules}
    data |= {"first_k_dense_replace": dense} if dense is not None else {}
    spec = spec_from_hf_config(data, "tiny.json")
    spec = with_mtp(spec, "shared") if mtp else spec
    spec = fuse_projections(spec) if fused else spec
    return lower(bind(spec, next(iter(spec.sizes))))


def _module(low):
    return loaded(emit(low, "test"))


def _value(low, expr) -> int:
    return int(expr.xreplace(low.binding.numeric()))


def _batch(low, batch: int = 2, seq: int = SEQ, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    tokens = torch.randint(0, _value(low, low.root.attrs.vocab), (batch, seq + 1), generator=g)
    return tokens[:, :-1], tokens[:, 1:]


@pytest.mark.parametrize("case", MTP_CASES)
@pytest.mark.parametrize("modules", [1, 2])
def test_parameters_are_the_count_with_mtp(case, modules):
    low = _lowered(case, modules)
    module = _module(low)
    assert verify(low, module=module).ok  # every name and shape, the ties to the embedding and head
    model = module.build(device="meta")
    total = count(low.binding).total
    assert sum(p.numel() for p in model.parameters()) == total == module.PARAMETERS
    assert total > count(_lowered(case, modules, mtp=False).binding).total
    assert len(model.mtp) == modules and model.mtp[0].embed is model.embed.token and model.mtp[0].head is model.head


@pytest.mark.parametrize("case", MTP_CASES)
@pytest.mark.parametrize("modules, batch, seq", [(1, 2, 7), (2, 1, 2)])  # seq 2: module 2 has no target
def test_forward_and_training_step_are_the_flops_with_mtp(case, modules, batch, seq):
    """A forward with targets runs every MTP module over all seq positions; FlopCounterMode (on the CPU: routing reads
    values; SDPA's math backend, counted as its matmuls) = forward_matmul, and with backward = train_step_matmul."""
    low = _lowered(case, modules)
    torch.manual_seed(0)
    model = _module(low).build()
    ids, targets = _batch(low, batch, seq)
    exact = flops(low.binding, seq, batch, lowered=low)
    assert exact.by_role["mtp"] > 0
    with sdpa_kernel(SDPBackend.MATH):
        with FlopCounterMode(display=False) as forward:
            model(ids, targets=targets)
        assert forward.get_total_flops() == exact.forward_matmul
        with FlopCounterMode(display=False) as step:
            model(ids, targets=targets)[1].backward()
        # (DeepSeek Sparse Attention's indexer only selects keys: no gradient flows through its scores, so backward
        # is not twice its forward; test_sparse_attention.py checks its forward only too)
        if not any(node.kind == "indexer" for _, node in low.root.walk()):
            assert step.get_total_flops() == exact.train_step_matmul
        with FlopCounterMode(display=False) as logits:  # without targets: the main model only
            model(ids)
    plain = flops(_lowered(case, modules, mtp=False).binding, seq, batch)
    assert logits.get_total_flops() == plain.forward_matmul < exact.forward_matmul


def test_training_steps_reduce_the_loss():
    low = _lowered(MTP_CASES[0], modules=2)
    torch.manual_seed(0)
    model = _module(low).build()
    ids, targets = _batch(low)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    losses, first = [], [m.eh_proj.weight.detach().clone() for m in model.mtp]
    for _ in range(6):
        loss = model(ids, targets=targets)[1]
        loss.backward()
        assert all(m.eh_proj.weight.grad.abs().sum() > 0 for m in model.mtp)  # both modules learn
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.item())
    assert losses[-1] < 0.8 * losses[0]
    assert not any(torch.equal(m.eh_proj.weight, w) for m, w in zip(model.mtp, first, strict=True))


@pytest.mark.parametrize("case", MTP_CASES)
def test_weight_zero_gives_the_plain_models_loss(case):
    """mtp_weight = 0: the loss and logits of the module generated without MTP, with the same weights; generation
    ignores the modules."""
    low = _lowered(case)
    module, plain_module = _module(low), _module(_lowered(case, mtp=False))
    torch.manual_seed(0)
    model = module.build().eval()
    plain = plain_module.build().eval()
    state = model.state_dict()
    plain.load_state_dict({k: v for k, v in state.items() if not k.startswith("mtp.")})
    silent = module.Transformer(dataclasses.replace(module.Config(), mtp_weight=0.0)).eval()
    silent.load_state_dict(state)
    ids, targets = _batch(low)
    with torch.no_grad():
        logits, loss = silent(ids, targets=targets)
        plain_logits, plain_loss = plain(ids, targets=targets)
        assert torch.equal(loss, plain_loss) and torch.equal(logits, plain_logits)
        assert torch.equal(model(ids), plain(ids))
        weighted = model(ids, targets=targets)[1]
    assert module.Config().mtp_weight == 0.3 and weighted > loss  # DeepSeek-V3's lambda early in training
    prompt = ids[:, :4]
    assert torch.equal(model.generate(prompt, 3, temperature=0), plain.generate(prompt, 3, temperature=0))


@pytest.mark.parametrize("case", MTP_CASES)
def test_checkpoint_layout_round_trip(case):
    """to_hf_state_dict writes module k as the layer after the model's L layers, model.layers.{L + k} (enorm, hnorm,
    eh_proj, the block, shared_head.norm, and the copies embed_tokens and shared_head.head); load_hf_state_dict reads it
    back. The rest is transformers' model's state_dict (it loads strictly); the module generated without MTP refuses
    the extra layers as today."""
    modules = 2
    low, plain_low = _lowered(case, modules), _lowered(case, mtp=False)
    module, plain_module = _module(low), _module(plain_low)
    torch.manual_seed(0)
    model = module.build()
    with torch.no_grad():  # the norms off their ones, so that a swap would show
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.1)
    state = module.to_hf_state_dict(model)
    config, _ = configs(case)
    layers = config.num_hidden_layers
    extra = {k for k in state if any(k.startswith(f"model.layers.{layers + j}.") for j in range(modules))}
    plain_keys = set(plain_module.to_hf_state_dict(plain_module.build(device="meta")))
    assert set(state) - extra == plain_keys
    for j in range(modules):
        layer = f"model.layers.{layers + j}."
        own = {layer + n for n in ("enorm.weight", "hnorm.weight", "eh_proj.weight", "shared_head.norm.weight")}
        assert own <= extra and state[layer + "eh_proj.weight"].shape == (config.hidden_size, 2 * config.hidden_size)
        assert state[layer + "embed_tokens.weight"] is state["model.embed_tokens.weight"]
        assert state[layer + "shared_head.head.weight"] is state["lm_head.weight"]
        block = {k[len(layer):] for k in extra if k.startswith(layer)} - {n[len(layer):] for n in own}
        last = {k[len(f"model.layers.{layers - 1}."):] for k in plain_keys if k.startswith(f"model.layers.{layers - 1}.")}
        assert block - {"embed_tokens.weight", "shared_head.head.weight"} == last  # a layer of the last kind
    again = module.build()
    module.load_hf_state_dict(again, state)
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), again.state_dict().values(), strict=True))
    hf = build_hf(config)
    hf.load_state_dict({k: v for k, v in state.items() if k not in extra}, strict=True)
    with pytest.raises(ValueError, match=f"transformers tensors with no place in this module: model.layers.{layers}."):
        plain_module.load_hf_state_dict(plain_module.build(), state)


def test_a_copy_that_differs_is_refused():
    """The module holds the embedding and head once: a checkpoint whose copies differ cannot load silently."""
    low = _lowered(MTP_CASES[0])
    module = _module(low)
    model = module.build()
    state = dict(module.to_hf_state_dict(model))
    copy = next(k for k in state if k.endswith("shared_head.head.weight"))
    state[copy] = state[copy] + 1
    with pytest.raises(ValueError, match="differs from lm_head.weight"):
        module.load_hf_state_dict(module.build(), state)


def test_fused_projections():
    """--fuse-projections: an MTP block's fused q, k, v split into the checkpoint's three tensors and back."""
    case = next(c for c in MTP_CASES if any(leaf.path.endswith(".attn.q.weight") for leaf in leaves(_lowered(c).root)))
    low = _lowered(case, fused=True)
    assert any(leaf.path == "mtp.block.attn.qkv.weight" for leaf in leaves(low.root))
    module = _module(low)
    assert verify(low, module=module).ok
    model = module.build()
    again = module.build()
    module.load_hf_state_dict(again, module.to_hf_state_dict(model))
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), again.state_dict().values(), strict=True))


def test_one_stack_round_trip():
    """Every layer of one stack (no dense layers first): the module is model.layers.{L} all the same."""
    low = _lowered(MTP_CASES[0], dense=0)
    assert [c.name for c in low.root.children if c.kind == "block"] == ["blocks"]
    module = _module(low)
    model = module.build()
    state = module.to_hf_state_dict(model)
    layers = _value(low, low.root.find("blocks").repeat)
    assert f"model.layers.{layers}.eh_proj.weight" in state and f"model.layers.{layers + 1}.eh_proj.weight" not in state
    again = module.build()
    module.load_hf_state_dict(again, state)
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), again.state_dict().values(), strict=True))


def test_generated_file_is_lint_clean(tmp_path):
    from tests.helpers import assert_ruff_clean

    assert_ruff_clean(emit(_lowered(MTP_CASES[0], 2), "test"), tmp_path)


def test_cli(cli, tmp_path):
    target = tmp_path / "model.py"
    r = cli("generate", "deepseek_v3", "--size", "671b", "--set", "L=4", "--with-mtp", "-o", str(target))
    assert r.status == 0, r.err
    text = target.read_text()
    assert "--with-mtp -o FILE.py" in text and "class MTP(nn.Module):" in text
    assert cli("generate", "deepseek_v3", "--size", "671b", "-o", str(tmp_path / "p.py")).status == 0
    assert "MTP" not in (tmp_path / "p.py").read_text()  # without the switch: as before
    for argv in (("generate", "llama", "--size", "3-8b", "--with-mtp", "-o", str(tmp_path / "x.py")),
                 ("verify", "llama", "--size", "3-8b", "--with-mtp"),
                 ("run", "llama", "--size", "3-8b", "--with-mtp")):
        r = cli(*argv)
        assert r.status == 2 and "no multi-token prediction modules" in r.err and len(r.err.strip().splitlines()) == 1
    assert not (tmp_path / "x.py").exists()


def test_run_trains_the_modules(cli, tmp_path):
    """archcalc run --with-mtp: the model's own loss (with the MTP modules'), and FLOPs with them."""
    config, _ = configs(MTP_CASES[0])
    path = tmp_path / "config.json"
    path.write_text(config.to_json_string(use_diff=False))
    argv = ("run", "--hf", str(path), "--device", "cpu", "--steps", "3", "--seq-len", "8", "--batch", "2", "--json")
    runs = [cli(*argv, *extra) for extra in ((), ("--with-mtp",))]
    assert all(r.status == 0 for r in runs), runs[-1].err
    plain, mtp = (r.json()["results"][0] for r in runs)
    assert mtp["train_step_matmul"] > plain["train_step_matmul"]
    assert mtp["first_loss"] > plain["first_loss"]  # 0.3 x the MTP modules' loss on top
    r = cli(*argv, "--with-mtp", "--nproc", "2")
    assert r.status == 2 and "--with-mtp" in r.err and len(r.err.strip().splitlines()) == 1
