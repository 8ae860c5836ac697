"""A layer pattern cycling over a stack: the shortest cycle that builds the same layers (``layer_cycle``, linear in
the pattern's length) and how many layers of each kind it gives (``layers_of_kind``: floors for a short cycle, one
``layers_KIND(L)`` term for a long one), checked against a count layer by layer, for patterns of 10,000 entries too."""

from __future__ import annotations

import random

import pytest
import sympy
from hypothesis import given
from hypothesis import strategies as st

from archcalc.backends.flops import flops
from archcalc.backends.infer.traffic import kv_terms
from archcalc.backends.memory import memory
from archcalc.backends.parallel_plan import Plan, kv_by_stage
from archcalc.ir.layers import FLOOR_TERMS, PatternLayers, layers_of_kind
from archcalc.ir.ops import forward_ops
from archcalc.ir.parts import layer_cycle
from archcalc.spec import load_spec
from archcalc.spec.bind import bind
from tests.helpers import examples, lowered

L = sympy.Symbol("L", integer=True, positive=True)


def shortest_cycle(pattern, layers: int) -> tuple:
    """The definition, checked period by period (quadratic: small patterns only)."""
    seen = [pattern[i % len(pattern)] for i in range(min(layers, len(pattern)))]
    whole = len(seen) == len(pattern)
    for p in range(1, len(seen) + 1):
        if (not whole or len(seen) % p == 0) and all(seen[i] == seen[i % p] for i in range(len(seen))):
            return tuple(seen[:p])
    return tuple(seen)


patterns = st.one_of(
    st.lists(st.sampled_from("ab"), min_size=1, max_size=24),
    st.lists(st.sampled_from("abc"), min_size=1, max_size=24),
    # a block repeated, its tail cut or one entry changed: the near misses of periodicity
    st.tuples(st.lists(st.sampled_from("ab"), min_size=1, max_size=6), st.integers(1, 6), st.integers(0, 5), st.booleans())
    .map(lambda t: (t[0] * t[1])[: max(1, len(t[0]) * t[1] - t[2])] + (["c"] if t[3] else [])),
)


@examples(300)
@given(pattern=patterns, extra=st.integers(-30, 30))
def test_the_cycle_is_the_shortest_that_builds_the_same_layers(pattern, extra):
    layers = max(1, len(pattern) + extra)
    cycle = layer_cycle(tuple(pattern), layers)
    assert cycle == shortest_cycle(pattern, layers)
    built = layers if layers < len(pattern) else 3 * len(pattern)  # every layer of the pattern built: any depth
    assert all(cycle[i % len(cycle)] == pattern[i % len(pattern)] for i in range(built))


def _block(n: int) -> list[str]:
    return ["local" if (i * i + 3 * i) % 7 < 3 else "global" for i in range(n)]


@pytest.mark.parametrize("pattern, layers, expected", [
    (_block(7) * 1428, 9996, _block(7)),  # 10,000 entries, a cycle of 7
    (_block(100) * 100, 10_000, _block(100)),
    (_block(100) * 99 + _block(99) + ["x"], 10_000, _block(100) * 99 + _block(99) + ["x"]),  # one entry off: no cycle
    (["global"] * 9_999 + ["local"], 9_999, ["global"]),  # the local layer is never built
    (["global"] * 9_998 + ["local", "global"], 9_999, ["global"] * 9_998 + ["local"]),  # the old quadratic case
    (["global"] * 9_999 + ["local"], 10_000, ["global"] * 9_999 + ["local"]),
    (["a", "b"] * 4_999 + ["a"], 9_998, ["a", "b"]),  # 9,998 of its 9,999 layers built: the cycle need not divide them
    (["a", "b"] * 4_999 + ["a"], 20_000, ["a", "b"] * 4_999 + ["a"]),  # every layer of it built: it must
])
def test_a_ten_thousand_entry_pattern(pattern, layers, expected):
    assert layer_cycle(tuple(pattern), layers) == tuple(expected)


def _by_hand(cycle, layers: int, kind: str) -> int:
    return sum(cycle[i % len(cycle)] == kind for i in range(layers))


@examples(100)
@given(pattern=st.lists(st.sampled_from(["local", "global"]), min_size=1, max_size=3 * FLOOR_TERMS),
       layers=st.lists(st.integers(0, 80), min_size=1, max_size=4))
def test_layers_of_kind_counts_what_the_cycle_builds(pattern, layers):
    """Symbolic (floors for a kind at few places, layers_KIND(L) for more) or numeric, the count is the one made
    layer by layer, at every depth."""
    pattern = tuple(pattern)
    for kind in ("local", "global"):
        symbolic = layers_of_kind(pattern, L, kind)
        long = pattern.count(kind) > FLOOR_TERMS
        assert symbolic.has(PatternLayers) == long
        for n in layers:
            assert symbolic.xreplace({L: sympy.Integer(n)}) == _by_hand(pattern, n, kind)
            assert layers_of_kind(pattern, sympy.Integer(n), kind) == _by_hand(pattern, n, kind)


