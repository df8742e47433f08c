"""Which values of a reply Corral wrote (engine.constraints.filled): from where the closing
began, the values its text touched, as JSON pointers; and what the engine reports with
them, for a JSON reply and for a tool call's arguments."""

from __future__ import annotations

import json

import pytest

from engine.constraints.filled import filled_paths
from engine.constraints.sources import json_schema_constraint
from engine.types import ChatRequest, Ending, SamplingSettings

TEXT = '{"a": 1, "date": "2000-01-01", "items": ["x", "y"], "amount": 12}'


def at(marker: str) -> int:
    return TEXT.index(marker)


@pytest.mark.parametrize(
    ("offset", "paths"),
    [
        (len(TEXT), []),  # an empty ending: every value the model's
        (len(TEXT) - 1, ["/amount"]),  # ended where Corral began: 12 may have been 120
        (at(', "amount'), ["/amount"]),  # a whole value Corral wrote, key and all
        (at("]"), ["/items", "/amount"]),  # a list Corral closed may be cut short
        (at('y"'), ["/items/1", "/amount"]),  # a string the model began, Corral finished
        (at('"date'), ["/date", "/items", "/amount"]),
        (at("01-01"), ["/date", "/items", "/amount"]),
        (0, [""]),  # the whole reply
    ],
)
def test_the_values_the_closing_touched(offset: int, paths: list[str]) -> None:
    assert filled_paths(TEXT, offset) == paths


def test_an_object_corral_only_closed_names_nothing_and_keys_are_escaped() -> None:
    text = '{"a/b": {"~k": "v"}, "c": true}'
    assert filled_paths(text, len(text) - 1) == []  # the model wrote every value
    assert filled_paths(text, text.index('"v"') + 1) == ["/a~1b/~0k", "/c"]
    assert filled_paths(text, text.index("true") + 2) == ["/c"]


def test_text_that_is_not_json_has_no_paths() -> None:
    assert filled_paths("The answer is no.", 4) == []
    assert filled_paths("", 0) == []
    assert filled_paths('  "abc"', 4) == [""]  # leading blanks are skipped


USER = [{"role": "user", "content": "Give me JSON."}]


def test_a_reply_closed_to_fit_names_what_corral_wrote(tiny_engine) -> None:
    schema = {
        "type": "object",
        "properties": {"name": {"type": "string"}, "n": {"type": "integer"}},
        "required": ["name", "n"],
    }
    settings = SamplingSettings(temperature=0.0, max_tokens=24)
    result = tiny_engine.chat(
        ChatRequest(USER, settings, constraint=json_schema_constraint(schema), logprobs=0)
    )
    assert result.ending == Ending.FILLED and result.filled_paths
    data = json.loads(result.text)
    assert set(result.filled_paths) <= {"/name", "/n"} and "n" in data
    # the tokens Corral wrote are marked, and they are the reply's last ones
    assert result.logprobs is not None
    marked = [t.closing for t in result.logprobs]
    assert any(marked) and marked == sorted(marked)
    assert result.to_dict()["ending"] == "filled"
    assert result.to_dict()["filled_paths"] == result.filled_paths


def test_a_tool_call_corral_completed_points_into_its_arguments(tiny_engine) -> None:
    parameters = {
        "type": "object",
        "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
        "required": ["city", "days"],
    }
    tool = {"type": "function", "function": {"name": "weather", "parameters": parameters}}
    settings = SamplingSettings(temperature=0.0, max_tokens=40)
    result = tiny_engine.chat(ChatRequest(USER, settings, tools=[tool], tool_choice="required"))
    assert result.ending == Ending.FILLED and result.tool_calls
    assert result.filled_paths
    for path in result.filled_paths:
        assert path.startswith("/tool_calls/0")
        parts = path.split("/")[4:]  # under /tool_calls/0/arguments
        node = result.tool_calls[0].arguments
        for part in parts:
            node = node[part]


def test_a_reply_the_model_ended_has_nothing_filled(tiny_engine) -> None:
    settings = SamplingSettings(temperature=0.0, max_tokens=40)
    constraint = json_schema_constraint({"enum": ["alpha", "beta", "gamma"]})
    result = tiny_engine.chat(ChatRequest(USER, settings, constraint=constraint))
    assert result.ending == Ending.FINISHED and result.filled_paths == []
    cut = tiny_engine.chat(ChatRequest(USER, SamplingSettings(temperature=0.0, max_tokens=4)))
    assert cut.ending == Ending.CUT and cut.filled_paths == []
