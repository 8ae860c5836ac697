"""Symbolic FLOPs = torch's FlopCounterMode: for random configs of every dense spec the generated
module's forward on the meta device counts exactly ``forward_matmul``, and forward + backward exactly
``train_step_matmul``. (On the CPU FlopCounterMode reports 0 for scaled_dot_product_attention; on
meta it decomposes into counted bmm.)

The families beyond GPT are here too: rotary positions, QK-norm, sliding windows, sinks and soft-capped
scores (written-out products: the same two matmuls), encoders (the pooler reads the first token only),
mixtures of experts, and DeepSeek-V3's latent attention (its scores over head_width + rope_width, its values
over value_width) with sigmoid, group-limited routing (no matmul beyond the router's). A mixture of experts runs each expert on the tokens routed to it, so
FlopCounterMode counts the routed top-k FLOPs only, as ``forward_matmul`` does, whichever experts the
tokens choose. Routing needs values, so models with experts run on the CPU, with SDPA's math backend
(which FlopCounterMode counts as the matmuls it is made of).
"""

from __future__ import annotations

import torch
from hypothesis import given
from hypothesis import strategies as st
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

from archcalc.backends.flops import flops
from archcalc.codegen.emit import emit
from archcalc.codegen.load import load_source
from archcalc.codegen.verify import verify
from archcalc.ir import lower
from archcalc.ir.ops import BATCH, SEQ, forward_ops
from archcalc.spec import load_spec
from archcalc.spec.bind import bind
from tests.helpers import codegen_spec, examples, lowered


@st.composite
def config(draw):
    name = draw(st.sampled_from(["gpt2", "gpt3", "gqa_gated", "parallel", "fused_mqa", "sandwich", *FAMILIES]))
    H = draw(st.integers(1, 6))
    v = {"V": draw(st.integers(2, 300)), "L": draw(st.integers(1, 3))}
    if name in ("gpt2", "gpt3"):
        v.update(H=H, d=H * draw(st.integers(1, 12)), T=draw(st.integers(16, 64)),
                 qkv_bias=draw(st.booleans()), tie_embeddings=draw(st.booleans()))
        if draw(st.booleans()):
            v["d_head"] = draw(st.integers(1, 12))
    elif name == "gqa_gated":
        KV = draw(st.sampled_from([k for k in range(1, H + 1) if H % k == 0]))
        v.update(H=H, KV=KV, d_head=draw(st.integers(1, 12)), tie=draw(st.booleans()), d_ff=draw(st.integers(1, 64)))
    elif name == "fused_mqa":
        v.update(H=H, KV=draw(st.sampled_from([k for k in range(1, H + 1) if H % k == 0])), d=H * draw(st.integers(1, 12)))
    elif name == "parallel":
        v.update(H=H, d=H * draw(st.integers(1, 12)), T=draw(st.integers(16, 64)))
    elif name == "sandwich":
        v.update(H=H, d=H * draw(st.integers(1, 12)), L2=draw(st.integers(1, 3)))
    else:
        v.update(draw(FAMILIES[name](H)))
    return name, v


def _kv(H):
    return st.sampled_from([k for k in range(1, H + 1) if H % k == 0])


def _experts():
    return st.integers(1, 5).flatmap(lambda E: st.fixed_dictionaries({"E": st.just(E), "K": st.integers(1, E)}))


