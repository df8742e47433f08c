"""Checks a finished reply against the schema the user wrote, not the one Corral enforced.

The grammar a reply is decoded under can differ from what the user wrote: the tight
defaults narrow it (which keeps every reply valid as written), and llguidance relaxes
what it cannot enforce (an overlapping `oneOf` read as `anyOf`, `if`/`then`, an unknown
`format`), which can let a reply through that the user's schema rejects. This module
validates the reply's JSON (or each tool call's arguments) with `jsonschema`, formats
checked, once the reply has ended, so the reply can say so instead of passing silently.

Validators are built once per schema text (`_validator`): a schema is reused by every
reply of a conversation, and building one resolves its references.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Protocol

import jsonschema
from jsonschema.exceptions import ValidationError, best_match

from engine.types import AsWrittenCheck

__all__ = ["as_written_line", "check_json_text", "check_reply", "check_tool_arguments"]


class _Tool(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def parameters(self) -> dict[str, Any]: ...


class _Call(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def arguments(self) -> dict[str, Any]: ...


@dataclass(frozen=True)
class _Failure:
    keyword: str
    path: str
    message: str


def _pointer(parts: Iterable[str | int]) -> str:
    """A JSON pointer ("/items/0/name") for a path inside the reply; "" for the root."""
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in parts)


@lru_cache(maxsize=64)
def _validator(schema_text: str) -> jsonschema.protocols.Validator:
    """A validator for the schema text (its draft from `$schema`, formats checked)."""
    schema = json.loads(schema_text)
    cls = jsonschema.validators.validator_for(schema)
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


def _first_failure(schema_text: str, value: Any) -> _Failure | None:
    try:
        validator = _validator(schema_text)
    except (ValueError, jsonschema.exceptions.SchemaError, TypeError) as err:
        # A schema jsonschema itself cannot read (llguidance accepted it): say so, never
        # claim the reply valid.
        return _Failure("schema", "", f"the schema could not be checked: {err}")
    error: ValidationError | None = best_match(validator.iter_errors(value))
    if error is None:
        return None
    return _Failure(str(error.validator), _pointer(error.absolute_path), error.message)


MAX_MESSAGE = 300  # jsonschema quotes the failing value whole; a reply can be long


def _verdict(failure: _Failure | None, where: str = "") -> AsWrittenCheck:
    if failure is None:
        return AsWrittenCheck(valid=True)
    message = failure.message
    if len(message) > MAX_MESSAGE:
        message = message[: MAX_MESSAGE - 1] + "…"
    return AsWrittenCheck(
        valid=False, keyword=failure.keyword, path=where + failure.path, message=message
    )


def check_json_text(schema_text: str, text: str) -> AsWrittenCheck:
    """Whether `text` is JSON that the schema `schema_text` accepts as written.

    Args:
        schema_text: the user's JSON schema, as text.
        text: the reply.

    Returns:
        valid, or the first failing keyword ("json" when the text is not JSON), the JSON
        pointer where it failed inside the reply, and jsonschema's message.
    """
    try:
        value = json.loads(text)
    except ValueError as err:
        return AsWrittenCheck(valid=False, keyword="json", path="", message=f"not JSON: {err}")
    return _verdict(_first_failure(schema_text, value))


def check_tool_arguments(tools: Sequence[_Tool], calls: Sequence[_Call]) -> AsWrittenCheck:
    """Whether every call's arguments fit its tool's parameter schema as written.

    Args:
        tools: the request's tools (name and parameter schema).
        calls: the reply's parsed calls.

    Returns:
        valid, or the first failure with its path prefixed by the call ("/calls/1/...").
    """
    by_name = {t.name: t for t in tools}
    for i, call in enumerate(calls):
        tool = by_name.get(call.name)
        if tool is None:
            return AsWrittenCheck(
                valid=False,
                keyword="name",
                path=f"/calls/{i}",
                message=f"no tool is named {call.name!r}",
            )
        schema_text = json.dumps(tool.parameters, sort_keys=True)
        failure = _first_failure(schema_text, call.arguments)
        if failure is not None:
            return _verdict(failure, f"/calls/{i}/arguments")
    return AsWrittenCheck(valid=True)


def check_reply(
    kind: str | None,
    source: str,
    text: str,
    tools: Sequence[_Tool] = (),
    calls: Sequence[_Call] = (),
) -> AsWrittenCheck | None:
    """The as-written check that applies to a finished reply, or None where none does.

    A JSON schema is checked against the reply's text; `any_json` checks the text parses;
    tool calls are checked against their tools. Grammars and regexes are enforced exactly
    as written, so nothing is re-checked for them (None).

    Args:
        kind: the reply's constraint kind (None when it had none).
        source: the constraint's text as the user wrote it.
        text: the reply's text (without tool-call markup).
        tools: the request's tools, when it had any.
        calls: the reply's tool calls.
    """
    if calls:
        return check_tool_arguments(tools, calls)
    if kind == "json_schema":
        return check_json_text(source, text)
    if kind == "any_json":
        try:
            json.loads(text)
        except ValueError as err:
            return AsWrittenCheck(valid=False, keyword="json", path="", message=f"not JSON: {err}")
        return AsWrittenCheck(valid=True)
    return None


def as_written_line(check: AsWrittenCheck) -> str:
    """One line for a person: "valid against your schema as written", or where it is not."""
    if check.valid:
        return "valid against your schema as written"
    where = f" at {check.path}" if check.path else ""
    return f"not valid against your schema as written: {check.keyword}{where}: {check.message}"
