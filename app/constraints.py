"""Constraint files and pasted grammars, checked before the GUI applies them.

The engine's constraint sources and validation (engine.constraints.sources / .validate,
no MLX) do the work; the GUI gets a `Checked`: a ConstraintSpec ready for a request, or
problems with line and column, never an exception. Everything here may block (grammars are
compiled), so the GUI runs it on a worker thread.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.constraints import ConstraintError, sources, validate
from engine.types import ConstraintKind, ConstraintSpec

KIND_LABELS = {
    "json_schema": "JSON schema",
    "lark": "Lark grammar",
    "gbnf": "GBNF grammar",
    "regex": "regular expression",
    "any_json": "any JSON",
}


def describe_constraint(kind: str, name: str = "") -> str:
    """The constraint in plain words: "Reply as: recipe.json (JSON schema)"."""
    label = KIND_LABELS.get(kind, kind)
    if not name or name == label or kind == "any_json":
        return f"Reply as: {label}"
    if name.endswith(label):  # "pasted JSON schema"
        return f"Reply as: {name}"
    return f"Reply as: {name} ({label})"


def describe_reply_constraint(name: str | None, kind: str | None = None) -> str:
    """What a saved reply was held to, from the name the engine reported: a user's
    constraint, or the tool-call grammar ("tools: auto (hermes)" -> "Tools (auto)")."""
    if not name:
        return ""
    if name.startswith("tools: "):
        choice = name[len("tools: ") :].split(" (")[0]
        return f"Tools ({_CHOICE_WORDS.get(choice, f'must call {choice}')})"
    return describe_constraint(kind or "", name)


_CHOICE_WORDS = {"auto": "auto", "required": "must call one", "none": "off"}


@dataclass(frozen=True)
class Problem:
    """An error or warning about a constraint, with where it is when known."""

    message: str
    line: int | None = None
    column: int | None = None

    def __str__(self) -> str:
        if self.line is None:
            return self.message
        where = f"line {self.line}" + (f", column {self.column}" if self.column else "")
        return f"{where}: {self.message}"


@dataclass
class Checked:
    """The outcome of checking a constraint: a spec to apply, or the errors that stop it."""

    spec: ConstraintSpec | None
    errors: list[Problem] = field(default_factory=list)
    warnings: list[Problem] = field(default_factory=list)
    path: str | None = None

    @property
    def ok(self) -> bool:
        return self.spec is not None and not self.errors


def spec_to_dict(spec: ConstraintSpec, path: str | None = None) -> dict[str, Any]:
    return {"kind": spec.kind, "source": spec.source, "name": spec.name, "path": path}


def spec_from_dict(data: dict[str, Any]) -> ConstraintSpec:
    return ConstraintSpec(
        kind=data["kind"], source=data.get("source", ""), name=data.get("name", "")
    )


def _problems(diagnostics: Any) -> list[Problem]:
    return [Problem(d.message, d.line, d.column) for d in diagnostics]


def _check(make_spec: Callable[[], ConstraintSpec], path: str | None) -> Checked:
    try:
        spec = make_spec()
    except ConstraintError as exc:
        return Checked(None, _problems(exc.diagnostics) or [Problem(str(exc))], path=path)
    report = validate.validate_constraint(spec)
    errors, warnings = _problems(report.errors), _problems(report.warnings)
    return Checked(None if errors else spec, errors, warnings, path)


def _strip_path(message: str, path: str | Path) -> str:
    """The GUI names the file itself; drop the engine's "PATH: " prefix."""
    for prefix in (f"{Path(path).expanduser()}: ", f"{Path(path).name}: "):
        if message.startswith(prefix):
            return message[len(prefix) :]
    return message


def check_file(path: str | Path) -> Checked:
    """Read and validate a constraint file (blocking)."""
    checked = _check(lambda: sources.constraint_from_file(path), str(path))
    checked.errors = [
        Problem(_strip_path(e.message, path), e.line, e.column) for e in checked.errors
    ]
    return checked


def check_source(kind: ConstraintKind, source: str, name: str = "") -> Checked:
    """Validate pasted or loaded constraint text of `kind` (blocking)."""
    return _check(lambda: sources.constraint_from_text(source, kind, name), None)
