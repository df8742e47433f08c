"""How a reply ended, as each dialect's client reads it (issue 44): a reply Corral closed to
fit its budget or because it repeated itself, or cut, is never reported as finished —
Chat Completions `finish_reason: "length"` (tool calls too), Messages `stop_reason:
"max_tokens"`, Responses `status: "incomplete"` — and the `corral` object names the values
Corral filled; a reply the model ended still reads `stop` / `end_turn` / `completed`.
Driven by the official `openai` and `anthropic` clients and raw HTTP, whole and streamed,
over the tiny random model, whose rambling makes the closes deterministic (greedy)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import anthropic
import httpx
import jsonschema
import pytest
from server_support import anthropic_client, openai_client, serving, sse_events

from engine.engine import Engine
from engine.server import HTTPServer

# The tiny model runs out of its 36 tokens inside this object: Corral closes it (budget).
BUDGET_SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "tags": {"type": "array", "items": {"type": "string"}, "minItems": 2},
        "n": {"type": "integer"},
        "code": {"type": "string", "pattern": "^[A-Z]{2}-[0-9]{4}$"},
    },
    "required": ["name", "tags", "n", "code"],
}
# ... and repeats itself inside this string long before 200 tokens, where the string may not
# end yet (not before "#end#": a loop is moved on only where it may end): closed (repetition).
LOOP_SCHEMA = {
    "type": "object",
    "properties": {"s": {"type": "string", "pattern": "^[^#]*#end#$"}},
    "required": ["s"],
}
# ... and ends this one itself: a finished reply.
DONE_SCHEMA = {"enum": ["alpha", "beta", "gamma"]}
CASES = {  # name: (schema, max tokens, how Corral closed it)
    "budget": (BUDGET_SCHEMA, 36, "budget"),
    "loop": (LOOP_SCHEMA, 200, "repetition"),
}
WEATHER = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
    "required": ["city", "days"],
}
USER = [{"role": "user", "content": "Give me JSON."}]
GREEDY = {"temperature": 0}


@pytest.fixture(scope="module")
def served(tiny_engine: Engine) -> Iterator[HTTPServer]:
    with serving(tiny_engine) as server:
        yield server


@pytest.fixture(scope="module")
def model(tiny_engine: Engine) -> str:
    assert tiny_engine.snapshot.model is not None
    return tiny_engine.snapshot.model.name


def _filled(corral: dict[str, Any], reason: str, schema: dict[str, Any], text: str) -> None:
    """What every dialect's `corral` object says of a filled reply, and that it still fits."""
    assert corral["ending"] == "filled" and corral["closed_to_fit"] is True
    assert corral["close_reason"] == reason
    assert corral["filled_paths"] and all(p.startswith("/") for p in corral["filled_paths"])
    data = json.loads(text)
    jsonschema.validate(data, schema)
    for path in corral["filled_paths"]:  # each names a value of the reply
        node: Any = data
        for part in path.split("/")[1:]:
            node = node[int(part)] if isinstance(node, list) else node[part]


def _chat_format(schema: dict[str, Any]) -> dict[str, Any]:
    return {"type": "json_schema", "json_schema": {"name": "reply", "schema": schema}}


# ---- Chat Completions ----


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_chat_completions_say_length_for_a_filled_reply(
    served: HTTPServer, model: str, case: str, stream: bool
) -> None:
    schema, tokens, reason = CASES[case]
    client = openai_client(served)
    ask: dict[str, Any] = dict(
        model=model,
        messages=USER,
        max_tokens=tokens,
        temperature=0,
        response_format=_chat_format(schema),
    )
    if stream:
        chunks = list(client.chat.completions.create(**ask, stream=True))
        last = [c for c in chunks if c.choices][-1]
        finish, corral = last.choices[0].finish_reason, last.model_extra["corral"]  # type: ignore[index]
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    else:
        reply = client.chat.completions.create(**ask)
        finish, text = reply.choices[0].finish_reason, reply.choices[0].message.content or ""
        corral = reply.model_extra["corral"]  # type: ignore[index]
    assert finish == "length"
    _filled(corral, reason, schema, text)


