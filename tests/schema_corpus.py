"""JSON schemas written for the suite, each with instances jsonschema accepts and rejects.

They cover what the real-world sets in ../shared/datasets exercise (nested objects, arrays
with bounds, enums and consts, number and string bounds, patterns, formats, nullable types,
anyOf, $ref/$defs, closed objects, optional properties) so that a clone without the
datasets checks the same behaviours; UNSUPPORTED are schemas whose keywords llguidance
cannot enforce and must refuse by name.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class SchemaCase:
    name: str
    schema: dict[str, Any]
    valid: tuple[Any, ...]
    invalid: tuple[Any, ...]


CASES: tuple[SchemaCase, ...] = (
    SchemaCase(
        "calculate_area",
        {
            "type": "object",
            "properties": {
                "shape": {"type": "string", "enum": ["circle", "rectangle", "triangle"]},
                "dimensions": {
                    "type": "object",
                    "properties": {
                        "radius": {"type": "number", "minimum": 0},
                        "width": {"type": "number"},
                        "height": {"type": "number"},
                    },
                },
            },
            "required": ["shape", "dimensions"],
        },
        (
            {"shape": "circle", "dimensions": {"radius": 2.5}},
            {"shape": "rectangle", "dimensions": {"width": 3, "height": 4}},
        ),
        (
            {"shape": "hexagon", "dimensions": {}},
            {"shape": "circle"},
            {"shape": "circle", "dimensions": {"radius": -1}},
            {"shape": "circle", "dimensions": "big"},
        ),
    ),
    SchemaCase(
        "create_event",
        {
            "type": "object",
            "properties": {
                "title": {"type": "string", "minLength": 1, "maxLength": 40},
                "date": {"type": "string", "format": "date"},
                "attendees": {
                    "type": "array",
                    "items": {"type": "string"},
                    "minItems": 1,
                    "maxItems": 3,
                },
                "private": {"type": "boolean"},
            },
            "required": ["title", "date"],
            "additionalProperties": False,
        },
        (
            {"title": "Standup", "date": "2024-05-01"},
            {"title": "Lunch", "date": "2024-12-24", "attendees": ["ann", "bo"], "private": True},
        ),
        (
            {"title": "", "date": "2024-05-01"},
            {"title": "Standup", "date": "tomorrow"},
            {"title": "Standup", "date": "2024-05-01", "attendees": []},
            {"title": "Standup", "date": "2024-05-01", "attendees": ["a", "b", "c", "d"]},
            {"title": "Standup", "date": "2024-05-01", "room": 4},
        ),
    ),
    SchemaCase(
        "set_thermostat",
        {
            "type": "object",
            "properties": {
                "room": {"const": "living"},
                "celsius": {"type": "integer", "minimum": 10, "maximum": 30},
                "mode": {"type": ["string", "null"], "enum": ["eco", "comfort", None]},
            },
            "required": ["room", "celsius"],
        },
        (
            {"room": "living", "celsius": 21},
            {"room": "living", "celsius": 10, "mode": None},
            {"room": "living", "celsius": 30, "mode": "eco"},
        ),
        (
            {"room": "kitchen", "celsius": 21},
            {"room": "living", "celsius": 31},
            {"room": "living", "celsius": 20.5},
            {"room": "living", "celsius": 21, "mode": "turbo"},
        ),
    ),
    SchemaCase(
        "lookup_order",
        {
            "type": "object",
            "properties": {
                "order_id": {"type": "string", "pattern": "^[A-Z]{2}-[0-9]{4}$"},
                "fields": {
                    "type": "array",
                    "items": {"enum": ["status", "total", "items"]},
                },
            },
            "required": ["order_id"],
        },
        ({"order_id": "AB-1234"}, {"order_id": "ZZ-0000", "fields": ["status", "total"]}),
        (
            {"order_id": "ab-1234"},
            {"order_id": "AB-12345"},
            {"order_id": "AB-1234", "fields": ["price"]},
            {},
        ),
    ),
    SchemaCase(
        "send_payment",
        {
            "$defs": {
                "amount": {
                    "type": "object",
                    "properties": {
                        "value": {"type": "number", "exclusiveMinimum": 0},
                        "currency": {"type": "string", "enum": ["EUR", "USD"]},
                    },
                    "required": ["value", "currency"],
                    "additionalProperties": False,
                }
            },
            "type": "object",
            "properties": {
                "to": {"type": "string", "maxLength": 20},
                "amount": {"$ref": "#/$defs/amount"},
                "memo": {"anyOf": [{"type": "string", "maxLength": 30}, {"type": "null"}]},
            },
            "required": ["to", "amount"],
        },
        (
            {"to": "alice", "amount": {"value": 12.5, "currency": "EUR"}},
            {"to": "bob", "amount": {"value": 1, "currency": "USD"}, "memo": None},
            {"to": "bob", "amount": {"value": 3, "currency": "USD"}, "memo": "rent"},
        ),
        (
            {"to": "alice", "amount": {"value": 0, "currency": "EUR"}},
            {"to": "alice", "amount": {"value": 5, "currency": "GBP"}},
            {"to": "alice", "amount": {"value": 5}},
            {"to": "alice", "amount": {"value": 5, "currency": "EUR", "fee": 1}},
            {"to": "alice", "amount": {"value": 5, "currency": "EUR"}, "memo": 7},
        ),
    ),
    SchemaCase(
        "search_books",
        {
            "type": "object",
            "properties": {
                "query": {"type": "string"},
                "filters": {
                    "type": "object",
                    "properties": {
                        "year_from": {"type": "integer"},
                        "languages": {
                            "type": "array",
                            "items": {"type": "string", "minLength": 2, "maxLength": 2},
                        },
                    },
                    "additionalProperties": False,
                },
                "limit": {"type": "integer", "minimum": 1, "maximum": 50},
            },
            "required": ["query"],
        },
        (
            {"query": "dune"},
            {"query": "poems", "filters": {"year_from": 1990, "languages": ["en", "fr"]}},
            {"query": "x", "limit": 50},
        ),
        (
            {"query": 3},
            {"query": "dune", "limit": 0},
            {"query": "dune", "filters": {"languages": ["eng"]}},
            {"query": "dune", "filters": {"author": "Herbert"}},
        ),
    ),
)

UNSUPPORTED: tuple[tuple[dict[str, Any], str], ...] = (
    ({"type": "array", "items": {"type": "integer"}, "uniqueItems": True}, "uniqueItems"),
    ({"type": "object", "if": {"required": ["a"]}, "then": {"required": ["b"]}}, '"if"'),
    # (a `not` over types, values, required keys or plain patterns is enforced by the tight
    # rewrite: see tests/test_constraints_tight_enforce.py; over `\d`, Unicode-wide in
    # Python, it cannot be)
    ({"type": "string", "not": {"pattern": "\\d"}}, '"not"'),
)
