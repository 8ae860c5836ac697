"""``load_hf_state_dict`` and ``to_hf_state_dict`` for a spec with a transformers model type (``spec.hf``).

The generated file gets the weight map of its model type (``codegen.hf_maps``) as a dict literal,
restricted to the parameters its module has, and two small functions that read it both ways: the map
is data, the functions are the same for every family. Only the operations the map uses are written out.
Loading computes each parameter from transformers' tensors (``_hf_tensor``); exporting undoes each
operation, keeping the pieces a transformers tensor was cut into until they can be put back together
(``_hf_pieces``, ``_hf_whole``): the two are inverse by construction and tested against transformers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from archcalc.ir import Leaf, leaves
from codegen.errors import UnsupportedError
from codegen.hf_export import EXPORT_OPS, export_sources
from codegen.hf_maps import MAPS, Recipe

if TYPE_CHECKING:
    from codegen.emitter import Emitter

LOAD_OPS = {  # operation: the lines of _hf_tensor that apply it to x (the tensor of its last argument)
    "t": ["    if op == \"t\":  # stored in x out (GPT-2's Conv1D, gpt-oss's experts)", "        return x.transpose(-2, -1)"],
    "expert": ["    if op == \"expert\":  # one expert of a tensor that stacks them all", "        return x[index[\"e\"]]"],
    "half": ["    if op == \"half\":  # gate or up of a fused gate_up projection", "        return x.chunk(2, dim=0)[args[0]]"],
    "half_last": ["    if op == \"half_last\":  # gate or up of a fused gate_up stored in x out (Llama 4's experts)",
                  "        return x.chunk(2, dim=-1)[args[0]]"],
    "qkv_rows": ["    if op == \"qkv_rows\":  # q, k or v of a fused projection stored [q; k; v] (Phi-3's qkv_proj)",
                 "        return x.split(_qkv_widths(cfg), dim=0)[args[0]]"],
    "qkv_cols": ["    if op == \"qkv_cols\":  # q, k or v of a fused projection stored in x [q, k, v] (GPT-2's c_attn)",
                 "        return x.split(_qkv_widths(cfg), dim=-1)[args[0]]"],
    "qkv_group": [
        "    if op == \"qkv_group\":  # q, k or v of a projection stored [queries of the group, key, value] per key/value head",
        "        x = x.unflatten(0, ({groups}, -1, cfg.head_width))  # (KV, heads / KV + 2, d_head, ...)",
        "        return (x[:, :-2].flatten(0, 2), x[:, -2].flatten(0, 1), x[:, -1].flatten(0, 1))[args[0]]",
    ],
    "every_other": ["    if op == \"every_other\":  # interleaved gate and up (gpt-oss)", "        return x[..., args[0]::2]"],
    "heads": [  # before x is read: the recipe's name has {h}
        "    if op == \"heads\":  # one transformers tensor per head ({h} = 0, 1, ...), concatenated (StableLM's QK-norms)",
        "        parts = []",
        "        while args[-1].format(**index, h=len(parts)) in state_dict:",
        "            parts.append(_hf_tensor(args[-1], state_dict, {**index, \"h\": len(parts)}, used, cfg))",
        "        return torch.cat(parts)",
    ],
    "flat": ["    if op == \"flat\":  # one row per head (Cohere's QK-norm weights), as one vector", "        return x.flatten()"],
    "qkv_by_group": [
        "    if op == \"qkv_by_group\":  # [queries of the group, key, value] per key/value head -> all q, all k, all v",
        "        x = x.unflatten(0, ({groups}, -1, cfg.head_width))  # (KV, heads / KV + 2, d_head, ...)",
        "        return torch.cat([x[:, :-2].flatten(0, 2), x[:, -2].flatten(0, 1), x[:, -1].flatten(0, 1)])",
    ],
}


def pattern(leaf: Leaf) -> str:
    """The leaf's path with ``{i}`` (block) and ``{e}`` (expert) where its copies are numbered."""
    path = leaf.path
    for depth, (prefix, _) in reversed(list(enumerate(leaf.repeats))):
        path = path[: len(prefix)] + (".{i}" if depth == 0 else ".{e}") + path[len(prefix):]
    return path


