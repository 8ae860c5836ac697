"""Per-layer config keys (``max_window_layers``, ``sliding_window_pattern``, ``no_rope_layer_interval``,
``interleave_moe_layer_step``, ``decoder_sparse_step``, ``moe_layers``, ``mlp_only_layers``, ``first_k_dense_replace``,
``layer_types``, ``no_rope_layers``) are answered without a list as long as the stack: a rule that repeats is learnt from
its first two cycles, a uniform stack is not listed, and what would need more than 100,000 listed layers is refused in
one line at the key that asks for it (issue 26).

The hostile cases run in-process under an address-space limit of the process's size plus 1 GiB: a list of 10^9 layers
(8 GB of pointers) fails there with MemoryError (exit 3), so these tests check that the work is bounded by
construction, not by a clock. The small cases check the arithmetic against transformers: each layer's attention kind,
rotary positions and MLP kind, and the parameter count (``tests.helpers.meta_count``).
"""

from __future__ import annotations

import json
import os
import re
from contextlib import contextmanager
from pathlib import Path

import pytest

from archcalc.backends.count import count_size
from archcalc.hf import MODEL_TYPES, spec_from_hf_config
from archcalc.hf.build import family_of
from archcalc.hf.windows import MAX_LISTED, listed_layers
from tests.helpers import meta_count

LOCATED = re.compile(r"^(?P<file>.+\.json):(?P<line>\d+):(?P<col>\d+): (?P<key>[A-Za-z_]+)(\[\d+\])?: .+$")
HUGE = (10**9, 10**18)
HEADROOM = 1 << 30

#: Every per-layer key of every family whose hooks read one (a family added with such a hook must be listed here:
#: test_every_family_with_per_layer_hooks_is_covered).
PER_LAYER_KEYS = {
    "qwen2": ["max_window_layers", "layer_types"],
    "qwen3": ["max_window_layers", "layer_types"],
    "gemma2": ["layer_types"],
    "gpt_oss": ["layer_types"],
    "gemma3_text": ["sliding_window_pattern", "layer_types"],
    "smollm3": ["no_rope_layer_interval", "no_rope_layers", "layer_types"],
    "llama4_text": ["interleave_moe_layer_step", "moe_layers", "no_rope_layer_interval", "no_rope_layers", "layer_types"],
    "qwen2_moe": ["decoder_sparse_step", "mlp_only_layers"],
    "qwen3_moe": ["decoder_sparse_step", "mlp_only_layers"],
    "deepseek_v2": ["first_k_dense_replace"],
    "deepseek_v3": ["first_k_dense_replace"],
    "glm4_moe": ["first_k_dense_replace"],
    "glm4_moe_lite": ["mlp_layer_types"],
    "deepseek_v32": ["first_k_dense_replace"],
    "glm_moe_dsa": ["first_k_dense_replace"],
    "mistral4": ["first_k_dense_replace"],
    "olmo3": ["layer_types"],
}
PER_LAYER_HOOKS = {"sliding_window_alternate", "sliding_window_qwen", "sliding_window_pattern", "no_rope_layers",
                   "sliding_window_on_nope_layers", "interleaved_moe_layers", "sparse_step_layers", "deepseek_stacks"}
LISTS = {"layer_types", "no_rope_layers", "moe_layers", "mlp_only_layers"}


