"""The coverage bench section on a handful of real schemas (the tiny model): every key it
promises; rates that match a count made here, independently, with jsonschema; and the two
checks (as written, as enforced) telling apart what they should."""

from __future__ import annotations

import json
import shutil

import jsonschema
import pytest
from bench_keys import STABLE_KEYS
from shared_datasets import dataset

from benchmarks.coverage import (
    SAMPLE_SUBSETS,
    enforced_schema,
    first_mask_ms,
    is_valid,
    load_schema,
    request_for,
    run_coverage_bench,
)
from engine.constraints.sources import json_schema_constraint
from engine.constraints.tokenizer import ll_tokenizer
from engine.runtime.sampling import end_token_ids

MAX_TOKENS = 40
IGNORED = "JSON schema keywords not enforced (ignored): "


def written_valid(schema: object, text: str) -> bool:
    """Valid against `schema` as written, formats checked the RFC 3339 way: the count the
    bench's figure must match, made without the bench's code."""
    try:
        value = json.loads(text)
    except ValueError:
        return False
    cls = jsonschema.validators.validator_for(schema, jsonschema.Draft202012Validator)
    checker = jsonschema.Draft202012Validator.FORMAT_CHECKER
    return not list(cls(schema, format_checker=checker).iter_errors(value))


@pytest.fixture
def six_schemas(tmp_path, monkeypatch):
    bench = dataset("jsonschemabench")
    picked = []
    for subset in SAMPLE_SUBSETS:
        (tmp_path / "jsonschemabench" / subset).mkdir(parents=True)
        for path in sorted((bench / subset).glob("*.json"))[:2]:
            picked.append(shutil.copy(path, tmp_path / "jsonschemabench" / subset / path.name))
    monkeypatch.setenv("CORRAL_DATASETS", str(tmp_path))
    return sorted(picked)


def test_coverage_section_reports_rates_counted_as_written(tiny_engine, six_schemas):
    figures = run_coverage_bench(tiny_engine, max_tokens=MAX_TOKENS)
    assert STABLE_KEYS["coverage"] <= set(figures), figures
    assert figures["coverage_schemas"] == 6 and figures["coverage_max_tokens"] == MAX_TOKENS
    # the schemas that compile to a first mask, counted here: the sample is all of them
    lltok = tiny_engine.run(lambda lm: ll_tokenizer(lm.tokenizer, end_token_ids(lm.tokenizer)))
    compiled = [
        p
        for p in six_schemas
        if first_mask_ms(json_schema_constraint(load_schema(p)[0], p.name), lltok.result())
        is not None
    ]
    assert len(compiled) >= 4, "most plain real-world schemas compile"
    assert figures["schema_compile_rate"] == round(len(compiled) / 6, 4)
    assert figures["schema_compile_rate"] >= figures["schema_compile_rate_strict"] >= 0
    assert 0 < figures["first_mask_p50_ms"] <= figures["first_mask_p99_ms"]
    n = figures["coverage_sample"]
    assert n == len(compiled)
    # the same greedy replies, one at a time, checked here against the schemas as written
    complete = closed = flagged = by_model = steered = 0
    for path in compiled:
        result = tiny_engine.chat(request_for(path, MAX_TOKENS))
        schema = json.loads(path.read_text(encoding="utf-8"))["schema"]
        valid = not result.incomplete and written_valid(schema, result.text)
        complete += valid
        closed += result.closed_to_fit
        flagged += result.valid_as_written is False
        by_model += valid and not result.closed_to_fit
        steered += result.stats.steered_tokens > 0 or result.stats.loops_moved_on > 0
    assert figures["constrained_complete_rate"] == round(complete / n, 4)
    assert figures["closed_to_fit_rate"] == round(closed / n, 4)
    assert figures["flagged_invalid_rate"] == round(flagged / n, 4)
    assert figures["model_complete_rate"] == round(by_model / n, 4)
    assert figures["steered_rate"] == round(steered / n, 4)
    # the tiny model rambles: some replies are steered toward their end, and end valid
    assert steered > 0 and complete > 0
    assert figures["model_complete_rate"] <= figures["constrained_complete_rate"]
    # valid as written is valid as enforced (that schema only drops constraints)
    assert figures["constrained_complete_rate"] <= figures["constrained_valid_enforced_rate"] <= 1
    # the engine checked each complete reply as written itself, and agrees with this test
    assert figures["as_written_agreement"] == 1.0
    # times only ordered: how long they are depends on the machine and its load
    assert 0 < figures["as_written_p50_ms"] <= figures["as_written_max_ms"]


