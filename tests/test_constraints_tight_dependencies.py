"""Dependencies enforced in every form, for every key, required or not (issue 38).

For each shape: llguidance's "ignored" warning is gone; an object without the trigger, and
one with the trigger and what it brings, stay valid under the tight schema; the object the
issue saw (the trigger without what it brings) is refused by the tight schema and by the
grammar llguidance compiles; instances hypothesis-jsonschema generates from the tight
schema validate as written. A reply cut off right after the trigger is ended with what it
brings, and the tiny model's replies validate with jsonschema.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, assume, given, settings
from jsonschema_strategies import from_schema, inlined
from llguidance import LLMatcher, LLTokenizer
from tight_oracle import validator

from engine.constraints.closing import ClosingPolicy, Nesting
from engine.constraints.sources import json_schema_constraint
from engine.constraints.tight import tighten
from engine.constraints.tight_dependencies import MAX_BRANCHES
from engine.constraints.validate import compile_constraint, validate_constraint
from engine.types import ChatRequest, SamplingSettings

IGNORED = "not enforced (ignored)"
DRAFT4 = "http://json-schema.org/draft-04/schema#"
DRAFT7 = "http://json-schema.org/draft-07/schema#"
ADDRESS_KEYS = ("post_office_box", "extended_address", "street_address", "locality")
ADDRESS_KEYS += ("region", "postal_code", "country_name")
# The issue's first case: draft 4's array form, on a key no one requires.
ADDRESS = {
    "$schema": DRAFT4,
    "type": "object",
    "properties": {k: {"type": "string"} for k in ADDRESS_KEYS},
    "required": ["locality", "region", "country_name"],
    "dependencies": {
        "post_office_box": ["street_address"],
        "extended_address": ["street_address"],
    },
}
# The second: `oneOf` branches selected through a schema dependency on `type`.
PRICE = {
    "$schema": DRAFT7,
    "type": "object",
    "properties": {
        "type": {"type": "string", "enum": ["free", "paid"]},
        "valueInCents": {"type": "integer"},
        "currency": {"type": "string"},
    },
    "required": ["currency"],
    "dependencies": {
        "type": {
            "oneOf": [
                {"properties": {"type": {"const": "free"}, "valueInCents": {"const": 0}}},
                {
                    "properties": {
                        "type": {"const": "paid"},
                        "valueInCents": {"minimum": 1, "maximum": 100000},
                    },
                    "required": ["valueInCents"],
                },
            ]
        }
    },
}
PLACE = {"locality": "L", "region": "R", "country_name": "C"}

# name: (schema, values it accepts, values it rejects that it would accept without the
# dependency)
SHAPES: dict[str, tuple[dict, list, list]] = {
    "array form on an optional key": (
        ADDRESS,
        [PLACE, {**PLACE, "post_office_box": "1", "street_address": "S"}],
        [{**PLACE, "post_office_box": "street_address"}],
    ),
    "oneOf through a schema dependency": (
        PRICE,
        [
            {"currency": "EUR"},
            {"currency": "EUR", "type": "free", "valueInCents": 0},
            {"currency": "EUR", "type": "paid", "valueInCents": 250},
        ],
        [
            {"currency": "EUR", "type": "free", "valueInCents": 250},
            {"currency": "EUR", "type": "paid"},
        ],
    ),
    "dependentRequired": (
        {
            "type": "object",
            "properties": {"card": {"type": "string"}, "billing": {"type": "string"}},
            "dependentRequired": {"card": ["billing"]},
        },
        [{}, {"billing": "b"}, {"card": "c", "billing": "b"}],
        [{"card": "c"}],
    ),
    "dependentSchemas": (
        {
            "type": "object",
            "properties": {"card": {"type": "string"}, "cvv": {"type": "integer"}},
            "dependentSchemas": {"card": {"required": ["cvv"]}},
        },
        [{}, {"cvv": 1}, {"card": "c", "cvv": 123}],
        [{"card": "c"}],
    ),
    "nested, with a chain of required triggers": (
        {
            "type": "object",
            "properties": {
                "inner": {
                    "type": "object",
                    "properties": {"a": {}, "b": {}, "c": {}, "d": {"type": "integer"}},
                    "required": ["a"],
                    "dependentRequired": {"a": ["b"], "b": ["c"], "d": ["a"]},
                    "dependentSchemas": {"c": {"properties": {"d": {"minimum": 5}}}},
                }
            },
            "required": ["inner"],
        },
        [{"inner": {"a": 1, "b": 2, "c": 3}}, {"inner": {"a": 1, "b": 2, "c": 3, "d": 7}}],
        [{"inner": {"a": 1, "b": 2}}, {"inner": {"a": 1, "b": 2, "c": 3, "d": 1}}],
    ),
    "an open object": (
        {
            "$schema": DRAFT7,
            "type": "object",
            "properties": {"x": {"type": "integer"}},
            "additionalProperties": {"type": "integer"},
            "dependencies": {"x": ["y"]},
        },
        [{}, {"z": 1}, {"x": 1, "y": 2}],
        [{"x": 1}, {"x": 1, "z": 2}],
    ),
}


def accepts(schema: object, value: object) -> bool:
    return bool(validator(schema).is_valid(value))


def grammar_accepts(schema: object, value: object) -> bool:
    report = validate_constraint(json_schema_constraint(schema))
    assert report.ok and report.grammar is not None, report.errors
    matcher = LLMatcher(LLTokenizer("byte"), report.grammar, log_level=0)
    text = json.dumps(value, separators=(",", ":")).encode()
    return bool(matcher.consume_tokens(list(text)) and matcher.is_accepting())


@pytest.mark.parametrize("name", SHAPES)
def test_the_dependency_is_enforced_and_its_warning_is_gone(name):
    schema, good, bad = SHAPES[name]
    tight = tighten(schema)
    report = validate_constraint(json_schema_constraint(schema))
    assert not [w for w in report.warnings if IGNORED in str(w)], report.warnings
    assert any("enforced" in n or "required" in n for n in tight.notes()), tight.notes()
    for value in good:
        assert accepts(schema, value) and accepts(tight.schema, value), value
    for value in bad:
        assert not accepts(schema, value), value
        assert not accepts(tight.schema, value), (value, json.dumps(tight.schema))
        assert not grammar_accepts(schema, value), value


@pytest.mark.parametrize("name", SHAPES)
def test_instances_generated_from_the_tight_schema_validate_as_written(name):
    schema = SHAPES[name][0]
    tight = tighten(schema).schema

    @settings(
        max_examples=30, deadline=None, database=None, suppress_health_check=list(HealthCheck)
    )
    @given(from_schema(inlined(tight)))
    def check(value: object) -> None:
        assume(accepts(tight, value))
        assert accepts(schema, value), (json.dumps(tight), value)

    check()


def test_a_dependency_that_would_multiply_past_the_bound_is_left_flagged():
    """Each optional dependency doubles llguidance's branches: past MAX_BRANCHES the rest
    stay as written (and warned about), the first ones are enforced."""
    count = 8
    schema = {
        "$schema": DRAFT7,
        "type": "object",
        "properties": {f"k{i}": {"type": "string"} for i in range(2 * count)},
        "dependencies": {f"k{i}": [f"k{i + count}"] for i in range(count)},
    }
    tight = tighten(schema)
    left = tight.schema.get("dependencies", {})
    enforced = count - len(left)
    assert 2**enforced <= MAX_BRANCHES < 2 ** (enforced + 1) and left
    report = validate_constraint(json_schema_constraint(schema))
    assert report.ok and any(IGNORED in str(w) for w in report.warnings)
    assert not grammar_accepts(schema, {"k0": "x"})  # one the rewrite enforced
    # one left as written: llguidance lets it through, the check as written flags it
    assert grammar_accepts(schema, {"k7": "x"}) and not accepts(schema, {"k7": "x"})


@pytest.fixture(scope="module")
def lltok(tiny_model):
    from engine.constraints.tokenizer import ll_tokenizer

    return ll_tokenizer(tiny_model[1], (0, 2))


@pytest.mark.parametrize(
    ("schema", "prefix"),
    [
        (ADDRESS, '{"post_office_box":"street_address"'),
        (PRICE, '{"type":"free","valueInCents":'),
        (PRICE, '{"type":"paid"'),
    ],
)
def test_a_reply_cut_off_after_the_trigger_ends_with_what_it_brings(lltok, schema, prefix):
    spec = compile_constraint(json_schema_constraint(schema))
    assert spec.compiled is not None
    matcher = spec.compiled.matcher(lltok)
    assert matcher.consume_tokens(lltok.tokenize_str(prefix))
    nesting = Nesting()
    nesting.feed(prefix.encode())
    ending = ClosingPolicy.for_tokenizer(lltok).ending(matcher, 120, nesting)
    assert ending is not None
    value = json.loads(prefix + lltok.decode_str(ending))
    assert accepts(schema, value), value


@pytest.mark.parametrize("schema", [ADDRESS, PRICE], ids=["address", "price"])
def test_the_tiny_model_s_replies_validate_as_written(tiny_engine, schema):
    user = [{"role": "user", "content": "Write one example JSON object."}]
    constraint = json_schema_constraint(schema)
    handles = [
        tiny_engine.submit(
            ChatRequest(
                user,
                SamplingSettings(temperature=1.0, seed=seed, max_tokens=60),
                constraint=constraint,
            )
        )
        for seed in range(6)
    ]
    for handle in handles:
        result = handle.result()
        assert not result.error and not result.incomplete, result
        assert accepts(schema, json.loads(result.text)), result.text
        assert result.valid_as_written, result.text
