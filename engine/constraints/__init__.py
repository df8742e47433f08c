"""Constrained decoding: grammar sources, validation, llguidance matchers and masks.

`sources` turns files and pasted text into ConstraintSpecs, `validate` compiles them to
llguidance grammars and reports problems as Diagnostics, `row` runs one reply's matcher
on the mask pool for the decode loop (`engine.runtime.batch`), `masking` applies the masks.
Imports run one way: sources, then validate, then row. Only `row` and `masking` import
MLX; the rest is safe for the GUI thread. This module holds the error they raise; the
Diagnostics it carries are plain data in `engine.types`.
"""

from __future__ import annotations

from collections.abc import Iterable

from engine.errors import CorralError
from engine.types import Diagnostic


class ConstraintError(CorralError):
    """A constraint could not be read or compiled; `diagnostics` says where and why."""

    def __init__(self, message: str, diagnostics: Iterable[Diagnostic] = ()) -> None:
        super().__init__(message)
        self.diagnostics: list[Diagnostic] = list(diagnostics)


__all__ = ["ConstraintError", "Diagnostic"]
