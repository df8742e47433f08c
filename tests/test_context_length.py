"""Prompts longer than the model reads are refused before any prefill, with the numbers;
replies stop where the context ends; the server answers OpenAI's context_length_exceeded."""

from __future__ import annotations

import re
from collections.abc import Iterator

import httpx
import pytest
from conftest import SHORT_CONTEXT
from server_support import serving

from engine.engine import Engine
from engine.runtime.context import CONTEXT_LENGTH_EXCEEDED, ContextLengthError, reply_budget
from engine.types import ChatRequest, SamplingSettings, StopReason


def _tool(i: int) -> dict:
    return {
        "type": "function",
        "function": {
            "name": f"tool_{i}",
            "description": "Looks up one thing in a large catalogue of things. " * 3,
            "parameters": {"type": "object", "properties": {"q": {"type": "string"}}},
        },
    }


def test_a_prompt_longer_than_the_context_is_refused_with_the_numbers(short_engine) -> None:
    request = ChatRequest(
        [{"role": "user", "content": "word " * 2000}], SamplingSettings(max_tokens=8)
    )
    result = short_engine.chat(request)
    assert result.error is not None and result.error_kind == "input"
    assert result.error_code == CONTEXT_LENGTH_EXCEEDED
    n = result.stats.prompt_tokens
    assert n > 2000
    assert f"prompt is {n:,} tokens; this model reads at most {SHORT_CONTEXT}" in result.error
    assert result.stats.generated_tokens == 0 and result.stats.ttft_s == 0.0  # no prefill


def test_tool_definitions_count_and_the_message_says_how_much(short_engine) -> None:
    request = ChatRequest(
        [{"role": "user", "content": "hi"}],
        SamplingSettings(max_tokens=8),
        tools=[_tool(i) for i in range(20)],
    )
    result = short_engine.chat(request)
    assert result.error_code == CONTEXT_LENGTH_EXCEEDED
    assert "the tool definitions take" in (result.error or "")
    taken = int(result.error.split("take ")[1].split(" of")[0].replace(",", ""))
    assert 0.8 * result.stats.prompt_tokens < taken < result.stats.prompt_tokens


def test_a_reply_stops_where_the_context_ends(short_engine) -> None:
    request = ChatRequest(
        [{"role": "user", "content": "word " * 200}],
        SamplingSettings(temperature=10.0, max_tokens=500, seed=1),
    )
    result = short_engine.chat(request)
    assert result.error is None, result.error
    assert result.stats.prompt_tokens + result.stats.generated_tokens <= SHORT_CONTEXT
    assert result.stop_reason in (StopReason.LENGTH, StopReason.EOS)
    if result.stop_reason == StopReason.LENGTH:
        assert result.stats.prompt_tokens + result.stats.generated_tokens == SHORT_CONTEXT


def test_budget_rules() -> None:
    assert reply_budget(10, None, 512) == 512
    assert reply_budget(10, 100, 512) == 90
    assert reply_budget(10, 100, 5) == 5
    with pytest.raises(ContextLengthError, match="reads at most 100, and a reply needs"):
        reply_budget(100, 100, 5)
    with pytest.raises(ContextLengthError, match=r"27,312 tokens; this model reads at most 8,192"):
        reply_budget(27_312, 8_192, 5, lambda: 0)


@pytest.fixture(scope="module")
def served(short_engine: Engine) -> Iterator[str]:
    with serving(short_engine) as server:
        yield server.url


@pytest.mark.parametrize("stream", [False, True])
def test_the_server_answers_context_length_exceeded(
    served: str, short_engine: Engine, stream: bool
) -> None:
    assert short_engine.snapshot.model is not None
    body = {
        "model": short_engine.snapshot.model.name,
        "messages": [{"role": "user", "content": "word " * 2000}],
        "max_tokens": 4,
        "stream": stream,
    }
    response = httpx.post(served + "/v1/chat/completions", json=body, timeout=120)
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == CONTEXT_LENGTH_EXCEEDED
    assert f"this model reads at most {SHORT_CONTEXT}" in error["message"]


@pytest.mark.slow
def test_the_default_model_refuses_a_20000_token_prompt_before_prefill(default_engine) -> None:
    result = default_engine.chat(
        ChatRequest([{"role": "user", "content": "word " * 20_000}], SamplingSettings(max_tokens=4))
    )
    assert result.error_code == CONTEXT_LENGTH_EXCEEDED
    assert "this model reads at most 8,192" in (result.error or "")
    assert result.stats.prompt_tokens > 20_000 and result.stats.ttft_s == 0.0