def test_chat_completions_say_stop_only_for_a_reply_the_model_ended(
    served: HTTPServer, model: str
) -> None:
    client = openai_client(served)
    ask: dict[str, Any] = dict(
        model=model,
        messages=USER,
        max_tokens=40,
        temperature=0,
        response_format=_chat_format(DONE_SCHEMA),
    )
    reply = client.chat.completions.create(**ask)
    assert reply.choices[0].finish_reason == "stop"
    corral = reply.model_extra["corral"]  # type: ignore[index]
    assert corral["ending"] == "finished" and corral["filled_paths"] == []
    chunks = list(client.chat.completions.create(**ask, stream=True))
    assert [c for c in chunks if c.choices][-1].choices[0].finish_reason == "stop"


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_a_tool_call_corral_completed_says_length(
    served: HTTPServer, model: str, stream: bool
) -> None:
    """A call whose arguments Corral finished is not `tool_calls`: the client sees the
    call and `length`, and `corral.filled_paths` points into its arguments."""
    body = {
        "model": model,
        "messages": [{"role": "user", "content": "Weather?"}],
        "max_tokens": 40,
        "temperature": 0,
        "tools": [{"type": "function", "function": {"name": "weather", "parameters": WEATHER}}],
        "tool_choice": "required",
        "stream": stream,
    }
    response = httpx.post(served.url + "/v1/chat/completions", json=body, timeout=120)
    assert response.status_code == 200, response.text
    if stream:
        events = [d for _, d in sse_events(response.text.replace("data: [DONE]\n\n", ""))]
        last = [e for e in events if e["choices"]][-1]
        finish, corral = last["choices"][0]["finish_reason"], last["corral"]
        assert any(
            "tool_calls" in e["choices"][0]["delta"] for e in events if e["choices"]
        )  # the call itself still streams
    else:
        choice = response.json()["choices"][0]
        finish, corral = choice["finish_reason"], response.json()["corral"]
        (call,) = choice["message"]["tool_calls"]
        jsonschema.validate(json.loads(call["function"]["arguments"]), WEATHER)
    assert finish == "length"
    assert corral["ending"] == "filled"
    assert corral["filled_paths"] and all(
        p.startswith("/tool_calls/0/arguments") for p in corral["filled_paths"]
    )


def test_raw_chat_completion_of_a_loop(served: HTTPServer, model: str) -> None:
    body = {
        "model": model,
        "messages": USER,
        "max_tokens": 200,
        "temperature": 0,
        "response_format": _chat_format(LOOP_SCHEMA),
    }
    response = httpx.post(served.url + "/v1/chat/completions", json=body, timeout=120)
    data = response.json()
    assert data["choices"][0]["finish_reason"] == "length"  # never "stop" for a loop closed
    _filled(data["corral"], "repetition", LOOP_SCHEMA, data["choices"][0]["message"]["content"])
    assert data["corral"]["filled_paths"] == ["/s"]


# ---- Messages ----


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_messages_say_max_tokens_for_a_filled_reply(
    served: HTTPServer, model: str, case: str, stream: bool
) -> None:
    schema, tokens, reason = CASES[case]
    client = anthropic_client(served)
    ask: dict[str, Any] = dict(
        model=model,
        max_tokens=tokens,
        messages=USER,
        output_config={"format": {"type": "json_schema", "schema": schema}},
        extra_body=GREEDY,  # the SDK no longer takes temperature; the API does
    )
    if stream:
        with client.messages.stream(**ask) as events:
            reply = events.get_final_message()
    else:
        reply = client.messages.create(**ask)
    assert reply.stop_reason == "max_tokens"
    text = reply.content[0].text  # type: ignore[union-attr]
    body = {k: v for k, v in ask.items() if k != "extra_body"}
    raw = httpx.post(
        served.url + "/v1/messages",
        json={**body, **GREEDY},
        headers={"x-api-key": "unused", "anthropic-version": "2023-06-01"},
        timeout=120,
    ).json()
    assert raw["stop_reason"] == "max_tokens" and raw["content"][0]["text"] == text
    _filled(raw["corral"], reason, schema, text)


def test_messages_say_end_turn_for_a_reply_the_model_ended(served: HTTPServer, model: str) -> None:
    client: anthropic.Anthropic = anthropic_client(served)
    ask: dict[str, Any] = dict(
        model=model,
        max_tokens=40,
        messages=USER,
        output_config={"format": {"type": "json_schema", "schema": DONE_SCHEMA}},
        extra_body=GREEDY,
    )
    assert client.messages.create(**ask).stop_reason == "end_turn"
    with client.messages.stream(**ask) as events:
        assert events.get_final_message().stop_reason == "end_turn"


def test_a_streamed_message_of_a_loop_ends_with_max_tokens_in_its_delta(
    served: HTTPServer, model: str
) -> None:
    body = {
        "model": model,
        "max_tokens": 200,
        "messages": USER,
        "stream": True,
        **GREEDY,
        "output_config": {"format": {"type": "json_schema", "schema": LOOP_SCHEMA}},
    }
    response = httpx.post(served.url + "/v1/messages", json=body, timeout=120)
    events = sse_events(response.text)
    delta = next(d for n, d in events if n == "message_delta")
    assert delta["delta"]["stop_reason"] == "max_tokens"
    assert delta["corral"]["ending"] == "filled" and delta["corral"]["filled_paths"] == ["/s"]


# ---- Responses ----


