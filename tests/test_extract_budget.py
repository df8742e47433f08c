"""The default reply budget of an extraction row: estimated from the schema's shape and the
document's size (engine.extract.budget), not a fixed 512."""

from __future__ import annotations

from engine.extract.budget import CEILING, FLOOR, reply_tokens
from engine.extract.fields import schema_from_fields

LINE_ITEMS = {
    "type": "object",
    "properties": {
        "vendor": {"type": "string"},
        "items": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"what": {"type": "string"}, "amount": {"type": "number"}},
            },
        },
    },
}


def test_a_small_schema_gets_the_floor_and_a_larger_one_more() -> None:
    small = {"type": "object", "properties": {"paid": {"type": "boolean"}}}
    assert reply_tokens(small, 100) == FLOOR
    wide = {"type": "object", "properties": {f"field{i}": {"type": "string"} for i in range(20)}}
    assert reply_tokens(wide, 100) > 512  # what a fixed 512 cut short


def test_lists_grow_with_the_document_and_maxitems_bounds_them() -> None:
    short, long = reply_tokens(LINE_ITEMS, 300), reply_tokens(LINE_ITEMS, 6000)
    assert short < long <= CEILING
    bounded = {**LINE_ITEMS, "properties": {**LINE_ITEMS["properties"]}}
    bounded["properties"]["items"] = {**LINE_ITEMS["properties"]["items"], "maxItems": 2}  # type: ignore[index]
    assert reply_tokens(bounded, 6000) == reply_tokens(bounded, 300) < long


def test_formats_enums_refs_and_branches_are_counted_by_what_they_allow() -> None:
    dated = {"type": "object", "properties": {"d": {"type": "string", "format": "date"}}}
    free = {"type": "object", "properties": {"d": {"type": "string"}}}
    many = {"type": "object", "properties": {f"d{i}": {"$ref": "#/$defs/day"} for i in range(40)}}
    many["$defs"] = {"day": {"anyOf": [{"type": "null"}, {"enum": ["monday", "tuesday"]}]}}
    assert reply_tokens(dated, 100) <= reply_tokens(free, 100)
    assert FLOOR < reply_tokens(many, 100) < CEILING  # the refs were followed, not guessed
    looping = {"$ref": "#"}  # a schema that names itself ends as a free value
    assert reply_tokens(looping, 100) == FLOOR


def test_the_fields_the_window_builds_get_a_budget_that_fits_a_list() -> None:
    schema = schema_from_fields("vendor: string, total: number, date: date, items: list")
    assert FLOOR < reply_tokens(schema, 200) < reply_tokens(schema, 3000) <= CEILING
