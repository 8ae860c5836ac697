"""Template of to_hf_state_dict and its helpers (archcalc.codegen.hf_export fills it): each
operation of a recipe, and each way to join pieces, in a region of its own."""

import torch
from torch import nn

from archcalc.codegen.templates.hf_load import _indexed
from archcalc.codegen.templates.names import HF_BUFFERS, HF_COPIES, HF_SPLITS, HF_WEIGHTS, Config


def to_hf_state_dict(model: nn.Module) -> dict[str, torch.Tensor]:
    """transformers' state_dict for `model`'s weights: the inverse of load_hf_state_dict, with
    transformers' names and shapes, so that hf_model.load_state_dict(to_hf_state_dict(model),
    strict=True) loads it."""
    pieces: dict[str, list] = {}  # transformers name -> the (cuts, tensor) pieces of it
    # region: !buffers
    tensors = model.named_parameters()
    # endregion
    # region: buffers
    buffers = [(n, b) for n, b in model.named_buffers() if _indexed(model, n)[0] in HF_BUFFERS]
    tensors = [*model.named_parameters(), *buffers]
    # endregion
    for name, tensor in tensors:
        pattern, index = _indexed(model, name)
        # region: !buffers
        recipe = HF_WEIGHTS[pattern]
        # endregion
        # region: buffers
        recipe = HF_WEIGHTS.get(pattern) or HF_BUFFERS[pattern]
        # endregion
        # region: head_pairs
        # a gated query (each head's query, then its gate) -> transformers' query and gate apart
        if isinstance(recipe, tuple) and recipe[0] == "head_pairs":
            pairs = tensor.detach().unflatten(0, (model.cfg.heads, 2, -1))  # (H, 2, d_head, d)
            for n, part_recipe in enumerate(recipe[1:]):
                _hf_pieces(part_recipe, pairs[:, n].flatten(0, 1), index, (), pieces, model.cfg)
            continue
        # endregion
        # region: expert_after
        # a zero expert: expert e of those after the first cfg.<recipe[1]> (LongCat-Flash's)
        if isinstance(recipe, tuple) and recipe[0] == "expert_after":
            cut = ("expert", getattr(model.cfg, recipe[1]) + index["e"])
            _hf_pieces(recipe[2], tensor.detach(), index, (cut,), pieces, model.cfg)
            continue
        # endregion
        # region: splits
        if pattern in HF_SPLITS:  # a fused parameter: a part for each of transformers' tensors
            parts = tensor.detach().split(HF_SPLITS[pattern])
            for part, part_recipe in zip(parts, recipe[1:], strict=True):
                _hf_pieces(part_recipe, part, index, (), pieces, model.cfg)
        else:
            _hf_pieces(recipe, tensor.detach(), index, (), pieces, model.cfg)
        # endregion
        # region: !splits
        _hf_pieces(recipe, tensor.detach(), index, (), pieces, model.cfg)
        # endregion
    # region: cut
    state = {name: _hf_whole(parts, model.cfg) for name, parts in pieces.items()}
    # endregion
    # region: !cut
    state = {name: parts[0][1] for name, parts in pieces.items()}
    # endregion
    return state | {copy: state[original] for copy, original in HF_COPIES.items()}


