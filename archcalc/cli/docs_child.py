"""``python -m archcalc.cli.docs_child``: the child process in which ``archcalc docs`` runs the page examples that
need torch (``verify``, ``run``, a training script), so that ``archcalc docs`` itself never imports torch. It reads
the commands on stdin and prints their outputs as JSON (:func:`archcalc.site.examples.serve_child`)."""

from __future__ import annotations

from archcalc.cli import _parser, main
from archcalc.site.examples import serve_child

if __name__ == "__main__":
    serve_child(main, prepare=_parser)  # the parser and the modules it imports, once before the forked copies
