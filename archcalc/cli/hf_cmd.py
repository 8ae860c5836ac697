"""``archcalc import-hf``: a transformers ``config.json`` as a spec file, to read, edit or count."""

from __future__ import annotations

import argparse
from pathlib import Path


def register(sub) -> None:
    p = sub.add_parser(
        "import-hf", help="turn a transformers config.json into a spec file",
        description=(
            "Read a transformers config.json (model types: bert, deepseek_v3, falcon, gemma2, gpt2, gpt_neox, "
            "gpt_oss, gptj, llama, mistral, mixtral, olmo2, phi3, qwen2, qwen3, t5) and print the spec that "
            "counts exactly what transformers instantiates from it (decoders as ...ForCausalLM, BERT as BertModel, "
            "T5 as T5ForConditionalGeneration), with one size named after the file. A field that would change the "
            "architecture in a way archcalc does not model is an error at its line and column. The spec written "
            "with -o loads back with 'archcalc count SPEC.yaml' to the same counts; every command also takes "
            "--hf CONFIG.json directly."
        ),
    )
    p.add_argument("config", metavar="CONFIG.json", help="a transformers config.json")
    p.add_argument("-o", "--output", metavar="SPEC.yaml", help="write the spec here (atomically) instead of printing it")
    p.add_argument("--force", action="store_true", help="overwrite SPEC.yaml even if archcalc did not write it")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from archcalc.cli.output import write_output
    from archcalc.hf import YAML_MARKER, spec_from_hf_file, spec_to_yaml

    spec = spec_from_hf_file(args.config)
    text = spec_to_yaml(spec)
    if args.output is None or args.output == "-":
        print(text, end="")
        return 0
    target = Path(args.output)
    write_output(target, text, YAML_MARKER, args.force, "written by archcalc import-hf")
    size = next(iter(spec.sizes))
    print(f"wrote {target} ({spec.name}, size {size}; count it with: archcalc count {target})")
    return 0
