"""The emitter's error: a spec uses a component that codegen does not generate (yet).

The command line prints it after the spec file's ``FILE:LINE:COL``: of ``loc`` (a path into the spec, such as
``("model", "embedding", "position", "rotary_fraction")``) when the raiser gives one, else of the ``model:`` section.
"""

from __future__ import annotations

from archcalc.errors import ArchcalcError


class UnsupportedError(ArchcalcError):
    """The spec uses a component the PyTorch emitter does not generate yet."""

    def __init__(self, message: str, loc: tuple = ()):
        super().__init__(message)
        self.loc = tuple(loc)