def test_messages_answer_prompt_is_too_long_with_the_numbers(
    served: str, short_engine: Engine
) -> None:
    import anthropic

    assert short_engine.snapshot.model is not None
    client = anthropic.Anthropic(base_url=served, api_key="unused", max_retries=0)
    with pytest.raises(anthropic.BadRequestError) as excinfo:
        client.messages.create(
            model=short_engine.snapshot.model.name,
            max_tokens=4,
            messages=[{"role": "user", "content": "word " * 2000}],
        )
    error = excinfo.value.body["error"]  # type: ignore[index]
    assert error["type"] == "invalid_request_error"
    found = re.fullmatch(r"prompt is too long: (\d+) tokens > (\d+) maximum", error["message"])
    assert found is not None, error["message"]
    # the maximum is the most prompt tokens that leave a reply room: one token short of it
    assert int(found.group(1)) > 2000 and int(found.group(2)) == SHORT_CONTEXT - 1


@pytest.mark.parametrize("stream", [False, True])
def test_responses_answer_context_length_exceeded(
    served: str, short_engine: Engine, stream: bool
) -> None:
    import openai

    assert short_engine.snapshot.model is not None
    client = openai.OpenAI(base_url=served + "/v1", api_key="unused", max_retries=0)
    with pytest.raises(openai.BadRequestError) as excinfo:
        client.responses.create(
            model=short_engine.snapshot.model.name,
            input="word " * 2000,
            max_output_tokens=4,
            stream=stream,
        )
    error = excinfo.value.body  # the SDK hands the error object itself
    assert isinstance(error, dict) and error["code"] == CONTEXT_LENGTH_EXCEEDED
    assert f"this model reads at most {SHORT_CONTEXT}" in error["message"]


# ---- the context's edge (issue 44): no room is refused with both numbers; a little decodes ----

EDGE_TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "read",
            "description": "Read a file",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string"}},
                "required": ["path"],
            },
        },
    }
]
EDGE_SCHEMA = {  # its shortest valid ending from the start is ~26 tokens on this tokenizer
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "tags": {"type": "array", "items": {"type": "string"}, "minItems": 2},
        "n": {"type": "integer"},
        "code": {"type": "string", "pattern": "^[A-Z]{2}-[0-9]{4}$"},
    },
    "required": ["name", "tags", "n", "code"],
}
MAX_PROMPT = re.compile(r"at most (\d+) prompt tokens leave it room")


def _leaving(url: str, model: str, room: int, **extra: object) -> tuple[str, int]:
    """A user message whose chat completion prompt (with `extra`: tools, a format) leaves
    `room` tokens of the context, and that prompt's length; measured by the server."""

    def prompt(words: int) -> int:
        body = {
            "model": model,
            "messages": [{"role": "user", "content": "word " * words}],
            "max_tokens": 1,  # max_tokens binds, not the context: never refused
            **extra,
        }
        reply = httpx.post(url + "/v1/chat/completions", json=body, timeout=120)
        assert reply.status_code == 200, reply.text
        return int(reply.json()["usage"]["prompt_tokens"])

    words = 20
    for _ in range(4):  # a word is a token here, nearly always: two tries, at most four
        length = prompt(words)
        if length == SHORT_CONTEXT - room:
            return "word " * words, length
        words += SHORT_CONTEXT - room - length
    raise AssertionError(f"no prompt of {SHORT_CONTEXT - room} tokens found")


@pytest.mark.parametrize("stream", [False, True])
def test_chat_completions_refuse_a_prompt_that_leaves_the_format_no_room(
    served: str, short_engine: Engine, stream: bool
) -> None:
    """OpenCode's case: tools offered, a few tokens left. Corral's closing would take them
    all before the model wrote one (a 0-token reply ended `stop`, which the agent retried
    for minutes): refused before prefill, as OpenAI refuses, with both numbers."""
    import openai

    model = short_engine.snapshot.model.name  # type: ignore[union-attr]
    content, length = _leaving(served, model, 3, tools=EDGE_TOOLS)
    client = openai.OpenAI(base_url=served + "/v1", api_key="unused", max_retries=0)
    with pytest.raises(openai.BadRequestError) as excinfo:
        reply = client.chat.completions.create(
            model=model,
            messages=[{"role": "user", "content": content}],
            tools=EDGE_TOOLS,  # type: ignore[arg-type]
            max_tokens=300,
            stream=stream,
        )
        if stream:
            list(reply)  # type: ignore[arg-type]
    error = excinfo.value.body
    assert isinstance(error, dict) and error["code"] == CONTEXT_LENGTH_EXCEEDED
    message = error["message"]
    assert f"prompt is {length} tokens" in message and f"reads at most {SHORT_CONTEXT}" in message
    found = MAX_PROMPT.search(message)
    assert found is not None and int(found.group(1)) < length, message


