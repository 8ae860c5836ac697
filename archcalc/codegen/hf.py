"""``load_hf_state_dict`` and ``to_hf_state_dict`` for a spec with a transformers model type (``spec.hf``).

The generated file gets the weight-name layout its spec names (``hf.weights``: ``archcalc.hf.weights``) as a dict literal,
restricted to the parameters its module has, and two small functions that read it both ways: the map
is data, the functions are the same for every family. Only the operations the map uses are written out.
Loading computes each parameter from transformers' tensors (``_hf_tensor``); exporting undoes each
operation, keeping the pieces a transformers tensor was cut into until they can be put back together
(``_hf_pieces``, ``_hf_whole``): the two are inverse by construction and tested against transformers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from archcalc.codegen.errors import UnsupportedError
from archcalc.codegen.hf_export import export_sources
from archcalc.codegen.literal import assign, flat
from archcalc.codegen.mtp import mtp_copies, mtp_stack, mtp_weights
from archcalc.codegen.template import fragment, unit
from archcalc.hf.registry import weights_of
from archcalc.hf.weights import LAYOUTS, Recipe
from archcalc.ir import Leaf, leaves

if TYPE_CHECKING:
    from archcalc.codegen.emitter import Emitter

LOAD_OPS = ("t", "expert", "expert_after", "half", "half_last", "qkv_rows", "qkv_cols", "qkv_group", "every_other", "heads", "flat",
            "qkv_by_group", "head_pairs")  # the operations of templates/hf_load.py's _hf_tensor besides "cat", each in a region


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
    hf_map = LAYOUTS.get(weights_of(origin) or "")
    if hf_map is None:
        raise UnsupportedError(f"codegen has no transformers weight names for model_type {origin.model_type!r}: name a "
                               f"layout in hf.weights, one of {', '.join(LAYOUTS)}")
    stacks = [c.name for c in lowered.root.children if c.kind == "block"]
    if stacks and stacks != [name for name in hf_map.stacks if name in stacks]:  # []: an encoder-decoder model's towers
        raise UnsupportedError(f"codegen loads {origin.model_type!r} weights into the stacks {list(hf_map.stacks)} (in that order), not {stacks}")
    blocks = [c for c in lowered.root.children if c.kind == "block"]
    hf_weights = hf_map.weights | mtp_weights(em, hf_map.weights, blocks)  # --with-mtp: the layers after the last
    buffers = _buffers(lowered, hf_map)
    weights: dict[str, Recipe] = {}
    splits: dict[str, tuple[int, ...]] = {}
    copies: dict[str, str] = dict(hf_map.copies)
    all_leaves = leaves(lowered.root)
    names = {pattern(leaf) for leaf in all_leaves}
    for leaf in all_leaves:
        name = pattern(leaf)
        if name not in hf_weights:
            raise UnsupportedError(f"codegen: the {origin.model_type!r} weight map has no transformers name for {name!r}")
        gated = any(name.rsplit(".", 2)[0] + f".{g}.weight" in names for g in ("gate", "gate_up"))
        stack = lowered.root.find(name.split(".")[0])
        recipe = _resolve(hf_weights[name], gated, getattr(stack.attrs, "residual", None) if stack is not None else None)
        if leaf.tensor.tied_to:  # transformers lists the tied copy too: the same tensor under the head's name
            original = hf_map.weights.get(leaf.tensor.tied_to)
            if not isinstance(recipe, str) or not isinstance(original, str):
                raise UnsupportedError(f"codegen: the tied {name!r} must map to plain transformers names")
            copies |= mtp_copies(em, recipe, original) if name.startswith("mtp.") else {recipe: original}
            continue
        weights[name] = recipe
        if (sizes := _splits(em, leaf, recipe)) is not None:
            splits[name] = sizes
    shared = shared_copies(em, weights)
    copies |= shared
    ops = set().union(*(ops_of(r) for r in [*weights.values(), *buffers.values()]))
    lines = [
        f"# transformers' tensors (model_type {origin.model_type!r}) for this module's parameters;",
        "# {i}: block, {e}: expert. A name is taken as it is; (operation, ..., recipe) transforms one",
        "# (see _hf_tensor).",
        assign("HF_MODEL_TYPE", origin.model_type),
        assign("HF_WEIGHTS", weights),
        "# transformers tensors that are the same tensor as another (a tied head)",
        *(["# (a shared block and its layers' adapters, listed under every layer that runs the block)"] if shared else []),
        assign("HF_COPIES", copies),
    ]
    if buffers:
        lines += ["# buffers, not parameters: loaded where the state_dict has them", assign("HF_BUFFERS", buffers)]
    if splits:
        lines += ["# the rows of a fused parameter that each of transformers' tensors holds", assign("HF_SPLITS", splits)]
    names = {} if "kv_heads" in em.fields else {"cfg.kv_heads": "cfg.heads"}  # multi-head attention: a group per head
    names |= _heads_field(em) if "head_pairs" in ops else {}
    numbered = any("{n}" in name for recipe in weights.values() for name in _names(recipe))
    mtp = lowered.root.find("mtp") is not None
    return "\n\n\n".join(["\n".join(lines), *_load(buffers, ops, names, stacks, lowered.root.attrs.layer_order is not None,
                                                 numbered, mtp),
                           export_sources(bool(buffers), bool(splits), ops, names)])


def _heads_field(em: Emitter) -> dict[str, str]:
    """The config field of the heads ``head_pairs`` splits by: ``heads``, or one stack's where every stack has as many."""
    if "heads" in em.fields:
        return {}
    fields = {name: value for name, (value, _) in em.fields.items() if name.endswith("_heads") and not name.endswith("kv_heads")}
    if len(set(fields.values())) != 1:
        raise UnsupportedError(f"codegen: a query and its gate stored apart need one head count in all stacks, not {fields}")
    return {"cfg.heads": f"cfg.{next(iter(fields))}"}


