"""The PyTorch emitter: IR → one self-contained, readable Python source file (the classes come from
:class:`archcalc.codegen.printer.TorchPrinter`; this module puts the file together around them).

The file imports only torch and the standard library and reads like nanoGPT's ``model.py``: a config
dataclass, one class per component in bottom-up order, shape comments, ``build(device, dtype)``, the
loss in forward and ``generate()`` with a KV cache. Parameter names in ``state_dict()`` are the IR paths
with layer indices (``blocks.0.attn.qkv.weight``). The file has no ``from __future__ import annotations``,
so it loads however Python code is loaded (import, ``importlib`` without ``sys.modules``, ``runpy``).

Safety: spec files are untrusted, so nothing from a spec reaches the source except identifiers that
the schema validated (symbol and stack names, the transformers model type), integers and floats
formatted here, and strings written with ``repr()``. Emission itself does not import torch.

>>> from archcalc.spec import load_spec
>>> from archcalc.spec.bind import bind
>>> from archcalc.ir import lower
>>> source = emit(lower(bind(load_spec("gpt2"), "small")), "archcalc generate gpt2 --size small -o gpt2_small.py")
>>> "class Attention(nn.Module):" in source and "def generate(" in source
True
"""

from __future__ import annotations

import ast
import re
import textwrap
from functools import lru_cache

from archcalc import __version__
from archcalc.codegen.emitter import Emitter
from archcalc.codegen.errors import UnsupportedError
from archcalc.codegen.flops_source import flops_source
from archcalc.codegen.hf import hf_sources, pattern
from archcalc.codegen.literal import WIDTH, assign, fit_long_lines, flat
from archcalc.codegen.parallel import parallel_sources
from archcalc.codegen.printer import TorchPrinter
from archcalc.codegen.template import unit
from archcalc.ir import Lowered, leaves
from archcalc.ir.attrs import GatedDeltaNet, Mamba, Mamba2, ShortConv

__all__ = ["MARKER", "Emitter", "UnsupportedError", "emit"]

MARKER = "# archcalc-generated: 'archcalc generate' replaces this file only while it is unedited."
IMPORTS = (  # (the name a file uses, its import): the standard library's, then torch's
    ("math", "import math"), ("dataclass", "from dataclasses import dataclass"), (None, ""),
    ("torch", "import torch"), ("F", "import torch.nn.functional as F"), ("nn", "from torch import nn"),
    ("checkpoint", "from torch.utils.checkpoint import checkpoint"),
)


def emit(lowered: Lowered, command: str) -> str:
    """The Python source of a PyTorch module for ``lowered`` (one size of one spec)."""
    # state mixers are generated in a decoder, alone or beside attention layers (Bamba, Jamba, Qwen3.5, LFM2)
    decoder = lowered.root.attrs.architecture == "decoder"
    mixers = (Mamba, Mamba2, GatedDeltaNet, ShortConv)
    lowered.require_attention_only("code generation", modelled=mixers if decoder else ())
    _refuse_layer_shapes(lowered)
    printer = TorchPrinter(lowered)
    printer.doprint(lowered.root)
    return _module(printer.em, lowered, command)


#: the components that codegen does not generate yet, by the name the IR gives them (none today: Gemma 4's per-layer
#: inputs, KV sharing and experts beside the MLP, LongCat-Flash's experts and multi-token prediction are all generated)
UNGENERATED: dict[str, str] = {}


def _refuse_layer_shapes(lowered: Lowered) -> None:
    """Refuse, naming each, the features of the layers that the generated module does not compute yet."""
    found = ungenerated(lowered)
    if found:
        raise UnsupportedError("codegen does not generate these layers yet: " + ", ".join(found) +
                               " (counts, FLOPs, memory, import and export model them)")


def ungenerated(lowered: Lowered) -> list[str]:
    """The features of the model that codegen does not generate yet, each named once."""

    found: list[str] = []
    for _, node in lowered.root.walk():
        found += [UNGENERATED[node.name]] if node.name in UNGENERATED else []
    return list(dict.fromkeys(found))


def _module(em: Emitter, lowered: Lowered, command: str) -> str:
    """The whole file: the docstring, the imports, the constants, the Config dataclass, the classes, build(), the
    FLOPs of a training step, parallelize() and the HF weight maps."""
    from archcalc.backends.count import count

    result = count(lowered.binding)
    hf = hf_sources(em)
    classes = [fit_long_lines(text) for text in em.classes]  # long stack-prefixed names
    parts = [_config(em), *em.helpers, *classes, unit("module", "build"), flops_source(lowered)]
    parts += [unit("module", "flops_per_token")] if parts[-1] is not None else []
    parts = [part for part in [*parts, fit_long_lines(parallel_sources(em)), hf] if part]
    code = "\n\n\n".join(parts)
    spec, b = lowered.binding.spec, lowered.binding
    constants = [assign("SPEC_NAME", spec.name), assign("SPEC_TITLE", spec.title), assign("SPEC_SOURCE", spec.source),
                 assign("SIZE", b.size), f"PARAMETERS = {result.total}"]
    head = [*_docstring(lowered, result, hf is not None), MARKER, f"# Regenerate with: {command}", ""]
    return "\n".join([*head, *_imports(parts), "", *constants, "", "", code, ""])


