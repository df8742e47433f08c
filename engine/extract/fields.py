"""A schema from a few field names with types, for users who do not write JSON schemas:
`vendor: string, total: number, paid: boolean, date: date, items: list` becomes an object
schema with those properties, all required."""

from __future__ import annotations

import re
from typing import Any

TYPES: dict[str, dict[str, Any]] = {
    "string": {"type": "string"},
    "text": {"type": "string"},
    "number": {"type": "number"},
    "integer": {"type": "integer"},
    "int": {"type": "integer"},
    "boolean": {"type": "boolean"},
    "bool": {"type": "boolean"},
    "date": {"type": "string", "format": "date"},
    "list": {"type": "array", "items": {"type": "string"}},
}
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_ ]{0,63}$")


def schema_from_fields(text: str) -> dict[str, Any]:
    """The object schema `text` describes (see the module docstring); ValueError naming the
    field that is not `name: type` or whose type is unknown. A field without a type is a
    string."""
    properties: dict[str, Any] = {}
    for part in (p.strip() for p in re.split(r"[,\n]", text)):
        if not part:
            continue
        name, _, kind = (s.strip() for s in part.partition(":"))
        kind = kind.lower() or "string"
        if not _NAME.match(name):
            raise ValueError(f"{part!r}: a field is a name (letters, digits, _) and a type")
        if kind not in TYPES:
            raise ValueError(f"{part!r}: the type is one of {', '.join(TYPES)}")
        if name in properties:
            raise ValueError(f"{name!r} is named twice")
        properties[name] = dict(TYPES[kind])
    if not properties:
        raise ValueError("name at least one field, e.g. 'vendor: string, total: number'")
    return {"type": "object", "properties": properties, "required": list(properties)}
