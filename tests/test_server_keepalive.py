"""Agents that wait for a long prefill: a client whose read timeout is shorter than the
prompt's prefill still gets its reply, streamed or not, in all three dialects, because
keep-alives arrive while the prompt is read; without them the same client gives up.

The prefill is made slow without depending on the machine's speed: the engine's model is
wrapped so that a forward pass over a prompt (more than one token) first sleeps DELAY_S
(benchmarks/slow_prefill.py).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest

from benchmarks.slow_prefill import SlowPrefill, slowed
from engine.engine import Engine
from engine.server import HTTPServer
from tests.server_support import anthropic_client, serving

# One prompt's forward pass, the clients' read timeout (shorter than the prefill) and the
# keep-alive: a busy machine may hold the server back for most of a second and still pass.
DELAY_S = 2.5
READ_TIMEOUT_S = 1.5
KEEP_ALIVE_S = 0.1


@pytest.fixture(scope="module")
def slow_engine(tiny_model_dir: Path) -> Iterator[Engine]:
    engine = Engine(learn_pass_cost=False, speculative=False)  # one token a decode pass
    engine.load_model(str(tiny_model_dir)).result()
    yield engine
    engine.close()


@pytest.fixture(scope="module")
def slow(slow_engine: Engine) -> Iterator[SlowPrefill]:
    with slowed(slow_engine, DELAY_S) as model:
        yield model


@pytest.fixture(scope="module")
def server(slow_engine: Engine, slow: SlowPrefill) -> Iterator[HTTPServer]:
    with serving(slow_engine, keep_alive_s=KEEP_ALIVE_S) as running:
        yield running


def timeout() -> httpx.Timeout:
    return httpx.Timeout(READ_TIMEOUT_S, connect=10.0)


def prompt() -> str:
    """A prompt no earlier request shares a prefix with (the prompt cache would skip the
    slow prefill)."""
    return f"{uuid.uuid4().hex} Tell me about keep-alives."


def model_name(server: HTTPServer) -> str:
    return str(httpx.get(server.url + "/v1/models").json()["data"][0]["id"])


def openai_slow(server: HTTPServer) -> openai.OpenAI:
    return openai.OpenAI(
        base_url=server.url + "/v1", api_key="unused", max_retries=0, timeout=timeout()
    )


def test_chat_completions_outlive_the_read_timeout(server: HTTPServer) -> None:
    client, model = openai_slow(server), model_name(server)
    started = time.monotonic()
    reply = client.chat.completions.create(
        model=model, messages=[{"role": "user", "content": prompt()}], max_tokens=3
    )
    assert time.monotonic() - started > DELAY_S  # the prefill did outlast the timeout
    assert reply.choices[0].finish_reason == "length" and reply.usage is not None
    chunks = list(
        client.chat.completions.create(
            model=model,
            messages=[{"role": "user", "content": prompt()}],
            max_tokens=3,
            stream=True,
        )
    )
    assert chunks[-1].choices[0].finish_reason == "length"


def test_responses_outlive_the_read_timeout(server: HTTPServer) -> None:
    client, model = openai_slow(server), model_name(server)
    reply = client.responses.create(model=model, input=prompt(), max_output_tokens=3)
    assert reply.status == "incomplete" and reply.output_text
    events = [
        e.type
        for e in client.responses.create(
            model=model, input=prompt(), max_output_tokens=3, stream=True
        )
    ]
    assert events[0] == "response.created" and events[-1] == "response.incomplete"


def test_messages_outlive_the_read_timeout(server: HTTPServer) -> None:
    import httpx2

    slow = httpx2.Timeout(READ_TIMEOUT_S, connect=10.0)  # the anthropic SDK's own httpx
    client, model = anthropic_client(server, timeout=slow), model_name(server)  # type: ignore[arg-type]
    ask = {"model": model, "max_tokens": 3, "messages": [{"role": "user", "content": prompt()}]}
    reply = client.messages.create(**ask)
    assert reply.stop_reason == "max_tokens"
    ask["messages"] = [{"role": "user", "content": prompt()}]
    with client.messages.stream(**ask) as stream:
        final = stream.get_final_message()
    assert final.stop_reason == "max_tokens" and final.content


def test_without_keep_alives_the_same_client_gives_up(
    slow_engine: Engine, slow: SlowPrefill
) -> None:
    with serving(slow_engine, keep_alive_s=0) as silent:
        with pytest.raises(openai.APITimeoutError):
            openai_slow(silent).chat.completions.create(
                model=model_name(silent),
                messages=[{"role": "user", "content": prompt()}],
                max_tokens=3,
            )


def test_what_each_dialect_sends_while_the_prompt_is_read(server: HTTPServer) -> None:
    model = model_name(server)
    user = {"role": "user", "content": prompt()}
    with httpx.stream(
        "POST",
        server.url + "/v1/chat/completions",
        json={"model": model, "messages": [user], "max_tokens": 2, "stream": True},
        timeout=timeout(),
    ) as reply:
        lines = [line for line in reply.iter_lines() if line]
    # the assistant's role first, then keep-alives while the prompt is read, then tokens
    assert lines[0].startswith("data:") and '"role":"assistant"' in lines[0]
    waiting = lines[1 : next(i for i, x in enumerate(lines) if i and x.startswith("data:"))]
    assert len(waiting) >= 3 and set(waiting) == {": keep-alive"}

    user = {"role": "user", "content": prompt()}
    with httpx.stream(
        "POST",
        server.url + "/v1/messages",
        json={"model": model, "messages": [user], "max_tokens": 2, "stream": True},
        timeout=timeout(),
    ) as reply:
        names = [line for line in reply.iter_lines() if line.startswith("event:")]
    assert names[:3] == ["event: message_start", "event: ping", "event: ping"]


def test_a_held_reply_that_fails_sends_its_error_body(
    server: HTTPServer, slow: SlowPrefill
) -> None:
    """Past the keep-alive's wait the status is 200 and the connection held; a failure
    after that is the error body, in the dialect's own shape."""
    model = model_name(server)
    slow.fail_next = True
    reply = httpx.post(
        server.url + "/v1/messages",
        json={"model": model, "max_tokens": 2, "messages": [{"role": "user", "content": prompt()}]},
        timeout=timeout(),
    )
    assert reply.status_code == 200 and reply.text.startswith("  ")
    body = reply.json()
    assert body["type"] == "error" and body["error"]["type"] == "api_error", body
