"""What checking a constraint found: its problems, where they are, and the compiled result."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from engine.types.request import KIND_NAMES, ConstraintSpec


@dataclass(frozen=True)
class Diagnostic:
    """One problem with a constraint: what, and where (the file, 1-based line and column)
    if known. `str()` gives the position and message; whoever shows it names the file."""

    message: str
    line: int | None = None
    column: int | None = None
    severity: Literal["error", "warning"] = "error"
    detail: str = ""  # the offending lines with a caret, as llguidance prints them
    file: str | None = None

    def __str__(self) -> str:
        where = f"line {self.line}" if self.line is not None else ""
        if where and self.column is not None:
            where += f", column {self.column}"
        return f"{where}: {self.message}" if where else self.message


@dataclass
class ValidationReport:
    """The outcome of checking a constraint: its compiled grammar, errors and warnings.

    When there are no errors, `spec` carries its CompiledGrammar: use it for requests."""

    spec: ConstraintSpec
    grammar: str | None = None
    errors: list[Diagnostic] = field(default_factory=list)
    warnings: list[Diagnostic] = field(default_factory=list)
    check_ms: float = 0.0
    # what the tight defaults did to a JSON schema, in words ("declared keys only", ...)
    tight: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.errors

    def summary(self) -> str:
        """One line per problem, prefixed with the constraint's name."""
        label = self.spec.name or KIND_NAMES.get(self.spec.kind, self.spec.kind)
        lines = [f"{label}: {d}" for d in self.errors]
        lines += [f"{label}: warning: {d}" for d in self.warnings]
        return "\n".join(lines)