@pytest.mark.parametrize("case", CASES)
def test_responses_are_incomplete_for_a_filled_reply(
    served: HTTPServer, model: str, case: str
) -> None:
    schema, tokens, reason = CASES[case]
    client = openai_client(served)
    ask: dict[str, Any] = dict(
        model=model,
        input="Give me JSON.",
        max_output_tokens=tokens,
        temperature=0,
        text={"format": {"type": "json_schema", "name": "reply", "schema": schema}},
    )
    reply = client.responses.create(**ask)
    assert reply.status == "incomplete"
    assert reply.incomplete_details is not None
    assert reply.incomplete_details.reason == "max_output_tokens"
    assert reply.output[-1].status == "incomplete"  # type: ignore[union-attr]
    _filled(reply.model_extra["corral"], reason, schema, reply.output_text)  # type: ignore[index]
    # streamed: the last event is response.incomplete (the SDK's own stream helper raises
    # on it, as it does for OpenAI's own replies cut at max_output_tokens)
    events = list(client.responses.create(**ask, stream=True))
    assert events[-1].type == "response.incomplete"
    assert events[-1].response.status == "incomplete"  # type: ignore[union-attr]


def test_responses_are_completed_only_for_a_reply_the_model_ended(
    served: HTTPServer, model: str
) -> None:
    client = openai_client(served)
    ask: dict[str, Any] = dict(
        model=model,
        input="Give me JSON.",
        max_output_tokens=40,
        temperature=0,
        text={"format": {"type": "json_schema", "name": "reply", "schema": DONE_SCHEMA}},
    )
    reply = client.responses.create(**ask)
    assert reply.status == "completed" and reply.incomplete_details is None
    with client.responses.stream(**ask) as stream:
        assert stream.get_final_response().status == "completed"


def test_a_responses_function_call_corral_completed_is_incomplete(
    served: HTTPServer, model: str
) -> None:
    body = {
        "model": model,
        "input": "Weather?",
        "max_output_tokens": 40,
        "temperature": 0,
        "tools": [{"type": "function", "name": "weather", "parameters": WEATHER}],
        "tool_choice": "required",
    }
    data = httpx.post(served.url + "/v1/responses", json=body, timeout=120).json()
    assert data["status"] == "incomplete"
    assert data["incomplete_details"] == {"reason": "max_output_tokens"}
    call = data["output"][-1]
    assert call["type"] == "function_call" and call["status"] == "incomplete"
    assert all(p.startswith("/tool_calls/0/") for p in data["corral"]["filled_paths"])


# ---- the Batch API ----


def test_batch_lines_carry_the_same_endings(served: HTTPServer, model: str) -> None:
    """A batch line answers as its endpoint would: `length` for a filled reply, `stop` for
    a finished one, `incomplete` for a filled Responses line."""
    import io
    import time

    client = openai_client(served)
    lines = [
        ("filled", "/v1/chat/completions", {"messages": USER, "max_tokens": 36,
         "response_format": _chat_format(BUDGET_SCHEMA)}),
        ("finished", "/v1/chat/completions", {"messages": USER, "max_tokens": 40,
         "response_format": _chat_format(DONE_SCHEMA)}),
        ("responses", "/v1/responses", {"input": "Give me JSON.", "max_output_tokens": 200,
         "text": {"format": {"type": "json_schema", "name": "r", "schema": LOOP_SCHEMA}}}),
    ]  # fmt: skip
    text = "".join(
        json.dumps({"custom_id": name, "method": "POST", "url": url,
                    "body": {"model": model, "temperature": 0, **body}}) + "\n"
        for name, url, body in lines
    )  # fmt: skip
    results: dict[str, Any] = {}
    for endpoint in ("/v1/chat/completions", "/v1/responses"):
        mine = "".join(x for x in text.splitlines(keepends=True) if endpoint in x)
        upload = client.files.create(file=("in.jsonl", io.BytesIO(mine.encode())), purpose="batch")
        batch = client.batches.create(
            input_file_id=upload.id,
            endpoint=endpoint,  # type: ignore[arg-type]
            completion_window="24h",
        )
        deadline = time.monotonic() + 120
        while batch.status not in ("completed", "failed", "cancelled"):
            assert time.monotonic() < deadline
            time.sleep(0.05)
            batch = client.batches.retrieve(batch.id)
        assert batch.output_file_id is not None
        for line in client.files.content(batch.output_file_id).text.splitlines():
            found = json.loads(line)
            results[found["custom_id"]] = found["response"]["body"]
    assert results["filled"]["choices"][0]["finish_reason"] == "length"
    assert results["filled"]["corral"]["ending"] == "filled"
    assert results["finished"]["choices"][0]["finish_reason"] == "stop"
    assert results["responses"]["status"] == "incomplete"
    assert results["responses"]["corral"]["close_reason"] == "repetition"


def test_the_server_log_names_the_ending(served: HTTPServer, model: str) -> None:
    client = openai_client(served)
    before = len(served.activity.records)
    client.chat.completions.create(
        model=model, messages=USER, max_tokens=36, temperature=0,
        response_format=_chat_format(BUDGET_SCHEMA),  # type: ignore[arg-type]
    )  # fmt: skip
    record = list(served.activity.records)[before]
    assert record.ending == "filled" and ", filled" in record.line()
