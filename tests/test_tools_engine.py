"""Tool requests through the engine on the tiny random model: whatever its random logits
prefer, the reply's calls parse and fit the tool's schema."""

from __future__ import annotations

import jsonschema

from engine.types import ChatRequest, SamplingSettings

# Every argument is bounded (a boolean, an integer in range, an enum), so even a random
# model finishes the call in a few dozen tokens.
LIGHT = {
    "type": "function",
    "function": {
        "name": "set_light",
        "description": "Switch a lamp",
        "parameters": {
            "type": "object",
            "properties": {
                "on": {"type": "boolean"},
                "level": {"type": "integer", "minimum": 0, "maximum": 10},
                "room": {"type": "string", "enum": ["kitchen", "hall"]},
            },
            "required": ["on", "room"],
        },
    },
}
FAN = {
    "type": "function",
    "function": {
        "name": "set_fan",
        "parameters": {
            "type": "object",
            "properties": {"speed": {"type": "integer", "minimum": 1, "maximum": 3}},
            "required": ["speed"],
        },
    },
}
ASK = [{"role": "user", "content": "Turn on the kitchen light."}]


def _chat(engine, tool_choice, seed: int, **extra):
    return engine.chat(
        ChatRequest(
            ASK,
            SamplingSettings(temperature=1.0, seed=seed, max_tokens=64),
            tools=[LIGHT, FAN],
            tool_choice=tool_choice,
            **extra,
        )
    )


def test_required_calls_through_the_engine_always_validate(tiny_engine) -> None:
    """A random model may chain parallel calls until max_tokens; every finished call still
    parses and validates, and an unfinished one stays in the text, not in the calls."""
    schemas = {t["function"]["name"]: t["function"]["parameters"] for t in (LIGHT, FAN)}
    for seed in range(4):
        result = _chat(tiny_engine, "required", seed)
        assert result.tool_calls, result.text
        assert result.constraint_name.startswith("tools: required")
        for call in result.tool_calls:
            jsonschema.validate(call.arguments, schemas[call.name])
        assert result.to_dict()["tool_calls"][0]["name"] in schemas
        if not result.incomplete:
            assert result.text == ""
        else:
            assert result.text.startswith("<tool_call>")


def test_named_choice_through_the_engine(tiny_engine) -> None:
    for seed in range(2):
        result = _chat(tiny_engine, {"type": "function", "function": {"name": "set_fan"}}, seed)
        assert not result.incomplete and result.text == ""
        assert [c.name for c in result.tool_calls] == ["set_fan"], result.text
        assert 1 <= result.tool_calls[0].arguments["speed"] <= 3


def test_none_through_the_engine_has_no_calls(tiny_engine) -> None:
    result = _chat(tiny_engine, "none", 0)
    assert result.tool_calls == [] and result.constraint_name is None


def test_a_reply_that_copies_the_tool_result_markup_shows_none_of_it(tiny_engine) -> None:
    """After a result (written `<tool_response>…</tool_response>` in the prompt), a model
    that copies the markup into its answer goes on, and no raw tag reaches the reply. The
    user's format below makes the tiny model write exactly that."""
    from engine.types import ConstraintSpec

    history = [
        *ASK,
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "set_fan", "arguments": '{"speed": 2}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "fan at 2"},
    ]
    # (a format may not start with "<": the reply could not be told from a call)
    echo = ConstraintSpec("regex", r"Result:\n<tool_response>\nfan at 2\n</tool_response>\nDone\.")
    result = tiny_engine.chat(
        ChatRequest(
            history,
            SamplingSettings(temperature=1.0, seed=0, max_tokens=40),
            tools=[LIGHT, FAN],
            tool_choice="auto",
            constraint=echo,
        )
    )
    assert result.error is None and result.tool_calls == []
    assert result.text == "Result:\n\nfan at 2\n\nDone."  # the tags left out, the rest kept
