"""Key patterns made disjoint (tight_keys.py): the rewrite keeps the language exactly (an
object is valid under it exactly when it is under the schema as written, checked with
Hypothesis over objects whose keys match one pattern, the other, both or none), and
llguidance compiles what it refused as written ("patternProperty regexes ... are not
disjoint")."""

from __future__ import annotations

import json

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from llguidance import LLMatcher

from engine.constraints.tight import tighten
from engine.constraints.tight_keys import disjoint_key_patterns

A_INT = {"patternProperties": {"a": {"type": "integer"}}}
B_SMALL = {"patternProperties": {"b": {"type": "integer", "maximum": 5}}}
SCHEMAS = {
    "allOf": {"type": "object", "allOf": [A_INT, B_SMALL]},
    "own and allOf": {
        "type": "object",
        "patternProperties": {"^c": {"type": "integer", "minimum": 0}},
        "allOf": [A_INT, B_SMALL],
    },
    "anyOf beside": {
        "type": "object",
        "allOf": [A_INT],
        "anyOf": [B_SMALL, {"required": ["x"]}],
    },
    "oneOf beside": {
        "type": "object",
        "allOf": [A_INT],
        "oneOf": [B_SMALL, {"required": ["ab"]}],
    },
    "three": {
        "type": "object",
        "allOf": [A_INT, B_SMALL, {"patternProperties": {"c$": {"minimum": 2}}}],
    },
}
KEYS = st.sampled_from(["a", "b", "ab", "ba", "c", "bc", "cab", "x", "xyz", "abc"])
VALUES = st.one_of(st.integers(-3, 9), st.text(max_size=2), st.none())
OBJECTS = st.dictionaries(KEYS, VALUES, max_size=4)


def valid(schema: dict, value: object) -> bool:
    return jsonschema.Draft202012Validator(schema).is_valid(value)


@pytest.mark.parametrize("name", SCHEMAS)
def test_disjoint_key_patterns_keep_the_language(name):
    schema = SCHEMAS[name]
    rewritten, notes = disjoint_key_patterns(schema)
    assert notes and rewritten != schema

    @settings(
        max_examples=150, deadline=None, database=None, suppress_health_check=list(HealthCheck)
    )
    @given(OBJECTS)
    def same(value: dict) -> None:
        assert valid(rewritten, value) == valid(schema, value), (json.dumps(rewritten), value)

    same()


@pytest.mark.parametrize("name", SCHEMAS)
def test_llguidance_compiles_the_disjoint_patterns(name):
    schema = SCHEMAS[name]
    as_written = LLMatcher.grammar_from_json_schema(schema)
    assert LLMatcher.validate_grammar_with_warnings(as_written)[0]  # refused: not disjoint
    tight = tighten(schema)
    assert any("key patterns" in note for note in tight.enforced)
    grammar = LLMatcher.grammar_from_json_schema(tight.schema)
    is_error, messages = LLMatcher.validate_grammar_with_warnings(grammar)
    assert not is_error, messages


def test_what_cannot_be_shown_exact_is_left_as_written():
    # an additionalProperties in a member: moving its neighbours' patterns would change it
    owned = {
        "allOf": [A_INT, {"patternProperties": {"b": {}}, "additionalProperties": False}],
    }
    assert disjoint_key_patterns(owned) == (owned, [])
    # a pattern greenery does not read the way Python does (\\w is Unicode-wide)
    unicode = {"allOf": [A_INT, {"patternProperties": {"\\w+": {"type": "string"}}}]}
    assert disjoint_key_patterns(unicode) == (unicode, [])
    # patterns no key can match both of need nothing
    apart = {"allOf": [{"patternProperties": {"^a": {}}}, {"patternProperties": {"^b": {}}}]}
    assert disjoint_key_patterns(apart) == (apart, [])
