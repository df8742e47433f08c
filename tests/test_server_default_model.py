"""The server over the real default model (SmolLM2-135M), through the official `openai`
client: a plain answer, a schema-valid JSON reply, required tool calls whose arguments
validate (whole and streamed). Token counts stay small: this CPU decodes ~13 tok/s."""

from __future__ import annotations

import json
from collections.abc import Iterator

import jsonschema
import openai
import pytest

from engine.engine import Engine
from engine.server import HTTPServer, ServerConfig

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
def client(default_engine: Engine) -> Iterator[openai.OpenAI]:
    server = HTTPServer(default_engine, ServerConfig(port=0))
    server.start()
    yield openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0, timeout=300)
    server.stop()


@pytest.fixture(scope="module")
def model(default_engine: Engine) -> str:
    assert default_engine.snapshot.model is not None
    return default_engine.snapshot.model.name


def test_plain_answer(client: openai.OpenAI, model: str) -> None:
    reply = client.chat.completions.create(
        model=model,
        messages=[{"role": "user", "content": "What is the capital of France?"}],
        max_tokens=8,
        temperature=0,
    )
    assert "Paris" in (reply.choices[0].message.content or "")


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
        max_tokens=30,
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
