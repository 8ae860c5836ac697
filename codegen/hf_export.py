"""Source of ``to_hf_state_dict``: the generated module's weights under transformers' names and shapes.

Each recipe of the weight map says how a parameter is computed from transformers' tensors; export undoes
it step by step. Some operations cut a piece out of a transformers tensor (one expert of a stack, one half,
every other feature); export keeps each piece with the cuts that took it out (outermost first) and puts
the tensor back together once every piece is there (``_hf_whole``). A fused parameter (a ("cat", ...)
recipe) is split into its parts first, by the row counts in ``HF_SPLITS``.
"""

from __future__ import annotations

EXPORT_OPS = {  # operation: the lines of _hf_pieces that undo it on x
    "t": ["    if op == \"t\":", "        return _hf_pieces(args[-1], x.transpose(-2, -1), index, cuts, pieces, cfg)"],
    "expert": ["    if op == \"expert\":  # expert e of a stack", "        return _hf_pieces(args[-1], x, index, ((\"expert\", index[\"e\"]),) + cuts, pieces, cfg)"],
    "half": ["    if op == \"half\":  # half n of the rows", "        return _hf_pieces(args[-1], x, index, ((\"half\", args[0]),) + cuts, pieces, cfg)"],
    "half_last": ["    if op == \"half_last\":  # half n of the columns",
                  "        return _hf_pieces(args[-1], x, index, ((\"half_last\", args[0]),) + cuts, pieces, cfg)"],
    "qkv_rows": ["    if op in (\"qkv_rows\", \"qkv_cols\", \"qkv_group\"):  # q, k or v of a fused projection",
                 "        return _hf_pieces(args[-1], x, index, ((op, args[0]),) + cuts, pieces, cfg)"],
    "qkv_cols": [],
    "qkv_group": [],
    "every_other": ["    if op == \"every_other\":  # features n, n + 2, ...",
                    "        return _hf_pieces(args[-1], x, index, ((\"every_other\", args[0]),) + cuts, pieces, cfg)"],
    "heads": [
        "    if op == \"heads\":  # one transformers tensor per head ({h}): each head's features",
        "        for h, part in enumerate(x.unflatten(0, (-1, cfg.head_width))):",
        "            _hf_pieces(args[-1], part, {**index, \"h\": h}, cuts, pieces, cfg)",
        "        return",
    ],
    "flat": ["    if op == \"flat\":  # one vector -> one row per head",
             "        return _hf_pieces(args[-1], x.unflatten(0, (-1, cfg.head_width)), index, cuts, pieces, cfg)"],
    "qkv_by_group": [
        "    if op == \"qkv_by_group\":  # all q, all k, all v -> [queries of the group, key, value] per key/value head",
        "        q, k, v = x.split([cfg.heads * cfg.head_width, {groups} * cfg.head_width, {groups} * cfg.head_width])",
        "        by_group = [t.unflatten(0, ({groups}, -1, cfg.head_width)) for t in (q, k, v)]  # (KV, heads / KV or 1, d_head, ...)",
        "        return _hf_pieces(args[-1], torch.cat(by_group, dim=1).flatten(0, 2), index, cuts, pieces, cfg)",
    ],
}

WHOLE = {  # how pieces cut by an operation go back together (parts in order of their index)
    "expert": "        return torch.stack(parts)  # (E, ...)",
    "half": "        return torch.cat(parts)",
    "half_last": "        return torch.cat(parts, dim=-1)",
    "qkv_rows": "        return torch.cat(parts)",
    "qkv_cols": "        return torch.cat(parts, dim=-1)",
    "qkv_group": "        return torch.cat([p.unflatten(0, ({groups}, -1, cfg.head_width)) for p in parts], dim=1).flatten(0, 2)",
    "every_other": "        return torch.stack(parts, dim=-1).flatten(-2)  # interleaved again",
}


