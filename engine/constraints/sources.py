"""Where constraints come from: grammar files, pasted text, a JSON schema object, "any JSON".

Files are recognised by extension and checked against their content: `.json` (a JSON
schema), `.lark` (llguidance's Lark dialect, `%json` embeds included), `.gbnf`
(llama.cpp GBNF), `.regex`/`.re` (one pattern). Files with another extension are sniffed.
Binary, empty, oversized and unrecognised files are rejected with a message naming them.
Nothing here compiles anything; `engine.constraints.validate` does that.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any, get_args

from engine.constraints import ConstraintError, Diagnostic
from engine.files import FileRefused, read_limited
from engine.types import KIND_NAMES, ConstraintKind, ConstraintSpec

# Grammar and schema files, and pasted grammars: larger ones are refused before reading.
MAX_SOURCE_BYTES = 1_000_000

EXTENSION_KINDS: dict[str, ConstraintKind] = {
    ".json": "json_schema",
    ".lark": "lark",
    ".gbnf": "gbnf",
    ".regex": "regex",
    ".re": "regex",
}


# "any JSON" means a JSON object, like the "JSON mode" of chat APIs: a bare number or string
# is rarely what someone asking for JSON wants.
ANY_JSON_SCHEMA: dict[str, Any] = {"type": "object"}

_GBNF_RULE = re.compile(r"^\s*[A-Za-z][\w-]*\s*::=", re.MULTILINE)
_LARK_START = re.compile(r"^\s*[?!]?start\s*(\.\s*-?\d+\s*)?:", re.MULTILINE)
_LARK_RULE = re.compile(r"^\s*(%\w+|[?!]?[A-Za-z_]\w*\s*(\.\s*-?\d+\s*)?:)", re.MULTILINE)


def constraint_from_file(
    path: str | os.PathLike[str], kind: ConstraintKind | None = None
) -> ConstraintSpec:
    """Read a grammar file into a ConstraintSpec named after the file.

    `kind` forces the kind (for `--json-schema FILE`); otherwise it comes from the extension,
    corrected by the content (a `.lark` file written in GBNF is read as GBNF and vice versa).
    Raises ConstraintError naming the file when it cannot be used.
    """
    p = Path(path).expanduser()
    text = _read_text(p)
    ext = p.suffix.lower()
    if kind is None:
        kind = _kind_for(ext, text)
        if kind is None:
            known = ", ".join(EXTENSION_KINDS)
            raise _file_error(
                p,
                "not a recognised grammar file (expected a JSON schema, a Lark or GBNF "
                f"grammar, or a regex; extensions {known})",
            )
    _check_kind(kind)
    if kind == "json_schema":
        parse_json_schema(text, str(p), file=str(p))
    elif kind == "regex":
        text = text.rstrip("\r\n")
    return ConstraintSpec(kind=kind, source=text, name=p.name)


def constraint_from_text(text: str, kind: ConstraintKind, name: str = "") -> ConstraintSpec:
    """A constraint pasted by the user; raises ConstraintError if it is empty or too large."""
    _check_kind(kind)
    label = name or KIND_NAMES[kind]
    if kind == "any_json":
        return any_json_constraint()
    if not text.strip():
        raise ConstraintError(f"{label}: the {KIND_NAMES[kind]} is empty")
    if len(text.encode("utf-8", "surrogatepass")) > MAX_SOURCE_BYTES:
        raise ConstraintError(f"{label}: too large (the limit is {MAX_SOURCE_BYTES:,} bytes)")
    if kind == "json_schema":
        parse_json_schema(text, label)
    return ConstraintSpec(kind=kind, source=text, name=name or KIND_NAMES[kind])


def json_schema_constraint(schema: dict[str, Any] | bool | str, name: str = "") -> ConstraintSpec:
    """A constraint from a JSON schema given as an object (or its JSON text)."""
    text = schema if isinstance(schema, str) else json.dumps(schema)
    return constraint_from_text(text, "json_schema", name)


def regex_constraint(pattern: str, name: str = "") -> ConstraintSpec:
    """A constraint that the whole reply matches `pattern` (Rust regex syntax, anchored)."""
    if not pattern:
        raise ConstraintError("regex: the pattern is empty")
    return ConstraintSpec(kind="regex", source=pattern, name=name or f"regex {pattern[:40]}")


def any_json_constraint() -> ConstraintSpec:
    """Any JSON object."""
    return ConstraintSpec(kind="any_json", source="", name=KIND_NAMES["any_json"])


def sniff_kind(text: str) -> ConstraintKind | None:
    """Guess a grammar's kind from its content alone, or None."""
    stripped = text.lstrip()
    if stripped.startswith(("{", "true", "false")):
        try:
            value = json.loads(text)
        except ValueError:
            value = None
        if isinstance(value, dict | bool):
            return "json_schema"
    if _GBNF_RULE.search(text) and not _LARK_START.search(text):
        return "gbnf"
    if _LARK_START.search(text) and _LARK_RULE.search(text):
        return "lark"
    return None


def _kind_for(ext: str, text: str) -> ConstraintKind | None:
    kind = EXTENSION_KINDS.get(ext)
    if kind in ("lark", "gbnf"):
        # Grammar files are often misnamed; trust the syntax when it is clear.
        sniffed = sniff_kind(text)
        return sniffed if sniffed in ("lark", "gbnf") else kind
    if kind is not None:
        return kind
    return sniff_kind(text)


def _check_kind(kind: str) -> None:
    if kind not in get_args(ConstraintKind):
        kinds = ", ".join(get_args(ConstraintKind))
        raise ConstraintError(f"unknown constraint kind {kind!r} (use one of {kinds})")


def _read_text(path: Path) -> str:
    if not path.exists():
        raise _file_error(path, "no such file")
    try:
        data = read_limited(path, MAX_SOURCE_BYTES, "grammar file")
    except FileRefused as exc:
        raise _file_error(path, str(exc).removeprefix(f"{path}: ")) from None
    if b"\x00" in data:
        raise _file_error(path, "not a text file (it contains NUL bytes)")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise _file_error(
            path, f"not a UTF-8 text file (invalid byte at offset {exc.start})"
        ) from exc
    if not text.strip():
        raise _file_error(path, "the file is empty")
    return text


def _file_error(path: Path, message: str) -> ConstraintError:
    """An error about the file at `path` as a whole, its path in the Diagnostic."""
    return ConstraintError(f"{path}: {message}", [Diagnostic(message, file=str(path))])


def parse_json_schema(text: str, label: str, file: str | None = None) -> dict[str, Any] | bool:
    """The schema in `text`; ConstraintError with line and column (and `file`, if it came
    from one) if it is not one."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        diag = Diagnostic(f"not valid JSON: {exc.msg}", exc.lineno, exc.colno, file=file)
        raise ConstraintError(f"{label}: {diag}", [diag]) from exc
    except RecursionError as exc:
        diag = Diagnostic("the JSON is nested too deeply", file=file)
        raise ConstraintError(f"{label}: {diag}", [diag]) from exc
    if not isinstance(value, dict | bool):
        what = {list: "an array", str: "a string", type(None): "null"}.get(type(value), "a number")
        diag = Diagnostic(f"a JSON schema must be an object, not {what}", 1, 1, file=file)
        raise ConstraintError(f"{label}: {diag}", [diag])
    return value