def _imports(parts: list[str]) -> list[str]:
    """The import lines of the names the code uses: its ``parts``, each whole top-level statements (read from their
    compiled code or syntax tree, not by searching their text; each part once: the models share most of them)."""
    used = set().union(*map(_names_used, parts))
    lines = [line for name, line in IMPORTS if name is None or name in used]
    return [line for i, line in enumerate(lines) if line or (0 < i < len(lines) - 1 and lines[i - 1])]


@lru_cache(maxsize=2048)
def _names_used(code: str) -> frozenset[str]:
    """The import names (``IMPORTS``) that ``code`` uses as names. Its compiled code's names, gathered in C, are those
    it reads as names or as attributes (``x.F``); where the text has ``.NAME`` for one of them, the syntax tree tells
    the two apart (a walk in Python: a tenth of a second for a large file, so only then)."""
    wanted = {name for name, _ in IMPORTS if name is not None}
    found: set[str] = set()
    stack = [compile(code, "<generated>", "exec", dont_inherit=True)]
    while stack:
        obj = stack.pop()
        found.update(wanted.intersection(obj.co_names))
        stack += [c for c in obj.co_consts if hasattr(c, "co_names")]
    if any(re.search(rf"\.{name}\b", code) for name in found):
        return frozenset(node.id for node in ast.walk(ast.parse(code)) if isinstance(node, ast.Name))
    return frozenset(found)


def _config(em: Emitter) -> str:
    lines = ["@dataclass(frozen=True)", "class Config:"]
    for name, (value, note) in em.fields.items():
        line = f"    {name}: {type(value).__name__} = {flat(value)}" + (f"  # {note}" if note else "")
        if len(line) > WIDTH:  # the note above its field
            lines += [f"    # {note}", assign(f"    {name}: {type(value).__name__}", value)]
        else:
            lines.append(line)
    return "\n".join(lines)


def _docstring(lowered: Lowered, result, hf: bool) -> list[str]:
    """The file's docstring: what the model is, its parameter count, an example parameter name and its use."""
    b = lowered.binding
    values = ", ".join(f"{k}={str(v).lower() if isinstance(v, bool) else v}" for k, v in b.values.items())
    paths = [pattern(leaf).format(i=0, e=0) for leaf in leaves(lowered.root)]
    example = next((path for path in paths if ".attn." in path), paths[0])
    return [
        f'"""{b.spec.name}, size {b.size}: a PyTorch module generated by archcalc {__version__}.',
        "",
        *_wrapped(f"{result.total:,} parameters = {result.formula_text}"),
        *_wrapped(f"at {values}."),
        *_wrapped(f"Parameter names in state_dict() are archcalc's IR paths, e.g. {example!r}."),
        "",
        "    model = build()  # on the CPU, float32",
        *_usage(lowered, hf),
        '    big = build(device="meta")  # shapes only: allocates nothing',
        '"""',
    ]


def _wrapped(text: str) -> list[str]:
    return textwrap.wrap(text, WIDTH, break_long_words=False, break_on_hyphens=False)


def _usage(lowered: Lowered, hf: bool) -> list[str]:
    architecture = lowered.root.attrs.architecture
    if architecture == "encoder-decoder":
        usage = ["    logits = model(input_ids, decoder_input_ids)  # (B, S), (B, T) ids -> (B, T, V) logits",
                 "    logits, loss = model(input_ids, decoder_input_ids, targets=labels)  # and the loss",
                 "    out = model.generate(input_ids, max_new_tokens=20, temperature=0)  # (B, 21): greedy"]
    elif any(c.name == "head" for c in lowered.root.children):
        usage = ["    logits = model(input_ids)  # (B, T) token ids -> (B, T, V) logits",
                 "    logits, loss = model(input_ids, targets=targets)  # and the mean cross-entropy"
                 + (" (+ the MTP loss)" if lowered.root.find("mtp") is not None else "")]
        if architecture == "decoder":
            usage.append("    out = model.generate(input_ids, max_new_tokens=20, temperature=0)  # greedy, cached")
    else:
        usage = ["    hidden = model(input_ids)  # (B, T) token ids -> (B, T, d) hidden states"]
    if hf:
        usage += ["    load_hf_state_dict(model, hf_model.state_dict())  # the transformers model's weights",
                  "    hf_model.load_state_dict(to_hf_state_dict(model))  # and back"]
    return usage