def _load(buffers: dict, ops: set[str], names: dict[str, str], stacks: list[str], interleaved: bool,
          numbered: bool = False, mtp: bool = False) -> list[str]:
    """load_hf_state_dict, _same, _indexed, _hf_tensor and (for a fused q, k, v) _qkv_widths; ``numbered``: the map
    names a layer's number in its own stack too ({n}); ``mtp``: multi-token prediction modules, numbered on after the
    last layer."""
    doc = ("Copy a transformers model's state_dict() into `model`, in place, through HF_WEIGHTS"
           + ("\n    and HF_BUFFERS." if buffers else ".") + "\n\n    Every parameter must be found with its shape, and "
           "every transformers tensor must find a place.\n    ")
    offsets = (len(stacks) > 1 or mtp) and not interleaved  # transformers numbers the layers of every stack in one list
    layers = (lambda s: f"model.cfg.{s}_layers") if len(stacks) > 1 else (lambda s: "model.cfg.layers")
    sums = {name: " + ".join(layers(s) for s in stacks[:k]) or "0" for k, name in enumerate([*stacks, *["mtp"] * mtp])}
    index = {"interleaved": len(stacks) > 1 and interleaved, "offsets": offsets, "numbered": numbered}
    found = {op: op in ops for op in LOAD_OPS} | {"cat": "cat" in ops, "ops": bool(ops), "x": bool(ops - {"cat", "heads", "head_pairs"})}
    units = [unit("hf_load", "load_hf_state_dict", {"buffers": bool(buffers)}, {"DOC": f'"""{doc}"""'}),
             unit("hf_load", "_same"),
             unit("hf_load", "_indexed", index, {"OFFSETS": _offsets(sums)}),
             unit("hf_load", "_hf_tensor", found, names, inserts={"transforms": fragment("hf_ops", "transforms", 4, found, names)})]
    if ops & {"qkv_rows", "qkv_cols"}:
        units.append(unit("hf_ops", "_qkv_widths", {}, names))
    return units


