"""Tool definitions: loading from lists and files, and clear errors for malformed ones."""

from __future__ import annotations

import json

import pytest

from engine.tools import ToolDefinitionError, load_tools, validate_tools
from engine.tools.definitions import arguments_grammar_schema
from engine.tools.grammar import resolve_choice
from engine.types import SchemaOptions


def tool(name: str = "get_weather", parameters: object = None, **extra: object) -> dict:
    function: dict = {"name": name, "description": "Weather for a city"}
    function["parameters"] = (
        parameters
        if parameters is not None
        else {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    )
    function.update(extra)
    return {"type": "function", "function": function}


def test_valid_tools_from_a_list_and_a_file(tmp_path) -> None:
    specs = validate_tools([tool(), tool("add", {"type": "object", "properties": {}})])
    assert [s.name for s in specs] == ["get_weather", "add"]
    assert specs[0].to_openai() == tool()
    path = tmp_path / "tools.json"
    path.write_text(json.dumps({"tools": [tool()]}))
    assert load_tools(path) == [tool()]
    path.write_text(json.dumps(tool()))  # a single tool object is a list of one
    assert len(load_tools(str(path))) == 1


def test_missing_parameters_mean_no_arguments() -> None:
    spec = validate_tools([{"type": "function", "function": {"name": "now"}}])[0]
    assert spec.parameters == {"type": "object", "properties": {}}


@pytest.mark.parametrize(
    ("tools", "message"),
    [
        ([], "the tool list is empty"),
        ("nope", "must be a list"),
        ([42], "tool 1: expected an object, got int"),
        ([{"type": "function"}], 'tool 1: missing "function"'),
        ([{"type": "retrieval", "function": {"name": "x"}}], '"type" must be "function"'),
        ([{"type": "function", "function": {"description": "x"}}], 'tool 1: missing "name"'),
        ([tool("get weather")], 'tool 1 ("get weather"): invalid name'),
        ([tool(), tool()], 'tool 2 ("get_weather"): duplicate name, already used by tool 1'),
        ([tool(parameters=[1])], 'tool 1 ("get_weather"): "parameters" must be a JSON schema'),
        ([tool(parameters={"type": "array"})], "must describe an object"),
        ([tool(description=3)], '"description" must be a string'),
        (
            [tool(), tool("bad", {"type": "object", "properties": {"a": {"type": "strng"}}})],
            'tool 2 ("bad"): "parameters" is not a usable JSON schema',
        ),
        (
            [tool("ref", {"type": "object", "properties": {"a": {"$ref": "#/$defs/missing"}}})],
            'tool 1 ("ref"): "parameters" is not a usable JSON schema',
        ),
    ],
)
def test_malformed_tools_name_the_tool_and_the_problem(tools: object, message: str) -> None:
    with pytest.raises(ToolDefinitionError) as info:
        validate_tools(tools)
    assert message in str(info.value)


def test_file_errors_name_the_file(tmp_path) -> None:
    missing = tmp_path / "missing.json"
    with pytest.raises(ToolDefinitionError, match="no such tools file"):
        load_tools(missing)
    broken = tmp_path / "broken.json"
    broken.write_text('[\n  {"type": "function",\n   "function": {"name": }}\n]')
    with pytest.raises(ToolDefinitionError) as info:
        load_tools(broken)
    assert str(broken) in str(info.value) and "line 3" in str(info.value)
    binary = tmp_path / "binary.json"
    binary.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(ToolDefinitionError, match="not a UTF-8 text file"):
        load_tools(binary)
    bad_tool = tmp_path / "bad.json"
    bad_tool.write_text(json.dumps([tool("a b")]))
    with pytest.raises(ToolDefinitionError, match=r"bad\.json: tool 1 \(\"a b\"\): invalid name"):
        load_tools(bad_tool)


def test_tool_choice_is_resolved_or_names_the_unknown_function() -> None:
    specs = validate_tools([tool(), tool("add")])
    assert resolve_choice("auto", specs).mode == "auto"
    assert resolve_choice("none", specs).mode == "none"
    assert resolve_choice({"type": "required"}, specs).mode == "required"
    named = resolve_choice({"type": "function", "function": {"name": "add"}}, specs)
    assert (named.mode, named.function) == ("function", "add")
    assert resolve_choice("get_weather", specs).function == "get_weather"
    with pytest.raises(ToolDefinitionError, match='names "launch", which is not one of the tools'):
        resolve_choice("launch", specs)
    with pytest.raises(ToolDefinitionError, match="expected"):
        resolve_choice({"type": "function"}, specs)


def test_tool_arguments_are_tight_objects_without_changing_allof() -> None:
    schema = {
        "type": "object",
        "properties": {
            "a": {"type": "object", "properties": {"b": {"type": "string"}}},
            "c": {"allOf": [{"type": "object", "properties": {"d": {}}}]},
        },
        "required": ["a"],
    }
    strict = arguments_grammar_schema(schema)
    assert strict["additionalProperties"] is False
    assert strict["properties"]["a"]["additionalProperties"] is False
    assert "additionalProperties" not in strict["properties"]["c"]["allOf"][0]
    assert "additionalProperties" not in schema  # the original is untouched
    open_ = {"type": "object", "properties": {}, "additionalProperties": {"type": "integer"}}
    assert arguments_grammar_schema(open_)["additionalProperties"]["type"] == "integer"
    loose = arguments_grammar_schema(schema, SchemaOptions(tight=False))
    assert "additionalProperties" not in loose and loose["x-guidance"]["lenient"] is True


def test_one_of_parameters_are_accepted_where_llguidance_compiles_them() -> None:
    shapes = {
        "type": "object",
        "properties": {
            "shape": {
                "oneOf": [
                    {
                        "type": "object",
                        "properties": {"kind": {"const": "circle"}, "r": {"type": "number"}},
                        "required": ["kind", "r"],
                    },
                    {
                        "type": "object",
                        "properties": {"kind": {"const": "square"}, "side": {"type": "number"}},
                        "required": ["kind", "side"],
                    },
                ]
            },
            "id": {"oneOf": [{"type": "string"}, {"type": "integer"}]},
        },
        "required": ["shape"],
    }
    (spec,) = validate_tools(
        [{"type": "function", "function": {"name": "area", "parameters": shapes}}]
    )
    assert spec.warnings == ()  # disjoint branches: enforced exactly, no warning
    overlapping = {
        "type": "object",
        "properties": {"n": {"oneOf": [{"type": "integer"}, {"type": "number"}]}},
    }
    tool = {"type": "function", "function": {"name": "count", "parameters": overlapping}}
    (spec,) = validate_tools([tool])
    assert any("oneOf" in w for w in spec.warnings)
    with pytest.raises(ToolDefinitionError, match="oneOf"):
        validate_tools([tool], options=SchemaOptions(lenient=False))