def export_sources(buffers: bool, splits: bool, ops: set[str], groups: str) -> list[str]:
    """``to_hf_state_dict`` and the helpers it needs (``_hf_pieces``, and ``_hf_whole`` where tensors are cut)."""
    tensors = "model.named_parameters()"
    if buffers:
        tensors = "[*model.named_parameters(), *((n, b) for n, b in model.named_buffers() if _indexed(model, n)[0] in HF_BUFFERS)]"
    lines = [
        "def to_hf_state_dict(model: nn.Module) -> dict[str, torch.Tensor]:",
        '    """transformers\' state_dict for `model`\'s weights: the inverse of load_hf_state_dict, with transformers\' names and',
        '    shapes, so that hf_model.load_state_dict(to_hf_state_dict(model), strict=True) loads it."""',
        "    pieces: dict[str, list] = {}  # transformers name -> the (cuts, tensor) pieces of it",
        f"    for name, tensor in {tensors}:",
        "        pattern, index = _indexed(model, name)",
        f"        recipe = {'HF_WEIGHTS.get(pattern) or HF_BUFFERS[pattern]' if buffers else 'HF_WEIGHTS[pattern]'}",
    ]
    if splits:
        lines += [
            "        if pattern in HF_SPLITS:  # a fused parameter: a part for each of transformers' tensors",
            "            for part, part_recipe in zip(tensor.detach().split(HF_SPLITS[pattern]), recipe[1:], strict=True):",
            "                _hf_pieces(part_recipe, part, index, (), pieces, model.cfg)",
            "        else:",
            "            _hf_pieces(recipe, tensor.detach(), index, (), pieces, model.cfg)",
        ]
    else:
        lines.append("        _hf_pieces(recipe, tensor.detach(), index, (), pieces, model.cfg)")
    cut = bool(ops & set(WHOLE))
    lines += [
        f"    state = {{name: {'_hf_whole(parts, model.cfg)' if cut else 'parts[0][1]'} for name, parts in pieces.items()}}",
        "    return state | {copy: state[original] for copy, original in HF_COPIES.items()}",
        "",
        "",
        "def _hf_pieces(recipe, x: torch.Tensor, index: dict[str, int], cuts: tuple, pieces: dict[str, list], cfg: Config) -> None:",
        '    """Undo a recipe on x: file x as a piece of the transformers tensor it came from, with the cuts that took it out."""',
        "    if isinstance(recipe, str):",
        "        pieces.setdefault(recipe.format(**index), []).append((cuts, x))",
        "        return",
    ]
    used = ops - {"cat"}
    if used:
        lines.append("    op, *args = recipe")
    if used & {"qkv_rows", "qkv_cols", "qkv_group"}:
        used = used | {"qkv_rows"}  # one branch for the three
    for op, body in EXPORT_OPS.items():
        if op in used:
            lines += [line.replace("{groups}", groups) for line in body]
    lines.append('    raise ValueError(f"cannot export through {recipe!r}")')
    if cut:
        lines += [
            "",
            "",
            "def _hf_whole(pieces: list, cfg: Config) -> torch.Tensor:",
            '    """A transformers tensor from its pieces: group them by their outermost cut, rebuild each group, then join them."""',
            "    if len(pieces) == 1 and not pieces[0][0]:",
            "        return pieces[0][1]",
            "    groups: dict[tuple, list] = {}",
            "    for cuts, x in pieces:",
            "        groups.setdefault(cuts[0], []).append((cuts[1:], x))",
            "    keys = sorted(groups)",
            "    if [n for _, n in keys] != list(range(len(keys))):",
            '        raise ValueError(f"pieces missing: {keys}")',
            "    parts = [_hf_whole(groups[key], cfg) for key in keys]",
        ]
        present = [op for op in WHOLE if op in ops]
        if len(present) > 1:
            lines.append("    op = keys[0][0]  # how the pieces were cut")
        for j, op in enumerate(present):
            body = WHOLE[op].replace("{groups}", groups)
            if j < len(present) - 1:
                lines += [f'    if op == "{op}":', body]
            else:
                lines.append(body.replace("        return", "    return"))
    return lines
