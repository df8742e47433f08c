"""The server over the real default model (SmolLM2-135M), through the official `openai`
client: a plain answer, a schema-valid JSON reply, required tool calls whose arguments
validate (whole and streamed), a tool result continuing a streamed chat with cached
tokens, and a client that disconnects mid-stream. Token counts stay small: this CPU
decodes ~13 tok/s."""

from __future__ import annotations

import json
from collections.abc import Iterator

import jsonschema
import openai
import pytest
from server_support import leave_mid_stream, openai_client, serving, wait_for_record

from engine.engine import Engine
from engine.server import HTTPServer

pytestmark = pytest.mark.slow

CITY = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "maxLength": 20},
        "country": {"type": "string", "maxLength": 20},
    },
    "required": ["city", "country"],
    "additionalProperties": False,
}
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather in a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "maxLength": 20}},
            "required": ["city"],
        },
    },
}


@pytest.fixture(scope="module")
def served(default_engine: Engine) -> Iterator[HTTPServer]:
    with serving(default_engine) as server:
        yield server


@pytest.fixture(scope="module")
def client(served: HTTPServer) -> openai.OpenAI:
    return openai_client(served, timeout=300)


@pytest.fixture(scope="module")
def model(default_engine: Engine) -> str:
    assert default_engine.snapshot.model is not None
    return default_engine.snapshot.model.name


def capital_of_france(client: openai.OpenAI, model: str) -> str:
    """The model's greedy answer to a question it answers right."""
    reply = client.chat.completions.create(
        model=model,
        messages=[{"role": "user", "content": "What is the capital of France?"}],
        max_tokens=8,
        temperature=0,
    )
    return reply.choices[0].message.content or ""


def test_plain_answer(client: openai.OpenAI, model: str) -> None:
    assert "Paris" in capital_of_france(client, model)


def test_json_schema_reply_validates(client: openai.OpenAI, model: str) -> None:
    reply = client.chat.completions.create(
        model=model,
        messages=[{"role": "user", "content": "Name a city in Japan as JSON."}],
        max_tokens=30,
        temperature=0,
        response_format={"type": "json_schema", "json_schema": {"name": "city", "schema": CITY}},
    )
    assert reply.choices[0].finish_reason == "stop"
    jsonschema.validate(json.loads(reply.choices[0].message.content or ""), CITY)


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_required_tool_call_validates(client: openai.OpenAI, model: str, stream: bool) -> None:
    kwargs = dict(
        model=model,
        messages=[{"role": "user", "content": "What's the weather like in Paris?"}],
        tools=[WEATHER],
        tool_choice="required",
        parallel_tool_calls=False,  # one call (the tiny model would write a second, cut short)
        max_tokens=60,  # the call's frame alone is 26 tokens: room for the model's own city
        temperature=0,
    )
    if stream:
        arguments, names, finish = "", [], None
        for chunk in client.chat.completions.create(stream=True, **kwargs):  # type: ignore[call-overload]
            if chunk.choices:
                finish = chunk.choices[0].finish_reason or finish
                for delta in chunk.choices[0].delta.tool_calls or []:
                    if delta.function and delta.function.name:
                        names.append(delta.function.name)
                    if delta.function and delta.function.arguments:
                        arguments += delta.function.arguments
    else:
        reply = client.chat.completions.create(**kwargs)  # type: ignore[call-overload]
        finish = reply.choices[0].finish_reason
        calls = reply.choices[0].message.tool_calls or []
        names = [c.function.name for c in calls]
        arguments = calls[0].function.arguments if calls else ""
    assert finish == "tool_calls" and names == ["get_weather"]
    jsonschema.validate(json.loads(arguments), WEATHER["function"]["parameters"])


def test_a_tool_result_continues_a_streamed_chat_from_the_cache(
    client: openai.OpenAI, model: str
) -> None:
    """The call's result goes back as a `tool` message; the streamed answer uses it, and
    the prompt it shares with the first request comes from the prefix cache."""
    question = [{"role": "user", "content": "What's the weather like in Paris?"}]
    first = client.chat.completions.create(
        model=model,
        messages=question,  # type: ignore[arg-type]
        tools=[WEATHER],  # type: ignore[list-item]
        tool_choice="required",
        parallel_tool_calls=False,
        max_tokens=60,
        temperature=0,
    )
    message = first.choices[0].message
    (call,) = message.tool_calls or []
    history = [
        *question,
        message.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": call.id, "content": "Sunny, 24 degrees Celsius."},
    ]
    chunks = list(
        client.chat.completions.create(
            model=model,
            messages=history,  # type: ignore[arg-type]
            tools=[WEATHER],  # type: ignore[list-item]
            max_tokens=16,
            temperature=0,
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text.strip(), "the model answered after the tool result"
    usage = chunks[-1].usage
    assert usage is not None and first.usage is not None
    assert usage.prompt_tokens > first.usage.prompt_tokens
    assert usage.prompt_tokens_details is not None
    assert usage.prompt_tokens_details.cached_tokens > 0


def test_a_disconnect_cancels_and_the_next_request_is_served(
    served: HTTPServer, client: openai.OpenAI, model: str
) -> None:
    before = len(served.activity.records)
    body = {
        "model": model,
        "messages": [{"role": "user", "content": "Tell me a very long story about a dragon."}],
        "max_tokens": 400,
        "temperature": 0,
        "stream": True,
    }
    leave_mid_stream(served, body)
    record = wait_for_record(served, 499, before, timeout=60)
    assert record.stop_reason == "cancelled" and record.completion_tokens < 40
    assert "Paris" in capital_of_france(client, model)
