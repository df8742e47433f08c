"""Arguments in syntaxes that are not compact JSON (XML parameters, Gemma 4, pythonic calls,
Command R+'s indented JSON) are held to every part of the schema, in every layout a family's
templates write (`layouts`): nested objects and arrays, booleans, nulls, numeric enums,
array and string bounds; what the grammar accepts parses back to arguments that validate,
and what breaks the schema is refused."""

from __future__ import annotations

from typing import Any

import jsonschema
import pytest
from tools_support import grammar_accepts, load_fixture_tokenizer

from engine.tools.definitions import validate_tools
from engine.tools.formats.command_r_plus import CommandRPlusFormat
from engine.tools.formats.gemma4 import Gemma4Format
from engine.tools.formats.pythonic import OlmoFormat, PythonicFormat
from engine.tools.formats.xml_params import GlmFormat, MiniMaxFormat, QwenXmlFormat
from engine.tools.grammar import ToolChoice, tool_grammar

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "query": {"type": "string", "maxLength": 20},
        "limit": {"type": "integer", "enum": [5, 10, 20]},
        "exact": {"type": "boolean"},
        "tags": {"type": "array", "items": {"type": "string", "maxLength": 8}, "maxItems": 3},
        "where": {
            "type": "object",
            "properties": {"lat": {"type": "number"}, "near": {"type": ["string", "null"]}},
            "required": ["lat"],
        },
    },
    "required": ["query", "limit"],
}
TOOL = {"type": "function", "function": {"name": "search", "parameters": SCHEMA}}
GOOD: list[dict[str, Any]] = [
    {"query": "cafes in Oslo", "limit": 10},
    {"query": "x", "limit": 5, "exact": False, "tags": ["a", "b"]},
    {"query": "line\nbreak", "limit": 20, "where": {"lat": 59.9, "near": None}},
    {"query": "q", "limit": 5, "tags": [], "where": {"lat": -3, "near": "port"}},
]
BAD: list[dict[str, Any]] = [
    {"query": "q", "limit": 7},  # not in the enum
    {"query": "q", "limit": 5, "tags": ["a", "b", "c", "d"]},  # too many items
    {"query": "q", "limit": 5, "where": {"near": "port"}},  # nested required missing
    {"query": "q", "limit": 5, "where": {"lat": 1, "far": 2}},  # nested unknown key
    {"query": "q", "limit": 5, "exact": "yes"},  # a string for a boolean
    {"query": "a string much longer than twenty", "limit": 5},  # too long
    {"limit": 5},  # required missing
]
FORMATS = [
    QwenXmlFormat,
    MiniMaxFormat,
    GlmFormat,
    Gemma4Format,
    PythonicFormat,
    OlmoFormat,
    CommandRPlusFormat,
]
# (format, layout index) for every layout of every format above
LAYOUTS = [(cls, i) for cls in FORMATS for i in range(len(cls(None, True).layouts()))]


@pytest.fixture(scope="module")
def tok(tmp_path_factory: pytest.TempPathFactory) -> Any:
    return load_fixture_tokenizer("chatml", tmp_path_factory.mktemp("tok"))


@pytest.mark.parametrize(("cls", "layout"), LAYOUTS, ids=lambda v: getattr(v, "name", str(v)))
def test_values_follow_their_subschemas_in_the_syntax(tok: Any, cls: type, layout: int) -> None:
    fmt = cls(tok, True)
    for key, value in fmt.layouts()[layout].items():
        if not key.startswith("_"):
            setattr(fmt, key, value)
    specs = validate_tools([TOOL])
    grammar = tool_grammar(fmt, specs, ToolChoice("required"))
    schemas = {"search": SCHEMA}
    for arguments in GOOD:
        if "\n" in arguments["query"] and "'" in fmt.calls_as_text([("search", {"query": ""})]):
            continue  # OLMo's template writes strings raw in single quotes: no newline there
        text = fmt.calls_as_text([("search", arguments)])
        assert grammar_accepts(tok._tokenizer, grammar, text), text
        _, calls = fmt.parse(text, schemas)
        assert calls == [("search", arguments)], text
        jsonschema.validate(calls[0][1], SCHEMA)
    for arguments in BAD:
        text = fmt.calls_as_text([("search", arguments)])
        assert not grammar_accepts(tok._tokenizer, grammar, text), text
