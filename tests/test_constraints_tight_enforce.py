"""Enforce instead of warning: the tight rewrite turns `not`, an overlapping `oneOf`,
`contains` and schema `dependencies` into keywords llguidance enforces, narrowing only.

For each shape: llguidance's warning for the keyword is gone; the value the schema as
written needs stays valid under the tight schema (and a value the schema excludes is
excluded); instances hypothesis-jsonschema generates from the tight schema validate as
written. Then the nine JSONSchemaBench schemas whose replies broke the promise, under the
tiny model: a reply valid as written, or the schema refused as unsatisfiable where no
value can match it, or the warning kept where the rewrite cannot be sound.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, assume, given, settings
from jsonschema_strategies import from_schema, inlined
from llguidance import LLMatcher
from shared_datasets import dataset
from tight_oracle import validator

from benchmarks.coverage import load_schema, request_for, valid_as_written
from engine.constraints import ConstraintError
from engine.constraints.sources import json_schema_constraint
from engine.constraints.tight import tighten
from engine.constraints.tight_negation import string_complement
from engine.constraints.validate import compile_constraint, validate_constraint

IGNORED = "not enforced (ignored)"

# name: (schema, a value it accepts, a value it rejects that the schema less the keyword
# would accept, the keyword llguidance would ignore)
SHAPES: dict[str, tuple[dict, object, object, str]] = {
    "not required": (
        {
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "string"}},
            "not": {"required": ["b"]},
        },
        {"a": 1},
        {"a": 1, "b": "x"},
        "not",
    ),
    "not type": ({"type": ["string", "integer"], "not": {"type": "integer"}}, "s", 3, "not"),
    "not const boolean": ({"type": "boolean", "not": {"const": True}}, False, True, "not"),
    "not enum numbers": (
        {"type": "number", "minimum": 0, "maximum": 10, "not": {"enum": [1, 2.5]}},
        2,
        2.5,
        "not",
    ),
    "not enum strings": (
        {"type": "string", "maxLength": 8, "not": {"enum": ["red", "green", "re]d"]}},
        "blue",
        "green",
        "not",
    ),
    "not anyOf (De Morgan)": (
        {
            "type": "object",
            "properties": {"a": {}, "b": {}, "c": {}},
            "not": {"anyOf": [{"required": ["a"]}, {"required": ["b"]}]},
        },
        {"c": 1},
        {"b": 1},
        "not",
    ),
    "not not": ({"type": "integer", "not": {"not": {"minimum": 5}}}, 7, 3, "not"),
    "a key must exist (not propertyNames)": (
        {"type": "object", "not": {"propertyNames": {"not": {"const": "0"}}}},
        {"0": 1},
        {"1": 1},
        "not",
    ),
    "overlapping oneOf of required keys": (
        {
            "type": "object",
            "properties": {"r": {"type": "number"}, "s": {"type": "number"}},
            "oneOf": [{"required": ["r"]}, {"required": ["s"]}],
        },
        {"r": 1},
        {"r": 1, "s": 2},
        "oneOf",
    ),
    "overlapping oneOf of types": (
        {"oneOf": [{"type": "integer"}, {"type": "number", "minimum": 0}]},
        -3,
        4,
        "oneOf",
    ),
    "contains": (
        {"type": "array", "items": {"type": "integer"}, "contains": {"minimum": 10}},
        [10],
        [1, 2],
        "contains",
    ),
    "dependencies with a required trigger": (
        {
            "$schema": "http://json-schema.org/draft-07/schema#",
            "type": "object",
            "properties": {"a": {"type": "string"}, "b": {"type": "integer"}},
            "required": ["a"],
            "dependencies": {"a": {"required": ["b"]}},
        },
        {"a": "x", "b": 1},
        {"a": "x"},
        "dependencies",
    ),
    "a dependency on false": (
        {
            "$schema": "http://json-schema.org/draft-07/schema#",
            "type": "object",
            "properties": {"x": {}, "y": {}},
            "dependencies": {"x": False},
        },
        {"y": 1},
        {"x": 1},
        "dependencies",
    ),
    "not pattern, one regex with the string's own": (
        {"type": "string", "pattern": "^[a-z]+$", "not": {"pattern": "abc"}},
        "abd",
        "xabcx",
        "not",
    ),
    "not pattern beside other types": (
        {"type": ["string", "integer"], "not": {"pattern": "^[ab]"}},
        "c",
        "ab",
        "not",
    ),
    "integers a not excludes, listed": (
        {
            "type": "integer",
            "exclusiveMinimum": 10,
            "maximum": 40,
            "not": {"anyOf": [{"multipleOf": 2}, {"multipleOf": 3}]},
        },
        11,
        12,
        "not",
    ),
}


def accepts(schema: object, value: object) -> bool:
    return bool(validator(schema).is_valid(value))


def warnings_of(schema: object) -> list[str]:
    report = validate_constraint(json_schema_constraint(schema))
    assert report.ok, report.errors
    return [str(w) for w in report.warnings]


@pytest.mark.parametrize("name", SHAPES)
def test_the_keyword_is_enforced_and_its_warning_is_gone(name):
    schema, good, bad, keyword = SHAPES[name]
    assert accepts(schema, good) and not accepts(schema, bad)
    as_written = tighten(schema)
    tight = as_written.schema
    assert accepts(tight, good), json.dumps(tight)
    assert not accepts(tight, bad), json.dumps(tight)
    # the warning for the keyword is gone: llguidance enforces all of the tight schema
    assert not [w for w in warnings_of(schema) if IGNORED in w or "oneOf is enforced" in w]
    # and the chip says what was done, in words that name the keyword
    assert any(keyword in note or "listed" in note for note in as_written.notes())
    # the grammar llguidance compiled refuses the excluded value
    grammar = validate_constraint(json_schema_constraint(schema)).grammar
    assert grammar is not None
    matcher = LLMatcher(_bytes(), grammar, log_level=0)
    text = json.dumps(bad, separators=(",", ":")).encode()
    assert not (matcher.consume_tokens(list(text)) and matcher.is_accepting())


@pytest.mark.parametrize("name", SHAPES)
def test_instances_generated_from_the_tight_schema_validate_as_written(name):
    schema = SHAPES[name][0]
    tight = tighten(schema).schema

    @settings(
        max_examples=25, deadline=None, database=None, suppress_health_check=list(HealthCheck)
    )
    @given(from_schema(inlined(tight)))
    def check(value: object) -> None:
        assume(accepts(tight, value))
        assert accepts(schema, value), (json.dumps(tight), value)

    check()


def test_a_negation_that_would_narrow_under_another_not_is_left_alone():
    """`not: {not: {... minimum ...}}` is exact; a `not` over a `multipleOf` cannot be
    negated, and narrowing what it references would widen the whole: left as written."""
    schema = {
        "$defs": {"m": {"multipleOf": 3}},
        "type": "number",
        "properties": {},
        "not": {"$ref": "#/$defs/m"},
    }
    tight = tighten(schema)
    assert "not" in json.dumps(tight.schema) or "enum" in tight.schema
    for value in (1, 2, 3, 4.5, 6):
        if accepts(tight.schema, value):
            assert accepts(schema, value), value


def test_a_schema_proven_to_have_no_value_is_refused_with_the_reason():
    """Every key is required, so every object matches both branches: nothing is valid."""
    schema = {
        "type": "object",
        "properties": {
            "d": {
                "type": "object",
                "properties": {"r": {"type": "number"}, "s": {"type": "number"}},
                "required": ["r", "s"],
                "oneOf": [{"required": ["r"]}, {"required": ["s"]}],
            }
        },
        "required": ["d"],
    }
    with pytest.raises(ConstraintError, match="Unsatisfiable schema: the oneOf at /properties/d"):
        compile_constraint(json_schema_constraint(schema))
    # the same key optional: the object just cannot have it
    optional = {**schema, "required": []}
    tight = tighten(optional).schema
    assert accepts(tight, {}) and not accepts(tight, {"d": {"r": 1, "s": 2}})


def test_a_narrowing_that_leaves_nothing_falls_back_to_what_is_exact():
    """`not` of an `enum` of arrays can only be narrowed to "not an array": beside an
    `enum` of one array that leaves nothing, so the `not` stays as written (with its
    warning) rather than make a satisfiable schema unsatisfiable."""
    schema = {"allOf": [{"enum": [[1, 2, 3]]}, {"not": {"enum": [[{"foo": "bar"}]]}}]}
    tight = tighten(schema)
    assert tight.unsatisfiable is None and accepts(tight.schema, [1, 2, 3])


def test_the_string_complement_pattern_excludes_exactly_the_listed_strings():
    import re

    pattern = string_complement(["red", "re", "a]b", ""])
    assert pattern is not None
    for text in ("red", "re", "a]b", ""):
        assert not re.search(pattern, text), text
    for text in ("r", "redd", "rex", "blue", "a]", "a]bc", "ä"):
        assert re.search(pattern, text), text
    assert string_complement(["a\nb"]) is None  # `$` also matches before a final "\n"


# ---- the nine dataset schemas whose replies broke the promise ----

ENFORCED = [
    "Handwritten/existsName1",
    "Handwritten/num2",
    "Handwritten/allone4",
    "Handwritten/oneof6",
    "Handwritten/oneofitemscontains1",
    # a oneOf made disjoint by a not over patternProperties narrowed to a named key, its
    # overlapping key patterns then split into disjoint ones (tight_keys.py)
    "Handwritten/oneofpr4",
]
UNSATISFIABLE = ["Glaiveai2K/calculate_area_4493ae68"]
# a `not` over propertyNames whose narrowing leaves no valid reply the witness walk can
# find (object9 has none: each key containing "a" needs a value with such a key, without
# end), and one whose negation makes strings match several patterns at once (llguidance's
# lexer runs out of states mid-reply): left as written, with the warning
LEFT = ["Handwritten/object9", "Handwritten/allany20"]


@pytest.mark.parametrize("name", ENFORCED)
def test_the_tiny_model_s_reply_is_valid_as_written(tiny_engine, name):
    path = dataset("jsonschemabench") / f"{name}.json"
    result = tiny_engine.chat(request_for(path, 60))
    # (oneof6 keeps a warning for `dependencies`, which its draft, 2020-12, ignores too)
    enforced = ('"not"', '"contains"', "oneOf is enforced")
    assert not [w for w in result.warnings if any(k in w for k in enforced)], result.warnings
    assert valid_as_written(path, result), (result.text, result.warnings)


@pytest.mark.parametrize("name", UNSATISFIABLE)
def test_a_dataset_schema_no_value_matches_is_refused(name):
    path = dataset("jsonschemabench") / f"{name}.json"
    with pytest.raises(ConstraintError, match="Unsatisfiable schema"):
        compile_constraint(json_schema_constraint(load_schema(path)[0], path.name))


@pytest.mark.parametrize("name", LEFT)
def test_what_cannot_be_enforced_soundly_still_warns(name):
    path = dataset("jsonschemabench") / f"{name}.json"
    assert any(IGNORED in w for w in warnings_of(load_schema(path)[0]))


def _bytes():
    from llguidance import LLTokenizer

    return LLTokenizer("byte")