def _hf_pieces(
    recipe,
    x: torch.Tensor,
    index: dict[str, int],
    cuts: tuple,
    pieces: dict[str, list],
    cfg: Config,
) -> None:
    """Undo a recipe on x: file x as a piece of the transformers tensor it came from, with the cuts
    that took it out."""
    if isinstance(recipe, str):
        pieces.setdefault(recipe.format(**index), []).append((cuts, x))
        return
    # region: ops
    op, *args = recipe
    # endregion
    # region: t
    if op == "t":
        return _hf_pieces(args[-1], x.transpose(-2, -1), index, cuts, pieces, cfg)
    # endregion
    # region: expert
    if op == "expert":  # expert e of a stack
        return _hf_pieces(args[-1], x, index, (("expert", index["e"]),) + cuts, pieces, cfg)
    # endregion
    # region: half
    if op == "half":  # half n of the rows
        return _hf_pieces(args[-1], x, index, (("half", args[0]),) + cuts, pieces, cfg)
    # endregion
    # region: half_last
    if op == "half_last":  # half n of the columns
        return _hf_pieces(args[-1], x, index, (("half_last", args[0]),) + cuts, pieces, cfg)
    # endregion
    # region: qkv
    if op in ("qkv_rows", "qkv_cols", "qkv_group"):  # q, k or v of a fused projection
        return _hf_pieces(args[-1], x, index, ((op, args[0]),) + cuts, pieces, cfg)
    # endregion
    # region: every_other
    if op == "every_other":  # features n, n + 2, ...
        return _hf_pieces(args[-1], x, index, (("every_other", args[0]),) + cuts, pieces, cfg)
    # endregion
    # region: heads
    if op == "heads":  # one transformers tensor per head ({h}): each head's features
        for h, part in enumerate(x.unflatten(0, (-1, cfg.head_width))):
            _hf_pieces(args[-1], part, {**index, "h": h}, cuts, pieces, cfg)
        return
    # endregion
    # region: flat
    if op == "flat":  # one vector -> one row per head
        rows = x.unflatten(0, (-1, cfg.head_width))
        return _hf_pieces(args[-1], rows, index, cuts, pieces, cfg)
    # endregion
    # region: qkv_by_group
    if op == "qkv_by_group":  # all q, all k, all v -> [queries of the group, key, value] per group
        kv_width = cfg.kv_heads * cfg.head_width
        q, k, v = x.split([cfg.heads * cfg.head_width, kv_width, kv_width])
        # (KV, heads / KV or 1, d_head, ...)
        by_group = [t.unflatten(0, (cfg.kv_heads, -1, cfg.head_width)) for t in (q, k, v)]
        grouped = torch.cat(by_group, dim=1).flatten(0, 2)
        return _hf_pieces(args[-1], grouped, index, cuts, pieces, cfg)
    # endregion
    raise ValueError(f"cannot export through {recipe!r}")


def _hf_whole(pieces: list, cfg: Config) -> torch.Tensor:
    """A transformers tensor from its pieces: group them by their outermost cut, rebuild each
    group, then join them."""
    if len(pieces) == 1 and not pieces[0][0]:
        return pieces[0][1]
    groups: dict[tuple, list] = {}
    for cuts, x in pieces:
        groups.setdefault(cuts[0], []).append((cuts[1:], x))
    keys = sorted(groups)
    if [n for _, n in keys] != list(range(len(keys))):
        raise ValueError(f"pieces missing: {keys}")
    parts = [_hf_whole(groups[key], cfg) for key in keys]
    # region: several
    op = keys[0][0]  # how the pieces were cut
    # endregion
    # region: if_expert
    if op == "expert":
        return torch.stack(parts)  # (E, ...)
    # endregion
    # region: last_expert
    return torch.stack(parts)  # (E, ...)
    # endregion
    # region: if_half
    if op == "half":
        return torch.cat(parts)
    # endregion
    # region: last_half
    return torch.cat(parts)
    # endregion
    # region: if_half_last
    if op == "half_last":
        return torch.cat(parts, dim=-1)
    # endregion
    # region: last_half_last
    return torch.cat(parts, dim=-1)
    # endregion
    # region: if_qkv_rows
    if op == "qkv_rows":
        return torch.cat(parts)
    # endregion
    # region: last_qkv_rows
    return torch.cat(parts)
    # endregion
    # region: if_qkv_cols
    if op == "qkv_cols":
        return torch.cat(parts, dim=-1)
    # endregion
    # region: last_qkv_cols
    return torch.cat(parts, dim=-1)
    # endregion
    # region: if_qkv_group
    if op == "qkv_group":
        grouped = [p.unflatten(0, (cfg.kv_heads, -1, cfg.head_width)) for p in parts]
        return torch.cat(grouped, dim=1).flatten(0, 2)
    # endregion
    # region: last_qkv_group
    grouped = [p.unflatten(0, (cfg.kv_heads, -1, cfg.head_width)) for p in parts]
    return torch.cat(grouped, dim=1).flatten(0, 2)
    # endregion
    # region: if_every_other
    if op == "every_other":
        return torch.stack(parts, dim=-1).flatten(-2)  # interleaved again
    # endregion
    # region: last_every_other
    return torch.stack(parts, dim=-1).flatten(-2)  # interleaved again
    # endregion
