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
