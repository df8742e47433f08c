"""Constrained decoding: grammar sources, validation, llguidance matchers and the masked loop.

`sources` turns files and pasted text into ConstraintSpecs, `validate` compiles them to
llguidance grammars and reports problems as data, `loop` runs the overlapped decode loop.
Only `loop`, `masking` and `bench` import MLX; the rest is safe for the GUI thread.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from engine.errors import CorralError

if TYPE_CHECKING:
    from engine.constraints.validate import Diagnostic


class ConstraintError(CorralError):
    """A constraint could not be read or compiled; `diagnostics` says where and why."""

    def __init__(self, message: str, diagnostics: Iterable[Diagnostic] = ()) -> None:
        super().__init__(message)
        self.diagnostics: list[Diagnostic] = list(diagnostics)


__all__ = ["ConstraintError"]
