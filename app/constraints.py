"""Constraint files and pasted grammars, checked before the GUI applies them.

The engine's constraint sources and validation (engine.constraints.sources / .validate,
no MLX) do the work; if an engine build lacks them, a small local fallback reads the file
by extension and asks llguidance to validate it. Either way the GUI gets a `Checked`: a
ConstraintSpec ready for a request, or problems with line and column, never an exception.
Everything here may block (grammars are compiled), so the GUI runs it on a worker thread.
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


def _engine_api() -> tuple[Any, Any, Any] | None:
    """(ConstraintError, sources, validate) from the engine, or None if it has none."""
    try:
        from engine.constraints import ConstraintError, sources, validate
    except ImportError:
        return None
    return ConstraintError, sources, validate


def _problems(diagnostics: Any) -> list[Problem]:
    return [Problem(d.message, d.line, d.column) for d in diagnostics]


def _engine_check(api: tuple[Any, Any, Any], make_spec: Any, path: str | None) -> Checked:
    constraint_error, _sources, validate = api
    try:
        spec = make_spec()
    except constraint_error as exc:
        return Checked(None, _problems(exc.diagnostics) or [Problem(str(exc))], path=path)
    report = validate.validate_constraint(spec)
    errors, warnings = _problems(report.errors), _problems(report.warnings)
    return Checked(None if errors else spec, errors, warnings, path)


def _strip_path(message: str, path: str | Path) -> str:
    """The GUI names the file itself; drop the engine's "PATH: " prefix."""
    for prefix in (f"{Path(path).expanduser()}: ", f"{Path(path).name}: "):
        if message.startswith(prefix):
            return message[len(prefix):]
    return message


def check_file(path: str | Path) -> Checked:
    """Read and validate a constraint file (blocking)."""
    if (api := _engine_api()) is not None:
        checked = _engine_check(api, lambda: api[1].constraint_from_file(path), str(path))
        checked.errors = [Problem(_strip_path(e.message, path), e.line, e.column)
                          for e in checked.errors]
        return checked
    path = Path(path)
    kind = EXTENSIONS.get(path.suffix.lower())
    if kind is None:
        known = ", ".join(sorted(EXTENSIONS))
        return Checked(None, [Problem(f"not a constraint file (use {known})")])
    try:
        if path.stat().st_size > MAX_FILE_BYTES:
            return Checked(None, [Problem("too large (over 1 MB)")])
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        return Checked(None, [Problem("not a UTF-8 text file")])
    except OSError as exc:
        return Checked(None, [Problem(f"cannot be read ({exc.strerror})")])
    checked = check_source(kind, text, path.name)
    checked.path = str(path)
    return checked


def check_source(kind: str, source: str, name: str = "") -> Checked:
    """Validate pasted or loaded constraint text of `kind` (blocking)."""
    if (api := _engine_api()) is not None:
        return _engine_check(api, lambda: api[1].constraint_from_text(source, kind, name), None)
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
