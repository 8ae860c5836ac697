"""``archcalc count --hf CONFIG.json --with-vision``: a multimodal wrapper's vision tower and projector, added to the
text model's count (archcalc.hf.vision counts them).

The two parts join the count as roles ``vision_tower`` and ``projector``: in ``by_role``, ``by_path``, ``tensors``
and the total; ``text_total`` keeps the text model's own total and ``vision`` the encoder's values and formulas.
``active`` stays the text model's (what one text token uses). ``--set`` changes the text model only: the vision part
is counted from the config as written.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from typing import TYPE_CHECKING

from archcalc.cli.table import num, percent, table
from archcalc.errors import UsageError

if TYPE_CHECKING:  # every command's parser imports this module: the HF import loads only when the flag is given
    from archcalc.backends.count import CountResult
    from archcalc.hf.vision import VisionCount


def add_vision_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--with-vision", action="store_true",
                   help="with --hf and a multimodal wrapper config (gemma3, gemma4, mistral3, qwen3_5, qwen3_5_moe): also "
                        "count its vision tower and projector, as roles vision_tower and projector")


def vision_of(args: argparse.Namespace) -> VisionCount | None:
    """The vision part ``--with-vision`` asks for (None without it); a one-line error where there is none to count."""
    if not getattr(args, "with_vision", False):
        return None
    if getattr(args, "hf", None) is None:
        raise UsageError(f"archcalc {getattr(args, 'command', 'count')}: --with-vision needs --hf CONFIG.json (a "
                         "multimodal wrapper config), not a SPEC")
    from archcalc.hf.jsonfile import read_file
    from archcalc.hf.vision import vision_count

    vc = vision_count(read_file(args.hf))
    for note in vc.notes:
        print(f"archcalc: {args.hf}: {note}", file=sys.stderr)
    if args.overrides:
        print(f"archcalc: {args.hf}: --set changes the text model only; the vision tower and projector are counted from "
              "the config as written", file=sys.stderr)
    return vc


def merged(r: CountResult, vc: VisionCount) -> CountResult:
    """``r`` with the vision tower and projector added to its total, roles and paths."""
    totals = vc.totals()
    return dataclasses.replace(r, total=r.total + sum(totals.values()), by_role={**r.by_role, **totals},
                               by_path={**r.by_path, **vc.by_path()})


def add_json(entry: dict, text_total: int, vc: VisionCount) -> dict:
    """One size's ``--json`` entry with the vision tensors, the text model's total and the vision part's summary."""
    entry["tensors"] = entry["tensors"] + vc.tensors_json()
    entry["text_total"] = text_total
    entry["vision"] = vc.to_json()
    return entry


def render(vc: VisionCount, total: int, text_total: int) -> str:
    """The terminal section: the encoder, its values, each part's formula, and (if any) its tensors."""
    from archcalc.hf.vision import PARTS

    out = [f"vision tower and projector of {vc.model_type}: {vc.encoder.title} ({vc.encoder.source})"]
    if not vc.tensors:
        return "\n".join(out + [f"  {note}" for note in vc.notes])
    out.append("  " + ", ".join(f"{k} = {v:,}" for k, v in vc.values.items()))
    totals = vc.totals()
    for part in PARTS:
        out.append(f"  {part} = {vc.formula(part)} = {num(totals[part])}")
    out.append(f"  total = text model {num(text_total)} + vision_tower + projector = {num(total)} (params above: the "
               "text model's formula)")
    rows = []
    for t in vc.tensors_json():
        n = t["count"]
        rows.append([t["path"], t["role"], " × ".join(t["shape_formula"]), " × ".join(f"{s:,}" for s in t["shape"]),
                     f"×{t['repeat']:,}" if t["repeat"] != 1 else "", num(n), percent(100.0 * n / total if total else 0.0)])
    out += ["", table(["tensor", "role", "shape", "", "repeat", "params", "share"], rows, left=3)]
    return "\n".join(out)
