"""Tight defaults narrow what a JSON schema accepts and never widen it: every instance the
tightened schema (or its compiled grammar) accepts, the schema as written accepts too.
Checked on hand-written schemas with instances Hypothesis generates from the tightened
schema, on the suite's corpus, and on every instance of the shared JSONSchemaBench sets."""

from __future__ import annotations

import functools
import json

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from llguidance import LLMatcher, LLTokenizer
from schema_corpus import CASES
from shared_datasets import dataset

from engine.constraints.sources import json_schema_constraint
from engine.constraints.tight import MAX_SAFE_INTEGER, disjoint, tighten
from engine.constraints.validate import json_compile_options, validate_constraint
from engine.types import SchemaOptions

BYTES = LLTokenizer("byte")
STRICT = json_compile_options(SchemaOptions(lenient=False))

# Schemas that try the rewrite's corners: open objects, free values, numbers, references,
# applicators whose branches must not be closed, and keywords under which narrowing widens.
CORNERS: list[dict] = [
    {"type": "object", "properties": {"a": {"type": "integer"}, "b": {}}, "required": ["a"]},
    {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a", "z"]},
    {"type": "object"},
    {"type": "array"},
    {"type": "number"},
    {"type": "object", "properties": {"x": {"type": "number", "minimum": 0}}},
    {
        "type": "object",
        "properties": {"kind": {"type": "string"}},
        "anyOf": [{"properties": {"p": {"type": "integer"}}, "required": ["p"]}, {}],
    },
    {"allOf": [{"properties": {"a": {"type": "integer"}}}, {"properties": {"b": {}}}]},
    {"not": {"type": "object", "properties": {"a": {"type": "integer"}}}},
    {
        "if": {"properties": {"a": {"const": 1}}},
        "then": {"required": ["b"]},
        "else": {"type": "object", "properties": {"a": {}}},
    },
    {
        "oneOf": [
            {"type": "object", "properties": {"a": {"type": "integer"}}},
            {"type": "object", "properties": {"b": {"type": "integer"}}},
        ]
    },
    {
        "oneOf": [
            {"type": "object", "properties": {"k": {"const": "x"}}, "required": ["k"]},
            {"type": "object", "properties": {"k": {"const": "y"}, "v": {}}, "required": ["k"]},
        ]
    },
    {
        "$defs": {"node": {"type": "object", "properties": {"next": {"$ref": "#/$defs/node"}}}},
        "$ref": "#/$defs/node",
    },
    {
        "definitions": {"base": {"type": "object", "properties": {"a": {"type": "integer"}}}},
        "type": "object",
        "allOf": [{"$ref": "#/definitions/base"}],
        "properties": {"b": {"type": "boolean"}},
    },
    {"type": "array", "contains": {"type": "object", "properties": {"a": {}}}, "maxContains": 1},
]


def grammar_accepts(grammar: str, value: object) -> bool:
    matcher = LLMatcher(BYTES, grammar, log_level=0)
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    return matcher.consume_tokens(list(text.encode())) and matcher.is_accepting()


def validator(schema: object) -> jsonschema.protocols.Validator:
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    return cls(schema)


@pytest.mark.parametrize("schema", CORNERS, ids=lambda s: json.dumps(s)[:40])
@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    value=st.recursive(
        st.none()
        | st.booleans()
        | st.integers()
        | st.floats(allow_nan=False, allow_infinity=False)  # JSON has neither
        | st.text(max_size=4),
        lambda inner: (
            st.lists(inner, max_size=3)
            | st.dictionaries(
                st.sampled_from(["a", "b", "k", "p", "v", "z", "next"]), inner, max_size=3
            )
        ),
        max_leaves=8,
    )
)
def test_arbitrary_values_the_tight_schema_accepts_the_original_accepts(schema, value):
    tight = tighten(schema).schema
    if validator(tight).is_valid(value):
        assert validator(schema).is_valid(value), (json.dumps(tight), value)
    grammar = _grammar(json.dumps(tight))
    if grammar is not None and grammar_accepts(grammar, value):
        assert validator(schema).is_valid(value), (json.dumps(tight), value)


@functools.cache
def _grammar(tight: str) -> str | None:
    """The tight schema compiled strictly, as llguidance enforces it (None if it cannot)."""
    grammar = LLMatcher.grammar_from_json_schema(tight, defaults=STRICT)
    return None if LLMatcher.validate_grammar_with_warnings(grammar)[0] else grammar


