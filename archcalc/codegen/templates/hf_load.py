"""Template of load_hf_state_dict and its helpers (archcalc.codegen.hf fills it): each operation
of a recipe in a region of its own, kept where the file's weight map uses it; ``cfg.kv_heads`` is
``cfg.heads`` in multi-head attention (one group per head)."""

import torch
from torch import nn

from archcalc.codegen.templates.hf_ops import transforms
from archcalc.codegen.templates.names import HF_BUFFERS, HF_COPIES, HF_WEIGHTS, OFFSETS, Config


def load_hf_state_dict(model: nn.Module, state_dict: dict[str, torch.Tensor]) -> None:
    """DOC"""
    used: set[str] = set()
    with torch.no_grad():
        for name, param in model.named_parameters():
            pattern, index = _indexed(model, name)
            tensor = _hf_tensor(HF_WEIGHTS[pattern], state_dict, index, used, model.cfg)
            if tensor.shape != param.shape:
                have, want = tuple(tensor.shape), tuple(param.shape)
                raise ValueError(f"{name}: transformers gives shape {have}, the module has {want}")
            param.copy_(tensor)
        # region: buffers
        for name, buffer in model.named_buffers():
            pattern, index = _indexed(model, name)
            if pattern not in HF_BUFFERS or HF_BUFFERS[pattern].format(**index) not in state_dict:
                continue  # not in this state_dict: the buffer keeps its initial value
            tensor = _hf_tensor(HF_BUFFERS[pattern], state_dict, index, used, model.cfg)
            if tensor.shape != buffer.shape:
                have, want = tuple(tensor.shape), tuple(buffer.shape)
                raise ValueError(f"{name}: transformers gives shape {have}, the module has {want}")
            buffer.copy_(tensor)
        # endregion
    # the same tensor under a second name: it must be that tensor
    for copy, original in HF_COPIES.items():
        if copy in state_dict and not _same(state_dict[copy], state_dict[original]):
            raise ValueError(
                f"{copy} differs from {original}, and this module holds the two as one tensor "
                f"(tied): the checkpoint's {copy} would be dropped (an untied head needs a module "
                "generated untied)"
            )
    left = sorted(set(state_dict) - used - set(HF_COPIES))
    if left:
        names = ", ".join(left[:5])
        raise ValueError(f"transformers tensors with no place in this module: {names}")


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Is a the tensor b (transformers lists a tied tensor under both names), or equal to it?"""
    return a is b or (a.shape == b.shape and a.dtype == b.dtype and torch.equal(a, b.to(a.device)))


def _indexed(model: nn.Module, name: str) -> tuple[str, dict[str, int]]:
    """'blocks.3.mlp.experts.5.up.weight' -> ('blocks.{i}.mlp.experts.{e}.up.weight',
    {'i': 3, 'e': 5})."""
    parts, index = name.split("."), {}
    for j, part in enumerate(parts):
        if part.isdigit():
            key = "e" if index else "i"
            index[key], parts[j] = int(part), "{" + key + "}"
    # region: numbered
    if "i" in index:  # the layer's number in its own stack (Zamba2's adapters are listed by it)
        index["n"] = index["i"]
    # endregion
    # region: interleaved
    if "i" in index:  # the stacks' layers interleaved: the model's layer_list gives their order
        block = getattr(model, parts[0])[index["i"]]
        index["i"] = [n for n, b in enumerate(model.layer_list) if b is block][0]
    # endregion
    # region: offsets
    # transformers numbers all layers in one list: model.layers.{i}
    offsets = OFFSETS
    if "i" in index:
        index["i"] += offsets[parts[0]]
    # endregion
    return ".".join(parts), index


def _hf_tensor(
    recipe, state_dict: dict[str, torch.Tensor], index: dict[str, int], used: set[str], cfg: Config
) -> torch.Tensor:
    """The tensor a recipe names: a transformers name, or (operation, ..., recipe) computed from
    others."""
    if isinstance(recipe, str):
        name = recipe.format(**index)
        if name not in state_dict:
            raise KeyError(f"the transformers state_dict has no {name!r}")
        used.add(name)
        return state_dict[name]
    # region: ops
    op, *args = recipe
    # endregion
    # region: cat
    if op == "cat":  # a fused projection: the parts stacked along the output dimension
        return torch.cat([_hf_tensor(r, state_dict, index, used, cfg) for r in args])
    # endregion
    # region: heads
    if op == "heads":  # one tensor per head ({h} = 0, 1, ...), concatenated (StableLM's QK-norms)
        parts = []
        while args[-1].format(**index, h=len(parts)) in state_dict:
            parts.append(_hf_tensor(args[-1], state_dict, {**index, "h": len(parts)}, used, cfg))
        return torch.cat(parts)
    # endregion
    # region: head_pairs
    if op == "head_pairs":  # a query and its gate stored apart -> each head's query, then its gate
        parts = [_hf_tensor(r, state_dict, index, used, cfg) for r in args]  # 2 x (H * d_head, d)
        pairs = [part.unflatten(0, (cfg.heads, -1)) for part in parts]  # 2 x (H, d_head, d)
        return torch.stack(pairs, dim=1).flatten(0, 2)  # (H * 2 * d_head, d)
    # endregion
    # region: x
    x = _hf_tensor(args[-1], state_dict, index, used, cfg)
    # endregion
    x = transforms(op, args, x, index, cfg)  # insert: transforms
    raise ValueError(f"unknown recipe {recipe!r}")