@contextmanager
def bounded_memory(headroom: int = HEADROOM):
    """The process may grow by at most ``headroom`` bytes of address space while inside (Linux)."""
    resource = pytest.importorskip("resource")
    statm = Path("/proc/self/statm")
    if not statm.exists():
        pytest.skip("needs /proc/self/statm to measure the address space")
    size = int(statm.read_text().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    limit = size + headroom if hard == resource.RLIM_INFINITY else min(size + headroom, hard)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def run_bounded(cli, tmp_path, config: dict):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    with bounded_memory():
        run = cli("count", "--hf", str(path), "--json")
    assert run.status in (0, 2), run.err
    return run


def refused_at(run, key: str) -> str:
    """The message of a refusal: one line, located, about ``key``."""
    message = run.err.strip()
    assert run.status == 2 and run.out == "" and "\n" not in message and "Traceback" not in message, run.err
    m = LOCATED.match(message)
    assert m and m["key"] == key, message
    return message


def counted(run) -> int:
    assert run.status == 0 and run.err == "", run.err
    total = run.json()["results"][0]["total"]
    assert isinstance(total, int) and total > 0
    return total


# -- every family, every per-layer key, at 10^9 and 10^18 ------------------------------------------------------------
def test_every_family_with_per_layer_hooks_is_covered():
    with_hooks = {t for t in MODEL_TYPES if PER_LAYER_HOOKS & set(family_of(t).origin.hooks)}
    assert with_hooks == set(PER_LAYER_KEYS)
    for model_type, keys in PER_LAYER_KEYS.items():
        assert set(keys) - {"layer_types"} <= set(family_of(model_type).keys), model_type  # hooks read layer_types


def _hostile(model_type: str, key: str, n: int) -> list[dict]:
    """The key at ``n`` (a list: one naming layer n - 1, or as long as a config file allows), with the class's layers
    and with ``n`` layers."""
    value = [n - 1] if key in ("moe_layers", "mlp_only_layers") else ["full_attention"] if key == "layer_types" \
        else [1] if key == "no_rope_layers" else n
    base = {"model_type": model_type}
    return [base | {key: value}, base | {"num_hidden_layers": n, key: value}]


HOSTILE = [(t, k, n, i) for t, keys in PER_LAYER_KEYS.items() for k in keys for n in HUGE for i in range(2)]


@pytest.mark.parametrize("model_type,key,n,which", HOSTILE, ids=[f"{t}-{k}-{n:.0e}-{i}" for t, k, n, i in HOSTILE])
def test_a_per_layer_key_at_a_huge_value_is_answered_in_a_line(cli, tmp_path, model_type, key, n, which):
    config = _hostile(model_type, key, n)[which]
    run = run_bounded(cli, tmp_path, config)
    if run.status == 2:  # refused at a key the config holds, never at one the family lacks
        label = LOCATED.match(run.err.strip())
        assert label and label["key"] in config, run.err


@pytest.mark.parametrize("n", HUGE)
@pytest.mark.parametrize("model_type", MODEL_TYPES)
def test_every_family_at_a_huge_depth_is_answered_in_a_line(cli, tmp_path, model_type, n):
    run = run_bounded(cli, tmp_path, {"model_type": model_type, "num_hidden_layers": n})
    if run.status == 2:
        refused_at(run, "num_hidden_layers")


# -- what each answer is ---------------------------------------------------------------------------------------------
WINDOW = {"use_sliding_window": True, "sliding_window": 4096}
COUNTED = [  # configs of 10^9 or 10^18 layers whose settings repeat, or are the same in every layer
    {"model_type": "qwen2", "num_hidden_layers": 10**9, "max_window_layers": 10**9, "use_sliding_window": False},  # issue 26
    {"model_type": "qwen3", "num_hidden_layers": 10**18, "max_window_layers": 10**18, "use_sliding_window": False},
    {"model_type": "qwen3", "num_hidden_layers": 10**18, "max_window_layers": 10**18} | WINDOW,  # no layer slides
    {"model_type": "qwen2", "num_hidden_layers": 10**18, "max_window_layers": 0} | WINDOW,  # every layer slides
    {"model_type": "gemma3_text", "sliding_window_pattern": 10**9},  # longer than the model: every layer slides
    {"model_type": "gemma3_text", "num_hidden_layers": 10**18, "sliding_window_pattern": 1},
    {"model_type": "gemma3_text", "num_hidden_layers": 10**18, "sliding_window_pattern": 1024},
    {"model_type": "smollm3", "num_hidden_layers": 10**18},  # NoPE every 4th layer
    {"model_type": "smollm3", "num_hidden_layers": 10**18 - 1, "no_rope_layer_interval": 10**18},  # every layer rotates
    {"model_type": "smollm3", "num_hidden_layers": 10**9, "no_rope_layer_interval": 3} | WINDOW,
    {"model_type": "llama4_text", "num_hidden_layers": 10**18},
    {"model_type": "llama4_text", "num_hidden_layers": 10**9, "interleave_moe_layer_step": 2, "no_rope_layer_interval": 3},
    {"model_type": "llama4_text", "num_hidden_layers": 10**9, "moe_layers": []},
    {"model_type": "qwen2_moe", "num_hidden_layers": 10**18, "decoder_sparse_step": 2},
    {"model_type": "qwen3_moe", "num_hidden_layers": 10**18, "decoder_sparse_step": 3, "mlp_only_layers": [0, 1, 3]},
    {"model_type": "qwen3_moe", "decoder_sparse_step": 10**18},  # more than the layers: every layer dense
    {"model_type": "deepseek_v3", "num_hidden_layers": 10**18, "first_k_dense_replace": 10**18},
]


@pytest.mark.parametrize("config", COUNTED, ids=lambda c: "-".join(f"{v}" for v in c.values())[:60])
def test_a_repeating_or_uniform_stack_of_huge_depth_is_counted(cli, tmp_path, config):
    counted(run_bounded(cli, tmp_path, config))


def test_the_count_of_a_huge_repeating_stack_is_exact(cli, tmp_path):
    """10^18 layers of Qwen-MoE, every other one dense: the count is that of 10^18 / 2 layers of each kind, exactly."""
    base = {"model_type": "qwen2_moe", "decoder_sparse_step": 2}
    totals = {n: counted(run_bounded(cli, tmp_path, base | {"num_hidden_layers": n})) for n in (2, 4, 10**18)}
    per_pair = totals[4] - totals[2]
    assert totals[10**18] == totals[2] + (10**18 // 2 - 1) * per_pair


REFUSED = [  # (config, the key named): settings that differ along a huge stack and do not repeat
    ({"model_type": "qwen2", "num_hidden_layers": 10**9} | WINDOW, "max_window_layers"),
    ({"model_type": "gemma3_text", "num_hidden_layers": 10**9, "sliding_window_pattern": 10**9}, "sliding_window_pattern"),
    ({"model_type": "gemma3_text", "num_hidden_layers": 10**18, "sliding_window_pattern": 1025}, "sliding_window_pattern"),
    ({"model_type": "smollm3", "num_hidden_layers": 10**18, "no_rope_layer_interval": 10**18}, "no_rope_layer_interval"),
    ({"model_type": "smollm3", "num_hidden_layers": 10**9, "no_rope_layer_interval": 2000} | WINDOW, "no_rope_layer_interval"),
    ({"model_type": "llama4_text", "num_hidden_layers": 10**9, "interleave_moe_layer_step": 10**9}, "interleave_moe_layer_step"),
    ({"model_type": "llama4_text", "num_hidden_layers": 10**9, "no_rope_layer_interval": 10**9 - 1}, "no_rope_layer_interval"),
    ({"model_type": "llama4_text", "num_hidden_layers": 10**18, "moe_layers": [3]}, "moe_layers"),
    ({"model_type": "qwen2_moe", "num_hidden_layers": 10**18, "decoder_sparse_step": 10**18}, "decoder_sparse_step"),
    ({"model_type": "qwen3_moe", "num_hidden_layers": 10**9, "mlp_only_layers": [7]}, "mlp_only_layers"),
]


@pytest.mark.parametrize("config,key", REFUSED, ids=[f"{c['model_type']}-{k}" for c, k in REFUSED])
def test_settings_that_do_not_repeat_over_a_huge_stack_are_refused_at_their_key(cli, tmp_path, config, key):
    message = refused_at(run_bounded(cli, tmp_path, config), key)
    assert "max_window_layers" not in message or key == "max_window_layers", message


def test_gemma3_pattern_refusal_names_its_own_key_not_qwens(cli, tmp_path):
    """Issue 26: Gemma 3's refusal once named max_window_layers, a key Gemma 3 lacks."""
    message = refused_at(run_bounded(cli, tmp_path, {"model_type": "gemma3_text", "num_hidden_layers": 5000,
                                                     "sliding_window_pattern": 2000}), "sliding_window_pattern")
    assert "max_window_layers" not in message and "2,000" in message


def test_listing_is_bounded_before_anything_is_built():
    """listed_layers answers two cycles of a repeating rule, and refuses more than MAX_LISTED layers."""

    class Draft:
        values = {"L": 10**18}

    class R:
        def fail(self, key, message):
            return ValueError(f"{key}: {message}")

    assert listed_layers(R(), Draft(), "x", 4, "k") == 8
    assert listed_layers(R(), Draft(), "x", 1, "k") == 2
    assert listed_layers(R(), Draft(), "x", MAX_LISTED // 2, "k") == MAX_LISTED
    for period in (MAX_LISTED // 2 + 1, 10**18, None):
        with pytest.raises(ValueError, match="^k: 1,000,000,000,000,000,000 layers"):
            listed_layers(R(), Draft(), "x", period, "k")


# -- the arithmetic against transformers, layer by layer -------------------------------------------------------------
TINY = {"vocab_size": 64, "hidden_size": 16, "num_attention_heads": 2, "num_key_value_heads": 1, "intermediate_size": 24,
        "pad_token_id": 0, "bos_token_id": 0, "eos_token_id": 0}
MOE = {"num_experts_per_tok": 1, "moe_intermediate_size": 8}
SLIDING = {"use_sliding_window": True, "sliding_window": 16}
LAYERS = 7
ORACLE = [
    *({"model_type": t, "max_window_layers": m} | s for t in ("qwen2", "qwen3") for m in (0, 3, LAYERS, 10**9)
      for s in ({"use_sliding_window": False}, SLIDING)),
    *({"model_type": "gemma3_text", "sliding_window": 16, "sliding_window_pattern": p} for p in (1, 2, 6, LAYERS, 8, 2000, 10**18)),
    *({"model_type": "smollm3", "no_rope_layer_interval": i} | s for i in (1, 3, LAYERS, 8, 10**18) for s in ({}, SLIDING)),
    *({"model_type": "llama4_text", "num_local_experts": 2, "intermediate_size_mlp": 24, "interleave_moe_layer_step": s,
       "no_rope_layer_interval": i, "num_experts_per_tok": 1} for s, i in ((1, 4), (2, 3), (3, 1), (LAYERS, 2), (8, 8), (10**18, 10**18))),
    {"model_type": "llama4_text", "num_local_experts": 2, "intermediate_size_mlp": 24, "moe_layers": [0, 5], "num_experts_per_tok": 1},
    {"model_type": "llama4_text", "num_local_experts": 2, "intermediate_size_mlp": 24, "num_experts_per_tok": 1,
     "attention_chunk_size": None},  # no chunk size: transformers makes every layer full attention
    *({"model_type": "llama4_text", "num_hidden_layers": 25, "num_local_experts": 2, "intermediate_size_mlp": 24,  # two cycles
       "interleave_moe_layer_step": s, "no_rope_layer_interval": i, "num_experts_per_tok": 1} for s, i in ((2, 3), (3, 4), (4, 2))),
    *({"model_type": "qwen2_moe", "num_hidden_layers": 25, "num_experts": 2, "decoder_sparse_step": s,
       "shared_expert_intermediate_size": 8} | MOE for s in (2, 3, 5)),
    *({"model_type": t, "num_experts": 2, "decoder_sparse_step": s, "mlp_only_layers": o} | MOE
      | ({"shared_expert_intermediate_size": 8} if t == "qwen2_moe" else {})
      for t in ("qwen2_moe", "qwen3_moe") for s, o in ((1, None), (2, None), (3, [2]), (2, [0]), (8, None), (10**18, None),
                                                       (1, list(range(LAYERS))))),
]


def archcalc_layers(spec) -> list[tuple[bool, str, bool]]:
    """(MoE MLP?, attention kind, rotary positions?) of each layer of an imported spec, expanded from its cycles."""
    values = next(iter(spec._source.data["sizes"].values()))
    stacks = [spec.model.block] if spec.model.block is not None else list(spec.model.blocks)
    repeats = {s.name: int(s.repeat.evaluate(values)) for s in stacks}
    order = spec.model.layer_order or [name for s in stacks for name in [s.name] * repeats[s.name]]
    by_name, seen, layers = {s.name: s for s in stacks}, dict.fromkeys(repeats, 0), []
    for i in range(sum(repeats.values())):
        stack = by_name[order[i % len(order)]]
        j, seen[stack.name] = seen[stack.name], seen[stack.name] + 1
        a = stack.attention
        kind = a.pattern[j % len(a.pattern)] if a.pattern else "global"
        rotates = a.rotary_pattern[j % len(a.rotary_pattern)] if a.rotary_pattern else True
        layers.append((stack.mlp.kind == "moe", kind, rotates))
    assert seen == repeats
    return layers


def transformers_layers(model_type: str, config) -> list[tuple[bool, str, bool]]:
    """The same, as transformers' config fills it in (and its decoder layers read it)."""
    kinds = {"full_attention": "global", "sliding_attention": "local", "chunked_attention": "chunked"}
    out = []
    for i in range(config.num_hidden_layers):
        if model_type == "llama4_text":
            moe = i in config.moe_layers
        elif model_type in ("qwen2_moe", "qwen3_moe"):
            moe = i not in config.mlp_only_layers and (i + 1) % config.decoder_sparse_step == 0
        else:
            moe = False
        kind = kinds[config.layer_types[i]] if hasattr(config, "layer_types") else "global"  # Qwen3-MoE: no such field
        if kind == "local" and getattr(config, "sliding_window", None) is None:
            kind = "global"  # a sliding layer with no window attends to everything
        rotates = bool(config.no_rope_layers[i]) if hasattr(config, "no_rope_layers") else True
        out.append((moe, kind, rotates))
    return out


@pytest.mark.parametrize("config", ORACLE, ids=lambda c: "-".join(str(v)[:12] for v in c.values()))
def test_per_layer_rules_equal_transformers_layer_by_layer(config):
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("torch")
    transformers.logging.set_verbosity_error()
    data = TINY | {"num_hidden_layers": LAYERS} | config
    spec = spec_from_hf_config(data, "config.json")
    model_type = data.pop("model_type")
    theirs = transformers.AutoConfig.for_model(model_type, **data)
    assert archcalc_layers(spec) == transformers_layers(model_type, theirs)
    assert count_size(spec, next(iter(spec.sizes))).total == meta_count(theirs, family_of(model_type).hf_class)


def test_gemma3_pattern_longer_than_the_model_is_imported_as_transformers_builds_it(cli, tmp_path):
    """Issue 26: sliding_window_pattern 2,000 with 26 layers makes every layer sliding in transformers; it was refused."""
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("torch")
    transformers.logging.set_verbosity_error()
    data = TINY | {"num_hidden_layers": 26, "sliding_window": 16, "sliding_window_pattern": 2000}
    total = counted(run_bounded(cli, tmp_path, {"model_type": "gemma3_text"} | data))
    theirs = transformers.AutoConfig.for_model("gemma3_text", **data)
    assert set(theirs.layer_types) == {"sliding_attention"}
    assert total == meta_count(theirs, family_of("gemma3_text").hf_class)
    spec = spec_from_hf_config({"model_type": "gemma3_text"} | data, "config.json")
    assert {kind for _, kind, _ in archcalc_layers(spec)} == {"local"}
