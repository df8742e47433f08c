"""Tool calling with the real default model through the Engine (SmolLM2-135M: a ChatML
template without tool support, so the Hermes fallback): every call parses and validates.

Everything runs through `Engine.chat`: the overlapped constrained loop, forced tokens and
the prefix cache (the tool sets share their prompt's head, so later cases reuse it).
"""

from __future__ import annotations

import json
import time

import jsonschema
import pytest
from schema_corpus import CASES
from shared_datasets import dataset
from tools_support import GLAIVE, glaive_cases

from engine.engine import Engine
from engine.tools.builtins import builtin_tools, run_builtin
from engine.types import ChatRequest, ChatResult, SamplingSettings, StopReason

pytestmark = pytest.mark.slow

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather in a city",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "The city name"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            },
            "required": ["city"],
        },
    },
}
TIME = {
    "type": "function",
    "function": {
        "name": "get_time",
        "description": "Get the current time in a time zone",
        "parameters": {
            "type": "object",
            "properties": {"zone": {"type": "string", "description": "An IANA time zone"}},
            "required": ["zone"],
        },
    },
}


def _ask(
    engine: Engine,
    messages: list[dict],
    tools: list[dict],
    choice: str | dict,
    max_tokens: int,
    parallel: bool = True,
) -> ChatResult:
    result = engine.chat(
        ChatRequest(
            messages,
            SamplingSettings(temperature=0.0, max_tokens=max_tokens),
            tools=tools,
            tool_choice=choice,
            parallel_tool_calls=parallel,
        )
    )
    assert result.error is None, result.error
    return result


def _complete(result: ChatResult) -> bool:
    return result.stop_reason == StopReason.EOS and not result.incomplete


def _schema(tools: list[dict], name: str) -> dict:
    return next(t["function"]["parameters"] for t in tools if t["function"]["name"] == name)


@pytest.mark.timeout(1800)  # a few minutes on an idle 2-core CPU; far longer when shared
def test_required_calls_validate_over_glaive_tool_sets(default_engine: Engine) -> None:
    """20 tool sets from Glaiveai2K, tool_choice=required, one call per reply so each fits
    a small token budget: every reply completes, and its call names a tool of the set and
    validates against that tool's schema with jsonschema. 100%, no exceptions."""
    glaive = dataset(*GLAIVE)
    failures = []
    started = time.perf_counter()
    cases = glaive_cases(glaive, 20)
    for case in cases:
        result = _ask(
            default_engine,
            [{"role": "user", "content": case.request}],
            case.tools,
            "required",
            max_tokens=96,
            parallel=False,
        )
        calls = result.tool_calls
        problem = None
        if not _complete(result):
            problem = f"did not complete ({result.stop_reason.value})"
        elif len(calls) != 1 or result.text:
            problem = f"expected one call and no text, got {len(calls)} calls, {result.text!r}"
        else:
            try:
                jsonschema.validate(calls[0].arguments, _schema(case.tools, calls[0].name))
            except (StopIteration, jsonschema.ValidationError) as exc:
                problem = f"invalid call {calls[0].name}: {exc}"
        if problem:
            failures.append(f"{case.target}: {problem}")
    elapsed = time.perf_counter() - started
    assert not failures, f"{len(failures)}/{len(cases)} failed:\n" + "\n".join(failures)
    print(f"20 Glaive tool sets: 100% valid calls in {elapsed:.0f} s")


# Requests for the suite's own tool schemas (tests/schema_corpus.py), stating the values.
SUITE_REQUESTS = {
    "set_thermostat": "Set the living room thermostat to 21 degrees, eco mode.",
    "lookup_order": "Look up the status of order AB-1234.",
    "calculate_area": "What is the area of a circle with radius 3?",
    "send_payment": "Send 12 EUR to alice.",
}


def test_required_calls_validate_over_the_suites_tool_sets(default_engine: Engine) -> None:
    """The Glaive check on schemas written in the suite (no dataset needed): with
    tool_choice=required and one call per reply, every reply completes with one call that
    names a tool of its set and validates against that tool's schema."""
    corpus = {case.name: case.schema for case in CASES}
    distractor = {"type": "function", "function": {"name": "search_books"}}
    distractor["function"]["parameters"] = corpus["search_books"]
    failures = []
    for name, request in SUITE_REQUESTS.items():
        target = {"type": "function", "function": {"name": name, "parameters": corpus[name]}}
        tools = [distractor, target]
        messages = [{"role": "user", "content": request}]
        result = _ask(default_engine, messages, tools, "required", max_tokens=96, parallel=False)
        calls = result.tool_calls
        if not _complete(result) or len(calls) != 1 or result.text:
            failures.append(f"{name}: {result.stop_reason.value}, {calls}, {result.text!r}")
            continue
        try:
            jsonschema.validate(calls[0].arguments, _schema(tools, calls[0].name))
        except (StopIteration, jsonschema.ValidationError) as exc:
            failures.append(f"{name}: invalid call {calls[0].name}: {exc}")
    assert not failures, "\n".join(failures)


def test_named_choice_calls_that_function(default_engine: Engine) -> None:
    messages = [{"role": "user", "content": "What's the weather like in Paris?"}]
    result = _ask(default_engine, messages, [WEATHER, TIME], "get_time", max_tokens=48)
    assert _complete(result), result
    assert [c.name for c in result.tool_calls] == ["get_time"] and result.text == ""
    jsonschema.validate(result.tool_calls[0].arguments, TIME["function"]["parameters"])


def test_none_never_calls(default_engine: Engine) -> None:
    messages = [{"role": "user", "content": "What's the weather like in Paris?"}]
    result = _ask(default_engine, messages, [WEATHER, TIME], "none", max_tokens=24)
    assert result.tool_calls == [] and "<tool_call>" not in result.text
    assert result.constraint_name is None


def test_a_conversation_with_tool_results_continues(default_engine: Engine) -> None:
    """Call the built-in calculator, run it, send the result back as a tool message: the
    model goes on and answers in text with the result."""
    tools = builtin_tools(["calculator"])
    messages: list[dict] = [{"role": "user", "content": "Calculate 12 * 7."}]
    result = _ask(default_engine, messages, tools, "required", max_tokens=40, parallel=False)
    assert _complete(result) and [c.name for c in result.tool_calls] == ["calculator"], result
    call = result.tool_calls[0]
    output = run_builtin(call.name, call.arguments)
    messages += [
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": json.dumps(call.arguments)},
                }
            ],
        },
        {"role": "tool", "tool_call_id": call.id, "name": call.name, "content": output},
    ]
    follow_up = _ask(default_engine, messages, tools, "auto", max_tokens=32)
    assert follow_up.text and not follow_up.tool_calls, follow_up
    if call.arguments.get("expression", "").replace(" ", "") in ("12*7", "7*12"):
        assert "84" in follow_up.text, follow_up.text
