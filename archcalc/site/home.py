"""The home page: what archcalc is, where to go, and one example of every command with its real output
(run when the page is built; see :mod:`archcalc.site.examples`)."""

from __future__ import annotations

import argparse
import json

from archcalc.site.examples import Program, Run, Step, Write, markdown, run_script
from archcalc.site.i18n import say
from archcalc.site.words_home import WORDS

TINYLLAMA = json.dumps({
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 32000, "hidden_size": 2048,
    "intermediate_size": 5632, "num_hidden_layers": 22, "num_attention_heads": 32, "num_key_value_heads": 4,
    "max_position_embeddings": 2048, "rms_norm_eps": 1e-05, "rope_theta": 10000.0, "hidden_act": "silu",
    "tie_word_embeddings": False}, indent=2) + "\n"

# (command, the script that shows it), in the order of 'archcalc --help'; what each is for: words_home's why_COMMAND
EXAMPLES: list[tuple[str, tuple[Step, ...]]] = [
    ("count", (Run(("count", "gpt3"), varies=True),)),
    ("flops", (Run(("flops", "gpt2", "--size", "small", "--seq-len", "1024")),)),
    ("memory", (Run(("memory", "llama", "--size", "3-8b", "--seq-len", "8192", "--batch", "1")),)),
    ("infer", (Run(("infer", "llama", "--size", "2-7b", "--hardware", "a100-80gb", "--batch", "1", "--prompt", "512",
                    "--new-tokens", "128")),)),
    ("solve", (Run(("solve", "gpt3", "--target-params", "100T", "--fix", "L=512")),)),
    ("plan", (Run(("plan", "llama", "--size", "3-8b", "--gpus", "64", "--hardware", "h100", "--tokens", "1T", "--seq-len",
                   "8192", "--top", "3")),)),
    ("serve", (Run(("serve", "llama", "--size", "3-8b", "--hardware", "h100", "--context", "8192", "--concurrency", "64")),)),
    ("generate", (Run(("generate", "gpt2", "--size", "small", "-o", "gpt2_small.py")),)),
    ("verify", (Run(("verify", "gpt2", "--size", "small"), torch=True),)),
    ("run", (Run(("run", "gpt2", "--size", "small", "--set", "L=2", "--set", "d=128", "--set", "H=2", "--steps", "2",
                  "--batch", "1", "--seq-len", "64"), torch=True),)),
    ("import-hf", (Write("tinyllama.json", TINYLLAMA), Run(("import-hf", "tinyllama.json", "-o", "tinyllama.yaml")),
                   Run(("count", "--hf", "tinyllama.json")))),
    ("export-hf", (Run(("export-hf", "llama", "--size", "3-8b", "-o", "llama3_8b.json")),)),
    ("specs", (Run(("specs",)),)),
]


SCRIPT = tuple(step for _, steps in EXAMPLES for step in steps)  # one folder, one child process for torch


def commands(parser: argparse.ArgumentParser) -> list[tuple[str, str]]:
    """Every command of 'archcalc --help' (``parser``), with its one-line help."""
    action = next(a for a in parser._actions if a.dest == "command")
    return [(choice.dest, choice.help or "") for choice in action._choices_actions]


def home_page(docs_report: list[str], program: Program, lang: str = "en") -> str:
    """The home page in ``lang``; ``docs_report`` is what ``archcalc docs -o mysite`` prints in an empty folder."""
    def t(key: str, **values: str) -> str:
        return say(WORDS, key, lang, **values)

    out = [t("title"), "", t("intro"), "", t("go_tutorial"), t("go_walkthrough"), t("go_calculator"),
           t("go_models"), t("go_gpt3"),
           t("go_reference"), "", t("install"), "", t("every_command"), "", t("examples_run"), ""]
    outputs = run_script(SCRIPT, program)
    start, shown = 0, {}
    for command, steps in EXAMPLES:
        shown[command] = [f"### {command}", "", t(f"why_{command}"), ""]
        for i in range(start, start + len(steps)):
            shown[command] += markdown(SCRIPT, outputs, i)
        start += len(steps)
    for command, help_text in commands(program.parser()):
        if command == "docs":
            continue
        out += shown.get(command, [f"### {command}", "", t("see_cli", help=f"{help_text[:1].upper()}{help_text[1:]}",
                                                            command=command), ""])
    out += ["### docs", "", t("docs"), "", "```bash", "archcalc docs -o mysite", "```", "",
            "```text", *docs_report, "```", ""]
    return "\n".join(out)
