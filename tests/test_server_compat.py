"""The compatibility table (engine/server/compat.py), row by row: a field real clients send
that changes nothing is answered (200) in every dialect the row names, a refused field is a
400 naming it (and accepted at its "off" value), client headers change nothing; then the
official `openai` and `anthropic` clients sending what Codex and Claude Code send."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from server_support import anthropic_client, openai_client, serving

from engine.engine import Engine
from engine.server import HTTPServer
from engine.server.compat import ACCEPT, HEADERS, HOSTED_TOOLS, REFUSE, RULES, Rule

# For each row: a value a client sends, and for refused rows the value that asks nothing.
SENT: dict[str, Any] = {
    "metadata": {"user_id": "u-1"},
    "client_metadata": {"session_id": "s-1", "turn_id": "t-1"},
    "user": "u-1",
    "safety_identifier": "hashed-user",
    "prompt_cache_key": "session-1",
    "prompt_cache_retention": "24h",
    "cache_control": {"type": "ephemeral"},
    "service_tier": "auto",
    "store": False,
    "inference_geo": "us",
    "speed": "fast",
    "user_profile_id": "p-1",
    "workspace_id": "w-1",
    "diagnostics": {"trace": True},
    "context_management": {"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]},
    "verbosity": "low",
    "text.verbosity": "low",
    "include": ["reasoning.encrypted_content"],
    "truncation": "auto",
    "max_tool_calls": 3,
    "stream_options": {"include_obfuscation": False},
    "reasoning.summary": "auto",
    "reasoning.generate_summary": "concise",
    "logit_bias": {"1": 5},
    "presence_penalty": 0.5,
    "frequency_penalty": 0.5,
    "modalities": ["text", "audio"],
    "audio": {"voice": "alloy", "format": "wav"},
    "prediction": {"type": "content", "content": "x"},
    "web_search_options": {"search_context_size": "low"},
    "functions": [{"name": "f", "parameters": {"type": "object"}}],
    "function_call": "auto",
    "echo": True,
    "suffix": "end",
    "best_of": 2,
    "mcp_servers": [{"type": "url", "url": "https://example.invalid", "name": "x"}],
    "container": "container-1",
    "background": True,
    "conversation": "conv_1",
    "prompt": {"id": "pmpt_1"},
    "top_logprobs": 2,
}
OFF: dict[str, Any] = {
    "logit_bias": {},
    "presence_penalty": 0,
    "frequency_penalty": 0.0,
    "modalities": ["text"],
    "echo": False,
    "suffix": "",
    "best_of": 1,
    "background": False,
    "top_logprobs": None,
}
PATHS = {
    "chat": "/v1/chat/completions",
    "completions": "/v1/completions",
    "messages": "/v1/messages",
    "responses": "/v1/responses",
}


def _body(dialect: str, model: str) -> dict[str, Any]:
    if dialect == "chat":
        return {"model": model, "messages": [{"role": "user", "content": "x"}], "max_tokens": 1}
    if dialect == "completions":
        return {"model": model, "prompt": "x", "max_tokens": 1}
    if dialect == "messages":
        return {"model": model, "messages": [{"role": "user", "content": "x"}], "max_tokens": 1}
    return {"model": model, "input": "x", "max_output_tokens": 1}


def _with(body: dict[str, Any], field: str, value: Any) -> dict[str, Any]:
    *parents, last = field.split(".")
    node = body
    for part in parents:
        node = node.setdefault(part, {})
    node[last] = value
    return body


def _cases(action: str) -> list[Any]:
    return [
        pytest.param(rule, dialect, id=f"{rule.field}-{dialect}")
        for rule in RULES
        if rule.action == action
        for dialect in rule.dialects
    ]


@pytest.fixture(scope="module")
def served(tiny_engine: Engine, tmp_path_factory: pytest.TempPathFactory) -> Iterator[HTTPServer]:
    db = Path(tmp_path_factory.mktemp("compat")) / "responses.sqlite3"
    with serving(tiny_engine, responses_db=db) as server:
        yield server


@pytest.fixture(scope="module")
def model(tiny_engine: Engine) -> str:
    assert tiny_engine.snapshot.model is not None
    return tiny_engine.snapshot.model.name


def _post(server: HTTPServer, dialect: str, body: dict[str, Any], **kw: Any) -> httpx.Response:
    return httpx.post(server.url + PATHS[dialect], json=body, timeout=120, **kw)


def test_every_row_has_a_value_to_send() -> None:
    assert {rule.field for rule in RULES} <= set(SENT)
    assert {rule.field for rule in RULES if rule.action == REFUSE} >= set(OFF)


@pytest.mark.parametrize(("rule", "dialect"), _cases(ACCEPT))
def test_an_accepted_field_changes_nothing_and_is_logged(
    served: HTTPServer, model: str, rule: Rule, dialect: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.DEBUG, logger="corral.server.compat"):
        r = _post(served, dialect, _with(_body(dialect, model), rule.field, SENT[rule.field]))
    assert r.status_code == 200, r.text
    assert any(f"accepted {rule.field} ({dialect})" in m for m in caplog.messages)


@pytest.mark.parametrize(("rule", "dialect"), _cases(REFUSE))
def test_a_refused_field_is_a_400_naming_it(
    served: HTTPServer, model: str, rule: Rule, dialect: str
) -> None:
    r = _post(served, dialect, _with(_body(dialect, model), rule.field, SENT[rule.field]))
    assert r.status_code == 400, r.text
    if dialect == "messages":
        error = r.json()["error"]
        assert error["type"] == "invalid_request_error" and rule.field in error["message"]
    else:
        error = r.json()["error"]
        assert error["param"] == rule.field and error["code"] == "unsupported_parameter"
        assert error["message"] == rule.why


@pytest.mark.parametrize(
    ("rule", "dialect"), [c for c in _cases(REFUSE) if c.values[0].field in OFF]
)
def test_a_refused_field_asking_nothing_is_accepted(
    served: HTTPServer, model: str, rule: Rule, dialect: str
) -> None:
    r = _post(served, dialect, _with(_body(dialect, model), rule.field, OFF[rule.field]))
    assert r.status_code == 200, r.text


def test_an_include_entry_that_would_change_the_reply_is_refused(
    served: HTTPServer, model: str
) -> None:
    body = _with(_body("responses", model), "include", ["message.output_text.logprobs"])
    r = _post(served, "responses", body)
    assert r.status_code == 400 and r.json()["error"]["param"] == "include"
    assert "message.output_text.logprobs" in r.json()["error"]["message"]


def test_a_field_outside_the_table_is_still_unrecognized(served: HTTPServer, model: str) -> None:
    for dialect in PATHS:
        r = _post(served, dialect, {**_body(dialect, model), "frobnicate": 1})
        assert r.status_code == 400 and "frobnicate" in r.text


@pytest.mark.parametrize("dialect", list(PATHS))
def test_client_headers_change_nothing(served: HTTPServer, model: str, dialect: str) -> None:
    headers = {name.replace("*", "os"): "1" for name in HEADERS}
    r = _post(served, dialect, _body(dialect, model), headers=headers)
    assert r.status_code == 200, r.text


@pytest.mark.parametrize("kind", sorted(HOSTED_TOOLS))
def test_hosted_tools_are_left_out_of_the_offer(served: HTTPServer, model: str, kind: str) -> None:
    function = {"type": "function", "name": "get_goal", "parameters": {"type": "object"}}
    hosted = {"type": kind, "name": "ns", "tools": [function]} if kind == "namespace" else {}
    body = {**_body("responses", model), "tools": [function, {"type": kind, **hosted}]}
    r = _post(served, "responses", body)
    assert r.status_code == 200, r.text
    assert any("tools[1]" in w for w in r.json()["corral"]["warnings"])


def test_the_openai_client_sending_what_codex_sends(served: HTTPServer, model: str) -> None:
    client = openai_client(served)
    response = client.responses.create(
        model=model,
        input=[
            {"type": "message", "role": "developer", "content": "Be brief."},
            {"type": "message", "role": "user", "content": "Hi"},
        ],
        max_output_tokens=2,
        store=False,
        include=["reasoning.encrypted_content"],
        prompt_cache_key="thread-1",
        reasoning={"summary": "auto"},
        extra_body={"client_metadata": {"session_id": "s-1"}},
        extra_headers={"originator": "codex_exec", "session-id": "s-1"},
    )
    assert response.status in ("completed", "incomplete")
    completion = client.chat.completions.create(
        model=model,
        messages=[{"role": "user", "content": "Hi"}],
        max_completion_tokens=2,
        store=False,
        metadata={"k": "v"},
        prompt_cache_key="k",
        safety_identifier="u",
        service_tier="auto",
        user="u",
    )
    assert completion.choices[0].finish_reason in ("length", "stop")


def test_the_anthropic_client_sending_what_claude_code_sends(
    served: HTTPServer, model: str
) -> None:
    client = anthropic_client(served)
    reply = client.messages.create(
        model=model,
        max_tokens=2,
        system=[{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}],
        messages=[
            {"role": "user", "content": "Hi"},
            {"role": "system", "content": "Mid-conversation note."},  # type: ignore[typeddict-item]
        ],
        metadata={"user_id": "u-1"},
        thinking={"type": "adaptive"},  # type: ignore[typeddict-item]
        extra_body={
            "context_management": {"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]},
            "output_config": {"effort": "high"},
        },
        extra_headers={"anthropic-beta": "claude-code-20250219,context-management-2025-06-27"},
    )
    assert reply.stop_reason in ("max_tokens", "end_turn")
