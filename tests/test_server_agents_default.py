"""Anthropic's Messages and OpenAI's Responses over the real default model (SmolLM2-135M),
one answer each through the official clients' stream helpers. Token counts stay small:
this CPU decodes ~13 tok/s."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from server_support import anthropic_client, openai_client, serving

from engine.engine import Engine
from engine.server import HTTPServer

pytestmark = pytest.mark.slow
QUESTION = "What is the capital of France?"


@pytest.fixture(scope="module")
def served(
    default_engine: Engine, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[HTTPServer]:
    db = Path(tmp_path_factory.mktemp("responses")) / "responses.sqlite3"
    with serving(default_engine, responses_db=db) as server:
        yield server


@pytest.fixture(scope="module")
def model(default_engine: Engine) -> str:
    assert default_engine.snapshot.model is not None
    return default_engine.snapshot.model.name


def test_messages_answer_streamed(served: HTTPServer, model: str) -> None:
    client = anthropic_client(served, timeout=300)
    with client.messages.stream(
        model=model,
        max_tokens=8,
        messages=[{"role": "user", "content": QUESTION}],
        extra_body={"temperature": 0},
    ) as stream:
        reply = stream.get_final_message()
    assert "Paris" in reply.content[0].text  # type: ignore[union-attr]
    assert reply.model == model and reply.usage.output_tokens <= 8


def test_responses_answer_streamed(served: HTTPServer, model: str) -> None:
    client = openai_client(served, timeout=300)
    with client.responses.stream(
        model=model, input=QUESTION, max_output_tokens=8, temperature=0
    ) as stream:
        events = list(stream)
    response = events[-1].response  # type: ignore[union-attr]
    assert events[-1].type in ("response.completed", "response.incomplete")
    assert "Paris" in response.output_text
    assert response.usage is not None and response.usage.output_tokens <= 8
