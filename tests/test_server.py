"""The OpenAI-compatible server over the tiny model, driven by the official `openai` client
(and by httpx, reading the SSE stream as raw text) on a free loopback port."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import jsonschema
import openai
import pytest
from server_support import leave_mid_stream, openai_client, serving, wait_for_record

from engine.engine import Engine
from engine.server import HTTPServer, ServerConfig, ServerConfigError
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
    with serving(tiny_engine) as server:
        yield server


@pytest.fixture(scope="module")
def client(served: HTTPServer) -> openai.OpenAI:
    return openai_client(served)


@pytest.fixture(scope="module")
def model(tiny_engine: Engine) -> str:
    assert tiny_engine.snapshot.model is not None
    return tiny_engine.snapshot.model.name


def _user(text: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": text}]


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
    assert reply.model_extra["corral"]["valid_as_written"] is True  # type: ignore[index]


def test_a_reply_invalid_as_written_says_so(client: openai.OpenAI, model: str) -> None:
    """llguidance ignores `not`: the reply fits what was enforced, and the corral object
    says it does not fit the schema as the client wrote it, and where."""
    schema = {
        "type": "object",
        "properties": {"a": {"type": "string", "maxLength": 4, "not": {"pattern": "^"}}},
        "required": ["a"],
        "additionalProperties": False,
    }
    body = {"type": "json_schema", "json_schema": {"name": "never", "schema": schema}}
    for stream in (False, True):
        if stream:
            chunks = list(
                client.chat.completions.create(
                    model=model,
                    messages=_user("Fill it in."),
                    max_tokens=30,
                    temperature=0,
                    response_format=body,  # type: ignore[arg-type]
                    stream=True,
                )
            )
            stats = [c for c in chunks if c.choices][-1].model_extra["corral"]  # type: ignore[index]
        else:
            reply = client.chat.completions.create(
                model=model,
                messages=_user("Fill it in."),
                max_tokens=30,
                temperature=0,
                response_format=body,  # type: ignore[arg-type]
            )
            stats = reply.model_extra["corral"]  # type: ignore[index]
        assert stats["valid_as_written"] is False
        assert stats["invalid_as_written"]["keyword"] == "not"


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


def test_max_completion_tokens_and_corral_extras(client: openai.OpenAI, model: str) -> None:
    long = {"grammar": {"type": "regex", "value": "[a-z]{40}"}}
    reply = client.chat.completions.create(
        model=model, messages=_user("Go."), max_completion_tokens=3, extra_body=long
    )
    assert reply.usage is not None and reply.usage.completion_tokens == 3
    assert reply.choices[0].finish_reason == "length"
    # Corral's top_k: with one candidate a hot temperature samples what greedy picks.
    greedy, top_one = (
        client.chat.completions.create(
            model=model, messages=_user("Go on."), max_tokens=8, **kwargs
        )
        .choices[0]
        .message.content
        for kwargs in (
            {"temperature": 0},
            {"temperature": 1.5, "seed": 7, "extra_body": {"top_k": 1, "min_p": 0.05}},
        )
    )
    assert greedy == top_one
    with pytest.raises(openai.BadRequestError) as excinfo:
        client.chat.completions.create(
            model=model, messages=_user("x"), extra_body={"repetition_penalty": 0}
        )
    assert _status_error(excinfo)["param"] == "repetition_penalty"


def test_the_corral_object_reports_the_reply(client: openai.OpenAI, model: str) -> None:
    """TTFT, tok/s, forced tokens, mask overhead and warnings, whole and streamed."""
    forced = {"grammar": {"type": "regex", "value": "The answer is (yes|no)[.]"}}
    # Greedy, so the whole and the streamed reply take the same branch (yes or no) and
    # force the same tokens.
    reply = client.chat.completions.create(
        model=model, messages=_user("Yes?"), max_tokens=20, temperature=0, extra_body=forced
    )
    stats = reply.model_extra["corral"]  # type: ignore[index]
    assert reply.choices[0].message.content in ("The answer is yes.", "The answer is no.")
    assert stats["constraint"] == "regex grammar" and stats["stop_reason"] == "eos"
    assert stats["forced_tokens"] >= 3  # "The answer is" is the grammar's, not the model's
    assert stats["ttft_ms"] > 0 and stats["decode_tps"] > 0 and stats["total_ms"] > 0
    assert stats["mask_overhead_ms"] >= 0 and stats["warnings"] == []
    assert stats["incomplete"] is False
    chunks = list(
        client.chat.completions.create(
            model=model,
            messages=_user("Yes?"),
            max_tokens=20,
            temperature=0,
            stream=True,
            extra_body=forced,
        )
    )
    last = [c for c in chunks if c.choices][-1]
    assert last.choices[0].finish_reason == "stop"
    streamed = last.model_extra["corral"]  # type: ignore[index]
    assert streamed["forced_tokens"] == stats["forced_tokens"]
    # Without stream_options.include_usage there is no usage chunk.
    assert all(c.choices for c in chunks) and all(c.usage is None for c in chunks)


def _call_finish(finish: str | None, corral: dict[str, Any]) -> None:
    """A reply that is a call: `tool_calls` when the model finished it, `length` when Corral
    completed its arguments (the rambling tiny model's often are), never anything else."""
    if corral["ending"] == "finished":
        assert finish == "tool_calls"
    else:
        assert corral["ending"] == "filled" and finish == "length"
        assert all(p.startswith("/tool_calls/") for p in corral["filled_paths"])


def _required_call(client: openai.OpenAI, model: str, stream: bool) -> tuple[str, str, str]:
    kwargs: dict[str, Any] = dict(
        model=model,
        messages=_user("What is the weather in Paris?"),
        tools=[WEATHER],
        tool_choice="required",
        parallel_tool_calls=False,  # one call to check (unseeded, a second call sometimes followed)
        temperature=0,
        max_tokens=60,
    )
    if not stream:
        reply = client.chat.completions.create(**kwargs)
        _call_finish(reply.choices[0].finish_reason, reply.model_extra["corral"])  # type: ignore[index]
        (call,) = reply.choices[0].message.tool_calls or []
        return call.id, call.function.name, call.function.arguments  # type: ignore[union-attr]
    calls: dict[int, dict[str, str]] = {}
    finish, corral = None, {}
    first_pieces: list[Any] = []
    for chunk in client.chat.completions.create(stream=True, **kwargs):
        if not chunk.choices:
            continue
        finish = chunk.choices[0].finish_reason or finish
        corral = (chunk.model_extra or {}).get("corral") or corral
        for delta in chunk.choices[0].delta.tool_calls or []:
            first_pieces.append(delta)
            call = calls.setdefault(delta.index, {"id": "", "name": "", "arguments": ""})
            if delta.id:
                call["id"] = delta.id
            if delta.function and delta.function.name:
                call["name"] = delta.function.name
            if delta.function and delta.function.arguments:
                call["arguments"] += delta.function.arguments
    _call_finish(finish, corral)
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
    if choice.message.tool_calls:  # `tool_calls`, or `length` where Corral completed one
        for call in choice.message.tool_calls or []:
            jsonschema.validate(
                json.loads(call.function.arguments), WEATHER["function"]["parameters"]
            )  # type: ignore[union-attr]
    else:
        assert choice.finish_reason in ("stop", "length")
        jsonschema.validate(json.loads(choice.message.content or ""), PERSON)


PRICE = {
    "type": "function",
    "function": {
        "name": "instrument_price.get",
        "description": "Current price of a financial instrument",
        "parameters": {
            "type": "object",
            "properties": {
                "ticker": {"type": "string", "enum": ["AAPL", "MSFT"]},
                "when": {
                    "type": "object",
                    "properties": {"days_ago": {"type": "integer", "minimum": 0, "maximum": 9}},
                    "required": ["days_ago"],
                },
            },
            "required": ["ticker", "when"],
        },
    },
}


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_dotted_tool_names_and_a_named_tool_choice(
    client: openai.OpenAI, model: str, stream: bool
) -> None:
    """MCP- and BFCL-style names (`instrument_price.get`) work through the API; a named
    tool_choice calls that tool; parallel_tool_calls false gives one call."""
    kwargs: dict[str, Any] = dict(
        model=model,
        messages=_user("Price of Apple two days ago?"),
        tools=[WEATHER, PRICE],
        tool_choice={"type": "function", "function": {"name": "instrument_price.get"}},
        parallel_tool_calls=False,
        max_tokens=60,
    )
    if stream:
        names, arguments, finish, corral = [], "", None, {}
        for chunk in client.chat.completions.create(stream=True, **kwargs):
            finish = (chunk.choices[0].finish_reason if chunk.choices else None) or finish
            corral = (chunk.model_extra or {}).get("corral") or corral
            for delta in chunk.choices[0].delta.tool_calls or [] if chunk.choices else []:
                assert delta.index == 0
                if delta.function and delta.function.name:
                    names.append(delta.function.name)
                arguments += (delta.function.arguments or "") if delta.function else ""
    else:
        reply = client.chat.completions.create(**kwargs)
        finish, corral = reply.choices[0].finish_reason, reply.model_extra["corral"]  # type: ignore[index]
        calls = reply.choices[0].message.tool_calls or []
        names = [c.function.name for c in calls]  # type: ignore[union-attr]
        arguments = calls[0].function.arguments  # type: ignore[union-attr]
    _call_finish(finish, corral)
    assert names == ["instrument_price.get"]
    jsonschema.validate(json.loads(arguments), PRICE["function"]["parameters"])


def test_tool_choice_none_answers_in_text(client: openai.OpenAI, model: str) -> None:
    reply = client.chat.completions.create(
        model=model,
        messages=_user("Weather in Rome?"),
        tools=[WEATHER, PRICE],
        tool_choice="none",
        max_tokens=12,
    )
    assert reply.choices[0].message.tool_calls is None
    assert reply.choices[0].finish_reason in ("stop", "length")


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
    # Greedy, so the streamed text can be compared with the whole one (a random model's
    # sampled tokens may be byte fragments that decode to nothing).
    kwargs: dict[str, Any] = dict(
        model=model, prompt="Once upon a time", max_tokens=5, temperature=0
    )
    reply = client.completions.create(**kwargs)
    assert reply.object == "text_completion"
    assert reply.choices[0].text and reply.choices[0].finish_reason == "length"
    pieces = list(client.completions.create(stream=True, **kwargs))
    assert "".join(p.choices[0].text for p in pieces if p.choices) == reply.choices[0].text
    assert pieces[-1].choices[0].finish_reason == "length"


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


@pytest.mark.parametrize(
    ("raw", "param", "words"),
    [
        # Python refuses integers over 4300 digits: a 400, not an internal error
        (b'{"messages": [], "max_tokens": ' + b"9" * 5000 + b"}", None, "too long"),
        # a lone surrogate, which JSON's \u escapes can spell but no tokenizer can read
        (
            b'{"messages": [{"role": "user", "content": "\\ud800 hi"}]}',
            "messages[0].content",
            "not valid Unicode",
        ),
        # types are strict, as OpenAI's are: no strings for numbers, no numbers for booleans
        (
            b'{"messages": [{"role": "user", "content": "x"}], "temperature": "0.5"}',
            "temperature",
            "valid number",
        ),
        (
            b'{"messages": [{"role": "user", "content": "x"}], "max_tokens": true}',
            "max_tokens",
            "valid integer",
        ),
        (
            b'{"messages": [{"role": "user", "content": "x"}], "max_tokens": 5.0}',
            "max_tokens",
            "valid integer",
        ),
        (
            b'{"messages": [{"role": "user", "content": "x"}], "stream": "true"}',
            "stream",
            "valid boolean",
        ),
        (
            b'{"messages": [{"role": "user", "content": 5}]}',
            "messages[0].content",
            "valid string",
        ),
        (
            b'{"messages": [{"role": "user", "content": "x"}], "temperature": NaN}',
            "temperature",
            "finite",
        ),
        (b"[1, 2]", None, "must be a JSON object"),
        (b'{"messages": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", None, "nested too deeply"),
    ],
    ids=[
        "huge-int",
        "surrogate",
        "str-number",
        "bool-int",
        "float-int",
        "str-bool",
        "int-content",
        "nan",
        "array",
        "deep",
    ],
)
def test_bodies_the_server_cannot_read_are_400s(
    served: HTTPServer, raw: bytes, param: str | None, words: str
) -> None:
    r = httpx.post(
        served.url + "/v1/chat/completions",
        content=raw,
        headers={"Content-Type": "application/json"},
        timeout=60,
    )
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert error["param"] == param and words in error["message"], error
    assert error["type"] == "invalid_request_error" and "Traceback" not in r.text


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
    assert body["param"] == "response_format.json_schema.schema.type"
    assert body["message"] == "response_format.json_schema.schema.type: Invalid type: strnig"
    # A schema has no lines of its own (the client serialised it): its errors are placed by
    # their path inside it, in param and message.
    nested = {
        "type": "object",
        "properties": {
            "when": {"type": "string", "format": "date"},
            "tags": {"type": "array", "items": {"type": "strnig"}},
        },
    }
    with pytest.raises(openai.BadRequestError) as excinfo:
        client.chat.completions.create(
            model=model,
            messages=_user("x"),
            response_format={
                "type": "json_schema",
                "json_schema": {"name": "nested", "schema": nested},
            },
        )
    body = _status_error(excinfo)
    assert body["param"] == "response_format.json_schema.schema.properties.tags.items.type"
    assert "Invalid type: strnig" in body["message"]
    # A keyword Corral cannot enforce is ignored (lenient by default) and named as a warning.
    lenient = {"type": "array", "items": {"type": "string", "not": {"pattern": "\\d"}}}
    reply = client.chat.completions.create(
        model=model,
        messages=_user("x"),
        max_tokens=8,
        response_format={"type": "json_schema", "json_schema": {"name": "l", "schema": lenient}},
    )
    warnings = reply.model_extra["corral"]["warnings"]  # type: ignore[index]
    assert any("not" in w for w in warnings), warnings
    bad_tool = {
        "type": "function",
        "function": {
            "name": "lookup",
            "parameters": {
                "type": "object",
                "properties": {"q": {"type": "string", "minLength": "3"}},
            },
        },
    }
    with pytest.raises(openai.BadRequestError) as excinfo:
        client.chat.completions.create(model=model, messages=_user("x"), tools=[WEATHER, bad_tool])
    body = _status_error(excinfo)
    assert body["param"] == "tools[1].function.parameters.properties.q.minLength"
    assert body["message"].startswith('tools: tool 2 ("lookup"): "parameters" is not a usable')
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
    body = _status_error(excinfo)
    assert "missing" in body["message"] and body["param"] == "grammar.value"
    with pytest.raises(openai.BadRequestError) as excinfo:
        client.chat.completions.create(
            model=model,
            messages=_user("x"),
            extra_body={"grammar": {"type": "gbnf", "value": 'root ::= "a"\nfoo ::= (\n'}},
        )
    assert "line 3, column 1" in _status_error(excinfo)["message"]
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
        ({"top_logprobs": 3}, "top_logprobs", "needs logprobs set to true"),
        ({"logprobs": 1}, "logprobs", "must be true or false"),
        ({"presence_penalty": 0.5}, "presence_penalty", "repetition_penalty"),
        ({"frequency_penalty": 0.5}, "frequency_penalty", "repetition_penalty"),
        ({"logit_bias": {"1": 5}}, "logit_bias", "not supported"),
        (
            {"tools": [{"type": "function", "function": {"name": "a b"}}]},
            "tools[0]",
            "invalid name",
        ),
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
    # checked at the edge first (a text model refuses a valid image: tests/test_vision_server.py)
    assert body["param"] == "messages[0].content[1]" and "not an image" in body["message"]


def test_unknown_model_and_route(client: openai.OpenAI, served: HTTPServer, model: str) -> None:
    with pytest.raises(openai.NotFoundError) as excinfo:
        client.chat.completions.create(model="gpt-4o", messages=_user("x"))
    body = _status_error(excinfo)
    assert body["code"] == "model_not_found" and model in body["message"]
    r = httpx.get(served.url + "/v1/nothing")
    assert r.status_code == 404 and "no such endpoint" in r.json()["error"]["message"]
    r = httpx.get(served.url + "/v1/models/gpt-4o")
    assert r.status_code == 404 and r.json()["error"]["code"] == "model_not_found"
    r = httpx.post(served.url + "/v1/completions", json={"model": "gpt-4o", "prompt": "x"})
    assert r.status_code == 404 and r.json()["error"]["param"] == "model"


def test_an_unexpected_error_is_a_500_without_a_traceback(tiny_engine: Engine) -> None:
    """A bug behind an endpoint answers with OpenAI's error body; the traceback goes to the
    server's log only."""
    from starlette.routing import Route
    from starlette.testclient import TestClient

    from engine.server import ServerActivity
    from engine.server.app import create_app

    app = create_app(tiny_engine, ServerConfig(), ServerActivity())

    async def broken(request: Any) -> Any:
        raise RuntimeError("secret internals at 0xdeadbeef")

    app.router.routes.append(Route("/v1/broken", broken))
    with TestClient(app, base_url="http://127.0.0.1", raise_server_exceptions=False) as http:
        r = http.get("/v1/broken")
    assert r.status_code == 500
    error = r.json()["error"]
    assert error["type"] == "server_error" and error["code"] == "internal_error"
    assert error["message"] == "internal error (RuntimeError); the server log has the details"
    assert "Traceback" not in r.text and "0xdeadbeef" not in r.text


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
        # A body sent in chunks, without Content-Length, is cut off at the limit too.
        chunks = iter([b'{"messages": [{"role": "user", "content": "', b"x" * 5000, b'"}]}'])
        r = httpx.post(
            base + "/chat/completions",
            content=chunks,
            headers={"Authorization": "Bearer s3cret-key", "Content-Type": "application/json"},
        )
        assert r.status_code == 413 and r.json()["error"]["code"] == "body_too_large"
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
    leave_mid_stream(served, body)
    record = wait_for_record(served, 499, before)
    assert record.stop_reason == "cancelled" and record.completion_tokens < 1500
    assert served.activity.active == 0
    reply = client.chat.completions.create(model=model, messages=_user("Hi"), max_tokens=3)
    assert reply.choices[0].finish_reason == "length"


def test_a_client_leaving_a_whole_reply_cancels_it_and_the_cache_keeps_the_prompt(
    served: HTTPServer, client: openai.OpenAI, model: str
) -> None:
    """Without streaming too: a client that gives up cancels its reply (499 in the log,
    far from its token limit), and the prompt it had computed stays in the trie."""
    before = len(served.activity.records)
    messages = [{"role": "system", "content": LONG_SYSTEM + " (disconnect test)"}]
    messages += _user("Write forever.")
    body = {
        "model": model,
        "messages": messages,
        "max_tokens": 3000,
        "grammar": {"type": "regex", "value": "[a-z ]{2500,}"},
    }
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(served.url + "/v1/chat/completions", json=body, timeout=1.0)
    record = wait_for_record(served, 499, before)
    assert record.stop_reason == "cancelled" and record.completion_tokens < 3000
    assert served.activity.active == 0
    again = client.chat.completions.create(model=model, messages=messages, max_tokens=2)  # type: ignore[arg-type]
    assert again.usage is not None and again.usage.prompt_tokens_details is not None
    assert again.usage.prompt_tokens_details.cached_tokens >= again.usage.prompt_tokens - 1


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


def test_public_bind_without_a_key_is_refused(tiny_engine: Engine, tmp_path: Path) -> None:
    with pytest.raises(ServerConfigError, match="without an API key"):
        HTTPServer(tiny_engine, ServerConfig(host="0.0.0.0", port=0))
    ServerConfig(host="0.0.0.0", api_key="k").check()  # a key makes it acceptable
    ServerConfig(host="::1").check()
    done = subprocess.run(
        [sys.executable, "-m", "engine", "serve", "--host", "0.0.0.0", "--port", "0"],
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": "/usr/bin:/bin", "CORRAL_LOG_DIR": str(tmp_path)},
    )
    assert done.returncode == 2
    assert "refusing to serve on 0.0.0.0 without an API key" in done.stderr
    # The refusal is in the app's log as well, where a bug report's diagnostics find it.
    logged = (tmp_path / "corral.log").read_text()
    assert "ERROR" in logged and "serve failed: refusing to serve on 0.0.0.0" in logged


def test_a_busy_port_is_reported(served: HTTPServer, tiny_engine: Engine) -> None:
    with pytest.raises(ServerConfigError, match="already in use"):
        HTTPServer(tiny_engine, ServerConfig(port=served.port or 0)).start()


def test_serve_command_prints_its_url_and_stops_on_ctrl_c(tiny_model_dir, tmp_path) -> None:
    import os
    import signal

    proc = subprocess.Popen(
        [sys.executable, "-m", "engine", "serve", "--model", str(tiny_model_dir), "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "CORRAL_API_KEY": "cli-key", "CORRAL_LOG_DIR": str(tmp_path)},
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
    # The app's log folder records the load and the server's life (info), never the key.
    logged = (tmp_path / "corral.log").read_text()
    assert "model loaded in" in logged and "serving tiny" in logged.lower()
    assert "server stopped" in logged and "cli-key" not in logged
    assert "/v1/chat/completions" not in logged  # request lines only at debug
