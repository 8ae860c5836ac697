"""``--with-mtp`` and ``--mtp-copies``: count a spec's multi-token prediction modules (``model.mtp``), which
transformers' models leave out and the checkpoints hold (see docs/conventions.md). count, flops, memory and infer
take them (generate, verify and run take --with-mtp); :func:`archcalc.cli.args.spec_from_args` applies them.

>>> import argparse
>>> p = argparse.ArgumentParser()
>>> add_mtp_options(p)
>>> mtp_include(p.parse_args(["--mtp-copies"])), mtp_include(p.parse_args([]))
('stored', None)
"""

from __future__ import annotations

import argparse


def add_mtp_options(p: argparse.ArgumentParser, copies: bool = True) -> None:
    """--with-mtp, and (``copies``) --mtp-copies: generate, verify and run take --with-mtp only (the generated module
    shares the embedding and head with its MTP modules)."""
    p.add_argument("--with-mtp", action="store_true",
                   help="count the multi-token prediction modules (model.mtp: DeepSeek-V3's, GLM-4.5's), which "
                        "transformers' model leaves out; their embedding and head are the model's, counted once")
    if not copies:
        return
    p.add_argument("--mtp-copies", action="store_true",
                   help="as --with-mtp, plus the checkpoint's own copies of the embedding and head in each module "
                        "(DeepSeek-V3's model.layers.61.embed_tokens and shared_head.head): the checkpoint's total")


def mtp_include(args: argparse.Namespace) -> str | None:
    """The ``mtp.include`` the options ask for (None: the spec's own)."""
    if getattr(args, "mtp_copies", False):
        return "stored"
    return "shared" if getattr(args, "with_mtp", False) else None


def apply_mtp(args: argparse.Namespace, spec):
    """``spec`` with its MTP modules counted as the options ask (unchanged without them)."""
    include = mtp_include(args)
    if include is None:
        return spec
    from archcalc.ir.mtp import with_mtp

    return with_mtp(spec, include)
