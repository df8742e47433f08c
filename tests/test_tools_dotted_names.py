"""Tool names as MCP servers and BFCL write them (`instrument_price.get`): the name rule,
the grammar and the parser of every call format, a tools file and the engine (tiny model)
all handle dots; names outside the rule are refused with the rule in the message."""

from __future__ import annotations

import json

import jsonschema
import pytest
from tools_support import grammar_accepts, load_fixture_tokenizer

from engine.tools import ToolDefinitionError, load_tools, prepare_tool_request, validate_tools
from engine.types import ChatRequest, SamplingSettings

# A BFCL-style tool set: dotted names, nested objects, enums and arrays, every value bounded
# so that even the random tiny model finishes a call in a few dozen tokens.
PRICE = {
    "type": "function",
    "function": {
        "name": "instrument_price.get",
        "description": "Current price of a financial instrument",
        "parameters": {
            "type": "object",
            "properties": {
                "ticker": {"type": "string", "enum": ["AAPL", "MSFT"]},
                "exchange": {"type": "string", "enum": ["NASDAQ", "NYSE"]},
            },
            "required": ["ticker"],
        },
    },
}
ORDER = {
    "type": "function",
    "function": {
        "name": "orders.v2.place-limit",
        "description": "Place a limit order",
        "parameters": {
            "type": "object",
            "properties": {
                "side": {"type": "string", "enum": ["buy", "sell"]},
                "lots": {
                    "type": "array",
                    "items": {"type": "integer", "minimum": 1, "maximum": 9},
                    "maxItems": 2,
                },
                "limit": {
                    "type": "object",
                    "properties": {"price": {"type": "integer", "minimum": 1, "maximum": 99}},
                    "required": ["price"],
                },
            },
            "required": ["side", "limit"],
        },
    },
}
DOTTED = [PRICE, ORDER]
ASK = [{"role": "user", "content": "Price of AAPL?"}]

CALLS = {
    "chatml": '<tool_call>\n{"name": "instrument_price.get", "arguments": {"ticker": "AAPL"}}'
    "\n</tool_call>",
    "qwen2_5": '<tool_call>\n{"name": "instrument_price.get", "arguments": {"ticker": "AAPL"}}'
    "\n</tool_call>",
    "llama3_2": '{"name": "instrument_price.get", "parameters": {"ticker": "AAPL"}}',
    "mistral_v3": '[TOOL_CALLS] [{"name": "instrument_price.get", "arguments": '
    '{"ticker": "AAPL"}, "id": "a1B2c3D4e"}]',
}


def _tool(name: str) -> dict:
    return {"type": "function", "function": {"name": name, "parameters": {"type": "object"}}}


def test_the_name_rule_follows_the_mcp_spec() -> None:
    ok = ["instrument_price.get", "a", "x" * 128, "get-weather_v2.1", "A.B.C"]
    assert [s.name for s in validate_tools([_tool(n) for n in ok])] == ok
    for bad in ["x" * 129, "get weather", "fs/read", "ünïcode", "name\n", "a:b"]:
        with pytest.raises(ToolDefinitionError, match="invalid name; use 1-128 letters"):
            validate_tools([_tool(bad)])


@pytest.mark.parametrize("fixture", list(CALLS))
def test_every_call_format_accepts_and_parses_dotted_names(fixture, tmp_path) -> None:
    tok = load_fixture_tokenizer(fixture, tmp_path)
    for choice in ("auto", "required", "instrument_price.get"):
        plan = prepare_tool_request(tok, ASK, DOTTED, choice)
        assert grammar_accepts(tok._tokenizer, plan.constraint.source, CALLS[fixture])
        # A name that differs only around the dot is not a tool.
        wrong = CALLS[fixture].replace("instrument_price.get", "instrument_price_get")
        assert not grammar_accepts(tok._tokenizer, plan.constraint.source, wrong)
        _, calls = plan.parse(CALLS[fixture])
        assert [(c.name, c.arguments) for c in calls] == [
            ("instrument_price.get", {"ticker": "AAPL"})
        ]


def test_a_history_with_dotted_calls_renders_for_the_next_turn(tmp_path) -> None:
    tok = load_fixture_tokenizer("qwen2_5", tmp_path)
    history = ASK + [
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "instrument_price.get", "arguments": {"ticker": "AAPL"}},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "189.5 USD"},
    ]
    plan = prepare_tool_request(tok, history, DOTTED, "auto")
    assert '"name": "instrument_price.get"' in plan.prompt_text
    assert "189.5 USD" in plan.prompt_text


def test_dotted_tool_sets_from_a_file_produce_valid_calls(tiny_engine, tmp_path) -> None:
    """The held-out style check: a tools file with dotted names loads, and every call the
    engine makes (required, then each tool by name) names one of them and validates."""
    path = tmp_path / "bfcl_tools.json"
    path.write_text(json.dumps({"tools": DOTTED}))
    tools = load_tools(path)
    schemas = {t["function"]["name"]: t["function"]["parameters"] for t in tools}
    made = valid = 0
    for seed, choice in enumerate(["required", "required", *schemas]):
        result = tiny_engine.chat(
            ChatRequest(
                ASK,
                SamplingSettings(temperature=1.0, seed=seed, max_tokens=80),
                tools=tools,
                tool_choice=choice,
                parallel_tool_calls=False,
            )
        )
        assert len(result.tool_calls) == 1, result.text
        call = result.tool_calls[0]
        if choice != "required":
            assert call.name == choice
        made += 1
        jsonschema.validate(call.arguments, schemas[call.name])
        valid += 1
    assert made == valid == 4
