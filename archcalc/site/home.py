"""The home page: what archcalc is, where to go, and one example of every command with its real output
(run when the page is built; see :mod:`archcalc.site.examples`)."""

from __future__ import annotations

import argparse
import json

from archcalc.site.examples import Program, Run, Step, Write, markdown, run_script

TINYLLAMA = json.dumps({
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 32000, "hidden_size": 2048,
    "intermediate_size": 5632, "num_hidden_layers": 22, "num_attention_heads": 32, "num_key_value_heads": 4,
    "max_position_embeddings": 2048, "rms_norm_eps": 1e-05, "rope_theta": 10000.0, "hidden_act": "silu",
    "tie_word_embeddings": False}, indent=2) + "\n"

# (command, why you would run it, the script that shows it), in the order of 'archcalc --help'
EXAMPLES: list[tuple[str, str, tuple[Step, ...]]] = [
    ("count", "Every size of a spec: the exact total against the published figure, the formula, the split by role.",
     (Run(("count", "gpt3"), varies=True),)),
    ("flops", "Exact matmul FLOPs of a forward pass and a training step, with 6N, Kaplan, Chinchilla and PaLM beside them.",
     (Run(("flops", "gpt2", "--size", "small", "--seq-len", "1024")),)),
    ("memory", "Weights, KV cache, training state and activations for a batch (and per GPU with --dp, --zero, --tp).",
     (Run(("memory", "llama", "--size", "3-8b", "--seq-len", "8192", "--batch", "1")),)),
    ("infer", "Generation: exact prefill and decode FLOPs, bytes moved, and the roofline latency and throughput on an accelerator.",
     (Run(("infer", "llama", "--size", "2-7b", "--hardware", "a100-80gb", "--batch", "1", "--prompt", "512",
           "--new-tokens", "128")),)),
    ("solve", "The hyperparameters that hit a target: the exact solution and whole-number candidates.",
     (Run(("solve", "gpt3", "--target-params", "100T", "--fix", "L=512")),)),
    ("plan", "A training plan: the parallel layouts that fit N GPUs, ranked, with days, GPU-hours and cost (times estimated "
             "from exact FLOPs and bytes).",
     (Run(("plan", "llama", "--size", "3-8b", "--gpus", "64", "--hardware", "h100", "--tokens", "1T", "--seq-len", "8192",
           "--top", "3")),)),
    ("serve", "A serving plan: paged KV blocks, the sequences that fit at each context, the longest context for a load.",
     (Run(("serve", "llama", "--size", "3-8b", "--hardware", "h100", "--context", "8192", "--concurrency", "64")),)),
    ("generate", "One readable PyTorch file for a size (writing it needs no torch).",
     (Run(("generate", "gpt2", "--size", "small", "-o", "gpt2_small.py")),)),
    ("verify", "Build the generated module on the meta device and compare every name and shape with the count.",
     (Run(("verify", "gpt2", "--size", "small"), torch=True),)),
    ("run", "Train the generated module on random tokens: loss, tokens/s, memory, achieved FLOP/s (measured on the "
            "machine that built this page, with one CPU thread; here GPT-2 small cut to 2 layers of width 128).",
     (Run(("run", "gpt2", "--size", "small", "--set", "L=2", "--set", "d=128", "--set", "H=2", "--steps", "2", "--batch",
           "1", "--seq-len", "64"), torch=True),)),
    ("import-hf", "A transformers config.json as a spec, counted as transformers builds it (also --hf on every command).",
     (Write("tinyllama.json", TINYLLAMA), Run(("import-hf", "tinyllama.json", "-o", "tinyllama.yaml")),
      Run(("count", "--hf", "tinyllama.json")))),
    ("export-hf", "The other way: a size of a spec as a transformers config.json.",
     (Run(("export-hf", "llama", "--size", "3-8b", "-o", "llama3_8b.json")),)),
    ("specs", "The bundled specs, usable by name.", (Run(("specs",)),)),
]


SCRIPT = tuple(step for _, _, steps in EXAMPLES for step in steps)  # one folder, one child process for torch


def commands(parser: argparse.ArgumentParser) -> list[tuple[str, str]]:
    """Every command of 'archcalc --help' (``parser``), with its one-line help."""
    action = next(a for a in parser._actions if a.dest == "command")
    return [(choice.dest, choice.help or "") for choice in action._choices_actions]


def home_page(docs_report: list[str], program: Program) -> str:
    """The home page; ``docs_report`` is what ``archcalc docs -o mysite`` prints in an empty folder."""
    out = ["# archcalc", "",
           "archcalc compiles a declarative transformer spec into exact symbolic formulas for its parameters, FLOPs and "
           "memory, and into a readable PyTorch module — and checks that the two agree. Every number is an exact integer.", "",
           "- **[Write your first spec](tutorial.md)**: a new model from an empty file to counts, a module that trains, and a solve.",
           "- **[Calculator](models/llama.md#calculator)**: parameters, FLOPs, memory and inference speed of any size, exact, "
           "in the page — every [model page](models/index.md) opens with one.",
           "- **[Models](models/index.md)**: one page per bundled spec — its architecture, an exact calculator, the formula, "
           "every size against its published figure, FLOPs, memory and the generated PyTorch source.",
           "- **[GPT-3's Table 2.1](gpt3.md)**: the eight rows counted as printed, the two that disagree with themselves, "
           "and a 100T-parameter GPT-3.",
           "- **Reference**: [counting conventions](conventions.md), [spec language](spec-language.md), "
           "[command line](cli.md), [Python API](api.md).", "",
           "Install from a checkout with `pip install .` (sympy, pydantic and PyYAML; `verify` and `run` also need "
           "torch). Figures cited from papers are labelled *reported*; everything else is computed.", "",
           "## Every command, with what it prints", "",
           "Each example was run when this page was built, in an empty folder; the output is as archcalc printed it.", ""]
    outputs = run_script(SCRIPT, program)
    start, shown = 0, {}
    for command, why, steps in EXAMPLES:
        shown[command] = [f"### {command}", "", why, ""]
        for i in range(start, start + len(steps)):
            shown[command] += markdown(SCRIPT, outputs, i)
        start += len(steps)
    for command, help_text in commands(program.parser()):
        if command == "docs":
            continue
        out += shown.get(command, [f"### {command}", "", f"{help_text[:1].upper()}{help_text[1:]}: see the "
                                   f"[command line reference](cli.md#archcalc-{command}).", ""])
    out += ["### docs", "", "This site: every page generated from the specs, with `mkdocs.yml`, so the folder builds "
            "as it is (offline, and from disk).", "", "```bash", "archcalc docs -o mysite", "```", "",
            "```text", *docs_report, "```", ""]
    return "\n".join(out)
