"""``archcalc import-hf`` (a transformers ``config.json`` as a spec file, to read, edit or count) and
``archcalc export-hf`` (a spec's size as a ``config.json`` that transformers builds with archcalc's count)."""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path


def register(sub) -> None:
    from archcalc.hf.registry import MODEL_TYPES

    p = sub.add_parser(
        "import-hf", help="turn a transformers config.json into a spec file",
        description=(
            f"Read a transformers config.json (model types: {', '.join(MODEL_TYPES)}; --list shows each with its "
            "bundled spec) and print the spec that "
            "counts exactly what transformers instantiates from it (decoders as ...ForCausalLM, BERT as BertModel, "
            "T5 as T5ForConditionalGeneration), with one size named after the file: the bundled spec of its model "
            "type, filled with the config's values as that spec's hf: section says. A field that would change the "
            "architecture in a way archcalc does not model is an error at its line and column. The spec written "
            "with -o loads back with 'archcalc count SPEC.yaml' to the same counts; every command also takes "
            "--hf CONFIG.json directly."
        ),
    )
    p.add_argument("config", metavar="CONFIG.json", nargs="?", help="a transformers config.json")
    p.add_argument("--list", action="store_true", dest="list_types",
                   help="print the supported model types, each with its bundled spec and transformers class, and exit")
    p.add_argument("-o", "--output", metavar="SPEC.yaml", help="write the spec here (atomically) instead of printing it")
    p.add_argument("--force", action="store_true",
                   help="overwrite SPEC.yaml even if archcalc did not write it, or it was edited since")
    p.set_defaults(run=run)
    register_export(sub)


EXPORT_EPILOG = """\
examples:
  archcalc export-hf llama --size 3.1-405b -o config.json    Llama 3.1 405B, with its llama3 rope scaling
  archcalc count --hf config.json                            read back: 405,853,388,800, as the spec counts
  archcalc export-hf gpt2 --size small --set L=2 --set d=64 --set H=4 -o -    a tiny GPT-2, on stdout
  python -c "import transformers as t; t.AutoModelForCausalLM.from_config(t.AutoConfig.from_pretrained('.'))"

The file starts with an "archcalc_exported" key (transformers keeps it as a plain attribute and ignores it) whose
value holds the file's content hash: an existing file is replaced without --force only if archcalc wrote it and
nobody changed it since (not a checkpoint's config.json that transformers saved, not an edited file).

Remote-code keys (auto_map, custom_pipelines, trust_remote_code, code_revision: transformers would import the
model's code from its repository) in the spec's hf: section are left out, with a note on stderr naming them;
--keep-remote-code writes them.
"""


