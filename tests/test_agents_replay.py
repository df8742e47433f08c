"""The recorded requests of Claude Code, Codex and OpenCode (tests/fixtures/agents/, written
by benchmarks/agents/record.py from the real agents) replayed against the server on the
tiny random model with a long context: every request is answered, and every answer (each
event of a stream) fits the dialect's schema as the official SDKs type it."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from server_support import serving

from benchmarks.agents.replay import conversations_passing, load_fixtures, replay
from benchmarks.tiny_model import build_tiny_model
from engine.engine import Engine
from engine.server import HTTPServer
from engine.tools.definitions import MAX_DESCRIPTION_CHARS

FIXTURES = load_fixtures()
LONG_CONTEXT = 65536


@pytest.fixture(scope="module")
def long_engine(
    tmp_path_factory: pytest.TempPathFactory, default_model_dir: Path
) -> Iterator[Engine]:
    folder = build_tiny_model(
        tmp_path_factory.mktemp("long"), default_model_dir, context=LONG_CONTEXT
    )
    eng = Engine()
    eng.load_model(str(folder)).result()
    yield eng
    eng.close()


@pytest.fixture(scope="module")
def served(long_engine: Engine, tmp_path_factory: pytest.TempPathFactory) -> Iterator[HTTPServer]:
    db = Path(tmp_path_factory.mktemp("replay")) / "responses.sqlite3"
    with serving(long_engine, responses_db=db, serve_any_model_name=True) as server:
        yield server


def test_every_agent_was_recorded() -> None:
    assert set(FIXTURES) == {"claude", "codex", "opencode-openai", "opencode-anthropic"}
    for fixture in FIXTURES.values():
        assert fixture["exit_code"] == 0
        posts = [r for r in fixture["requests"] if r["method"] == "POST"]
        assert len(posts) >= 2  # the first request and the one carrying the tool's result
        for entry in posts:
            assert not {"authorization", "x-api-key"} & set(entry["headers"])


def _recorded_length(text: str) -> int:
    """A recorded text's length before record.py trimmed it."""
    found = re.search(r"…\[trimmed (\d+) characters\]$", text)
    return len(text) + (int(found.group(1)) - len(found.group(0)) if found else 0)


def test_the_tool_limits_take_what_the_agents_send() -> None:
    for fixture in FIXTURES.values():
        for entry in fixture["requests"]:
            for tool in (entry["body"] or {}).get("tools") or []:
                spec = tool.get("function", tool)
                length = _recorded_length(spec.get("description") or "")
                assert length <= MAX_DESCRIPTION_CHARS, (spec.get("name"), length)


@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_a_recorded_conversation_is_answered_in_its_dialect(served: HTTPServer, name: str) -> None:
    outcomes = replay(served.url, "any-name", {name: FIXTURES[name]})
    problems = [f"request {o.index} ({o.path}): {o.problem}" for o in outcomes if not o.ok]
    assert not problems, "\n".join(problems)
    assert conversations_passing(outcomes) == (1, 1)


def test_an_agent_interrupting_its_stream_leaves_the_server_serving(served: HTTPServer) -> None:
    """Claude Code's Esc: the stream is dropped after its first event; the engine keeps
    serving the same conversation (from its prompt cache) right after."""
    entry = next(r for r in FIXTURES["claude"]["requests"] if r["method"] == "POST")
    body = {**entry["body"], "model": "any-name", "max_tokens": 512}
    before = len(served.activity.records)
    with httpx.stream("POST", served.url + "/v1/messages", json=body, timeout=300) as r:
        assert r.status_code == 200
        next(r.iter_lines())
    assert _ended(served, before) in (200, 499)  # finished first, or cut by the hang-up
    outcomes = replay(served.url, "any-name", {"claude": FIXTURES["claude"]})
    assert all(o.ok for o in outcomes), [o.problem for o in outcomes if not o.ok]


def _ended(server: HTTPServer, before: int) -> int:
    """The status the request after the first `before` ended with, once it has."""
    import time

    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        done = list(server.activity.records)[before:]
        if done:
            return done[0].status
        time.sleep(0.05)
    raise AssertionError("the interrupted request never ended")
