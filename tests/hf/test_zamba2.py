"""Zamba2's shared transformer blocks: counted once per distinct block (transformers ties them), run once per hybrid
layer (FLOPs, KV cache), and carried through import-hf and export-hf. transformers is the oracle for every count; the
FLOPs and bytes are derived here from the dimensions."""

from __future__ import annotations

import json
import random

import pytest
import sympy

from archcalc.backends.count import count_size
from archcalc.backends.memory import memory
from archcalc.errors import SpecError
from archcalc.hf.build import build
from archcalc.hf.export import export_config
from archcalc.hf.jsonfile import parse_text
from archcalc.ir import lower
from archcalc.ir.ops import forward_ops
from archcalc.spec import load_spec
from archcalc.spec.bind import bind
from tests.hf.oracle_configs import draw
from tests.hf.test_oracle import transformers_count

TINY = {"model_type": "zamba2", "vocab_size": 97, "hidden_size": 32, "intermediate_size": 48, "num_attention_heads": 4,
        "n_mamba_heads": 4, "mamba_d_state": 8, "adapter_rank": 4, "num_hidden_layers": 6,
        "layers_block_type": ["mamba", "hybrid", "mamba", "hybrid", "hybrid", "hybrid"]}


def imported(data: dict):
    return build(parse_text(json.dumps(data)))


def ours(data: dict) -> int:
    spec = imported(data)
    return count_size(spec, next(iter(spec.sizes))).total


@pytest.mark.parametrize("blocks", [1, 2, 3, 5])
@pytest.mark.parametrize("tied", [True, False])
@pytest.mark.parametrize("adapters", [True, False])
def test_shared_blocks_count_as_transformers_builds_them(blocks, tied, adapters):
    """One to five shared blocks over four hybrid layers (five: more blocks than layers, only four built), tied (each
    block once) or not (transformers 5 then ties no block: a copy per layer, each with its block's adapters)."""
    pytest.importorskip("transformers")
    data = TINY | {"num_mem_blocks": blocks, "tie_word_embeddings": tied, "use_shared_attention_adapter": adapters}
    assert ours(data) == transformers_count(data)


def test_a_shared_block_is_counted_once_for_all_the_layers_it_serves():
    """The bundled 2.7b's shared blocks: min(M, La) copies of norm(2d), q, k, v (2d -> H·d_head), out (H·d_head -> d),
    norm(d) and the gated MLP (d -> 2·d_ff -> d), whatever the nine layers that run them."""
    spec = load_spec("zamba2")
    lowered = lower(bind(spec, "2.7b"))
    v = {str(k): int(x) for k, x in lowered.binding.numeric().items()}
    d, h, dh, ff, copies = v["d"], v["H"], v["d_head"], v["d_ff"], min(v["M"], v["La"])
    block = 2 * d + 3 * (2 * d * h * dh) + h * dh * d + d + d * 2 * ff + ff * d
    by_path = count_size(spec, "2.7b").by_path
    shared = sum(n for path, n in by_path.items() if path.startswith("hybrid_blocks.shared."))
    assert shared == copies * block and v["La"] > copies


def test_the_shared_block_runs_in_every_hybrid_layer():
    """FLOPs: each of the La hybrid layers runs its block's projections (2 FLOPs a weight a token) and attention over
    H heads of d_head, whatever the block is shared."""
    lowered = lower(bind(load_spec("zamba2"), "2.7b"))
    v = {str(k): int(x) for k, x in lowered.binding.numeric().items()}
    d, h, dh, ff, la = v["d"], v["H"], v["d_head"], v["d_ff"], v["La"]
    b, s = sympy.Symbol("b", positive=True), sympy.Symbol("s", positive=True)
    ops = [op for op in forward_ops(lowered, b, s) if op.path.startswith("hybrid_blocks.shared.")]
    matmul = sum(op.total_full for op in ops if op.kind == "matmul")
    weights = 3 * (2 * d * h * dh) + h * dh * d + d * 2 * ff + ff * d
    assert sympy.expand(matmul.xreplace(lowered.binding.numeric()) - 2 * b * s * la * weights) == 0
    attention = sum(op.total_full for op in ops if op.kind == "attention").xreplace(lowered.binding.numeric())
    assert sympy.expand(attention - la * 2 * b * h * s**2 * 2 * dh) == 0


