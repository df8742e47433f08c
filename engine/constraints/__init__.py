"""Constrained decoding: grammar sources, validation, llguidance matchers and the masked loop.

`sources` turns files and pasted text into ConstraintSpecs, `validate` compiles them to
llguidance grammars and reports problems as Diagnostics, `loop` runs the overlapped decode
loop. Imports run one way: sources, then validate, then loop. Only `loop` and `masking`
import MLX; the rest is safe for the GUI thread. This module holds what can go wrong.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from engine.errors import CorralError


@dataclass(frozen=True)
class Diagnostic:
    """One problem with a constraint: what, and where (1-based line and column) if known."""

    message: str
    line: int | None = None
    column: int | None = None
    severity: Literal["error", "warning"] = "error"
    detail: str = ""  # the offending lines with a caret, as llguidance prints them

    def __str__(self) -> str:
        where = f"line {self.line}" if self.line is not None else ""
        if where and self.column is not None:
            where += f", column {self.column}"
        return f"{where}: {self.message}" if where else self.message


class ConstraintError(CorralError):
    """A constraint could not be read or compiled; `diagnostics` says where and why."""

    def __init__(self, message: str, diagnostics: Iterable[Diagnostic] = ()) -> None:
        super().__init__(message)
        self.diagnostics: list[Diagnostic] = list(diagnostics)


__all__ = ["ConstraintError", "Diagnostic"]
