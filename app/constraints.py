"""Constraint files and pasted grammars, checked before the GUI applies them.

The engine's constraint sources (engine.constraints) do the real work when they are
installed; until then a small local fallback reads the file, guesses its kind from the
extension and asks llguidance to validate it. Either way the GUI gets a `Checked`: a
ConstraintSpec ready for a request, or problems with line and column, never an exception.
Everything here may block, so the GUI runs it on a worker thread.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.types import ConstraintSpec

KIND_LABELS = {
    "json_schema": "JSON schema",
    "lark": "Lark",
    "gbnf": "GBNF",
    "regex": "Regex",
    "any_json": "Any JSON",
}
EXTENSIONS = {".lark": "lark", ".gbnf": "gbnf", ".json": "json_schema", ".regex": "regex",
              ".re": "regex"}
MAX_FILE_BYTES = 1024 * 1024
_AT_RE = re.compile(r"^at (\d+)\((\d+)\):\s*")


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


def is_constraint_path(path: str | Path) -> bool:
    """Whether a dropped file looks like a constraint (by extension)."""
    return Path(path).suffix.lower() in EXTENSIONS


def spec_to_dict(spec: ConstraintSpec, path: str | None = None) -> dict[str, Any]:
    return {"kind": spec.kind, "source": spec.source, "name": spec.name, "path": path}


def spec_from_dict(data: dict[str, Any]) -> ConstraintSpec:
    return ConstraintSpec(kind=data["kind"], source=data.get("source", ""),
                          name=data.get("name", ""))


def _problem(message: str) -> Problem:
    """llguidance writes "at LINE(COL): message\\n<source excerpt>"; keep the first line."""
    first = message.strip().splitlines()[0] if message.strip() else message
    if match := _AT_RE.match(first):
        return Problem(first[match.end():], int(match.group(1)), int(match.group(2)))
    return Problem(first)


def _engine_module() -> Any:
    try:
        from engine.constraints import sources  # type: ignore[import-not-found]
    except ImportError:
        return None
    return sources


def check_file(path: str | Path) -> Checked:
    """Read and validate a constraint file (blocking)."""
    path = Path(path)
    kind = EXTENSIONS.get(path.suffix.lower())
    if kind is None:
        known = ", ".join(sorted(EXTENSIONS))
        return Checked(None, [Problem(f"{path.name}: not a constraint file (use {known})")])
    try:
        if path.stat().st_size > MAX_FILE_BYTES:
            return Checked(None, [Problem(f"{path.name}: too large (over 1 MB)")])
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        return Checked(None, [Problem(f"{path.name}: not a UTF-8 text file")])
    except OSError as exc:
        return Checked(None, [Problem(f"{path.name}: cannot be read ({exc.strerror})")])
    checked = check_source(kind, text, path.name)
    checked.path = str(path)
    return checked


def check_source(kind: str, source: str, name: str = "") -> Checked:
    """Validate pasted or loaded constraint text of `kind` (blocking)."""
    label = name or KIND_LABELS.get(kind, kind)
    if kind != "any_json" and not source.strip():
        return Checked(None, [Problem(f"{label}: empty")])
    if kind == "json_schema":
        try:
            schema = json.loads(source)
        except json.JSONDecodeError as exc:
            return Checked(None, [Problem(f"invalid JSON: {exc.msg}", exc.lineno, exc.colno)])
        if not isinstance(schema, (dict, bool)):
            return Checked(None, [Problem("a JSON schema must be an object")])
    if kind not in KIND_LABELS:
        return Checked(None, [Problem(f"unknown constraint kind {kind!r}")])
    spec = ConstraintSpec(kind=kind, source=source, name=label)  # type: ignore[arg-type]
    errors, warnings = _validate(spec)
    return Checked(None if errors else spec, errors, warnings)


def _validate(spec: ConstraintSpec) -> tuple[list[Problem], list[Problem]]:
    from llguidance import LLMatcher

    try:
        if spec.kind == "json_schema":
            grammar = LLMatcher.grammar_from_json_schema(json.loads(spec.source))
        elif spec.kind == "any_json":
            grammar = LLMatcher.grammar_from_json_schema({})
        elif spec.kind == "regex":
            grammar = LLMatcher.grammar_from_regex(spec.source)
        elif spec.kind == "gbnf":
            from llguidance.gbnf_to_lark import gbnf_to_lark

            grammar = LLMatcher.grammar_from_lark(gbnf_to_lark(spec.source))
        else:
            grammar = LLMatcher.grammar_from_lark(spec.source)
    except Exception as exc:  # llguidance and the GBNF converter raise various errors
        return [_problem(str(exc))], []
    is_error, messages = LLMatcher.validate_grammar_with_warnings(grammar)
    problems = [_problem(m) for m in messages]
    return (problems, []) if is_error else ([], problems)
