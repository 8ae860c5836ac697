"""The generated file's code as real Python modules, read as text by
:mod:`archcalc.codegen.template` (never imported by the emitter): each is complete Python that
ruff checks, with ``# region: NAME`` / ``# endregion`` markers around its optional lines and
placeholder names that the emitter substitutes. ``names`` holds stand-ins for the names a
generated file defines elsewhere (its ``Config``, ``KVCache``, ...) and for the placeholders."""
