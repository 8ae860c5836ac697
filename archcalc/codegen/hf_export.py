"""Source of ``to_hf_state_dict``: the generated module's weights under transformers' names and shapes.

Each recipe of the weight map says how a parameter is computed from transformers' tensors; export undoes
it step by step. Some operations cut a piece out of a transformers tensor (one expert of a stack, one half,
every other feature); export keeps each piece with the cuts that took it out (outermost first) and puts
the tensor back together once every piece is there (``_hf_whole``). A fused parameter (a ("cat", ...)
recipe) is split into its parts first, by the row counts in ``HF_SPLITS``.
"""

from __future__ import annotations

from archcalc.codegen.template import unit

EXPORT_OPS = ("t", "expert", "half", "half_last", "qkv", "every_other", "heads", "flat", "qkv_by_group")  # regions
WHOLE = ("expert", "half", "half_last", "qkv_rows", "qkv_cols", "qkv_group", "every_other")  # how cut pieces join


def export_sources(buffers: bool, splits: bool, ops: set[str], names: dict[str, str]) -> str:
    """``to_hf_state_dict`` and the helpers it needs (``_hf_pieces``, and ``_hf_whole`` where tensors are cut), from
    ``templates/hf_save.py``; ``names``: the template's placeholders (``cfg.kv_heads`` in multi-head attention)."""
    ops = ops | {"expert"} if "expert_after" in ops else ops  # its pieces join as the other experts'
    cut = bool(ops & set(WHOLE))
    flags = {"buffers": buffers, "splits": splits, "cut": cut, "head_pairs": "head_pairs" in ops,
             "expert_after": "expert_after" in ops}
    model_names = {f"model.{k}": f"model.{v}" for k, v in names.items()}  # to_hf_state_dict reads model.cfg
    units = [unit("hf_save", "to_hf_state_dict", flags, model_names),
             unit("hf_save", "_hf_pieces", _pieces(ops), names)]
    if cut:
        units.append(unit("hf_save", "_hf_whole", _whole(ops), names))
    return "\n\n\n".join(units)


def _pieces(ops: set[str]) -> dict[str, bool]:
    used = ops - {"cat", "head_pairs", "expert_after"}  # these two: undone in to_hf_state_dict
    flags = {op: op in used for op in EXPORT_OPS} | {"ops": bool(used)}
    return flags | {"qkv": bool(used & {"qkv_rows", "qkv_cols", "qkv_group"})}  # one branch for the three


def _whole(ops: set[str]) -> dict[str, bool]:
    """The regions of _hf_whole: a branch for each way pieces were cut, the last one without its test."""
    present = [op for op in WHOLE if op in ops]
    flags = {"several": len(present) > 1}
    for op in WHOLE:
        flags[f"if_{op}"] = op in present[:-1]
        flags[f"last_{op}"] = op == present[-1]
    return flags
