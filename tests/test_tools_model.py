"""Tool calling with the real default model (SmolLM2-135M, a ChatML template without tool
support, so the Hermes fallback): under the tool grammar every call parses and validates.

Decoding is greedy with a test-only masked loop (tools_support.GreedyDecoder) that feeds
forced tokens in one pass and reuses the shared prompt prefix, to keep the CPU time small.
"""

from __future__ import annotations

import json
import time

import jsonschema
import pytest
from tools_support import GreedyDecoder, default_model, glaive_cases

from engine.tools import prepare_tool_request
from engine.tools.builtins import builtin_tools, run_builtin

pytestmark = pytest.mark.slow

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Get the current weather in a city",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "description": "The city name"},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
        "required": ["city"]}}}
TIME = {"type": "function", "function": {
    "name": "get_time", "description": "Get the current time in a time zone",
    "parameters": {"type": "object", "properties": {
        "zone": {"type": "string", "description": "An IANA time zone"}},
        "required": ["zone"]}}}


@pytest.fixture(scope="module")
def decoder() -> GreedyDecoder:
    model, tokenizer = default_model()
    return GreedyDecoder(model, tokenizer)


def _schema(tools: list[dict], name: str) -> dict:
    return next(t["function"]["parameters"] for t in tools if t["function"]["name"] == name)


@pytest.mark.timeout(1800)  # ~2 min on an idle 2-core CPU; far longer when it is shared
def test_required_calls_validate_over_glaive_tool_sets(decoder: GreedyDecoder) -> None:
    """20 tool sets from Glaiveai2K, tool_choice=required, one call per reply so each fits
    a small token budget: every reply completes, and its call names a tool of the set and
    validates against that tool's schema with jsonschema. 100%, no exceptions."""
    tok = decoder.tokenizer
    failures = []
    started = time.perf_counter()
    cases = glaive_cases(20)
    for case in cases:
        plan = prepare_tool_request(
            tok, [{"role": "user", "content": case.request}], case.tools, "required",
            parallel_tool_calls=False,
        )
        out = decoder.generate(plan.prompt_tokens, plan.constraint.source, max_tokens=96)
        content, calls = plan.parse(out.text)
        problem = None
        if not (out.finished and out.accepted):
            problem = "did not complete within the token budget"
        elif len(calls) != 1 or content:
            problem = f"expected one call and no text, got {len(calls)} calls, text {content!r}"
        else:
            call = calls[0]
            try:
                jsonschema.validate(call.arguments, _schema(case.tools, call.name))
            except (StopIteration, jsonschema.ValidationError) as exc:
                problem = f"invalid call {call.name}: {exc}"
        if problem:
            failures.append(f"{case.target}: {problem}\n  {out.text!r}")
    elapsed = time.perf_counter() - started
    assert not failures, f"{len(failures)}/{len(cases)} failed:\n" + "\n".join(failures)
    print(f"20 Glaive tool sets: 100% valid calls in {elapsed:.0f} s")


def test_named_choice_calls_that_function(decoder: GreedyDecoder) -> None:
    tok = decoder.tokenizer
    messages = [{"role": "user", "content": "What's the weather like in Paris?"}]
    plan = prepare_tool_request(tok, messages, [WEATHER, TIME], "get_time")
    out = decoder.generate(plan.prompt_tokens, plan.constraint.source, max_tokens=48)
    content, calls = plan.parse(out.text)
    assert out.finished and out.accepted, out.text
    assert [c.name for c in calls] == ["get_time"] and content == ""
    jsonschema.validate(calls[0].arguments, TIME["function"]["parameters"])


def test_none_never_calls(decoder: GreedyDecoder) -> None:
    tok = decoder.tokenizer
    messages = [{"role": "user", "content": "What's the weather like in Paris?"}]
    plan = prepare_tool_request(tok, messages, [WEATHER, TIME], "none")
    assert plan.constraint is None and "get_weather" not in plan.prompt_text
    out = decoder.generate(plan.prompt_tokens, None, max_tokens=24)
    content, calls = plan.parse(out.text)
    assert calls == [] and content == out.text and "<tool_call>" not in out.text


def test_a_conversation_with_tool_results_continues(decoder: GreedyDecoder) -> None:
    """Call the built-in calculator, run it, send the result back as a tool message: the
    model goes on and answers in text with the result."""
    tok = decoder.tokenizer
    tools = builtin_tools(["calculator"])
    messages: list[dict] = [{"role": "user", "content": "Calculate 12 * 7."}]
    plan = prepare_tool_request(tok, messages, tools, "required", parallel_tool_calls=False)
    out = decoder.generate(plan.prompt_tokens, plan.constraint.source, max_tokens=40)
    _, calls = plan.parse(out.text)
    assert out.finished and [c.name for c in calls] == ["calculator"], out.text
    call = calls[0]
    result = run_builtin(call.name, call.arguments)
    messages += [
        {"role": "assistant", "content": "", "tool_calls": [{
            "id": call.id, "type": "function",
            "function": {"name": call.name, "arguments": json.dumps(call.arguments)}}]},
        {"role": "tool", "tool_call_id": call.id, "name": call.name, "content": result},
    ]
    plan = prepare_tool_request(tok, messages, tools, "auto")
    assert f"<tool_response>\n{result}\n</tool_response>" in plan.prompt_text
    out = decoder.generate(plan.prompt_tokens, plan.constraint.source, max_tokens=32)
    content, calls = plan.parse(out.text)
    assert out.accepted and content, out.text
    if call.arguments.get("expression", "").replace(" ", "") in ("12*7", "7*12"):
        assert "84" in content, content
