"""`logprobs` over the OpenAI-compatible server, read with the official client's typed
objects: chat completions (whole and streamed) and text completions, OpenAI's fields and
Corral's `corral` extension (the figures before the constraint's mask)."""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import openai
import pytest
from openai.types.chat.chat_completion_token_logprob import ChatCompletionTokenLogprob

from engine.engine import Engine
from engine.server import HTTPServer
from tests.server_support import openai_client, serving

SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string", "maxLength": 6}, "age": {"type": "integer"}},
    "required": ["name", "age"],
    "additionalProperties": False,
}
FORMAT: Any = {"type": "json_schema", "json_schema": {"name": "person", "schema": SCHEMA}}


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


def _corral(entry: Any) -> dict[str, Any]:
    extra = entry.model_extra or {}
    assert "corral" in extra, "the entry has no corral extension"
    return dict(extra["corral"])


def test_chat_logprobs_shape_and_extension(client: openai.OpenAI, model: str) -> None:
    reply = client.chat.completions.create(
        model=model,
        messages=[{"role": "user", "content": "A person."}],
        max_tokens=20,
        temperature=0,
        logprobs=True,
        top_logprobs=3,
        response_format=FORMAT,
    )
    choice = reply.choices[0]
    assert choice.logprobs is not None and choice.logprobs.content
    content = choice.logprobs.content
    assert all(isinstance(e, ChatCompletionTokenLogprob) for e in content)
    assert "".join(e.token for e in content) == choice.message.content
    assert reply.usage is not None and len(content) == reply.usage.completion_tokens
    forced = overridden = 0
    for entry in content:
        assert entry.bytes is not None and bytes(entry.bytes).decode() == entry.token
        assert entry.logprob <= 0
        corral = _corral(entry)
        assert len(corral["top"]) <= 3 and len(entry.top_logprobs) <= 3
        assert all(isinstance(a["allowed"], bool) for a in corral["top"])
        if corral["forced"]:
            forced += 1
            assert entry.logprob == 0.0 and corral["allowed"] == 1
            continue
        assert corral["allowed"] >= 1 and corral["model_logprob"] <= entry.logprob + 1e-6
        # OpenAI's alternatives: the allowed ones of Corral's top, in the sampled distribution
        allowed = [a for a in corral["top"] if a["allowed"]]
        assert [a.token for a in entry.top_logprobs] == [a["token"] for a in allowed]
        assert sum(math.exp(a.logprob) for a in entry.top_logprobs) <= 1 + 1e-4
        overridden += bool(corral["overridden"])
        assert corral["overridden"] == (not corral["top"][0]["allowed"])
    figures = (reply.model_extra or {})["corral"]
    assert forced >= figures["forced_tokens"] > 0  # closing tokens are forced too
    assert overridden > 0  # the tiny model wants a newline where the schema allows none


def test_streamed_logprobs_equal_the_whole_reply(client: openai.OpenAI, model: str) -> None:
    kwargs: Any = {
        "model": model,
        "messages": [{"role": "user", "content": "A person."}],
        "max_tokens": 16,
        "temperature": 0,
        "logprobs": True,
        "top_logprobs": 2,
        "response_format": FORMAT,
    }
    whole = client.chat.completions.create(**kwargs)
    streamed: list[ChatCompletionTokenLogprob] = []
    text = ""
    for chunk in client.chat.completions.create(stream=True, **kwargs):
        for choice in chunk.choices:
            text += choice.delta.content or ""
            if choice.logprobs is not None and choice.logprobs.content:
                streamed += choice.logprobs.content
    assert whole.choices[0].logprobs is not None
    assert text == whole.choices[0].message.content
    assert [e.model_dump() for e in streamed] == [
        e.model_dump() for e in whole.choices[0].logprobs.content or []
    ]


def test_no_logprobs_unless_asked(client: openai.OpenAI, model: str) -> None:
    reply = client.chat.completions.create(
        model=model, messages=[{"role": "user", "content": "Hi"}], max_tokens=3
    )
    assert reply.choices[0].logprobs is None
    reply = client.chat.completions.create(
        model=model, messages=[{"role": "user", "content": "Hi"}], max_tokens=3, logprobs=True
    )
    content = reply.choices[0].logprobs.content if reply.choices[0].logprobs else None
    assert content and all(e.top_logprobs == [] for e in content)


def test_text_completion_logprobs(client: openai.OpenAI, model: str) -> None:
    reply = client.completions.create(
        model=model, prompt="Once upon a time", max_tokens=6, temperature=0, logprobs=2
    )
    logprobs = reply.choices[0].logprobs
    assert logprobs is not None and logprobs.tokens and logprobs.token_logprobs
    # the tokens as written (the reply's text drops the first token's leading space)
    assert "".join(logprobs.tokens).lstrip() == reply.choices[0].text.lstrip()
    assert logprobs.text_offset == [
        sum(len(t) for t in logprobs.tokens[:i]) for i in range(len(logprobs.tokens))
    ]
    assert logprobs.top_logprobs is not None
    for token, value, top in zip(
        logprobs.tokens, logprobs.token_logprobs, logprobs.top_logprobs, strict=True
    ):
        assert len(top) == 2 and max(top.values()) == pytest.approx(value)  # greedy
        assert token in top
    corral = (logprobs.model_extra or {})["corral"]
    assert len(corral) == len(logprobs.tokens) and not any(c["forced"] for c in corral)


def test_bad_logprobs_are_refused(client: openai.OpenAI, model: str) -> None:
    with pytest.raises(openai.BadRequestError) as excinfo:
        client.completions.create(model=model, prompt="x", max_tokens=2, logprobs=21)
    assert "0 to 20" in str(excinfo.value)
    with pytest.raises(openai.BadRequestError):
        client.chat.completions.create(
            model=model,
            messages=[{"role": "user", "content": "x"}],
            logprobs=True,
            top_logprobs=21,
        )