def test_each_hybrid_layer_keeps_its_own_kv_cache_and_every_layer_a_mamba2_state():
    """memory: La KV caches of KV heads of d_head (keys and values), and L Mamba2 states: the conv's last d_conv - 1
    inputs over inner + 2·groups·state channels, and heads × head width × state, in bfloat16."""
    binding = bind(load_spec("zamba2"), "default")
    v = {str(k): int(x) for k, x in binding.numeric().items()}
    seq, batch = 64, 3
    result = memory(binding, seq, batch)
    kv = v["La"] * 2 * v["KV"] * v["d_head"] * seq * batch * 2
    inner = v["expand"] * v["d"]
    conv = (inner + 2 * v["groups"] * v["d_state"]) * (v["d_conv"] - 1)
    state = v["L"] * (conv + inner * v["d_state"]) * batch * 2
    assert (result.kv_cache_bytes, result.state_bytes) == (kv, state)


@pytest.mark.parametrize("seed", range(6))
def test_a_random_config_exports_to_the_config_transformers_counts_alike(seed):
    """import-hf, then export-hf: transformers builds the exported config with the same count, the same layer types
    and the same rotary switch."""
    pytest.importorskip("transformers")
    data = {"model_type": "zamba2"} | draw("zamba2", random.Random(f"zamba2-export/{seed}"))
    spec = imported(data)
    exported = export_config(spec, next(iter(spec.sizes)))
    assert transformers_count(exported) == transformers_count(data) == ours(data)
    kinds = ["hybrid" if kind == "hybrid" else "mamba" for kind in data["layers_block_type"]]
    assert exported["layers_block_type"] == kinds
    assert exported["use_mem_rope"] == data.get("use_mem_rope", False)


@pytest.mark.parametrize("key,value", [("attention_hidden_size", 3), ("mamba_headdim", 5), ("hybrid_layer_ids", [0]),
                                       ("layers_block_type", ["mamba", "attention"]), ("num_hidden_layers", 7),
                                       ("n_mamba_heads", 7)])
def test_what_transformers_cannot_build_or_run_is_refused_at_its_key(key, value):
    data = TINY | {"num_hidden_layers": 2, "layers_block_type": ["mamba", "hybrid"], key: value}
    if key == "num_hidden_layers":
        data.pop("layers_block_type")  # then the class's own list of 54
    with pytest.raises(SpecError, match=key):
        imported(data)


def test_zamba2_7b_dimensions_count_as_transformers_builds_them():
    """Zamba2-7B's dimensions as a third-party copy of its remote-code-era config.json gives them (hypothetical: no
    whole published config was found): 81 layers, hybrid at 6, 11, then every sixth, two shared blocks."""
    pytest.importorskip("transformers")
    hybrid = {6, *range(11, 81, 6)}
    data = {"model_type": "zamba2", "hidden_size": 3584, "num_hidden_layers": 81, "n_mamba_heads": 112,
            "layers_block_type": ["hybrid" if i in hybrid else "mamba" for i in range(81)], "mamba_ngroups": 2,
            "num_attention_heads": 32, "intermediate_size": 14336, "num_mem_blocks": 2, "use_mem_rope": True}
    assert len(hybrid) == 13 and ours(data) == transformers_count(data)


def test_inference_holds_the_shared_weights_once_and_a_kv_cache_per_hybrid_layer(cli):
    """infer: the weights are the counted parameters in bfloat16 (a shared block held once, not once a layer), and the
    KV cache at the last token holds La layers' keys and values."""
    binding = bind(load_spec("zamba2"), "default")
    v = {str(k): int(x) for k, x in binding.numeric().items()}
    run = cli("infer", "zamba2", "--size", "default", "--hardware", "h100", "--batch", "1", "--prompt", "64",
              "--new-tokens", "8", "--json")
    assert run.status == 0, run.err
    got = run.json()["results"][0]["bytes"]
    assert got["weights"] == 2 * count_size(load_spec("zamba2"), "default").total
    assert got["kv_cache_bytes"] == v["La"] * 2 * v["KV"] * v["d_head"] * (64 + 8) * 2