def _offsets(sums: dict[str, str]) -> str:
    """_indexed's dict of where each stack's layers start, as source: on one line, or one entry a line where that line
    would be too long (an MTP module's start after two stacks)."""
    entries = [f"{flat(k)}: {v}" for k, v in sums.items()]
    one = "{" + ", ".join(entries) + "}"
    return one if len(one) <= 86 or "mtp" not in sums else "{\n" + "".join(f"        {e},\n" for e in entries) + "    }"


def _buffers(lowered, hf_map) -> dict[str, str]:
    """The map's buffers that this module has: a sigmoid-scored mixture of experts' score_bias (a buffer unless
    learned: AFMoE's is a parameter), xIELU's beta and eps, Gemma 4's layer_scalar."""
    if not hf_map.buffers:
        return {}
    wanted = {}
    for stack in (c for c in lowered.root.children if c.kind == "block"):
        scalar = f"{stack.name}.{{i}}.layer_scalar"  # Gemma 4's scale of each layer's output
        wanted |= {scalar: hf_map.buffers[scalar]} if scalar in hf_map.buffers else {}
        mlp = next((c for c in stack.children if c.name == "mlp"), None)
        if mlp is not None and mlp.kind == "mlp" and mlp.attrs.activation == "xielu":
            for name in (f"{stack.name}.{{i}}.mlp.beta", f"{stack.name}.{{i}}.mlp.eps"):
                if name not in hf_map.buffers:
                    raise UnsupportedError(f"codegen: the weight map has no transformers name for {name!r}")
                wanted[name] = hf_map.buffers[name]
        moe = mlp is not None and mlp.kind == "moe"
        sigmoid = moe and mlp.attrs.scoring == "sigmoid" and not mlp.attrs.weigh_input and not mlp.attrs.score_bias
        if sigmoid or (moe and mlp.attrs.zero_experts is not None):  # LongCat-Flash's: a softmax's correction bias
            name = f"{stack.name}.{{i}}.mlp.score_bias"
            if name not in hf_map.buffers:
                raise UnsupportedError(f"codegen: the weight map has no transformers name for {name!r}")
            wanted[name] = hf_map.buffers[name]
    if lowered.root.find("mtp") is not None:  # an MTP module's block: its stack's buffers
        stack = mtp_stack(lowered, [c for c in lowered.root.children if c.kind == "block"]).name
        wanted |= {f"mtp.{{i}}.block.{{e}}.{k[len(stack) + 5:]}": r for k, r in wanted.items() if k.startswith(f"{stack}.{{i}}.")}
    return wanted


def _names(recipe: Recipe) -> list[str]:
    """The transformers names a recipe reads."""
    if isinstance(recipe, str):
        return [recipe]
    return [name for part in recipe[1:] if isinstance(part, (str, tuple)) for name in _names(part)]


def shared_copies(em: Emitter, weights: dict[str, Recipe]) -> dict[str, str]:
    """Zamba2's shared blocks: transformers lists a block under every hybrid layer that runs it, and the adapters of
    every layer of a block under each of them, the same tensors again (tied): each such name, with the name of its
    original (the block's under its first layer; a layer's adapters under that layer)."""
    root, copies = em.lowered.root, {}
    stacks = [c for c in root.children if c.kind == "block"]
    order = root.attrs.layer_order or [s.name for s in stacks for _ in range(em.value(s.repeat))]
    total = sum(em.value(s.repeat) for s in stacks)
    for stack in (s for s in stacks if s.find("shared") is not None):
        layers = [j for j in range(total) if order[j % len(order)] == stack.name]  # transformers' numbers of its layers
        held = em.value(stack.find("shared").attrs.copies)
        for pattern, recipe in weights.items():
            if not pattern.startswith(f"{stack.name}.{{i}}."):
                continue
            for name in _names(recipe):
                if pattern.startswith(f"{stack.name}.{{i}}.shared."):  # layer k runs block k % held
                    copies |= {name.format(i=layers[k]): name.format(i=layers[k % held]) for k in range(held, len(layers))}
                elif "{n}" in name:  # layer k's adapters, listed under every layer m of its block
                    copies |= {name.format(i=layers[m], n=k): name.format(i=layers[k], n=k)
                               for k in range(len(layers)) for m in range(k % held, len(layers), held) if m != k}
    return copies
