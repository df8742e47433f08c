"""Each API returns the model's thinking in its own field, apart from the answer, over the
tiny thinking fixture, with the official clients, streamed and whole."""

from __future__ import annotations

import json

import jsonschema
import pytest
from server_support import openai_client, serving

from engine.engine import Engine

SCHEMA = {
    "type": "object",
    "properties": {"a": {"type": "integer"}, "b": {"type": "string", "maxLength": 8}},
    "required": ["a", "b"],
    "additionalProperties": False,
}
MESSAGES = [{"role": "user", "content": "Give me a and b."}]
FORMAT = {"type": "json_schema", "json_schema": {"name": "ab", "schema": SCHEMA}}


@pytest.fixture(scope="module")
def server(thinking_engine: Engine):
    with serving(thinking_engine, serve_any_model_name=True) as running:
        yield running


def test_chat_completion_returns_reasoning_content(server) -> None:
    client = openai_client(server)
    reply = client.chat.completions.create(
        model="local",
        messages=MESSAGES,  # type: ignore[arg-type]
        max_tokens=60,
        seed=1,
        response_format=FORMAT,  # type: ignore[arg-type]
        extra_body={"max_thinking_tokens": 7},
    )
    message = reply.choices[0].message
    thought = message.model_extra.get("reasoning_content")  # type: ignore[union-attr]
    assert isinstance(thought, str) and thought
    jsonschema.validate(json.loads(message.content or ""), SCHEMA)
    assert thought not in (message.content or "")


def test_streamed_reasoning_content_comes_before_the_answer(server) -> None:
    client = openai_client(server)
    stream = client.chat.completions.create(
        model="local",
        messages=MESSAGES,  # type: ignore[arg-type]
        max_tokens=60,
        seed=2,
        response_format=FORMAT,  # type: ignore[arg-type]
        reasoning_effort="low",
        extra_body={"max_thinking_tokens": 5},
        stream=True,
    )
    thought, text, order = [], [], []
    for chunk in stream:
        if not chunk.choices:
            continue
        delta = chunk.choices[0].delta
        piece = (delta.model_extra or {}).get("reasoning_content")
        if piece:
            thought.append(piece)
            order.append("r")
        if delta.content:
            text.append(delta.content)
            order.append("t")
    assert thought and text
    assert order.index("t") > len(order) - 1 - order[::-1].index("r")
    jsonschema.validate(json.loads("".join(text)), SCHEMA)


def test_reasoning_effort_none_turns_thinking_off(server) -> None:
    client = openai_client(server)
    reply = client.chat.completions.create(
        model="local",
        messages=MESSAGES,  # type: ignore[arg-type]
        max_tokens=40,
        response_format=FORMAT,  # type: ignore[arg-type]
        reasoning_effort="none",  # type: ignore[arg-type]
    )
    assert "reasoning_content" not in (reply.choices[0].message.model_extra or {})


def test_a_bad_effort_is_refused_naming_it(server) -> None:
    import openai

    client = openai_client(server)
    with pytest.raises(openai.BadRequestError, match="reasoning_effort"):
        client.chat.completions.create(
            model="local",
            messages=MESSAGES,  # type: ignore[arg-type]
            reasoning_effort="enormous",  # type: ignore[arg-type]
        )


def test_anthropic_messages_return_thinking_blocks(server) -> None:
    from server_support import anthropic_client

    client = anthropic_client(server)
    kwargs = {
        "model": "local",
        "max_tokens": 60,
        "messages": MESSAGES,
        "thinking": {"type": "enabled", "budget_tokens": 6},
        "output_config": {"format": {"type": "json_schema", "schema": SCHEMA}},
    }
    whole = client.messages.create(**kwargs)
    kinds = [block.type for block in whole.content]
    assert kinds == ["thinking", "text"]
    assert whole.content[0].thinking
    jsonschema.validate(json.loads(whole.content[1].text), SCHEMA)
    with client.messages.stream(**kwargs) as stream:
        events = [e.type for e in stream]
        final = stream.get_final_message()
    assert [b.type for b in final.content] == ["thinking", "text"]
    assert final.content[0].thinking
    assert "content_block_delta" in events
    off = client.messages.create(**{**kwargs, "thinking": {"type": "disabled"}})
    assert [block.type for block in off.content] == ["text"]


def test_responses_return_a_reasoning_item(server) -> None:
    client = openai_client(server)
    kwargs = {
        "model": "local",
        "input": "Give me a and b.",
        "max_output_tokens": 60,
        "reasoning": {"effort": "low"},
        "text": {"format": {"type": "json_schema", "name": "ab", "schema": SCHEMA}},
    }
    whole = client.responses.create(**kwargs)
    kinds = [item.type for item in whole.output]
    assert kinds == ["reasoning", "message"]
    assert whole.output[0].content and whole.output[0].content[0].text
    jsonschema.validate(json.loads(whole.output_text), SCHEMA)
    with client.responses.stream(**kwargs) as stream:
        seen = list(stream)
    events = [e.type for e in seen]
    # response.completed, or response.incomplete where Corral filled the answer to fit (the
    # SDK's get_final_response raises on that, as on OpenAI's own incomplete replies)
    assert events[-1] in ("response.completed", "response.incomplete")
    final = seen[-1].response  # type: ignore[union-attr]
    assert "response.reasoning_text.delta" in events
    assert [item.type for item in final.output] == ["reasoning", "message"]
