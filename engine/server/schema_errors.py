"""Where in a JSON schema a compile error is.

llguidance names what is wrong with a schema but not where. A schema sent inside a request
body has no lines of its own (the client serialised it), so the place is given as a path
into the schema, `properties.city.type`, which the server adds to the error's `param`.
"""

from __future__ import annotations

import re
from typing import Any

Path = tuple[int | str, ...]

_QUOTED = re.compile(r'"([^"]+)"')
_UNKNOWN_FORMAT = re.compile(r"Unknown format: (\S+)")
_POINTER = re.compile(r"Pointer '([^']*)' does not exist")


def schema_error_path(schema: Any, message: str) -> Path | None:
    """The path to the part of `schema` that `message` (llguidance's error) is about, or
    None when it cannot be told (the error is about the schema as a whole)."""
    if not isinstance(schema, dict):
        return None
    found: Path | None = None
    # What the message names first: unsupported keywords, a format, a $ref, a pattern.
    if "not supported" in message:
        keys = set(_QUOTED.findall(message))
        found = _find(schema, lambda node: next((k for k in node if k in keys), None))
    elif match := _UNKNOWN_FORMAT.search(message):
        wanted = match.group(1)
        found = _find(schema, lambda node: "format" if node.get("format") == wanted else None)
    elif match := _POINTER.search(message):
        ref = "#" + match.group(1)
        found = _find(schema, lambda node: "$ref" if node.get("$ref") == ref else None)
    elif "regex" in message:
        found = _find(schema, lambda node: "pattern" if _bad_pattern(node.get("pattern")) else None)
    # Else a keyword with a malformed value (a misspelt type, a string minLength), which
    # the JSON-schema meta-schema finds.
    return found or _meta_schema_path(schema)


def _meta_schema_path(schema: dict[str, Any]) -> Path | None:
    """Where the schema breaks its own meta-schema (jsonschema's check), if it does."""
    import jsonschema

    try:
        cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
        error = jsonschema.exceptions.best_match(cls(cls.META_SCHEMA).iter_errors(schema))
    except Exception:  # a schema jsonschema cannot read at all: no place to name
        return None
    if error is None or not error.absolute_path:
        return None
    return tuple(error.absolute_path)


def _bad_pattern(pattern: Any) -> bool:
    if not isinstance(pattern, str):
        return False
    try:
        re.compile(pattern)
    except re.error:
        return True
    return False


def _find(schema: Any, key_in: Any) -> Path | None:
    """The path of the first (depth-first) object in `schema` where `key_in(object)` names
    a key, with that key appended."""
    stack: list[tuple[Any, Path]] = [(schema, ())]
    while stack:
        node, path = stack.pop()
        if isinstance(node, dict):
            if (key := key_in(node)) is not None:
                return (*path, key)
            stack.extend((v, (*path, k)) for k, v in reversed(node.items()))
        elif isinstance(node, list):
            stack.extend((v, (*path, i)) for i, v in reversed(list(enumerate(node))))
    return None
