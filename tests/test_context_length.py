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
