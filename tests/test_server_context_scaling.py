"""`--report-context N`: every token count a client is told (usage in all three dialects,
count_tokens, input_tokens) is the real one times N / the model's context, so an agent
built for an N-token window compacts in time; the request log keeps the real counts."""

from __future__ import annotations

from typing import Any

import pytest

from engine.server import ServerConfig, ServerConfigError
from engine.server.context_scaling import reported, scale_factor
from tests.server_support import anthropic_client, openai_client, serving

MESSAGES = [{"role": "user", "content": "Count these tokens, please."}]


def test_every_count_a_client_reads_is_scaled(tiny_engine: Any) -> None:
    info = tiny_engine.snapshot.model
    factor = 4
    with (
        serving(tiny_engine) as plain,
        serving(tiny_engine, report_context=info.context_length * factor) as scaled,
    ):
        real = openai_client(plain).chat.completions.create(
            model=info.name, messages=MESSAGES, max_tokens=3, temperature=0
        )
        told = openai_client(scaled).chat.completions.create(
            model=info.name, messages=MESSAGES, max_tokens=3, temperature=0
        )
        assert real.usage is not None and told.usage is not None
        assert told.usage.prompt_tokens == factor * real.usage.prompt_tokens
        assert told.usage.completion_tokens == factor * real.usage.completion_tokens
        assert scaled.activity.records[-1].prompt_tokens == real.usage.prompt_tokens

        claude, plain_claude = anthropic_client(scaled), anthropic_client(plain)
        count = claude.messages.count_tokens(model=info.name, messages=MESSAGES)
        plain_count = plain_claude.messages.count_tokens(model=info.name, messages=MESSAGES)
        assert count.input_tokens == factor * plain_count.input_tokens
        reply = claude.messages.create(model=info.name, messages=MESSAGES, max_tokens=2)
        prompt = reply.usage.input_tokens + (reply.usage.cache_read_input_tokens or 0)
        assert prompt == factor * plain_count.input_tokens

        responses = openai_client(scaled).responses
        counted = responses.input_tokens.count(model=info.name, input="Count these tokens.")
        plain_counted = openai_client(plain).responses.input_tokens.count(
            model=info.name, input="Count these tokens."
        )
        assert counted.input_tokens == factor * plain_counted.input_tokens
        answer = responses.create(model=info.name, input="Count these tokens.", max_output_tokens=2)
        assert answer.usage is not None
        assert answer.usage.input_tokens == factor * plain_counted.input_tokens


def test_the_factor_and_its_settings() -> None:
    assert scale_factor(200_000, 32_768) == pytest.approx(6.1035, abs=1e-4)
    assert scale_factor(None, 32_768) == 1.0 and scale_factor(200_000, None) == 1.0
    assert reported(1000, 6.1035) == 6104 and reported(7, 1.0) == 7
    with pytest.raises(ServerConfigError, match="positive token count"):
        ServerConfig(report_context=0).check()
    with pytest.raises(ServerConfigError, match="keep-alive"):
        ServerConfig(keep_alive_s=-1).check()
