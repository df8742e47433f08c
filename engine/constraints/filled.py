"""Which JSON values of a reply Corral wrote rather than the model.

When the closing policy (`engine.constraints.closing`) ends a reply to fit, everything from
the offset where its tokens began is Corral's. `filled_paths` reads the finished JSON text
with each value's span and names, as JSON pointers, the values that text touches:

- a string, `true`, `false` or `null` is filled when any of its characters is Corral's (a
  value the model began and Corral finished counts: `"John Sm` + `"`);
- a number is filled also when it ends exactly where Corral began: the model had not ended
  it (its next character, the one that ends it, was Corral's), so `12` may have been `120`;
- an object or array wholly Corral's is named as one value (`/address`, not its keys);
- one the model began is looked into: the values inside it that Corral touched are named.
  An array Corral closed with nothing of its own inside is named itself (the list may be
  cut short); an object Corral only closed is not (every required key it lacked would have
  been filled, and so named).

The text need not be JSON only in the sense of its shape (leading blanks are skipped); text
that is not JSON at all (a Lark grammar's reply) has no paths.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

_BLANK = " \t\n\r"
_LITERALS = ("true", "false", "null")


@dataclass
class _Value:
    """One JSON value of the text: where it starts and ends, its kind, and its children
    (keyed by property name or index) for objects and arrays."""

    start: int
    end: int = 0
    kind: str = ""  # object | array | string | number | literal
    children: list[tuple[str, _Value]] = field(default_factory=list)


class _NotJSON(Exception):
    pass


def filled_paths(text: str, offset: int) -> list[str]:
    """JSON pointers of the values of `text` (a JSON reply) touched by what begins at
    `offset` (where the closing policy's text starts, in characters), in document order;
    [] if `text` is not JSON or nothing at or after `offset` is part of a value."""
    offset = max(0, offset)
    try:
        root, _ = _parse(text, _skip(text, 0))
    except (_NotJSON, IndexError):
        return []
    out: list[str] = []
    _collect(root, "", offset, out)
    return out


def _touched(value: _Value, offset: int) -> bool:
    if value.kind == "number":
        return value.end >= offset
    return value.end > offset


def _collect(value: _Value, path: str, offset: int, out: list[str]) -> None:
    if not _touched(value, offset):
        return
    if value.start >= offset or value.kind not in ("object", "array"):
        out.append(path)
        return
    inside = [(key, child) for key, child in value.children if _touched(child, offset)]
    if not inside:
        if value.kind == "array":
            out.append(path)  # closed by Corral: the list may be cut short
        return
    for key, child in inside:
        _collect(child, f"{path}/{_escape(key)}", offset, out)


def _escape(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


def _skip(text: str, i: int) -> int:
    while i < len(text) and text[i] in _BLANK:
        i += 1
    return i


def _parse(text: str, i: int) -> tuple[_Value, int]:
    """The value starting at `i` (no blanks before it), and the index after it."""
    char = text[i]
    if char == "{":
        return _object(text, i)
    if char == "[":
        return _array(text, i)
    if char == '"':
        end = _string_end(text, i)
        return _Value(i, end, "string"), end
    for literal in _LITERALS:
        if text.startswith(literal, i):
            return _Value(i, i + len(literal), "literal"), i + len(literal)
    end = i
    while end < len(text) and text[end] in "+-0123456789.eE":
        end += 1
    if end == i:
        raise _NotJSON
    return _Value(i, end, "number"), end


def _string_end(text: str, i: int) -> int:
    """The index after the string starting at `i` (its opening quote)."""
    j = i + 1
    while True:
        char = text[j]
        if char == "\\":
            j += 2
            continue
        if char == '"':
            return j + 1
        j += 1


def _object(text: str, i: int) -> tuple[_Value, int]:
    value = _Value(i, kind="object")
    j = _skip(text, i + 1)
    if text[j] == "}":
        value.end = j + 1
        return value, j + 1
    while True:
        if text[j] != '"':
            raise _NotJSON
        key_end = _string_end(text, j)
        key = _unquote(text[j:key_end])
        j = _skip(text, key_end)
        if text[j] != ":":
            raise _NotJSON
        child, j = _parse(text, _skip(text, j + 1))
        value.children.append((key, child))
        j = _skip(text, j)
        if text[j] == ",":
            j = _skip(text, j + 1)
            continue
        if text[j] != "}":
            raise _NotJSON
        value.end = j + 1
        return value, j + 1


def _array(text: str, i: int) -> tuple[_Value, int]:
    value = _Value(i, kind="array")
    j = _skip(text, i + 1)
    if text[j] == "]":
        value.end = j + 1
        return value, j + 1
    while True:
        child, j = _parse(text, j)
        value.children.append((str(len(value.children)), child))
        j = _skip(text, j)
        if text[j] == ",":
            j = _skip(text, j + 1)
            continue
        if text[j] != "]":
            raise _NotJSON
        value.end = j + 1
        return value, j + 1


def _unquote(quoted: str) -> str:
    try:
        key = json.loads(quoted)
    except ValueError:
        raise _NotJSON from None
    return key if isinstance(key, str) else quoted


def common_prefix(a: str, b: str) -> int:
    """How many leading characters `a` and `b` share."""
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i
