"""Placing a schema's compile error inside the schema: the path the server reports in
`param` for each kind of error llguidance gives (messages as the engine words them)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from engine.constraints.sources import json_schema_constraint
from engine.constraints.validate import validate_constraint
from engine.server.schema_errors import schema_error_path
from engine.types import SchemaOptions


def _obj(**properties: Any) -> dict[str, Any]:
    return {"type": "object", "properties": properties}


@pytest.mark.parametrize(
    ("schema", "path"),
    [
        (_obj(a={"type": "strnig"}), ("properties", "a", "type")),
        (_obj(a={"type": "string", "minLength": "3"}), ("properties", "a", "minLength")),
        (
            _obj(a={"type": "array", "items": {"type": "string", "not": {"pattern": "\\d"}}}),
            ("properties", "a", "items", "not"),
        ),
        (_obj(a={"type": "string", "format": "topic"}), ("properties", "a", "format")),
        (_obj(a={"$ref": "#/$defs/missing"}), ("properties", "a", "$ref")),
        (_obj(a={"type": "string", "pattern": "(unclosed"}), ("properties", "a", "pattern")),
        ({"type": "object", "required": "a"}, ("required",)),
        # About the schema as a whole: no place to name.
        ({**_obj(a={"type": "integer", "minimum": 5, "maximum": 1}), "required": ["a"]}, None),
    ],
    ids=["type", "minLength", "not", "format", "ref", "pattern", "required", "unsatisfiable"],
)
def test_each_error_is_placed_where_it_is(schema: dict[str, Any], path: tuple | None) -> None:
    # Strict: by default keywords Corral cannot enforce (not, formats) are only warnings.
    spec = json_schema_constraint(schema, "s")
    report = validate_constraint(replace(spec, options=SchemaOptions(lenient=False)))
    assert report.errors, "the schema must not compile"
    assert schema_error_path(schema, str(report.errors[0])) == path


def test_a_schema_that_is_not_an_object_has_no_place() -> None:
    assert schema_error_path(True, "anything") is None
    assert schema_error_path([1], "anything") is None