def test_the_rewrite_does_what_it_says():
    schema = {"type": "object", "properties": {"n": {"type": "integer"}, "free": {}}}
    tight = tighten(schema)
    assert tight.notes()[0] == "declared keys only" and tight.changed
    accepts = lambda v: grammar_accepts(  # noqa: E731
        LLMatcher.grammar_from_json_schema(tight.schema, defaults=STRICT), v
    )
    assert accepts({"n": MAX_SAFE_INTEGER, "free": {"a": [1, {"b": 2}]}})
    assert not accepts({"n": 1, "extra": 1})  # undeclared key
    assert not accepts({"n": MAX_SAFE_INTEGER + 1})  # beyond I-JSON
    assert not accepts({"free": {"a": {"b": {"c": {"d": 1}}}}})  # nested too deep
    assert validator(schema).is_valid({"n": 1, "extra": 1})  # the original allows them all
    # what it must not touch: explicit extra keys, `not`, an unchanged schema
    assert tighten({"type": "object", "additionalProperties": True}).closed_objects == 0
    assert tighten({"not": {"properties": {"a": {}}}}).closed_objects == 0
    assert tighten({"type": "string"}).notes() == []
    assert tighten({"type": "string"}).schema == {"type": "string"}


def test_numbers_keep_six_decimals_and_no_exponent():
    grammar = LLMatcher.grammar_from_json_schema(tighten({"type": "number"}).schema)
    assert grammar_accepts(grammar, 3.141593) and grammar_accepts(grammar, -12)
    assert not grammar_accepts(grammar, 3.1415926)
    assert not grammar_accepts(grammar, 1e300)


def test_disjoint_one_of_becomes_any_of_and_overlapping_is_made_disjoint():
    tagged = CORNERS[11]
    assert disjoint(tagged["oneOf"][0], tagged["oneOf"][1], tagged)
    assert "anyOf" in tighten(tagged).schema and tighten(tagged).exact_one_of == 1
    overlapping = CORNERS[10]  # {} matches both branches
    assert not disjoint(overlapping["oneOf"][0], overlapping["oneOf"][1], overlapping)
    tight = tighten(overlapping)
    # each branch now excludes the other: {} (both) is out, {"a": 1, "b": "x"} (one) in
    assert "oneOf" not in tight.schema and any("oneOf" in note for note in tight.notes())
    assert not jsonschema.Draft202012Validator(tight.schema).is_valid({})
    assert jsonschema.Draft202012Validator(tight.schema).is_valid({"a": 1, "b": "x"})
    assert disjoint({"type": "string"}, {"type": "integer"}, {})
    assert not disjoint({"type": "number"}, {"type": "integer"}, {})


def test_the_report_names_the_tight_defaults_and_allow_extra_restores_freedom():
    spec = json_schema_constraint({"type": "object", "properties": {"a": {"type": "string"}}})
    report = validate_constraint(spec)
    assert report.ok and report.tight[0] == "declared keys only"
    assert report.spec.compiled is not None and report.spec.compiled.notes[0] == report.tight[0]
    free = validate_constraint(json_schema_constraint(spec.source), check_language=False)
    assert free.ok
    from dataclasses import replace

    loose = validate_constraint(replace(spec, options=SchemaOptions(tight=False)))
    assert loose.ok and loose.tight == []
    assert grammar_accepts(loose.grammar, {"a": "x", "b": 1})
    assert not grammar_accepts(report.grammar, {"a": "x", "b": 1})


def test_a_rewrite_llguidance_cannot_compile_falls_back_to_the_schema_as_written():
    # llguidance refuses recursive references whose target has sibling keys; closing the
    # target adds one, so the tight schema fails where the original compiles.
    schema = {
        "definitions": {
            "node": {
                "type": "object",
                "properties": {"kind": {"type": "string"}},
                "anyOf": [{"properties": {"data": {"$ref": "#/definitions/node"}}}, {}],
            }
        },
        "$ref": "#/definitions/node",
    }
    report = validate_constraint(json_schema_constraint(schema))
    assert report.ok, report.summary()


def test_the_corpus_instances_agree():
    for case in CASES:
        tight = tighten(case.schema).schema
        grammar = LLMatcher.grammar_from_json_schema(tight, defaults=STRICT)
        for value in case.invalid:
            assert not grammar_accepts(grammar, value), (case.name, value)
        kept = sum(grammar_accepts(grammar, value) for value in case.valid)
        assert kept == len(case.valid), case.name  # written with declared keys only


def test_jsonschemabench_instances_the_tight_grammar_accepts_are_valid():
    """The instances of every third schema in the shared sets (all of them take minutes):
    if the tightened grammar accepts one, the dataset says it is valid (the schema as
    written accepts it); most valid ones stay accepted."""
    bench = dataset("jsonschemabench")
    valid = kept = checked = 0
    for path in sorted(bench.glob("*/*.json"))[::3]:
        doc = json.loads(path.read_text(encoding="utf-8"))
        if not doc.get("tests"):
            continue
        try:
            grammar = LLMatcher.grammar_from_json_schema(
                tighten(doc["schema"]).schema, defaults=STRICT
            )
        except ValueError:
            continue
        if LLMatcher.validate_grammar_with_warnings(grammar)[0]:
            continue  # not compiled strictly: llguidance's own limits, not the rewrite's
        for case in doc["tests"]:
            accepted = grammar_accepts(grammar, case["data"])
            assert case["valid"] or not accepted, (path.name, case["description"])
            valid += case["valid"]
            kept += accepted and case["valid"]
            checked += 1
    assert checked > 1000 and kept / valid > 0.9, (checked, kept, valid)
