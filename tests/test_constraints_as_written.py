"""Every constrained reply is checked against the schema the user wrote: a reply that fits
what Corral enforced but not what the user wrote says so, with the keyword and the place."""

from __future__ import annotations

import json

from engine.constraints.as_written import (
    as_written_line,
    check_json_text,
    check_reply,
    check_tool_arguments,
)
from engine.constraints.sources import json_schema_constraint
from engine.tools.definitions import ToolSpec
from engine.types import ChatRequest, SamplingSettings, ToolCall

GREEDY = SamplingSettings(temperature=0.0, max_tokens=60)
USER = [{"role": "user", "content": "Fill in the form."}]


def text(schema: dict) -> str:
    return json.dumps(schema)


def test_a_valid_reply_is_valid_as_written():
    schema = {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}
    check = check_json_text(text(schema), '{"a": "x"}')
    assert check.valid and check.to_dict() == {"valid": True}


def test_dependent_required_failure_names_the_keyword():
    schema = {
        "type": "object",
        "properties": {"a": {"type": "string"}},
        "required": ["a"],
        "dependentRequired": {"a": ["b"]},
    }
    check = check_json_text(text(schema), '{"a": "x"}')
    assert not check.valid
    assert check.keyword == "dependentRequired"
    assert "'b'" in check.message


def test_formats_are_checked():
    schema = {"type": "object", "properties": {"mail": {"type": "string", "format": "email"}}}
    assert check_json_text(text(schema), '{"mail": "a@b.io"}').valid
    check = check_json_text(text(schema), '{"mail": "nobody"}')
    assert (check.valid, check.keyword, check.path) == (False, "format", "/mail")


def test_an_overlapping_one_of_fails_where_both_branches_match():
    schema = {"oneOf": [{"type": "integer"}, {"type": "number", "minimum": 0}]}
    assert check_json_text(text(schema), "-3").valid  # only the first branch
    check = check_json_text(text(schema), "3")  # both: oneOf fails as written
    assert (check.valid, check.keyword) == (False, "oneOf")


def test_the_path_points_inside_the_reply():
    schema = {"type": "array", "items": {"type": "object", "properties": {"n": {"maximum": 3}}}}
    check = check_json_text(text(schema), '[{"n": 1}, {"n": 9}]')
    assert (check.keyword, check.path) == ("maximum", "/1/n")
    assert "/1/n" in as_written_line(check)


def test_text_that_is_not_json():
    check = check_json_text(text({"type": "object"}), '{"a": ')
    assert (check.valid, check.keyword) == (False, "json")


def test_tool_arguments_are_checked_against_their_tool():
    tool = ToolSpec(
        "light.set",
        "",
        {"type": "object", "properties": {"on": {"type": "boolean"}}, "required": ["on"]},
    )
    assert check_tool_arguments([tool], [ToolCall("1", "light.set", {"on": True})]).valid
    bad = check_tool_arguments([tool], [ToolCall("1", "light.set", {})])
    assert (bad.valid, bad.keyword, bad.path) == (False, "required", "/calls/0/arguments")
    unknown = check_tool_arguments([tool], [ToolCall("2", "fan", {})])
    assert (unknown.valid, unknown.keyword) == (False, "name")


def test_grammars_and_free_text_are_not_rechecked():
    assert check_reply("lark", 'start: "a"', "a") is None
    assert check_reply(None, "", "hello") is None
    assert check_reply("any_json", "", "[1]") is not None


# The engine: each reply carries the verdict; llguidance ignores `not` in lenient mode, so
# a schema whose `not` rejects everything Corral can generate gives a reply that fits the
# enforced grammar and not the schema as written.
UNSATISFIED = {
    "type": "object",
    "properties": {"a": {"type": "string", "maxLength": 4, "not": {"pattern": "^"}}},
    "required": ["a"],
    "additionalProperties": False,
}
PLAIN = {
    "type": "object",
    "properties": {"a": {"type": "integer", "minimum": 0, "maximum": 9}},
    "required": ["a"],
    "additionalProperties": False,
}


def test_engine_reply_valid_as_written(tiny_engine):
    result = tiny_engine.chat(ChatRequest(USER, GREEDY, json_schema_constraint(PLAIN, "plain")))
    assert result.error is None and not result.incomplete
    assert result.valid_as_written is True
    assert result.to_dict()["valid_as_written"] is True
    assert result.stats.as_written_ms > 0


def test_engine_reply_invalid_as_written_says_where(tiny_engine):
    result = tiny_engine.chat(ChatRequest(USER, GREEDY, json_schema_constraint(UNSATISFIED)))
    assert result.error is None and not result.incomplete, result.text
    assert len(json.loads(result.text)["a"]) <= 4  # it fits what was enforced
    assert result.valid_as_written is False
    data = result.to_dict()
    assert data["valid_as_written"] is False
    assert data["invalid_as_written"]["keyword"] == "not"
    assert any("not" in w for w in result.warnings)  # the compile warning said so too


def test_engine_free_text_has_no_verdict(tiny_engine):
    result = tiny_engine.chat(ChatRequest(USER, SamplingSettings(temperature=0, max_tokens=4)))
    assert result.valid_as_written is None
    assert result.to_dict()["valid_as_written"] is None


def test_every_format_corral_enforces_is_really_checked():
    """Without jsonschema's format extras, `date-time`, `uri` and `hostname` pass anything:
    the install must bring them (pyproject's jsonschema[format-nongpl])."""
    for fmt, bad in [
        ("date-time", "yesterday"),
        ("uri", "not a uri"),
        ("hostname", "-bad-.host"),
        ("email", "nobody"),
        ("ipv4", "300.1.1.1"),
        ("uuid", "123"),
        ("date", "2026-13-01"),
    ]:
        schema = {"type": "string", "format": fmt}
        assert not check_json_text(text(schema), json.dumps(bad)).valid, fmt