def _even(low=2, high=12):
    return st.integers(low // 2, high // 2).map(lambda n: 2 * n)


FAMILIES = {  # tests/data/codegen/<name>.yaml: the draws for one attention-head count H
    "rotary": lambda H: st.fixed_dictionaries({"H": st.just(H), "KV": _kv(H), "d_head": st.sampled_from([4, 8, 12]),
                                               "d_ff": st.integers(1, 48), "window": st.integers(1, 8),
                                               "bias": st.booleans(), "tie": st.booleans()}),
    "reordered": lambda H: st.fixed_dictionaries({"H": st.just(H), "KV": _kv(H), "d_head": _even(),
                                                  "d": st.integers(1, 48), "d_ff": st.integers(1, 48)}),
    "gemma": lambda H: st.fixed_dictionaries({"H": st.just(H), "KV": _kv(H), "d_head": _even(), "d": st.integers(1, 48),
                                              "d_ff": st.integers(1, 48), "window": st.integers(1, 8)}),
    "moe": lambda H: st.fixed_dictionaries({"H": st.just(H), "KV": _kv(H), "d_head": _even(), "d_ff": st.integers(1, 24),
                                            "router_bias": st.booleans()}).flatmap(lambda v: _experts().map(lambda e: {**v, **e})),
    "sinks": lambda H: st.fixed_dictionaries({"H": st.just(H), "KV": _kv(H), "d_head": _even(), "d": st.integers(1, 48),
                                              "d_ff": st.integers(1, 24), "window": st.integers(1, 8)}
                                             ).flatmap(lambda v: _experts().map(lambda e: {**v, **e})),
    "parallel_rotary": lambda H: st.fixed_dictionaries({"H": st.just(H), "d_head": st.sampled_from([8, 16])}),
    "encoder": lambda H: st.fixed_dictionaries({"H": st.just(H), "d": st.integers(1, 8).map(lambda k: H * k),
                                                "T": st.integers(16, 40)}),
    "latent": lambda H: st.fixed_dictionaries({"H": st.just(H), "d": st.integers(1, 48), "d_head": st.integers(1, 8),
                                               "d_rope": _even(2, 8), "d_v": st.integers(1, 8), "q_rank": st.integers(1, 12),
                                               "kv_rank": st.integers(1, 12), "L_dense": st.integers(1, 2), "d_ff": st.integers(1, 24),
                                               "d_expert": st.integers(1, 12), "G_k": st.integers(1, 3), "K": st.integers(1, 6)}
                                              ).map(lambda v: {**v, "G": 3, "E": 6}),  # 3 groups of 2
}


@examples(100)
@given(cfg=config(), batch=st.integers(1, 3), seq=st.integers(1, 16))
def test_forward_and_train_step_equal_flop_counter(cfg, batch, seq):
    name, values = cfg
    low = lowered(name if name in ("gpt2", "gpt3") else codegen_spec(name), **values)
    module = load_source(emit(low, "test"))
    assert verify(low, module=module).ok
    device = "cpu" if any(node.kind == "moe" for _, node in low.root.walk()) else "meta"  # routing needs values
    model = module.build(device=device)
    vocab = int(low.root.attrs.vocab.xreplace(low.binding.numeric()))
    ids = torch.randint(0, vocab, (batch, seq), device=device)
    with sdpa_kernel(SDPBackend.MATH):
        _assert_counted(lambda: run(model, ids), flops(low.binding, seq, batch, lowered=low))


def _assert_counted(forward, exact) -> None:
    """FlopCounterMode over ``forward()`` equals forward_matmul, and over forward + backward train_step_matmul."""
    with FlopCounterMode(display=False) as forward_only:
        forward()
    assert forward_only.get_total_flops() == exact.forward_matmul
    with FlopCounterMode(display=False) as step:
        forward().float().sum().backward()
    assert step.get_total_flops() == exact.train_step_matmul


def run(model, ids):
    """The forward pass that forward_matmul counts (an encoder's pooler included)."""
    out = model(ids)
    return model.pooler(out) if hasattr(model, "pooler") else out


def test_gpt2_small_nanogpt_figures():
    result = flops(bind(load_spec("gpt2"), "small"), 1024, 1)
    assert result.forward_matmul == 291_648_307_200
    assert result.train_step_matmul == 874_944_921_600
    assert result.approximations["palm"]["train_step"] == 879_894_724_608
    model = load_source(emit(lower(bind(load_spec("gpt2"), "small")), "t")).build(device="meta")
    with FlopCounterMode(display=False) as counter:
        model(torch.zeros(1, 1024, dtype=torch.long, device="meta"))
    assert counter.get_total_flops() == 291_648_307_200


def test_moe_on_the_cpu_counts_routed_top_k_only():
    """With real routing each expert runs on its own tokens only: FlopCounterMode counts router + experts'
    top-k share + the dense matmuls, exactly ``forward_matmul`` without the attention products (which it
    reports as 0 for scaled_dot_product_attention on the CPU)."""
    low = lowered(codegen_spec("moe"), E=5, K=2, d_ff=12)
    torch.manual_seed(0)
    model = load_source(emit(low, "test")).build().eval()
    batch, seq = 3, 7
    numeric = {**low.binding.numeric(), BATCH: batch, SEQ: seq}
    ops = forward_ops(low)
    matmuls = sum(int(op.total_full.xreplace(numeric)) for op in ops if op.kind == "matmul")
    experts = sum(int(op.total_full.xreplace(numeric)) for op in ops if ".experts." in op.path)
    assert experts == 2 * batch * seq * 2 * 3 * 2 * 32 * 12  # L x tokens x top_k x (gate, up, down) x 2 x d x d_ff
    with FlopCounterMode(display=False) as counter, torch.no_grad():
        model(torch.randint(0, 101, (batch, seq)))
    assert counter.get_total_flops() == matmuls


@examples(30)
@given(name=st.sampled_from(["t5", "transformer_2017"]), H=st.integers(1, 6), k=st.integers(1, 8), d_head=st.integers(1, 12),
       L=st.integers(1, 3), batch=st.integers(1, 3), seq=st.integers(1, 16))
def test_encoder_decoder_forward_and_train_step_equal_flop_counter(name, H, k, d_head, L, batch, seq):
    """T5 (relative-bias SDPA, cross-attention, scaled tied head) and the 2017 Transformer: encoder and decoder
    both read seq tokens; the relative bias is a lookup, the output scaling elementwise, so neither adds a matmul."""
    values = {"V": 50, "L": L, "H": H, "d": H * k, "d_head": d_head, "d_ff": 3 * k}
    low = lowered(name, **values)
    model = load_source(emit(low, "test")).build(device="meta")
    ids = torch.zeros(batch, seq, dtype=torch.long, device="meta")
    _assert_counted(lambda: model(ids, ids), flops(low.binding, seq, batch, lowered=low))
