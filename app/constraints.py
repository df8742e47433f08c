"""Constraint files and pasted grammars, checked before the GUI applies them.

The engine's constraint sources and validation (engine.constraints.sources / .validate,
no MLX) do the work; the GUI gets a `Checked`: a ConstraintSpec ready for a request (its
grammar compiled once, for the loaded model when there is one) or the problems as
Diagnostics with file, line and column, never an exception. Everything here may block
(grammars are compiled), so the GUI runs it on a worker thread.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from app.tools import tools_tag
from engine.constraints import ConstraintError, sources
from engine.constraints.validate import validate_constraint
from engine.types import ConstraintKind, ConstraintSpec, Diagnostic, ValidationReport

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


def describe_reply_constraint(
    name: str | None, kind: str | None = None, use: str | None = None, asked: str | None = None
) -> str:
    """What a saved reply was held to, from the name the engine reported: a user's
    constraint (with `use` "with_tools": it, or a tool call), or the tool-call grammar
    ("tools: auto (hermes)" -> "Tools (auto)"), said against the rule the user chose
    (`asked`, the chip's: "Tools (must call Clock, then auto)")."""
    if not name:
        return ""
    if name.startswith("tools: "):
        applied = name[len("tools: ") :].split(" (")[0]
        return tools_tag(asked or applied, applied)
    text = describe_constraint(kind or "", name)
    return f"{text}, or a tool call" if use == "with_tools" else text


# Checks a spec and compiles it: the engine bridge's `check_constraint` (for the loaded
# model's tokenizer) or, with no engine, plain validation.
Checker = Callable[[ConstraintSpec], ValidationReport]


@dataclass
class Checked:
    """The outcome of checking a constraint: a spec to apply (carrying its compiled
    grammar), or the errors that stop it."""

    spec: ConstraintSpec | None
    errors: list[Diagnostic] = field(default_factory=list)
    warnings: list[Diagnostic] = field(default_factory=list)
    path: str | None = None

    @property
    def ok(self) -> bool:
        return self.spec is not None and not self.errors


def spec_to_dict(spec: ConstraintSpec, path: str | None = None) -> dict[str, Any]:
    """What the store keeps of a constraint (its compiled grammar is rebuilt, not stored)."""
    return {"kind": spec.kind, "source": spec.source, "name": spec.name, "path": path}


def spec_from_dict(data: dict[str, Any]) -> ConstraintSpec:
    return ConstraintSpec(
        kind=data["kind"], source=data.get("source", ""), name=data.get("name", "")
    )


def _check(make_spec: Callable[[], ConstraintSpec], check: Checker, path: str | None) -> Checked:
    try:
        spec = make_spec()
    except ConstraintError as exc:
        errors = exc.diagnostics or [Diagnostic(str(exc), file=path)]
        return Checked(None, errors, path=path)
    report = check(spec)
    if path is not None:  # problems llguidance found are about the file too
        report.errors = [replace(d, file=path) for d in report.errors]
        report.warnings = [replace(d, file=path) for d in report.warnings]
    return Checked(report.spec if report.ok else None, report.errors, report.warnings, path)


def check_file(path: str | Path, check: Checker = validate_constraint) -> Checked:
    """Read, validate and compile a constraint file (blocking)."""
    return _check(lambda: sources.constraint_from_file(path), check, str(path))


def check_source(
    kind: ConstraintKind, source: str, name: str = "", check: Checker = validate_constraint
) -> Checked:
    """Validate and compile pasted or loaded constraint text of `kind` (blocking)."""
    return _check(lambda: sources.constraint_from_text(source, kind, name), check, None)


def check_spec(spec: ConstraintSpec, check: Checker = validate_constraint) -> Checked:
    """Validate and compile a constraint the store kept (blocking)."""
    return _check(lambda: spec, check, None)
