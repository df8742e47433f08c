"""Shared pieces for the tests of the server: a server on a free loopback port over an
engine, the official `openai` and `anthropic` clients for it, reading its activity log and
its raw event streams."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import openai

from engine.server import HTTPServer, RequestRecord, ServerConfig


@contextmanager
def serving(engine: Any, embeddings: Any = None, **settings: Any) -> Iterator[HTTPServer]:
    """An HTTPServer over `engine` (an Engine or a DistributedEngine) with ServerConfig
    `settings` (and `embeddings`' models), stopped after."""
    server = HTTPServer(engine, ServerConfig(port=0, **settings), embeddings=embeddings)
    server.start()
    try:
        yield server
    finally:
        server.stop()


def openai_client(server: HTTPServer, timeout: float = 120) -> openai.OpenAI:
    """The official client for `server` (no retries: a failure shows at once)."""
    return openai.OpenAI(
        base_url=server.url + "/v1", api_key="unused", max_retries=0, timeout=timeout
    )


def wait_for_record(
    server: HTTPServer, status: int, after: int, timeout: float = 30
) -> RequestRecord:
    """The first request in the log after the first `after` entries with `status`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for record in list(server.activity.records)[after:]:
            if record.status == status:
                return record
        time.sleep(0.02)
    raise AssertionError(f"no {status} record; log: {list(server.activity.records)[after:]}")


def leave_mid_stream(server: HTTPServer, body: dict[str, Any], lines: int = 6) -> None:
    """Stream a chat completion and hang up after `lines` lines (the role chunk and a few
    tokens), as a client that goes away does."""
    url = server.url + "/v1/chat/completions"
    with httpx.stream("POST", url, json=body, timeout=120) as r:
        read = r.iter_lines()
        for _ in range(lines):
            next(read)


def anthropic_client(server: HTTPServer, key: str = "unused", timeout: float = 120) -> Any:
    """The official `anthropic` client for `server` (no retries: a failure shows at once)."""
    import anthropic

    return anthropic.Anthropic(base_url=server.url, api_key=key, max_retries=0, timeout=timeout)


def sse_events(raw: str) -> list[tuple[str | None, dict[str, Any]]]:
    """A server-sent-event body as (event name, JSON data) pairs, in order; every event
    must be one `event:` line (optional) and one `data:` line (comments are skipped)."""
    import json

    out: list[tuple[str | None, dict[str, Any]]] = []
    for block in raw.split("\n\n"):
        if not block or block.startswith(":"):  # empty, or a comment (a keep-alive)
            continue
        name, data = None, None
        for line in block.split("\n"):
            field, _, value = line.partition(": ")
            if field == "event":
                name = value
            else:
                assert field == "data", block
                data = json.loads(value)
        assert data is not None, block
        out.append((name, data))
    return out


def leave_stream(server: HTTPServer, path: str, body: dict[str, Any], lines: int = 6) -> None:
    """POST a streaming `body` to `path` and hang up after `lines` lines."""
    with httpx.stream("POST", server.url + path, json=body, timeout=120) as r:
        assert r.status_code == 200, r.read()
        read = r.iter_lines()
        for _ in range(lines):
            next(read)


# What agents' tools look like (a nested schema with enums and arrays), a plain tool, and a
# structured-output schema: shared by the tests of every dialect.
TICKET_PARAMETERS = {
    "type": "object",
    "properties": {
        "title": {"type": "string", "maxLength": 12},
        "priority": {"enum": ["low", "high"]},
        "labels": {
            "type": "array",
            "items": {"enum": ["bug", "docs", "ui"]},
            "minItems": 1,
            "maxItems": 2,
        },
        "owner": {
            "type": "object",
            "properties": {
                "team": {"enum": ["core", "app"]},
                "ids": {
                    "type": "array",
                    "items": {"type": "integer", "minimum": 0, "maximum": 9},
                    "maxItems": 2,
                },
            },
            "required": ["team", "ids"],
            "additionalProperties": False,
        },
    },
    "required": ["title", "priority", "labels", "owner"],
    "additionalProperties": False,
}
WEATHER_PARAMETERS = {
    "type": "object",
    "properties": {"city": {"type": "string", "maxLength": 12}},
    "required": ["city"],
}
PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 12},
        "age": {"type": "integer", "minimum": 0, "maximum": 120},
        "tags": {"type": "array", "items": {"enum": ["a", "b"]}, "maxItems": 3},
    },
    "required": ["name", "age", "tags"],
    "additionalProperties": False,
}
