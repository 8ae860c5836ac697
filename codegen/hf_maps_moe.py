"""transformers' parameter names of a mixture-of-experts layer (transformers 5's layout), for the weight maps of
:mod:`codegen.hf_maps`: the router, the routed experts stacked in one ``gate_up_proj`` (E, 2 x d_ff, d: gate rows,
then up rows) and one ``down_proj`` (E, d, d_ff), and optionally a shared expert and the sigmoid gate on it.

The recipes are those of :mod:`codegen.hf_maps` (``("expert", r)``: expert ``{e}`` of a stacked tensor; ``("half",
n, r)``: half ``n`` of the output dimension; ``("cat", ...)``: concatenated along it).

>>> sorted(experts(shared="shared_expert"))[:2]
['blocks.{i}.mlp.experts.{e}.down.weight', 'blocks.{i}.mlp.experts.{e}.gate.weight']
"""

from __future__ import annotations

Recipe = str | tuple


def experts(stack: str = "blocks", mlp: str = "model.layers.{i}.mlp.", shared: str | None = None,
            shared_gate: str | None = None) -> dict[str, Recipe]:
    """Our names -> recipes for the MoE layers of ``stack``, whose transformers module is ``mlp`` (``{i}``: the
    layer): its router ``gate``, the stacked ``experts``, a shared expert named ``shared`` (one SwiGLU MLP: Qwen-MoE's
    ``shared_expert``, DeepSeek's ``shared_experts``) and the linear ``shared_gate`` whose sigmoid scales it."""
    ours, w = f"{stack}.{{i}}.mlp.", {}
    w[ours + "router.weight"] = mlp + "gate.weight"
    gate_up = ("expert", mlp + "experts.gate_up_proj")
    w[ours + "experts.{e}.gate.weight"] = ("half", 0, gate_up)
    w[ours + "experts.{e}.up.weight"] = ("half", 1, gate_up)
    w[ours + "experts.{e}.gate_up.weight"] = gate_up
    w[ours + "experts.{e}.down.weight"] = ("expert", mlp + "experts.down_proj")
    if shared is not None:
        s = f"{mlp}{shared}."
        for name, theirs in (("gate", "gate_proj"), ("up", "up_proj"), ("down", "down_proj")):
            w[f"{ours}shared.{name}.weight"] = f"{s}{theirs}.weight"
        w[ours + "shared.gate_up.weight"] = ("cat", s + "gate_proj.weight", s + "up_proj.weight")
    if shared_gate is not None:
        w[ours + "shared_gate.weight"] = f"{mlp}{shared_gate}.weight"
    return w


def with_dense_stack(w: dict[str, Recipe]) -> dict[str, Recipe]:
    """``w`` plus the same layer names for a ``dense_blocks`` stack (Qwen-MoE's dense layers, listed in the same
    ``model.layers.{i}`` as the MoE ones): attention, norms and a dense MLP, not the MoE layer's own tensors."""
    moe_only = (".mlp.router.", ".mlp.experts.", ".mlp.shared.", ".mlp.shared_gate.")
    dense = {"dense_" + k: r for k, r in w.items() if k.startswith("blocks.{i}.") and not any(m in k for m in moe_only)}
    return w | dense


def stored_in_by_out(stacks: tuple[str, ...] = ("dense_blocks", "blocks")) -> dict[str, Recipe]:
    """Llama 4's names (``model.layers.{i}`` for the layers of every stack; the MLP is ``feed_forward``): dense layers'
    gate, up and down projections; in MoE layers the ``router``, the experts stacked in x out (``gate_up_proj`` (E, d,
    2 x d_ff): gate columns, then up columns; ``down_proj`` (E, d_ff, d)) and one ``shared_expert``."""
    layer, w = "model.layers.{i}.", {"embed.token.weight": "model.embed_tokens.weight"}
    a, m = layer + "self_attn.", layer + "feed_forward."
    stacked, down = ("expert", m + "experts.gate_up_proj"), ("t", ("expert", m + "experts.down_proj"))
    for stack in stacks:
        ours = f"{stack}.{{i}}."
        for name, theirs in (("q", "q_proj"), ("k", "k_proj"), ("v", "v_proj"), ("out", "o_proj")):
            w[f"{ours}attn.{name}.weight"] = f"{a}{theirs}.weight"
            w[f"{ours}attn.{name}.bias"] = f"{a}{theirs}.bias"
        w[ours + "attn.qkv.weight"] = ("cat", *(f"{a}{p}_proj.weight" for p in "qkv"))
        w[ours + "attn.qkv.bias"] = ("cat", *(f"{a}{p}_proj.bias" for p in "qkv"))
        w[ours + "attn_norm.weight"] = layer + "input_layernorm.weight"
        w[ours + "mlp_norm.weight"] = layer + "post_attention_layernorm.weight"
        for prefix, theirs in (("mlp.", m), ("mlp.shared.", m + "shared_expert.")):  # a dense layer's MLP, the shared expert
            for name, proj in (("gate", "gate_proj"), ("up", "up_proj"), ("down", "down_proj")):
                w[f"{ours}{prefix}{name}.weight"] = f"{theirs}{proj}.weight"
            w[f"{ours}{prefix}gate_up.weight"] = ("cat", theirs + "gate_proj.weight", theirs + "up_proj.weight")
        w[ours + "mlp.router.weight"] = m + "router.weight"
        w[ours + "mlp.experts.{e}.gate.weight"] = ("t", ("half_last", 0, stacked))
        w[ours + "mlp.experts.{e}.up.weight"] = ("t", ("half_last", 1, stacked))
        w[ours + "mlp.experts.{e}.gate_up.weight"] = ("t", stacked)
        w[ours + "mlp.experts.{e}.down.weight"] = down
    w["final_norm.weight"] = "model.norm.weight"
    w["head.weight"] = "lm_head.weight"
    return w
