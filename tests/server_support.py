"""Shared pieces for the tests of the OpenAI-compatible server: a server on a free loopback
port over an engine, an `openai` client for it, and reading its activity log."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import openai

from engine.server import HTTPServer, RequestRecord, ServerConfig


@contextmanager
def serving(engine: Any) -> Iterator[HTTPServer]:
    """An HTTPServer over `engine` (an Engine or a DistributedEngine), stopped after."""
    server = HTTPServer(engine, ServerConfig(port=0))
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