def register_export(sub) -> None:
    import argparse as _argparse

    from archcalc.cli.args import SPEC_HELP

    p = sub.add_parser(
        "export-hf", help="write a spec's size as a transformers config.json",
        description=(
            "Write the config.json of one size of a spec: its hf: section (model_type, the config keys computed\n"
            "from the hyperparameters, the size's own keys) and its rotary base and scaling as rope_parameters.\n"
            "The config is read back with archcalc's importer before it is written and must describe the same\n"
            "model, so transformers builds exactly archcalc's count. A spec with no transformers form (GPT-3, the\n"
            "2017 Transformer) or a --set variant transformers cannot express is refused (exit 2). A spec written\n"
            "by import-hf exports back: the keys its hyperparameters hold from the size's values (so --set L=40\n"
            "carries through), the imported config's other keys as they were (kept in its hf: config)."
        ),
        epilog=EXPORT_EPILOG, formatter_class=_argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("spec", metavar="SPEC", help=SPEC_HELP)
    p.add_argument("--size", metavar="NAME", help="the size to export (needed when the spec has several)")
    p.add_argument("--set", metavar="NAME=VALUE", action="append", default=[], dest="overrides",
                   help="override a hyperparameter, e.g. --set L=2 (repeatable)")
    p.add_argument("-o", "--output", metavar="config.json", required=True,
                   help="write the config here (atomically), or '-' for stdout")
    p.add_argument("--force", action="store_true",
                   help="overwrite config.json even if archcalc did not write it, or it was edited since")
    p.add_argument("--keep-remote-code", action="store_true",
                   help="write the spec's remote-code keys (auto_map, custom_pipelines, trust_remote_code, code_revision), "
                        "which make transformers run code from the model's repository; left out by default")
    p.set_defaults(run=run_export)


def run_export(args: argparse.Namespace) -> int:
    from archcalc.backends.count import count_size
    from archcalc.cli.output import write_output
    from archcalc.hf.export import FILE_MARKER, config_text, export_config
    from archcalc.spec import load_spec
    from archcalc.spec.bind import parse_overrides

    spec = load_spec(args.spec)
    overrides = parse_overrides(spec, args.overrides)
    left_out: list[str] = []
    config = export_config(spec, args.size, overrides, keep_remote_code=args.keep_remote_code, left_out=left_out)
    text = config_text(config)
    if left_out:  # stderr: with -o - stdout is the config
        shown = ", ".join(left_out[:8]) + (f" and {len(left_out) - 8} more" if len(left_out) > 8 else "")
        print(f"note: left out the spec's remote-code keys {shown} (transformers would run code from the model's "
              "repository); pass --keep-remote-code to write them", file=sys.stderr)
    if args.output == "-":
        print(text, end="")
        return 0
    target = Path(args.output)
    write_output(args.output, text, FILE_MARKER, args.force, "written by archcalc export-hf")
    total = count_size(spec, args.size or next(iter(spec.sizes), None), overrides).total
    print(f"wrote {target} ({config['architectures'][0]}, {total:,} parameters; read it back with: "
          f"archcalc count --hf {shlex.quote(str(target))})")
    return 0


def list_model_types() -> str:
    """The table ``import-hf --list`` prints: each model type, the bundled spec that describes it, the class counted."""
    from archcalc.hf.build import family_of
    from archcalc.hf.registry import also_types, model_types

    rows = [("model type", "bundled spec", "transformers class")]
    rows += [(t, name, family_of(t).hf_class) for t, name in model_types().items()]
    rows += [(t, name, f"{family_of(t).hf_class} (read as {family_of(t).model_type})") for t, name in also_types().items()]
    widths = [max(len(row[i]) for row in rows) for i in range(2)]
    lines = [f"{a:<{widths[0]}}  {b:<{widths[1]}}  {c}" for a, b, c in rows]
    return "\n".join(lines) + f"\n{len(rows) - 1} model types: a config counts as its bundled spec's model, filled in as " \
                              "that spec's hf: section says\n"


def run(args: argparse.Namespace) -> int:
    from archcalc.cli.output import stamp, write_output
    from archcalc.errors import UsageError
    from archcalc.hf import YAML_MARKER, spec_from_hf_file, spec_to_yaml

    if args.list_types:
        if args.config is not None or args.output is not None:
            raise UsageError("archcalc import-hf --list takes no CONFIG.json and no -o")
        print(list_model_types(), end="")
        return 0
    if args.config is None:
        raise UsageError("archcalc import-hf: give a CONFIG.json (a transformers config), or --list for the model types")
    spec = spec_from_hf_file(args.config)
    text = stamp(spec_to_yaml(spec), YAML_MARKER)  # printed as written: 'import-hf C > s.yaml' is replaceable as '-o s.yaml'
    if args.output is None or args.output == "-":
        print(text, end="")
        return 0
    target = Path(args.output)
    write_output(args.output, text, YAML_MARKER, args.force, "written by archcalc import-hf")
    size = next(iter(spec.sizes))
    print(f"wrote {target} ({spec.name}, size {size}; count it with: archcalc count {shlex.quote(str(target))})")
    return 0
