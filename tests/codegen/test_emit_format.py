"""Generated files are formatted as ruff formats them at line length 100 (``ruff format --check``) and pass
``ruff check`` at that length, and the code templates they come from pass both too."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from archcalc.codegen.emit import emit
from archcalc.codegen.template import TEMPLATES
from tests.helpers import lowered

RUFF = ("-m", "ruff")
CHECK = ("check", "--isolated", "--line-length", "100", "--select", "E,F,W,B,I", "--ignore", "E501")  # lengths: below
FORMAT = ("format", "--isolated", "--line-length", "100", "--check", "--diff")
# every kind of block and attention whose classes are template-based: fused and separate q/k/v, GQA, biases, QK-norm,
# parallel and sandwich blocks, learned positions with an offset, token types, ALiBi-free encoders, NoPE layers
FORMATTED = [("gpt2", "small"), ("llama", "3-8b"), ("phi3", "mini"), ("falcon", "7b"), ("opt", "125m"),
             ("gptj", "6b"), ("qwen3", "0.6b"), ("olmo2", "7b"), ("stablelm", "2-1.6b"), ("smollm3", "3b"),
             ("cohere", "command-r-v01"), ("granite", "3.3-2b"), ("gpt_bigcode", "santacoder"), ("t5", "small"),
             ("transformer_2017", "base"), ("bloom", "560m"), ("mpt", "7b"), ("bert", "base"),
             # the feed-forward classes: GeGLU split over lines, a clamped SwiGLU, mixtures of experts with
             # Mixtral's routing, a softmax over all experts with shared experts, weighted inputs
             ("gemma", "2b"), ("gpt_oss", "20b"), ("mixtral", "8x7b"), ("qwen2_moe", "a2.7b"), ("llama4", "scout"),
             # latent attention over two stacks (dense layers first): long stack-prefixed config names
             ("deepseek_v3", "671b"), ("deepseek_v2", "236b"),
             # state mixers, alone and beside attention: long layer orders, experts beside a shared MLP, sigmoid routing
             ("mamba", "130m"), ("mamba2", "codestral-7b"), ("bamba", "9b"), ("jamba", "v0.1"), ("qwen3_5", "4b"),
             ("qwen3_next", "80b-a3b"), ("lfm2", "700m"), ("granitemoehybrid", "4.0-h-tiny"), ("glm4_moe", "4.7"),
             ("minimax_m2", "230b-a10b"),
             # Zamba2's shared blocks: the weight map's copies of them, under every layer that runs one
             ("zamba2", "default"),
             # an activation with learnable scalars and buffers of its own (xIELU), its helper function; experts chosen
             # by their softmax share plus a learned bias
             ("apertus", "8b"), ("ernie4_5_moe", "21b-a3b"),
             # the query temperature of every layer, on standard and on latent attention (Mistral 3, Mistral 4)
             ("ministral3", "8b"), ("mistral4", "119b")]
UNSPLITTABLE = re.compile(r'^ +"[^"]*": "[^"]*",$')  # a weight map's entry: two strings that ruff leaves whole


def _ruff(process, path: Path, *args: str):
    if process.run([*RUFF, "--version"], capture_output=True).returncode:
        pytest.skip("ruff not installed")
    return process.run([*RUFF, *args, str(path)], capture_output=True, text=True)


@pytest.mark.parametrize("spec,size", FORMATTED)
def test_generated_files_are_ruff_formatted_at_line_length_100(process, tmp_path, spec, size):
    path = tmp_path / "model.py"
    source = emit(lowered(spec, size), f"archcalc generate {spec} --size {size} -o model.py")
    path.write_text(source, encoding="utf-8")
    formatted = _ruff(process, path, *FORMAT)
    assert formatted.returncode == 0, formatted.stdout[-3000:] + formatted.stderr
    checked = _ruff(process, path, *CHECK)
    assert checked.returncode == 0, checked.stdout[-3000:]
    long = [line for line in source.splitlines() if len(line) > 100 and not UNSPLITTABLE.match(line)]
    assert not long, long


def test_the_templates_are_ruff_clean_and_formatted(process):
    files = sorted(str(path) for path in TEMPLATES.glob("*.py"))
    for args in (CHECK[:-2], FORMAT):  # E501 too: a template's lines are all within 100 characters
        proc = process.run([*RUFF, *args, *files], capture_output=True, text=True)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr


def test_templates_are_read_not_imported():
    """Emission reads the templates as text: it imports none of them (they import torch)."""
    for name in [name for name in sys.modules if name.startswith("archcalc.codegen.templates.")]:
        del sys.modules[name]  # another test of this worker may have imported one (to lint it, or pytest's doctests)
    emit(lowered("gpt2", "small"), "x")
    assert not [name for name in sys.modules if name.startswith("archcalc.codegen.templates.")]