LONG = 9_900  # entries: the spec holds fewer than 10,000 YAML nodes


def _long_spec(tmp_path, pattern, layers: int):
    path = tmp_path / "long.yaml"
    path.write_text(f"""name: longpattern
title: Long pattern
hyperparameters:
  V: {{doc: vocabulary, default: 1000}}
  L: {{doc: blocks}}
  d: {{doc: width}}
  H: {{doc: heads}}
model:
  embedding: {{vocab: V, width: d, position: {{kind: rotary, base: 10000}}}}
  block:
    repeat: L
    residual: pre-norm
    norm: rmsnorm
    attention: {{heads: H, kv_heads: H, head_width: d / H, qkv_bias: false, out_bias: false, window: 64,
                pattern: [{", ".join(pattern)}]}}
    mlp: {{kind: gated, hidden: 4 * d, activation: silu, bias: false}}
  final_norm: rmsnorm
  head: {{tied: false}}
sizes:
  s: {{L: {layers}, d: 64, H: 4}}
""")
    return load_spec(str(path))


@pytest.fixture(scope="module")
def long_pattern():
    """A pattern of 9,900 entries (seeded coin flips) with no shorter cycle, nor has its first 9,899."""
    draw = random.Random(26)
    return tuple(draw.choice(("local", "global")) for _ in range(LONG))


@pytest.mark.parametrize("layers", [LONG - 1, LONG, 2 * LONG + 17])
def test_a_long_pattern_lowers_and_counts_layer_by_layer(tmp_path, long_pattern, layers):
    """Through lowering, the FLOPs' ops and the causal FLOPs: a stack of 9,899 to 19,817 layers under a 9,900-entry
    pattern has the local and global layers a count layer by layer finds; each attention product costs what it costs
    in a stack of that kind alone."""
    spec = _long_spec(tmp_path, long_pattern, layers)
    binding = bind(spec, "s")
    low = lowered(spec, "s")
    attn = low.root.find("blocks.attn")
    assert attn is not None
    cycle = attn.attrs.pattern
    assert cycle == layer_cycle(long_pattern, layers) and len(cycle) > 9_000
    assert all(cycle[i % len(cycle)] == long_pattern[i % LONG] for i in range(layers))
    locals_ = _by_hand(long_pattern, layers, "local")
    ops = {op.causal: op.repeat for op in forward_ops(low) if op.kind == "attention"}
    numeric = {**binding.numeric(), sympy.Symbol("B", integer=True, positive=True): 1}
    counts = sorted(int(r.xreplace(numeric)) for r in ops.values())
    assert counts == sorted([locals_, layers - locals_])
    assert any(r.has(PatternLayers) for r in ops.values())  # one term a kind in the formula, not thousands
    seq, per_pair = 200, 2 * 4 * (16 + 16)  # 2·H·(d_head + d_value) FLOPs a query-key pair
    banded = 64 * seq - 64 * 63 // 2  # Σ min(i, 64) over 200 queries
    full = flops(binding, seq, 1).forward_matmul_causal
    assert full == flops(binding, seq, 1).forward_matmul - per_pair * (layers * seq * seq - (layers - locals_) * seq * (seq + 1) // 2
                                                                      - locals_ * banded)


def test_a_long_pattern_caches_layer_by_layer(tmp_path, long_pattern):
    """The KV cache of a stack under a 9,900-entry pattern, whole (archcalc memory, archcalc infer) and on each of 97
    pipeline stages: per layer, a window of 64 tokens or every token, as a loop over the layers finds it."""
    layers, seq = 2 * LONG + 17, 100
    spec = _long_spec(tmp_path, long_pattern, layers)
    binding, low = bind(spec, "s"), lowered(spec, "s")
    per_token = 4 * (16 + 16)  # kv_heads · (d_head + d_value): 4 heads of 64 / 4 = 16
    cached = [min(seq, 64) if long_pattern[i % LONG] == "local" else seq for i in range(layers)]
    assert memory(binding, seq, 1, "float32").kv_cache_bytes == 4 * per_token * sum(cached)
    assert sorted(kv_terms(low), key=str) == sorted([(64, per_token * _by_hand(long_pattern, layers, "local")),
                                                     (None, per_token * _by_hand(long_pattern, layers, "global"))], key=str)
    size = -(-layers // 97)
    by_stage = [per_token * sum(cached[s * size:(s + 1) * size]) for s in range(97)]
    assert kv_by_stage(low, Plan(pp=97), seq, 1) == by_stage
