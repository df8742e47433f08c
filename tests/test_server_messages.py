"""Anthropic's Messages API (`/v1/messages`, `/v1/messages/count_tokens`) over the tiny
model, driven by the official `anthropic` client and by httpx reading the raw event
stream, on a free loopback port."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import anthropic
import httpx
import jsonschema
import pytest
from server_support import (
    PERSON,
    TICKET_PARAMETERS,
    WEATHER_PARAMETERS,
    anthropic_client,
    leave_stream,
    serving,
    sse_events,
    wait_for_record,
)

from engine.engine import Engine
from engine.server import HTTPServer
from engine.server.anthropic.replies import MessageStream
from engine.types import ChatResult, Finished, GenerationStats, StopReason, ToolCall, ToolCallDelta

# A nested schema with enums and arrays: what agents' tools look like.
TICKET = {
    "name": "file_ticket",
    "description": "File a ticket in the tracker",
    "input_schema": TICKET_PARAMETERS,
}
WEATHER = {
    "name": "get_weather",
    "description": "Current weather in a city",
    "input_schema": WEATHER_PARAMETERS,
}
GREEDY = {"temperature": 0}


@pytest.fixture(scope="module")
def served(tiny_engine: Engine) -> Iterator[HTTPServer]:
    with serving(tiny_engine) as server:
        yield server


@pytest.fixture(scope="module")
def client(served: HTTPServer) -> anthropic.Anthropic:
    return anthropic_client(served)


@pytest.fixture(scope="module")
def model(tiny_engine: Engine) -> str:
    assert tiny_engine.snapshot.model is not None
    return tiny_engine.snapshot.model.name


def _user(text: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": text}]


def _prompt(usage: Any) -> int:
    return usage.input_tokens + usage.cache_read_input_tokens + usage.cache_creation_input_tokens


# ---- replies ----


def test_plain_text_and_the_corral_figures(client: anthropic.Anthropic, model: str) -> None:
    reply = client.messages.create(
        model=model,
        max_tokens=6,
        system="You are terse.",
        messages=_user("Say hello."),
        extra_body=GREEDY,
    )
    assert reply.type == "message" and reply.role == "assistant" and reply.model == model
    assert [block.type for block in reply.content] == ["text"] and reply.content[0].text
    assert reply.stop_reason == "max_tokens" and reply.usage.output_tokens == 6
    assert reply.id.startswith("msg_")
    figures = reply.model_extra["corral"]  # type: ignore[index]
    assert figures["ttft_ms"] > 0 and figures["decode_tps"] > 0 and figures["warnings"] == []
    counted = client.messages.count_tokens(
        model=model, system="You are terse.", messages=_user("Say hello.")
    )
    assert counted.input_tokens == _prompt(reply.usage)


def test_the_sdk_assembles_the_stream(client: anthropic.Anthropic, model: str) -> None:
    ask: dict[str, Any] = dict(
        model=model, max_tokens=10, messages=_user("Count to ten."), extra_body=GREEDY
    )
    whole = client.messages.create(**ask)
    texts = []
    with client.messages.stream(**ask) as stream:
        texts = list(stream.text_stream)
        final = stream.get_final_message()
    assert len(texts) > 1, "the text arrives in pieces"
    assert "".join(texts) == final.content[0].text == whole.content[0].text  # type: ignore[union-attr]
    assert final.stop_reason == "max_tokens" and final.usage.output_tokens == 10
    assert _prompt(final.usage) == _prompt(whole.usage)
    assert final.usage.cache_read_input_tokens > 0, "the same prompt again comes from the cache"


def test_raw_event_order(served: HTTPServer, model: str) -> None:
    body = {
        "model": model,
        "max_tokens": 60,
        "messages": _user("Weather in Oslo?"),
        "tools": [WEATHER],
        # one call: a second one the model starts may not fit, and would end max_tokens
        "tool_choice": {"type": "any", "disable_parallel_tool_use": True},
        "stream": True,
    }
    headers = {"anthropic-version": "2023-06-01", "anthropic-beta": "some-beta-2025"}
    with httpx.stream(
        "POST", served.url + "/v1/messages", json=body, headers=headers, timeout=60
    ) as r:
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("text/event-stream")
        events = sse_events("".join(r.iter_text()))
    names = [name for name, _ in events]
    assert all(name == data["type"] for name, data in events)
    assert names[:2] == ["message_start", "ping"]
    assert names[-2:] == ["message_delta", "message_stop"]
    blocks = [data for name, data in events if name == "content_block_start"]
    assert [b["index"] for b in blocks] == list(range(len(blocks))) and blocks
    first = blocks[0]["content_block"]
    assert first["type"] == "tool_use" and first["name"] == "get_weather" and first["input"] == {}
    pieces = [
        d["delta"]["partial_json"]
        for n, d in events
        if n == "content_block_delta" and d["index"] == 0
    ]
    jsonschema.validate(json.loads("".join(pieces)), WEATHER["input_schema"])
    # Every block opens, gets deltas, and closes before the next one opens.
    open_index = None
    for name, data in events:
        if name == "content_block_start":
            assert open_index is None
            open_index = data["index"]
        elif name == "content_block_delta":
            assert data["index"] == open_index
        elif name == "content_block_stop":
            assert data["index"] == open_index
            open_index = None
    delta = events[-2][1]
    assert delta["delta"]["stop_reason"] == "tool_use"
    assert delta["usage"]["output_tokens"] > 0 and delta["usage"]["input_tokens"] > 0
    assert delta["corral"]["constraint"].startswith("tools")


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_a_required_tool_call_validates(
    client: anthropic.Anthropic, model: str, stream: bool
) -> None:
    ask: dict[str, Any] = dict(
        model=model,
        max_tokens=120,
        messages=_user("File a ticket about the broken button."),
        tools=[WEATHER, TICKET],
        tool_choice={"type": "tool", "name": "file_ticket", "disable_parallel_tool_use": True},
    )
    if stream:
        with client.messages.stream(**ask) as events:
            reply = events.get_final_message()
    else:
        reply = client.messages.create(**ask)
    assert reply.stop_reason == "tool_use"
    (call,) = reply.content
    assert call.type == "tool_use" and call.name == "file_ticket"
    jsonschema.validate(call.input, TICKET["input_schema"])


def test_any_tool_and_none(client: anthropic.Anthropic, model: str) -> None:
    reply = client.messages.create(
        model=model,
        max_tokens=80,
        messages=_user("Weather?"),
        tools=[WEATHER, TICKET],
        tool_choice={"type": "any"},
    )
    assert reply.stop_reason == "tool_use"
    schemas = {t["name"]: t["input_schema"] for t in (WEATHER, TICKET)}
    for block in reply.content:
        assert block.type == "tool_use"
        jsonschema.validate(block.input, schemas[block.name])
    reply = client.messages.create(
        model=model,
        max_tokens=5,
        messages=_user("Weather?"),
        tools=[WEATHER],
        tool_choice={"type": "none"},
    )
    assert reply.stop_reason in ("max_tokens", "end_turn")
    assert all(block.type == "text" for block in reply.content)


def test_a_tool_result_continues_from_the_cache(client: anthropic.Anthropic, model: str) -> None:
    question = _user("Weather in Oslo?")
    first = client.messages.create(
        model=model,
        max_tokens=60,
        messages=question,
        tools=[WEATHER],
        tool_choice={"type": "any", "disable_parallel_tool_use": True},
        extra_body=GREEDY,
    )
    (call,) = first.content
    assert call.type == "tool_use"
    history = [
        *question,
        {"role": "assistant", "content": [block.model_dump() for block in first.content]},
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": call.id,
                    "content": [{"type": "text", "text": "Oslo: 4 degrees, light rain."}],
                }
            ],
        },
    ]
    second = client.messages.create(
        model=model, max_tokens=5, messages=history, tools=[WEATHER], extra_body=GREEDY
    )
    assert _prompt(second.usage) > _prompt(first.usage) + 10  # the call and result are read
    assert second.usage.cache_read_input_tokens >= _prompt(first.usage) - 1
    counted = client.messages.count_tokens(model=model, messages=history, tools=[WEATHER])
    assert counted.input_tokens == _prompt(second.usage)


def test_parallel_calls_in_history_and_in_the_stream(
    client: anthropic.Anthropic, model: str
) -> None:
    """Two calls in one assistant turn and their two results are read back (an error
    result too); streamed, each call is its own block with its own index."""
    history = [
        *_user("Weather in Oslo and Rome?"),
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Checking both."},
                {
                    "type": "tool_use",
                    "id": "toolu_1",
                    "name": "get_weather",
                    "input": {"city": "Oslo"},
                },
                {
                    "type": "tool_use",
                    "id": "toolu_2",
                    "name": "get_weather",
                    "input": {"city": "Rome"},
                },
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "4 degrees"},
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_2",
                    "content": "down",
                    "is_error": True,
                },
                {"type": "text", "text": "Summarise."},
            ],
        },
    ]
    reply = client.messages.create(model=model, max_tokens=4, messages=history, tools=[WEATHER])
    one_result = client.messages.count_tokens(
        model=model,
        messages=history[:2] + [{"role": "user", "content": [history[2]["content"][0]]}],
        tools=[WEATHER],
    )
    assert _prompt(reply.usage) > one_result.input_tokens
    # The stream of a reply with two calls, from the engine's events.
    stats = GenerationStats(prompt_tokens=5, generated_tokens=9)
    calls = [
        ToolCall("call_a", "get_weather", {"city": "Oslo"}),
        ToolCall("call_b", "get_weather", {"city": "Rome"}),
    ]
    result = ChatResult("", StopReason.EOS, stats, tool_calls=calls)
    writer = MessageStream("msg_x", model, [], [])
    raw = b"".join(writer.opening())
    raw += b"".join(
        writer.feed(
            [
                (0, ToolCallDelta(0, "call_a", "get_weather", "")),
                (0, ToolCallDelta(0, arguments='{"city": ')),
                (0, ToolCallDelta(0, arguments='"Oslo"}')),
            ]
        )
    )
    raw += b"".join(
        writer.feed(
            [
                (0, ToolCallDelta(1, "call_b", "get_weather", '{"city": "Rome"}')),
                (0, Finished(result)),
            ]
        )
    )
    raw += b"".join(writer.ending())
    events = sse_events(raw.decode())
    starts = [d for n, d in events if n == "content_block_start"]
    assert [(s["index"], s["content_block"]["id"]) for s in starts] == [
        (0, "call_a"),
        (1, "call_b"),
    ]
    for index, city in ((0, "Oslo"), (1, "Rome")):
        text = "".join(
            d["delta"]["partial_json"]
            for n, d in events
            if n == "content_block_delta" and d["index"] == index
        )
        assert json.loads(text) == {"city": city}
    assert [n for n, _ in events][-2:] == ["message_delta", "message_stop"]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_structured_output_validates(client: anthropic.Anthropic, model: str, stream: bool) -> None:
    ask: dict[str, Any] = dict(
        model=model,
        max_tokens=80,
        messages=_user("Describe a person."),
        output_config={"format": {"type": "json_schema", "schema": PERSON}, "effort": "low"},
    )
    if stream:
        with client.messages.stream(**ask) as events:
            reply = events.get_final_message()
    else:
        reply = client.messages.create(**ask)
    assert reply.stop_reason == "end_turn"
    jsonschema.validate(json.loads(reply.content[0].text), PERSON)  # type: ignore[union-attr]


def test_stop_sequences_and_seed(client: anthropic.Anthropic, model: str) -> None:
    reply = client.messages.create(
        model=model,
        max_tokens=20,
        messages=_user("Spell it."),
        stop_sequences=["X"],
        output_config={"format": {"type": "json_schema", "schema": {"const": "abcXdef"}}},
    )
    assert reply.content[0].text == '"abc'  # type: ignore[union-attr]
    assert reply.stop_reason == "stop_sequence" and reply.stop_sequence == "X"
    texts = {
        client.messages.create(
            model=model,
            max_tokens=8,
            messages=_user("Go."),
            extra_body={"temperature": 1.0, "top_k": 40, "seed": 7},
        )
        .content[0]
        .text  # type: ignore[union-attr]
        for _ in range(2)
    }
    assert len(texts) == 1


# ---- errors ----


def _error(r: httpx.Response, status: int, kind: str) -> str:
    assert r.status_code == status, r.text
    body = r.json()
    assert body["type"] == "error" and body["error"]["type"] == kind, body
    assert "Traceback" not in r.text
    return str(body["error"]["message"])


@pytest.mark.parametrize(
    ("extra", "words"),
    [
        ({"frobnicate": 1}, "unrecognized request argument: frobnicate"),
        ({"max_tokens": "8"}, "max_tokens"),
        ({"temperature": 1.5}, "temperature"),
        ({"messages": [{"role": "tool", "content": "x"}]}, "messages[0].role"),
        (
            {"messages": [{"role": "user", "content": [{"type": "image", "source": {}}]}]},
            "messages[0].content[0].source: give a base64 source (type, media_type, data)",
        ),
        ({"tools": [{"type": "web_search_20250305", "name": "web"}]}, "server tools"),
        (
            {
                "tools": [
                    {
                        "name": "a",
                        "input_schema": {"type": "object", "properties": {"q": {"type": "strnig"}}},
                    }
                ]
            },
            "tools[0].input_schema",
        ),
        ({"tool_choice": {"type": "any"}}, "no tools were given"),
        ({"tools": [WEATHER], "tool_choice": {"type": "tool", "name": "nope"}}, "nope"),
        (
            {"output_config": {"format": {"type": "json_schema", "schema": {"type": "strnig"}}}},
            "output_config.format.schema",
        ),
        ({"stop_sequences": ["x"] * 17}, "stop_sequences: at most 16"),
    ],
)
def test_bad_requests_name_the_field(
    served: HTTPServer, model: str, extra: dict[str, Any], words: str
) -> None:
    body = {"model": model, "max_tokens": 4, "messages": _user("x"), **extra}
    r = httpx.post(served.url + "/v1/messages", json=body, timeout=60)
    assert words in _error(r, 400, "invalid_request_error")


def test_missing_max_tokens_unknown_model_and_the_sdk_errors(
    served: HTTPServer, client: anthropic.Anthropic, model: str
) -> None:
    r = httpx.post(served.url + "/v1/messages", json={"model": model, "messages": _user("x")})
    assert _error(r, 400, "invalid_request_error") == "max_tokens: required"
    with pytest.raises(anthropic.NotFoundError) as excinfo:
        client.messages.create(model="claude-from-the-agent", max_tokens=4, messages=_user("x"))
    message = excinfo.value.body["error"]["message"]  # type: ignore[index]
    assert "claude-from-the-agent" in message and model in message
    assert "--serve-any-model-name" in message
    with pytest.raises(anthropic.BadRequestError):
        client.messages.count_tokens(model=model, messages=[])
    r = httpx.post(served.url + "/v1/messages/nothing", json={})
    assert "no such endpoint" in _error(r, 404, "not_found_error")


def test_any_model_name_is_served_when_asked(tiny_engine: Engine, model: str) -> None:
    with serving(tiny_engine, serve_any_model_name=True) as server:
        reply = anthropic_client(server).messages.create(
            model="claude-from-the-agent", max_tokens=2, messages=_user("x")
        )
    assert reply.model == model  # the model that answered


def test_key_size_limit_and_a_full_queue(tiny_engine: Engine, model: str) -> None:
    settings = {"api_key": "s3cret", "max_body_bytes": 4096, "max_queued_requests": 1}
    with serving(tiny_engine, **settings) as server:
        url = server.url + "/v1/messages"
        body = {"model": model, "max_tokens": 2, "messages": _user("x")}
        for headers in ({}, {"x-api-key": "wrong"}, {"Authorization": "Bearer wrong"}):
            r = httpx.post(url, json=body, headers=headers)
            assert "API key" in _error(r, 401, "authentication_error")
        with pytest.raises(anthropic.AuthenticationError):
            anthropic_client(server, key="wrong").messages.create(**body)
        good = anthropic_client(server, key="s3cret")  # sends x-api-key
        assert good.messages.create(**body).usage.output_tokens == 2
        bearer = httpx.post(url, json=body, headers={"Authorization": "Bearer s3cret"})
        assert bearer.status_code == 200
        big = {**body, "messages": _user("x" * 5000)}
        r = httpx.post(url, json=big, headers={"x-api-key": "s3cret"})
        assert "larger than the limit" in _error(r, 413, "request_too_large")
        # One long stream holds the only slot: the next request is told the server is busy.
        slow = {
            "model": model,
            "max_tokens": 400,
            "messages": _user("x"),
            "stream": True,
            "output_config": {
                "format": {
                    "type": "json_schema",
                    "schema": {"type": "string", "pattern": "^[a-z ]{300,}$"},
                }
            },
        }
        with good.messages.stream(**{k: v for k, v in slow.items() if k != "stream"}) as stream:
            next(iter(stream))
            r = httpx.post(url, json=body, headers={"x-api-key": "s3cret"})
            assert "busy" in _error(r, 529, "overloaded_error")
            assert r.headers["retry-after"] == "1"


def test_a_client_leaving_mid_stream_cancels_its_reply(
    served: HTTPServer, client: anthropic.Anthropic, model: str
) -> None:
    before = len(served.activity.records)
    body = {
        "model": model,
        "max_tokens": 1500,
        "messages": _user("Write forever."),
        "stream": True,
        "output_config": {
            "format": {
                "type": "json_schema",
                "schema": {"type": "string", "pattern": "^[a-z ]{1200,}$"},
            }
        },
    }
    leave_stream(served, "/v1/messages", body)
    record = wait_for_record(served, 499, before)
    assert record.endpoint == "/v1/messages" and record.stream
    assert record.stop_reason == "cancelled" and record.completion_tokens < 1500
    assert served.activity.active == 0
    reply = client.messages.create(model=model, max_tokens=3, messages=_user("Hi"))
    assert reply.stop_reason == "max_tokens"
    lines = [r.line() for r in list(served.activity.records)[before:]]
    assert any(" 200 /v1/messages" in line for line in lines), lines
