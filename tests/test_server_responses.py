"""OpenAI's Responses API (`/v1/responses`) over the tiny model, driven by the official
`openai` client and by httpx reading the raw event stream, on a free loopback port; stored
responses in a SQLite file of the test's own."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import jsonschema
import openai
import pytest
from server_support import (
    PERSON,
    TICKET_PARAMETERS,
    WEATHER_PARAMETERS,
    leave_stream,
    openai_client,
    serving,
    sse_events,
    wait_for_record,
)

from engine.engine import Engine
from engine.server import HTTPServer
from engine.server.openai_responses.store import ResponseStore

TICKET = {
    "type": "function",
    "name": "file_ticket",
    "description": "File a ticket in the tracker",
    "strict": True,
    "parameters": TICKET_PARAMETERS,
}
WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "Current weather in a city",
    "parameters": WEATHER_PARAMETERS,
}
YES_NO = {"format": {"type": "json_schema", "name": "yes_no", "schema": {"enum": ["yes", "no"]}}}


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("responses") / "responses.sqlite3"


@pytest.fixture(scope="module")
def served(tiny_engine: Engine, db: Path) -> Iterator[HTTPServer]:
    with serving(tiny_engine, responses_db=db) as server:
        yield server


@pytest.fixture(scope="module")
def client(served: HTTPServer) -> openai.OpenAI:
    return openai_client(served)


@pytest.fixture(scope="module")
def model(tiny_engine: Engine) -> str:
    assert tiny_engine.snapshot.model is not None
    return tiny_engine.snapshot.model.name


# ---- replies ----


def test_plain_text_stops_at_max_output_tokens(client: openai.OpenAI, model: str) -> None:
    reply = client.responses.create(
        model=model, input="Say hello.", instructions="Be brief.", max_output_tokens=6
    )
    assert reply.object == "response" and reply.model == model and reply.id.startswith("resp_")
    assert reply.status == "incomplete"
    assert reply.incomplete_details is not None
    assert reply.incomplete_details.reason == "max_output_tokens"
    assert [item.type for item in reply.output] == ["message"] and reply.output_text
    assert reply.usage is not None and reply.usage.output_tokens == 6
    figures = reply.model_extra["corral"]  # type: ignore[index]
    assert figures["ttft_ms"] > 0 and figures["stop_reason"] == "length"
    counted = client.responses.input_tokens.count(
        model=model, input="Say hello.", instructions="Be brief."
    )
    assert counted.input_tokens == reply.usage.input_tokens


def test_the_sdk_assembles_the_stream(client: openai.OpenAI, model: str) -> None:
    ask: dict[str, Any] = dict(model=model, input="Yes or no?", text=YES_NO, max_output_tokens=20)
    with client.responses.stream(**ask) as stream:
        kinds = [event.type for event in stream]
        final = stream.get_final_response()
    assert kinds[:2] == ["response.created", "response.in_progress"]
    assert kinds[-1] == "response.completed" and "response.output_text.delta" in kinds
    assert final.status == "completed" and json.loads(final.output_text) in ("yes", "no")
    # A reply cut at max_output_tokens ends with response.incomplete, which carries it.
    with client.responses.stream(model=model, input="Go on.", max_output_tokens=5) as stream:
        last = list(stream)[-1]
    assert last.type == "response.incomplete"
    assert last.response.usage is not None and last.response.usage.output_tokens == 5


def test_raw_event_order(served: HTTPServer, model: str) -> None:
    body = {
        "model": model,
        "input": [{"role": "user", "content": [{"type": "input_text", "text": "Weather?"}]}],
        "tools": [WEATHER],
        "tool_choice": "required",
        "parallel_tool_calls": False,
        "max_output_tokens": 60,
        "stream": True,
    }
    with httpx.stream("POST", served.url + "/v1/responses", json=body, timeout=60) as r:
        assert r.status_code == 200
        events = sse_events("".join(r.iter_text()))
    names = [name for name, _ in events]
    assert all(name == data["type"] for name, data in events)
    assert [data["sequence_number"] for _, data in events] == list(range(len(events)))
    assert names[:3] == ["response.created", "response.in_progress", "response.output_item.added"]
    assert names[-3:] == [
        "response.function_call_arguments.done",
        "response.output_item.done",
        "response.completed",
    ]
    added = events[2][1]["item"]
    assert added["type"] == "function_call" and added["name"] == "get_weather"
    pieces = [d["delta"] for n, d in events if n == "response.function_call_arguments.delta"]
    arguments = json.loads("".join(pieces))
    jsonschema.validate(arguments, WEATHER["parameters"])
    (item,) = events[-1][1]["response"]["output"]
    assert item["id"] == added["id"] and item["call_id"] == added["call_id"]
    assert json.loads(item["arguments"]) == arguments


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_a_required_function_call_validates(
    client: openai.OpenAI, model: str, stream: bool
) -> None:
    ask: dict[str, Any] = dict(
        model=model,
        input="File a ticket about the broken button.",
        tools=[WEATHER, TICKET],
        tool_choice={"type": "function", "name": "file_ticket"},
        parallel_tool_calls=False,
        max_output_tokens=120,
    )
    if stream:
        with client.responses.stream(**ask) as events:
            reply = events.get_final_response()
    else:
        reply = client.responses.create(**ask)
    (call,) = reply.output
    assert call.type == "function_call" and call.name == "file_ticket"
    jsonschema.validate(json.loads(call.arguments), TICKET["parameters"])


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_structured_output_validates(client: openai.OpenAI, model: str, stream: bool) -> None:
    ask: dict[str, Any] = dict(
        model=model,
        input="Describe a person.",
        text={"format": {"type": "json_schema", "name": "person", "schema": PERSON}},
        max_output_tokens=80,
    )
    if stream:
        with client.responses.stream(**ask) as events:
            reply = events.get_final_response()
    else:
        reply = client.responses.create(**ask)
    assert reply.status == "completed"
    jsonschema.validate(json.loads(reply.output_text), PERSON)
    assert reply.model_extra["corral"]["constraint"] == "person"  # type: ignore[index]


def test_a_function_result_continues_from_the_cache(client: openai.OpenAI, model: str) -> None:
    """Sent back in full (as a stateless client does) and by previous_response_id: the
    same prompt, read from the cache."""
    first = client.responses.create(
        model=model,
        input="Weather in Oslo?",
        tools=[WEATHER],
        tool_choice="required",
        parallel_tool_calls=False,
        max_output_tokens=60,
        temperature=0,
        store=False,
    )
    (call,) = first.output
    assert call.type == "function_call"
    output = {"type": "function_call_output", "call_id": call.call_id, "output": "4 degrees, rain"}
    history = [
        {"role": "user", "content": "Weather in Oslo?"},
        call.model_dump(exclude_none=True),
        output,
    ]
    second = client.responses.create(
        model=model, input=history, tools=[WEATHER], max_output_tokens=4, temperature=0
    )
    assert first.usage is not None and second.usage is not None
    assert second.usage.input_tokens > first.usage.input_tokens + 10
    assert second.usage.input_tokens_details.cached_tokens >= first.usage.input_tokens - 1
    with pytest.raises(openai.NotFoundError):  # store: false kept nothing
        client.responses.create(model=model, previous_response_id=first.id, input="x")


def test_parallel_calls_in_the_input(client: openai.OpenAI, model: str) -> None:
    """Two calls of one turn and their outputs are read back as one assistant turn."""
    calls = [
        {"type": "function_call", "call_id": f"c{i}", "name": "get_weather", "arguments": a}
        for i, a in enumerate(('{"city": "Oslo"}', '{"city": "Rome"}'))
    ]
    outputs = [
        {"type": "function_call_output", "call_id": f"c{i}", "output": t}
        for i, t in enumerate(("4 degrees", "20 degrees"))
    ]
    history = [{"role": "user", "content": "Weather in Oslo and Rome?"}, *calls, *outputs]
    both = client.responses.input_tokens.count(model=model, input=history, tools=[WEATHER])
    one = client.responses.input_tokens.count(
        model=model, input=history[:2] + outputs[:1], tools=[WEATHER]
    )
    assert both.input_tokens > one.input_tokens
    reply = client.responses.create(
        model=model, input=history, tools=[WEATHER], max_output_tokens=3
    )
    assert reply.usage is not None and reply.usage.input_tokens == both.input_tokens


def test_stored_responses_continue_after_a_restart_and_can_be_deleted(
    tiny_engine: Engine, db: Path, model: str
) -> None:
    with serving(tiny_engine, responses_db=db) as server:
        first = openai_client(server).responses.create(
            model=model,
            input="Remember the word heron.",
            instructions="Be brief.",
            max_output_tokens=6,
            temperature=0,
        )
    assert first.usage is not None
    with serving(tiny_engine, responses_db=db) as server:  # a new server, the same file
        client = openai_client(server)
        assert client.responses.retrieve(first.id).output_text == first.output_text
        second = client.responses.create(
            model=model,
            previous_response_id=first.id,
            input="Which word?",
            instructions="Be brief.",
            max_output_tokens=4,
        )
        assert second.previous_response_id == first.id and second.usage is not None
        assert second.usage.input_tokens > first.usage.input_tokens
        # The first turn's prompt is in the trie (as in chat completions, all but its last
        # token: that one is fed again with the reply).
        assert second.usage.input_tokens_details.cached_tokens >= first.usage.input_tokens - 1
        client.responses.delete(first.id)
        with pytest.raises(openai.NotFoundError):
            client.responses.retrieve(first.id)
        with pytest.raises(openai.NotFoundError) as excinfo:
            client.responses.create(model=model, previous_response_id=first.id, input="x")
        assert excinfo.value.body["param"] == "previous_response_id"  # type: ignore[index]
        r = httpx.delete(server.url + f"/v1/responses/{first.id}")
        assert r.status_code == 404 and r.json()["error"]["code"] == "response_not_found"


def test_the_store_is_bounded_by_count_and_age(tmp_path: Path) -> None:
    store = ResponseStore(tmp_path / "r.sqlite3", max_count=3, max_age_s=3600)
    for i in range(5):
        store.put({"id": f"resp_{i}"}, [{"role": "user", "content": str(i)}])
    assert [store.get(f"resp_{i}") is not None for i in range(5)] == [
        False,
        False,
        True,
        True,
        True,
    ]
    assert store.get("resp_4") == ({"id": "resp_4"}, [{"role": "user", "content": "4"}])
    old = ResponseStore(tmp_path / "r.sqlite3", max_count=3, max_age_s=0)
    assert old.get("resp_4") is None  # expired under a shorter age
    assert store.delete("resp_4") and not store.delete("resp_4")
    store.close()
    old.close()


# ---- errors ----


@pytest.mark.parametrize(
    ("extra", "param", "words"),
    [
        ({"frobnicate": 1}, "frobnicate", "unrecognized request argument"),
        ({"temperature": "hot"}, "temperature", "temperature"),
        ({"input": [{"type": "item_reference", "id": "x"}]}, "input[0].type", "not supported"),
        ({"input": [{"role": "wizard", "content": "x"}]}, "input[0].role", "input[0]"),
        (
            {"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "x"}]}]},
            "input[0].content[0]",
            "--allow-image-urls",  # checked at the edge, whatever the model
        ),
        (
            {"input": [{"type": "function_call", "call_id": "a", "name": "f", "arguments": "{"}]},
            "input[0].arguments",
            "not valid JSON",
        ),
        ({"tools": [{"type": "file_search"}]}, "tools[0].type", "not supported"),
        (
            {
                "tools": [
                    {
                        **WEATHER,
                        "parameters": {"type": "object", "properties": {"q": {"type": "strnig"}}},
                    }
                ]
            },
            "tools[0].parameters.properties.q.type",
            "strnig",
        ),
        ({"tool_choice": "required"}, "tool_choice", "no tools"),
        (
            {
                "text": {
                    "format": {"type": "json_schema", "name": "x", "schema": {"type": "strnig"}}
                }
            },
            "text.format.schema.type",
            "strnig",
        ),
        ({"background": True}, "background", "not supported"),
    ],
)
def test_bad_requests_name_the_field(
    served: HTTPServer, model: str, extra: dict[str, Any], param: str, words: str
) -> None:
    body = {"model": model, "input": "x", "max_output_tokens": 4, **extra}
    r = httpx.post(served.url + "/v1/responses", json=body, timeout=60)
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert error["param"] == param and words in error["message"], error


def test_unknown_model_wrong_key_and_size_limit(tiny_engine: Engine, model: str, db: Path) -> None:
    settings = {"api_key": "s3cret", "max_body_bytes": 4096, "responses_db": db}
    with serving(tiny_engine, **settings) as server:
        good = openai.OpenAI(base_url=server.url + "/v1", api_key="s3cret", max_retries=0)
        with pytest.raises(openai.NotFoundError) as excinfo:
            good.responses.create(model="gpt-5-codex", input="x")
        assert excinfo.value.body["code"] == "model_not_found"  # type: ignore[index]
        with pytest.raises(openai.AuthenticationError):
            openai.OpenAI(
                base_url=server.url + "/v1", api_key="nope", max_retries=0
            ).responses.create(model=model, input="x")
        with pytest.raises(openai.APIStatusError) as excinfo:
            good.responses.create(model=model, input="x" * 5000)
        assert excinfo.value.status_code == 413
    with serving(tiny_engine, serve_any_model_name=True, responses_db=db) as server:
        reply = openai_client(server).responses.create(
            model="gpt-5-codex", input="x", max_output_tokens=2, store=False
        )
        assert reply.model == model


def test_a_client_leaving_mid_stream_cancels_its_reply(
    served: HTTPServer, client: openai.OpenAI, model: str
) -> None:
    before = len(served.activity.records)
    body = {
        "model": model,
        "input": "Write forever.",
        "max_output_tokens": 1500,
        "stream": True,
        "store": False,
        "text": {
            "format": {
                "type": "json_schema",
                "name": "long",
                "schema": {"type": "string", "pattern": "^[a-z ]{1200,}$"},
            }
        },
    }
    leave_stream(served, "/v1/responses", body)
    record = wait_for_record(served, 499, before)
    assert record.endpoint == "/v1/responses" and record.stream
    assert record.stop_reason == "cancelled" and record.completion_tokens < 1500
    assert served.activity.active == 0
    reply = client.responses.create(model=model, input="Hi", max_output_tokens=3, store=False)
    assert reply.status == "incomplete"
