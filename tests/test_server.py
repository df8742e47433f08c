"""The OpenAI-compatible server over the tiny model, driven by the official `openai` client
(and by httpx, reading the SSE stream as raw text) on a free loopback port."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import jsonschema
import openai
import pytest

from engine.engine import Engine
from engine.server import HTTPServer, RequestRecord, ServerConfig, ServerConfigError
from engine.types import ChatRequest, SamplingSettings

PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 12},
        "age": {"type": "integer", "minimum": 0, "maximum": 120},
        "color": {"enum": ["red", "green", "blue"]},
    },
    "required": ["name", "age", "color"],
    "additionalProperties": False,
}
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather in a city",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "maxLength": 16},
                "unit": {"enum": ["celsius", "fahrenheit"]},
            },
            "required": ["city", "unit"],
        },
    },
}
LONG_SYSTEM = (
    "You are Corral, a careful assistant. Answer briefly, cite nothing, and keep every "
    "answer under three sentences. " * 6
)


@pytest.fixture(scope="module")
def served(tiny_engine: Engine) -> Iterator[HTTPServer]:
    server = HTTPServer(tiny_engine, ServerConfig(port=0))
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def client(served: HTTPServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=served.url + "/v1", api_key="unused", max_retries=0, timeout=120)


@pytest.fixture(scope="module")
def model(tiny_engine: Engine) -> str:
    assert tiny_engine.snapshot.model is not None
    return tiny_engine.snapshot.model.name


def _user(text: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": text}]


def _wait_for_record(server: HTTPServer, status: int, after: int) -> RequestRecord:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        for record in list(server.activity.records)[after:]:
            if record.status == status:
                return record
        time.sleep(0.02)
    raise AssertionError(f"no {status} record; log: {list(server.activity.records)[after:]}")


def _status_error(excinfo: pytest.ExceptionInfo[openai.APIStatusError]) -> dict[str, Any]:
    body = excinfo.value.body
    assert isinstance(body, dict)
    assert "Traceback" not in body["message"]
    return body


# ---- the happy paths ----


def test_models_and_health(client: openai.OpenAI, served: HTTPServer, model: str) -> None:
    assert [m.id for m in client.models.list().data] == [model]
    assert client.models.retrieve(model).id == model
    health = httpx.get(served.url + "/health").json()
    assert health["status"] == "ok" and health["model"] == model


def test_plain_chat(client: openai.OpenAI, model: str) -> None:
    reply = client.chat.completions.create(
        model=model, messages=_user("Say hello."), max_tokens=6, temperature=0
    )
    choice = reply.choices[0]
    assert choice.message.role == "assistant"
    assert isinstance(choice.message.content, str) and choice.message.content
    assert choice.finish_reason in ("length", "stop")
    assert reply.usage is not None and reply.usage.completion_tokens <= 6
    assert reply.usage.prompt_tokens > 0
    stats = reply.model_extra["corral"]  # type: ignore[index]
    assert stats["ttft_ms"] > 0 and stats["constraint"] is None


def test_streaming_matches_usage(client: openai.OpenAI, model: str) -> None:
    stream = client.chat.completions.create(
        model=model,
        messages=_user("Count to ten."),
        max_tokens=12,
        temperature=0,
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    assert chunks[0].choices[0].delta.role == "assistant"
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices]
    assert finishes[-1] in ("length", "stop") and not any(finishes[:-1])
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == 12
    assert text
    assert len({c.id for c in chunks}) == 1


def test_n_choices_decode_side_by_side(client: openai.OpenAI, model: str) -> None:
    """`n` choices: each its own reply (seed + i), every index once, usage summed; the
    same request gives the same choices again, streamed or not."""
    ask = {
        "model": model,
        "messages": _user("Name a colour."),
        "max_tokens": 8,
        "temperature": 1.5,
        "seed": 4,
        "n": 3,
    }
    reply = client.chat.completions.create(**ask)
    texts = [c.message.content for c in reply.choices]
    assert [c.index for c in reply.choices] == [0, 1, 2]
    assert len(set(texts)) > 1
    assert reply.usage is not None and 3 <= reply.usage.completion_tokens <= 3 * 8
    figures = reply.model_extra["corral"]  # type: ignore[index]
    assert len(figures["choices"]) == 3
    stream = client.chat.completions.create(
        **ask, stream=True, stream_options={"include_usage": True}
    )
    streamed = ["", "", ""]
    finishes = [None, None, None]
    chunks = list(stream)
    for chunk in chunks:
        for choice in chunk.choices:
            streamed[choice.index] += choice.delta.content or ""
            finishes[choice.index] = finishes[choice.index] or choice.finish_reason
    assert streamed == texts
    assert all(finishes)
    assert chunks[-1].usage is not None
    assert chunks[-1].usage.completion_tokens == reply.usage.completion_tokens


def test_json_schema_reply_validates(client: openai.OpenAI, model: str) -> None:
    reply = client.chat.completions.create(
        model=model,
        messages=_user("Describe a person as JSON."),
        max_tokens=80,
        response_format={
            "type": "json_schema",
            "json_schema": {"name": "person", "schema": PERSON, "strict": True},
        },
    )
    jsonschema.validate(json.loads(reply.choices[0].message.content or ""), PERSON)
    assert reply.model_extra["corral"]["constraint"] == "person"  # type: ignore[index]


def test_json_object_and_grammar_extension(client: openai.OpenAI, model: str) -> None:
    reply = client.chat.completions.create(
        model=model,
        messages=_user("Any JSON."),
        max_tokens=60,
        response_format={"type": "json_object"},
    )
    if reply.choices[0].finish_reason == "stop":
        assert isinstance(json.loads(reply.choices[0].message.content or ""), dict)
    grammar = 'start: "yes" | "no"\n'
    reply = client.chat.completions.create(
        model=model,
        messages=_user("Yes or no?"),
        max_tokens=5,
        extra_body={"grammar": {"type": "lark", "value": grammar}},
    )
    assert reply.choices[0].message.content in ("yes", "no")
    reply = client.chat.completions.create(
        model=model,
        messages=_user("A date."),
        max_tokens=20,
        extra_body={"grammar": {"type": "regex", "value": r"20[0-9]{2}-[01][0-9]"}},
    )
    assert len(reply.choices[0].message.content or "") == 7


def test_stop_strings_and_seed(client: openai.OpenAI, model: str) -> None:
    reply = client.chat.completions.create(
        model=model,
        messages=_user("Spell it."),
        max_tokens=20,
        stop=["X"],
        extra_body={"grammar": {"type": "regex", "value": "abcXdef"}},
    )
    assert reply.choices[0].message.content == "abc"
    assert reply.choices[0].finish_reason == "stop"
    texts = [
        client.chat.completions.create(
            model=model, messages=_user("Go."), max_tokens=8, temperature=1.5, seed=1234
        )
        .choices[0]
        .message.content
        for _ in range(2)
    ]
    assert texts[0] == texts[1]


def _required_call(client: openai.OpenAI, model: str, stream: bool) -> tuple[str, str, str]:
    kwargs: dict[str, Any] = dict(
        model=model,
        messages=_user("What is the weather in Paris?"),
        tools=[WEATHER],
        tool_choice="required",
        max_tokens=60,
    )
    if not stream:
        reply = client.chat.completions.create(**kwargs)
        assert reply.choices[0].finish_reason == "tool_calls"
        (call,) = reply.choices[0].message.tool_calls or []
        return call.id, call.function.name, call.function.arguments  # type: ignore[union-attr]
    calls: dict[int, dict[str, str]] = {}
    finish = None
    first_pieces: list[Any] = []
    for chunk in client.chat.completions.create(stream=True, **kwargs):
        if not chunk.choices:
            continue
        finish = chunk.choices[0].finish_reason or finish
        for delta in chunk.choices[0].delta.tool_calls or []:
            first_pieces.append(delta)
            call = calls.setdefault(delta.index, {"id": "", "name": "", "arguments": ""})
            if delta.id:
                call["id"] = delta.id
            if delta.function and delta.function.name:
                call["name"] = delta.function.name
            if delta.function and delta.function.arguments:
                call["arguments"] += delta.function.arguments
    assert finish == "tool_calls"
    assert first_pieces[0].id and first_pieces[0].function.name == "get_weather"
    assert len(first_pieces) > 1, "arguments arrive in fragments after the id and name"
    (call,) = calls.values()
    return call["id"], call["name"], call["arguments"]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_required_tool_call_arguments_validate(
    client: openai.OpenAI, model: str, stream: bool
) -> None:
    call_id, name, arguments = _required_call(client, model, stream)
    assert call_id.startswith("call_") and name == "get_weather"
    jsonschema.validate(json.loads(arguments), WEATHER["function"]["parameters"])


def test_response_format_with_tools_on_auto(client: openai.OpenAI, model: str) -> None:
    """Under tool_choice auto the reply is a call or JSON that fits the schema."""
    reply = client.chat.completions.create(
        model=model,
        messages=_user("Describe a person, or look up the weather."),
        tools=[WEATHER],
        max_tokens=80,
        response_format={"type": "json_schema", "json_schema": {"name": "p", "schema": PERSON}},
    )
    choice = reply.choices[0]
    assert reply.model_extra["corral"]["constraint_use"] == "with_tools"  # type: ignore[index]
    if choice.finish_reason == "tool_calls":
        for call in choice.message.tool_calls or []:
            jsonschema.validate(
                json.loads(call.function.arguments), WEATHER["function"]["parameters"]
            )  # type: ignore[union-attr]
    else:
        assert choice.finish_reason == "stop"
        jsonschema.validate(json.loads(choice.message.content or ""), PERSON)


def test_tool_result_continues_the_chat(client: openai.OpenAI, model: str) -> None:
    first = client.chat.completions.create(
        model=model,
        messages=_user("Weather in Oslo?"),
        tools=[WEATHER],
        tool_choice="required",
        max_tokens=60,
        temperature=0,
    )
    message = first.choices[0].message
    (call,) = message.tool_calls or []
    result = "Oslo: 4 degrees, light rain, wind from the north at 20 km/h. " * 3
    history = [
        *_user("Weather in Oslo?"),
        message.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": call.id, "content": result},
    ]
    second = client.chat.completions.create(
        model=model, messages=history, tools=[WEATHER], max_tokens=8, temperature=0
    )
    assert second.choices[0].finish_reason in ("stop", "length", "tool_calls")
    assert first.usage is not None and second.usage is not None
    # The history (call and result) is in the prompt, and the cache kept the first turn.
    assert second.usage.prompt_tokens > first.usage.prompt_tokens + 30
    assert second.usage.prompt_tokens_details is not None
    assert second.usage.prompt_tokens_details.cached_tokens >= first.usage.prompt_tokens - 1


def test_shared_prefix_reports_cached_tokens(client: openai.OpenAI, model: str) -> None:
    system = {"role": "system", "content": LONG_SYSTEM}
    client.chat.completions.create(
        model=model, messages=[system, *_user("First question?")], max_tokens=2
    )
    second = client.chat.completions.create(
        model=model, messages=[system, *_user("A different one?")], max_tokens=2
    )
    assert second.usage is not None and second.usage.prompt_tokens_details is not None
    assert second.usage.prompt_tokens_details.cached_tokens > 50


def test_text_completion(client: openai.OpenAI, model: str) -> None:
    reply = client.completions.create(model=model, prompt="Once upon a time", max_tokens=5)
    assert reply.object == "text_completion"
    assert reply.choices[0].text and reply.choices[0].finish_reason == "length"
    pieces = list(
        client.completions.create(model=model, prompt="Once upon a time", max_tokens=4, stream=True)
    )
    assert "".join(p.choices[0].text for p in pieces if p.choices)


def test_raw_sse_stream_with_httpx(served: HTTPServer, model: str) -> None:
    body = {
        "model": model,
        "messages": _user("Hi"),
        "max_tokens": 5,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    with httpx.stream("POST", served.url + "/v1/chat/completions", json=body, timeout=60) as r:
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("text/event-stream")
        raw = "".join(r.iter_text())
    events = raw.split("\n\n")
    assert events[-1] == "" and events[-2] == "data: [DONE]"
    payloads = []
    for event in events[:-2]:
        assert event.startswith("data: ") and "\n" not in event
        payloads.append(json.loads(event[len("data: ") :]))
    assert all(p["object"] == "chat.completion.chunk" for p in payloads)
    assert payloads[0]["choices"][0]["delta"]["role"] == "assistant"
    assert payloads[-2]["choices"][0]["finish_reason"] == "length"
    assert payloads[-1]["choices"] == [] and payloads[-1]["usage"]["completion_tokens"] == 5


# ---- errors ----


def _post(served: HTTPServer, body: Any, **kwargs: Any) -> httpx.Response:
    return httpx.post(served.url + "/v1/chat/completions", timeout=60, json=body, **kwargs)


def test_malformed_json_and_wrong_types(served: HTTPServer, model: str) -> None:
    r = httpx.post(
        served.url + "/v1/chat/completions",
        content=b'{"model": "x",\n "messages": [}',
        headers={"Content-Type": "application/json"},
    )
    assert r.status_code == 400
    assert "not valid JSON" in r.json()["error"]["message"]
    assert "line 2, column" in r.json()["error"]["message"]
    r = _post(served, {"messages": _user("x"), "temperature": "hot"})
    assert r.status_code == 400 and r.json()["error"]["param"] == "temperature"
    r = _post(served, {"messages": [{"role": "wizard", "content": "x"}]})
    assert r.status_code == 400 and r.json()["error"]["param"] == "messages[0].role"
    r = _post(served, {"messages": _user("x"), "temperature": -1})
    assert r.status_code == 400 and "temperature" in r.json()["error"]["message"]
    r = _post(served, {"messages": []})
    assert r.status_code == 400 and r.json()["error"]["param"] == "messages"
    r = _post(served, {"messages": _user("x"), "frobnicate": 1})
    assert r.status_code == 400
    assert r.json()["error"]["message"] == "unrecognized request argument: frobnicate"
    r = httpx.post(served.url + "/v1/chat/completions", content=b"{}")
    assert r.status_code == 415


def test_schema_and_grammar_errors_carry_diagnostics(client: openai.OpenAI, model: str) -> None:
    with pytest.raises(openai.BadRequestError) as excinfo:
        client.chat.completions.create(
            model=model,
            messages=_user("x"),
            response_format={
                "type": "json_schema",
                "json_schema": {"name": "bad", "schema": {"type": "strnig"}},
            },
        )
    body = _status_error(excinfo)
    assert body["param"] == "response_format.json_schema.schema" and "strnig" in body["message"]
    with pytest.raises(openai.BadRequestError) as excinfo:
        client.chat.completions.create(
            model=model,
            messages=_user("x"),
            extra_body={"grammar": {"type": "lark", "value": 'start: "a" rest\n'}},
        )
    body = _status_error(excinfo)
    assert body["param"] == "grammar.value"
    assert "line 1, column" in body["message"] and "rest" in body["message"]
    with pytest.raises(openai.BadRequestError) as excinfo:
        client.chat.completions.create(
            model=model,
            messages=_user("x"),
            extra_body={"grammar": {"type": "gbnf", "value": 'root ::= "a" missing\n'}},
        )
    assert "missing" in _status_error(excinfo)["message"]
    with pytest.raises(openai.BadRequestError) as excinfo:
        client.chat.completions.create(
            model=model,
            messages=_user("x"),
            extra_body={"grammar": {"type": "regex", "value": "(unclosed"}},
        )
    assert _status_error(excinfo)["param"] == "grammar.value"


@pytest.mark.parametrize(
    ("extra", "param", "words"),
    [
        ({"n": 17}, "n", "at most 16 choices"),
        ({"logprobs": True}, "logprobs", "not supported yet"),
        ({"presence_penalty": 0.5}, "presence_penalty", "repetition_penalty"),
        ({"frequency_penalty": 0.5}, "frequency_penalty", "repetition_penalty"),
        ({"logit_bias": {"1": 5}}, "logit_bias", "not supported"),
        ({"tools": [{"type": "function", "function": {"name": "a b"}}]}, "tools", "invalid name"),
        ({"tools": [WEATHER], "tool_choice": "nope"}, "tool_choice", "nope"),
        ({"tool_choice": "required"}, "tool_choice", "no tools"),
        (
            {
                "tools": [WEATHER],
                "tool_choice": "required",
                "response_format": {"type": "json_object"},
            },
            "response_format",
            "cannot apply when tool_choice forces a call",
        ),
    ],
)
def test_unsupported_and_invalid_options(
    client: openai.OpenAI, model: str, extra: dict[str, Any], param: str, words: str
) -> None:
    with pytest.raises(openai.BadRequestError) as excinfo:
        client.chat.completions.create(
            model=model, messages=_user("x"), max_tokens=2, extra_body=extra
        )
    body = _status_error(excinfo)
    assert body["param"] == param and words in body["message"]


def test_images_are_refused_for_a_text_model(client: openai.OpenAI, model: str) -> None:
    content = [
        {"type": "text", "text": "What is this?"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
    ]
    with pytest.raises(openai.BadRequestError) as excinfo:
        client.chat.completions.create(
            model=model,
            messages=[{"role": "user", "content": content}],  # type: ignore[list-item]
        )
    body = _status_error(excinfo)
    assert body["param"] == "messages[0].content[1]" and "text only" in body["message"]


def test_unknown_model_and_route(client: openai.OpenAI, served: HTTPServer, model: str) -> None:
    with pytest.raises(openai.NotFoundError) as excinfo:
        client.chat.completions.create(model="gpt-4o", messages=_user("x"))
    body = _status_error(excinfo)
    assert body["code"] == "model_not_found" and model in body["message"]
    r = httpx.get(served.url + "/v1/nothing")
    assert r.status_code == 404 and "no such endpoint" in r.json()["error"]["message"]


def test_host_header_must_be_loopback(served: HTTPServer) -> None:
    r = httpx.get(served.url + "/v1/models", headers={"Host": "attacker.example"})
    assert r.status_code == 400 and "attacker.example" in r.json()["error"]["message"]


def test_api_key_body_limit_queue_and_cors(tiny_engine: Engine, model: str) -> None:
    config = ServerConfig(
        port=0,
        api_key="s3cret-key",
        max_body_bytes=4096,
        max_queued_requests=1,
        cors_origins=["http://app.example"],
    )
    server = HTTPServer(tiny_engine, config)
    server.start()
    try:
        base = server.url + "/v1"
        for key in (None, "wrong-key"):
            headers = {"Authorization": f"Bearer {key}"} if key else {}
            r = httpx.post(
                base + "/chat/completions", json={"messages": _user("x")}, headers=headers
            )
            assert r.status_code == 401 and r.json()["error"]["code"] == "invalid_api_key"
        assert "s3cret" not in "".join(rec.line() for rec in server.activity.records)
        good = openai.OpenAI(base_url=base, api_key="s3cret-key", max_retries=0)
        with pytest.raises(openai.APIStatusError) as excinfo:
            good.chat.completions.create(model=model, messages=_user("x" * 5000))
        assert excinfo.value.status_code == 413
        # One long stream holds the only slot: the next request is turned away.
        stream = good.chat.completions.create(
            model=model,
            messages=_user("x"),
            max_tokens=400,
            stream=True,
            extra_body={"grammar": {"type": "regex", "value": "[a-z ]{300,}"}},
        )
        next(iter(stream))
        with pytest.raises(openai.APIStatusError) as excinfo:
            good.chat.completions.create(model=model, messages=_user("y"), max_tokens=2)
        assert excinfo.value.status_code == 503
        assert _status_error(excinfo)["code"] == "queue_full"
        stream.close()
        preflight = httpx.options(
            base + "/chat/completions",
            headers={
                "Origin": "http://app.example",
                "Access-Control-Request-Method": "POST",
                "Access-Control-Request-Headers": "authorization,content-type",
            },
        )
        assert preflight.headers["access-control-allow-origin"] == "http://app.example"
    finally:
        server.stop()


def test_cors_is_closed_by_default(served: HTTPServer) -> None:
    r = httpx.get(served.url + "/v1/models", headers={"Origin": "http://app.example"})
    assert "access-control-allow-origin" not in r.headers


# ---- cancellation and sharing ----


def test_disconnect_mid_stream_cancels_and_the_next_request_succeeds(
    served: HTTPServer, client: openai.OpenAI, model: str
) -> None:
    before = len(served.activity.records)
    body = {
        "model": model,
        "messages": _user("Write forever."),
        "max_tokens": 1500,
        "stream": True,
        "grammar": {"type": "regex", "value": "[a-z ]{1200,}"},
    }
    with httpx.stream("POST", served.url + "/v1/chat/completions", json=body, timeout=60) as r:
        lines = r.iter_lines()
        for _ in range(6):
            next(lines)
    record = _wait_for_record(served, 499, before)
    assert record.stop_reason == "cancelled" and record.completion_tokens < 1500
    assert served.activity.active == 0
    reply = client.chat.completions.create(model=model, messages=_user("Hi"), max_tokens=3)
    assert reply.choices[0].finish_reason == "length"


def test_window_and_server_share_the_engine(
    tiny_engine: Engine, client: openai.OpenAI, model: str
) -> None:
    """A reply submitted straight to the engine (as the window does) and one over HTTP, at the
    same time, each get the text they get alone (greedy)."""
    question = _user("Tell me about lighthouses.")

    def alone_http() -> str:
        reply = client.chat.completions.create(
            model=model, messages=question, max_tokens=16, temperature=0
        )
        return reply.choices[0].message.content or ""

    window_request = ChatRequest(
        _user("Something else entirely."), SamplingSettings(temperature=0, max_tokens=16)
    )
    want_window = tiny_engine.chat(window_request).text
    want_http = alone_http()
    got: dict[str, str] = {}
    thread = threading.Thread(target=lambda: got.setdefault("http", alone_http()))
    handle = tiny_engine.submit(window_request)
    thread.start()
    got["window"] = handle.result(timeout=60).text
    thread.join(60)
    assert got == {"window": want_window, "http": want_http}


# ---- starting ----


def test_public_bind_without_a_key_is_refused(tiny_engine: Engine) -> None:
    with pytest.raises(ServerConfigError, match="without an API key"):
        HTTPServer(tiny_engine, ServerConfig(host="0.0.0.0", port=0))
    ServerConfig(host="0.0.0.0", api_key="k").check()  # a key makes it acceptable
    ServerConfig(host="::1").check()
    done = subprocess.run(
        [sys.executable, "-m", "engine", "serve", "--host", "0.0.0.0", "--port", "0"],
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 2
    assert "refusing to serve on 0.0.0.0 without an API key" in done.stderr


def test_a_busy_port_is_reported(served: HTTPServer, tiny_engine: Engine) -> None:
    with pytest.raises(ServerConfigError, match="already in use"):
        HTTPServer(tiny_engine, ServerConfig(port=served.port or 0)).start()


def test_serve_command_prints_its_url_and_stops_on_ctrl_c(tiny_model_dir) -> None:
    import os
    import signal

    proc = subprocess.Popen(
        [sys.executable, "-m", "engine", "serve", "--model", str(tiny_model_dir), "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "CORRAL_API_KEY": "cli-key"},
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("Serving tiny") and "Ctrl+C" in line, line
        url = line.split(" on ", 1)[1].split(" ", 1)[0]
        client = openai.OpenAI(base_url=url + "/v1", api_key="cli-key", max_retries=0)
        reply = client.chat.completions.create(
            messages=_user("hi"), model=tiny_model_dir.name, max_tokens=2
        )
        assert reply.usage is not None and reply.usage.completion_tokens == 2
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err[-2000:]
    assert "200 /v1/chat/completions" in err and "Stopped." in err
    assert "cli-key" not in err