def ops_of(recipe: Recipe) -> set[str]:
    if isinstance(recipe, str):
        return set()
    return {recipe[0]}.union(*(ops_of(r) for r in recipe[1:] if isinstance(r, (str, tuple))))


def _resolve(recipe: Recipe, gated: bool, residual: str | None) -> Recipe:
    """A recipe that depends on the module becomes this module's: ("either", dense_name, gated_name) by the MLP (T5's
    up is wi, or wi_1 when gated); ("by_residual", (layout, name), ...) by the block's residual arrangement (Falcon's
    norms are ln_attn and ln_mlp in its parallel block, input_layernorm and post_attention_layernorm in its sequential
    one)."""
    if isinstance(recipe, tuple) and recipe[0] == "either":
        return recipe[2] if gated else recipe[1]
    if isinstance(recipe, tuple) and recipe[0] == "by_residual":
        names = dict(recipe[1:])
        if residual not in names:
            raise UnsupportedError(f"codegen: no transformers name for a {residual} block's {recipe!r}")
        return names[residual]
    return recipe


def _splits(em: Emitter, leaf: Leaf, recipe: Recipe) -> tuple[int, ...] | None:
    """How a fused parameter splits along its rows into the tensors of a ("cat", ...) recipe: q, k and v widths, or halves."""
    if not (isinstance(recipe, tuple) and recipe[0] == "cat"):
        return None
    rows = em.value(leaf.tensor.shape[0])
    parts = len(recipe) - 1
    if parts == 3:  # q, k, v of the attention that owns the leaf
        attn = em.lowered.root.find(leaf.path.rsplit(".", 2)[0])
        assert attn is not None, leaf.path
        a = attn.attrs
        heads, kv_heads, head_width, value_width = (em.value(w) for w in (a.heads, a.kv_heads, a.head_width, a.value_width))
        sizes = (heads * head_width, kv_heads * head_width, kv_heads * value_width)
    else:
        sizes = (rows // parts,) * parts
    if sum(sizes) != rows:
        raise UnsupportedError(f"codegen: {leaf.path} has {rows} rows, not the {sum(sizes)} of its transformers parts")
    return sizes


def hf_sources(em: Emitter) -> str | None:
    """The weight map, ``load_hf_state_dict`` and ``to_hf_state_dict``, or None for a spec without a model type."""
    lowered = em.lowered
    origin = lowered.binding.spec.hf
    if origin is None:
        return None
    hf_map = MAPS.get(origin.model_type)
    if hf_map is None:
        raise UnsupportedError(f"codegen has no transformers weight names for model_type {origin.model_type!r}; "
                               f"it knows {', '.join(sorted(MAPS))}")
    stacks = [c.name for c in lowered.root.children if c.kind == "block"]
    if stacks and stacks != [name for name in hf_map.stacks if name in stacks]:  # []: an encoder-decoder model's towers
        raise UnsupportedError(f"codegen loads {origin.model_type!r} weights into the stacks {list(hf_map.stacks)} (in that order), not {stacks}")
    buffers = _buffers(lowered, hf_map)
    weights: dict[str, Recipe] = {}
    splits: dict[str, tuple[int, ...]] = {}
    copies: dict[str, str] = dict(hf_map.copies)
    all_leaves = leaves(lowered.root)
    names = {pattern(leaf) for leaf in all_leaves}
    for leaf in all_leaves:
        name = pattern(leaf)
        if name not in hf_map.weights:
            raise UnsupportedError(f"codegen: the {origin.model_type!r} weight map has no transformers name for {name!r}")
        gated = any(name.rsplit(".", 2)[0] + f".{g}.weight" in names for g in ("gate", "gate_up"))
        stack = lowered.root.find(name.split(".")[0])
        recipe = _resolve(hf_map.weights[name], gated, getattr(stack.attrs, "residual", None) if stack is not None else None)
        if leaf.tensor.tied_to:  # transformers lists the tied copy too: the same tensor under the head's name
            original = hf_map.weights.get(leaf.tensor.tied_to)
            if not isinstance(recipe, str) or not isinstance(original, str):
                raise UnsupportedError(f"codegen: the tied {name!r} must map to plain transformers names")
            copies[recipe] = original
            continue
        weights[name] = recipe
        if (sizes := _splits(em, leaf, recipe)) is not None:
            splits[name] = sizes
    ops = set().union(*(ops_of(r) for r in [*weights.values(), *buffers.values()]))
    lines = [
        f"# transformers' tensors (model_type {origin.model_type!r}) for this module's parameters; {{i}}: block, {{e}}: expert.",
        "# A name is taken as it is; (operation, ..., recipe) transforms one (see _hf_tensor).",
        f"HF_MODEL_TYPE = {origin.model_type!r}",
        "HF_WEIGHTS = {",
        *(f"    {k!r}: {v!r}," for k, v in weights.items()),
        "}",
        f"HF_COPIES = {copies!r}  # transformers tensors that are the same tensor as another (a tied head)",
    ]
    if buffers:
        lines += ["HF_BUFFERS = {  # buffers, not parameters: loaded where the state_dict has them",
                  *(f"    {k!r}: {v!r}," for k, v in buffers.items()), "}"]
    if splits:
        lines += ["HF_SPLITS = {  # the rows of a fused parameter that each of transformers' tensors holds",
                  *(f"    {k!r}: {v!r}," for k, v in splits.items()), "}"]
    groups = "cfg.kv_heads" if "kv_heads" in em.fields else "cfg.heads"  # multi-head attention: one group per head
    lines += ["", "", *_load(buffers), "", "", *export_sources(bool(buffers), bool(splits), ops, groups), "", "",
              *_indexed(stacks, lowered.root.attrs.layer_order is not None), "", "", *_hf_tensor(ops, groups)]
    return "\n".join(lines)


def _load(buffers: dict) -> list[str]:
    lines = [
        "def load_hf_state_dict(model: nn.Module, state_dict: dict[str, torch.Tensor]) -> None:",
        '    """Copy a transformers model\'s state_dict() into `model`, in place, through HF_WEIGHTS' + (" and HF_BUFFERS." if buffers else "."),
        "",
        "    Every parameter must be found with its shape, and every transformers tensor must find a place.",
        '    """',
        "    used: set[str] = set()",
        "    with torch.no_grad():",
        "        for name, param in model.named_parameters():",
        "            pattern, index = _indexed(model, name)",
        "            tensor = _hf_tensor(HF_WEIGHTS[pattern], state_dict, index, used, model.cfg)",
        "            if tensor.shape != param.shape:",
        '                raise ValueError(f"{name}: transformers gives shape {tuple(tensor.shape)}, the module has {tuple(param.shape)}")',
        "            param.copy_(tensor)",
    ]
    if buffers:
        lines += [
            "        for name, buffer in model.named_buffers():",
            "            pattern, index = _indexed(model, name)",
            "            if pattern not in HF_BUFFERS or HF_BUFFERS[pattern].format(**index) not in state_dict:",
            "                continue  # not in this state_dict: the buffer keeps its initial value",
            "            tensor = _hf_tensor(HF_BUFFERS[pattern], state_dict, index, used, model.cfg)",
            "            if tensor.shape != buffer.shape:",
            '                raise ValueError(f"{name}: transformers gives shape {tuple(tensor.shape)}, the module has {tuple(buffer.shape)}")',
            "            buffer.copy_(tensor)",
        ]
    return lines + [
        "    for copy, original in HF_COPIES.items():  # the same tensor under a second name: it must be that tensor",
        "        if copy in state_dict and not _same(state_dict[copy], state_dict[original]):",
        '            raise ValueError(f"{copy} differs from {original}, and this module holds the two as one tensor (tied): the "',
        '                             f"checkpoint\'s {copy} would be dropped (an untied head needs a module generated untied)")',
        "    left = sorted(set(state_dict) - used - set(HF_COPIES))",
        "    if left:",
        '        raise ValueError(f"transformers tensors with no place in this module: {\', \'.join(left[:5])}")',
        "",
        "",
        "def _same(a: torch.Tensor, b: torch.Tensor) -> bool:",
        '    """Is a the tensor b (transformers lists a tied tensor under both names), or equal to it?"""',
        "    return a is b or (a.shape == b.shape and a.dtype == b.dtype and torch.equal(a, b.to(a.device)))",
    ]


def _indexed(stacks: list[str], interleaved: bool = False) -> list[str]:
    lines = [
        "def _indexed(model: nn.Module, name: str) -> tuple[str, dict[str, int]]:",
        "    \"\"\"'blocks.3.mlp.experts.5.up.weight' -> ('blocks.{i}.mlp.experts.{e}.up.weight', {'i': 3, 'e': 5}).\"\"\"",
        "    parts, index = name.split(\".\"), {}",
        "    for j, part in enumerate(parts):",
        "        if part.isdigit():",
        "            key = \"e\" if index else \"i\"",
        "            index[key], parts[j] = int(part), \"{\" + key + \"}\"",
    ]
    if len(stacks) > 1 and interleaved:  # the stacks' layers interleaved: the model's layer_list gives their order
        lines += ['    if "i" in index:',
                  '        index["i"] = [n for n, block in enumerate(model.layer_list) if block is getattr(model, parts[0])[index["i"]]][0]']
    elif len(stacks) > 1:  # transformers numbers the layers of every stack in one list
        offsets = ", ".join(f"{name!r}: {' + '.join(f'model.cfg.{s}_layers' for s in stacks[:k]) or '0'}" for k, name in enumerate(stacks))
        lines += [f"    offsets = {{{offsets}}}  # transformers numbers all layers in one list: model.layers.{{i}}",
                  '    if "i" in index:',
                  '        index["i"] += offsets[parts[0]]']
    return lines + ["    return \".\".join(parts), index"]


def _hf_tensor(ops: set[str], groups: str) -> list[str]:
    lines = [
        "def _hf_tensor(recipe, state_dict: dict[str, torch.Tensor], index: dict[str, int], used: set[str], cfg: Config) -> torch.Tensor:",
        '    """The tensor a recipe names: a transformers name, or (operation, ..., recipe) computed from others."""',
        "    if isinstance(recipe, str):",
        "        name = recipe.format(**index)",
        "        if name not in state_dict:",
        '            raise KeyError(f"the transformers state_dict has no {name!r}")',
        "        used.add(name)",
        "        return state_dict[name]",
    ]
    if ops:
        lines.append("    op, *args = recipe")
    if "cat" in ops:
        lines += ["    if op == \"cat\":  # a fused projection: the parts stacked along the output dimension",
                  "        return torch.cat([_hf_tensor(r, state_dict, index, used, cfg) for r in args])"]
    if "heads" in ops:
        lines += LOAD_OPS["heads"]
    if ops - {"cat", "heads"}:
        lines.append("    x = _hf_tensor(args[-1], state_dict, index, used, cfg)")
    for op, body in LOAD_OPS.items():
        if op in ops and op != "heads":
            lines += [line.replace("{groups}", groups) for line in body]
    lines.append('    raise ValueError(f"unknown recipe {recipe!r}")')
    if ops & {"qkv_rows", "qkv_cols"}:
        lines += ["", "", "def _qkv_widths(cfg: Config) -> list[int]:",
                  '    """The widths of q, k and v in a fused projection."""',
                  f"    return [cfg.heads * cfg.head_width, {groups} * cfg.head_width, {groups} * cfg.head_width]"]
    assert set(LOAD_OPS) | {"cat"} == set(EXPORT_OPS) | {"cat"}
    return lines


def _buffers(lowered, hf_map) -> dict[str, str]:
    """The map's buffers that this module has: a sigmoid-scored mixture of experts' score_bias."""
    if not hf_map.buffers:
        return {}
    wanted = {}
    for stack in (c for c in lowered.root.children if c.kind == "block"):
        mlp = next((c for c in stack.children if c.name == "mlp"), None)
        if mlp is not None and mlp.kind == "moe" and mlp.attrs.scoring == "sigmoid" and not mlp.attrs.weigh_input:
            name = f"{stack.name}.{{i}}.mlp.score_bias"
            if name not in hf_map.buffers:
                raise UnsupportedError(f"codegen: the weight map has no transformers name for {name!r}")
            wanted[name] = hf_map.buffers[name]
    return wanted
