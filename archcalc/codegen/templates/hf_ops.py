"""Template fragment of _hf_tensor (archcalc.codegen.hf inserts it): each operation of a weight
map's recipes in a region of its own, applied to x (the tensor of its last argument)."""

import torch

from archcalc.codegen.templates.names import Config


def transforms(op: str, args: list, x: torch.Tensor, index: dict[str, int], cfg: Config):
    # region: t
    if op == "t":  # stored in x out (GPT-2's Conv1D, gpt-oss's experts)
        return x.transpose(-2, -1)
    # endregion
    # region: expert
    if op == "expert":  # one expert of a tensor that stacks them all
        return x[index["e"]]
    # endregion
    # region: expert_after
    if op == "expert_after":  # expert e of those after the first cfg.<args[0]> (zero experts)
        return x[getattr(cfg, args[0]) + index["e"]]
    # endregion
    # region: half
    if op == "half":  # gate or up of a fused gate_up projection
        return x.chunk(2, dim=0)[args[0]]
    # endregion
    # region: half_last
    if op == "half_last":  # gate or up of a fused gate_up stored in x out (Llama 4's experts)
        return x.chunk(2, dim=-1)[args[0]]
    # endregion
    # region: qkv_rows
    if op == "qkv_rows":  # q, k or v of a fused projection stored [q; k; v] (Phi-3's qkv_proj)
        return x.split(_qkv_widths(cfg), dim=0)[args[0]]
    # endregion
    # region: qkv_cols
    if op == "qkv_cols":  # q, k or v of a fused projection stored in x [q, k, v] (GPT-2's c_attn)
        return x.split(_qkv_widths(cfg), dim=-1)[args[0]]
    # endregion
    # region: qkv_group
    if op == "qkv_group":  # q, k or v of [queries of the group, key, value] per key/value head
        x = x.unflatten(0, (cfg.kv_heads, -1, cfg.head_width))  # (KV, heads / KV + 2, d_head, ...)
        return (x[:, :-2].flatten(0, 2), x[:, -2].flatten(0, 1), x[:, -1].flatten(0, 1))[args[0]]
    # endregion
    # region: every_other
    if op == "every_other":  # interleaved gate and up (gpt-oss)
        return x[..., args[0] :: 2]
    # endregion
    # region: flat
    if op == "flat":  # one row per head (Cohere's QK-norm weights), as one vector
        return x.flatten()
    # endregion
    # region: qkv_by_group
    if op == "qkv_by_group":  # [queries of the group, key, value] per key/value head -> q, k, v
        x = x.unflatten(0, (cfg.kv_heads, -1, cfg.head_width))  # (KV, heads / KV + 2, d_head, ...)
        return torch.cat([x[:, :-2].flatten(0, 2), x[:, -2].flatten(0, 1), x[:, -1].flatten(0, 1)])
    # endregion
    return x


def _qkv_widths(cfg: Config) -> list[int]:
    """The widths of q, k and v in a fused projection."""
    kv_width = cfg.kv_heads * cfg.head_width
    return [cfg.heads * cfg.head_width, kv_width, kv_width]