def test_messages_refuse_it_with_both_numbers(served: str, short_engine: Engine) -> None:
    import anthropic

    model = short_engine.snapshot.model.name  # type: ignore[union-attr]
    parameters = EDGE_TOOLS[0]["function"]["parameters"]  # type: ignore[index]
    tools = [{"name": "read", "description": "Read a file", "input_schema": parameters}]
    client = anthropic.Anthropic(base_url=served, api_key="unused", max_retries=0)
    words = 20
    for _ in range(4):  # the prompt of `words` words, counted by the server itself
        counted = client.messages.count_tokens(
            model=model, messages=[{"role": "user", "content": "word " * words}], tools=tools
        ).input_tokens
        if counted == SHORT_CONTEXT - 3:
            break
        words += SHORT_CONTEXT - 3 - counted
    assert counted == SHORT_CONTEXT - 3
    with pytest.raises(anthropic.BadRequestError) as excinfo:
        client.messages.create(
            model=model,
            max_tokens=300,
            messages=[{"role": "user", "content": "word " * words}],
            tools=tools,  # type: ignore[arg-type]
        )
    message = excinfo.value.body["error"]["message"]  # type: ignore[index]
    found = re.match(r"prompt is too long: (\d+) tokens > (\d+) maximum", message)
    assert found is not None, message
    assert int(found.group(1)) == counted > int(found.group(2))


def test_a_prompt_that_leaves_a_little_decodes_and_ends_length(
    served: str, short_engine: Engine
) -> None:
    """A few tokens left and no format to close: the model writes them, and the reply ends
    `length` / `max_tokens` — never a 0-token reply ended `stop`."""
    import anthropic
    import openai

    model = short_engine.snapshot.model.name  # type: ignore[union-attr]
    content, length = _leaving(served, model, 4)
    client = openai.OpenAI(base_url=served + "/v1", api_key="unused", max_retries=0)
    reply = client.chat.completions.create(
        model=model,
        messages=[{"role": "user", "content": content}],
        max_tokens=300,
        temperature=0,
    )
    assert reply.usage is not None and reply.usage.prompt_tokens == length
    assert reply.choices[0].finish_reason == "length" and reply.usage.completion_tokens == 4
    message = anthropic.Anthropic(base_url=served, api_key="unused", max_retries=0)
    answer = message.messages.create(
        model=model,
        max_tokens=300,
        messages=[{"role": "user", "content": content}],
        extra_body={"temperature": 0},
    )
    assert answer.stop_reason == "max_tokens" and answer.usage.output_tokens == 4


def test_a_format_whose_ending_takes_the_room_is_refused_and_the_number_given_holds(
    served: str, short_engine: Engine
) -> None:
    """Room for more than the closing margin but not for the format's ending and the
    model's first token: refused once the grammar says so, naming the most prompt tokens
    that leave the model room; a prompt of that many tokens decodes, and its reply ends
    `length` (Corral filled it)."""
    model = short_engine.snapshot.model.name  # type: ignore[union-attr]
    fmt = {"type": "json_schema", "json_schema": {"name": "edge", "schema": EDGE_SCHEMA}}
    content, length = _leaving(served, model, 30, response_format=fmt)
    body = {
        "model": model,
        "messages": [{"role": "user", "content": content}],
        "max_tokens": 300,
        "temperature": 0,
        "response_format": fmt,
    }
    refused = httpx.post(served + "/v1/chat/completions", json=body, timeout=120)
    assert refused.status_code == 400, refused.text
    error = refused.json()["error"]
    assert error["code"] == CONTEXT_LENGTH_EXCEEDED
    found = MAX_PROMPT.search(error["message"])
    assert found is not None, error["message"]
    most = int(found.group(1))
    assert most < length
    content, at_most = _leaving(served, model, SHORT_CONTEXT - most, response_format=fmt)
    body["messages"] = [{"role": "user", "content": content}]
    answer = httpx.post(served + "/v1/chat/completions", json=body, timeout=120).json()
    assert answer["usage"]["prompt_tokens"] == at_most == most
    assert answer["choices"][0]["finish_reason"] == "length"
    assert (
        answer["corral"]["ending"] in ("filled", "cut") and answer["usage"]["completion_tokens"] > 0
    )


def test_the_room_a_format_needs_counts_only_where_the_context_binds() -> None:
    # seven tokens for a reply closed to fit (the closing margin and one): five left is no
    # room when the context limits the reply, and the client's own when max_tokens does
    with pytest.raises(ContextLengthError, match="at most 249 prompt tokens leave it room"):
        reply_budget(251, 256, 300, reply_needs=7)
    assert reply_budget(251, 256, 3, reply_needs=7) == 3
    assert reply_budget(249, 256, 300, reply_needs=7) == 7
    assert reply_budget(255, 256, 300) == 1  # free text: one token is room