def test_a_reply_is_checked_against_the_schema_corral_enforced() -> None:
    schema = {
        "type": "object",
        "properties": {"not": {"not": {"const": 1}}, "b": {"oneOf": [{}, {"type": "string"}]}},
    }
    assert enforced_schema(schema, []) is schema
    relaxed = enforced_schema(
        schema,
        [
            'JSON schema keywords not enforced (ignored): "not"',
            "oneOf is enforced as anyOf here: a reply may match more than one of its branches",
        ],
    )
    # the keyword goes, a property that happens to be called "not" stays
    assert relaxed == {
        "type": "object",
        "properties": {"not": {}, "b": {"anyOf": [{}, {"type": "string"}]}},
    }


def test_unknown_formats_and_property_counts_go_only_where_warned() -> None:
    schema = {
        "type": "object",
        "properties": {
            "t": {"type": "string", "format": "topic"},
            "u": {"type": "string", "format": "uri"},
            "o": {"type": "object", "minProperties": 2},
        },
    }
    warnings = [
        "Unknown format: topic (2 times) (not enforced)",
        'min/maxProperties only supported when all keys listed in "properties" are required',
    ]
    assert enforced_schema(schema, warnings) == {
        "type": "object",
        "properties": {
            "t": {"type": "string"},
            "u": {"type": "string", "format": "uri"},
            "o": {"type": "object"},
        },
    }


def test_valid_only_as_enforced_is_not_valid_as_written() -> None:
    """The figures part exactly where Corral relaxed the schema: `not`, an overlapping
    `oneOf` matched twice, an unknown format."""
    cases = [
        ({"type": "integer", "not": {"const": 3}}, "3", IGNORED + '"not"'),
        ({"oneOf": [{"type": "integer"}, {"minimum": 0}]}, "5", "oneOf is enforced as anyOf"),
        (
            {"type": "string", "format": "uri-reference"},
            '"a b"',
            "Unknown format: uri-reference (not enforced)",
        ),
    ]
    for schema, text, warning in cases:
        assert not is_valid(schema, text), schema
        assert is_valid(enforced_schema(schema, [warning]), text), schema
    assert not is_valid({"type": "integer"}, "{"), "text that is not JSON is not valid"


@pytest.mark.parametrize(
    ("fmt", "good", "bad"),
    [
        ("date-time", "2024-01-01T12:30:00Z", "2024-01-01T12:30:60Z"),  # no leap second here
        ("time", "12:30:00+01:00", "12:30"),  # RFC 3339 times carry a zone (draft 3's did not)
        ("email", "a@b", "ab"),
        ("uri", "https://example.com/x", "example com"),
        ("date", "2024-02-29", "2023-02-29"),
        ("hostname", "a-b.example", "-ab"),
        ("uuid", "123e4567-e89b-12d3-a456-426614174000", "123e4567"),
    ],
)
def test_formats_are_checked_whatever_the_draft(fmt, good, bad) -> None:
    for draft in ("http://json-schema.org/draft-04/schema#", None):
        schema = {"type": "string", "format": fmt}
        if draft:
            schema["$schema"] = draft
        assert is_valid(schema, json.dumps(good)), (fmt, draft)
        assert not is_valid(schema, json.dumps(bad)), (fmt, draft)
