"""Replay the recorded agent conversations (tests/fixtures/agents/*.json) against a Corral
server and check each answer against the dialect's schema: the official SDKs' own types
(`anthropic.types`, `openai.types`), event by event for a stream.

Each recorded request is sent as the agent sent it (its body and headers), with two
changes: the model is the served one and the reply's token budget is capped, so a replay
on the tiny random model takes seconds. Used by tests/test_agents_replay.py and by the
`server` bench section (`agent_replay_ok`).
"""

from __future__ import annotations

import json
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from pydantic import TypeAdapter, ValidationError

FIXTURES = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "agents"
GENERATING = ("/v1/messages", "/v1/responses", "/v1/chat/completions")
MAX_REPLY_TOKENS = 16
_TOKEN_FIELDS = ("max_tokens", "max_output_tokens", "max_completion_tokens")
_SENT_AGAIN = ("content-type", "accept", "user-agent")  # besides the clients' own headers


@dataclass
class Outcome:
    """One replayed request: whether the answer was right, and what was wrong if not."""

    fixture: str
    index: int
    path: str
    ok: bool
    problem: str = ""


def load_fixtures(folder: Path = FIXTURES) -> dict[str, dict[str, Any]]:
    return {p.stem: json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))}


def _schemas() -> dict[str, tuple[Any, Any]]:
    """(whole answer, stream event) types per path, as the official SDKs define them."""
    import anthropic.types as a
    import openai.types.chat as c
    import openai.types.responses as r

    return {
        "/v1/messages": (a.Message, a.RawMessageStreamEvent),
        "/v1/responses": (r.Response, r.ResponseStreamEvent),
        "/v1/chat/completions": (c.ChatCompletion, c.ChatCompletionChunk),
        "/v1/messages/count_tokens": (a.MessageTokensCount, a.MessageTokensCount),
    }


def _by_type(union: Any) -> dict[str, TypeAdapter[Any]]:
    """The members of an (annotated) union of event types, by their `type`, so that a wrong
    event is reported against its own schema rather than every member's."""
    members = typing.get_args(typing.get_args(union)[0])
    out = {}
    for member in members:
        for kind in typing.get_args(member.model_fields["type"].annotation):
            out[kind] = TypeAdapter(member)
    return out


_LAST_EVENT = {
    "/v1/messages": {"message_stop"},
    "/v1/responses": {"response.completed", "response.incomplete"},
}


def _events(raw: str) -> list[tuple[str | None, str]]:
    out: list[tuple[str | None, str]] = []
    for block in raw.split("\n\n"):
        name, data = None, None
        for line in block.splitlines():
            if line.startswith("event:"):
                name = line[6:].strip()
            elif line.startswith("data:"):
                data = line[5:].strip()
        if data is not None:
            out.append((name, data))
    return out


def check_answer(path: str, stream: bool, response: httpx.Response) -> str:
    """What is wrong with `response` to a request on `path` ("" if nothing)."""
    if response.status_code != 200:
        return f"status {response.status_code}: {response.text[:300]}"
    whole, event = _schemas()[path]
    try:
        if not stream:
            TypeAdapter(whole).validate_python(response.json())
            return ""
        events = _events(response.text)
        if not events:
            return "an empty stream"
        if path == "/v1/chat/completions":
            if events[-1][1] != "[DONE]":
                return "the stream does not end with [DONE]"
            for _, data in events[:-1]:
                TypeAdapter(event).validate_python(json.loads(data))
            return ""
        for name, data in events:
            parsed = json.loads(data)
            if name is not None and parsed.get("type") != name:
                return f"event {name!r} carries type {parsed.get('type')!r}"
            if parsed == {"type": "ping"} and path == "/v1/messages":
                continue  # Anthropic's keep-alive, which the SDK's union leaves out
            member = _by_type(event).get(parsed.get("type"))
            if member is None:
                return f"an event of unknown type {parsed.get('type')!r}"
            member.validate_python(parsed)
        last = json.loads(events[-1][1]).get("type")
        if last not in _LAST_EVENT[path]:
            return f"the stream ends with {last!r}"
    except ValidationError as exc:
        return f"not the dialect's schema: {str(exc)[:400]}"
    except json.JSONDecodeError as exc:
        return f"not JSON: {exc}"
    return ""


def replay_request(
    client: httpx.Client, base_url: str, model: str, entry: dict[str, Any]
) -> tuple[bool, str]:
    """Send one recorded request again; (answered correctly, what was wrong)."""
    path = entry["path"]
    if entry["method"] != "POST":
        response = client.request(entry["method"], base_url + path)
        ok = response.status_code < 400
        return ok, "" if ok else f"{entry['method']} {path}: {response.status_code}"
    body = dict(entry["body"])
    body["model"] = model
    for name in _TOKEN_FIELDS:
        if name in body:
            body[name] = min(int(body[name]), MAX_REPLY_TOKENS)
    headers = {
        k: v
        for k, v in entry["headers"].items()
        if k in _SENT_AGAIN or k.startswith(("anthropic-", "x-", "openai-")) or "-id" in k
    }
    query = f"?{entry['query']}" if entry.get("query") else ""
    response = client.post(base_url + path + query, json=body, headers=headers)
    problem = check_answer(path, bool(body.get("stream")), response)
    return not problem, problem


def replay(base_url: str, model: str, fixtures: dict[str, dict[str, Any]]) -> list[Outcome]:
    """Every recorded request of every fixture sent to the server at `base_url`."""
    outcomes = []
    with httpx.Client(timeout=600) as client:
        for name, fixture in fixtures.items():
            for i, entry in enumerate(fixture["requests"]):
                ok, problem = replay_request(client, base_url, model, entry)
                outcomes.append(Outcome(name, i, entry["path"], ok, problem))
    return outcomes


def conversations_passing(outcomes: list[Outcome]) -> tuple[int, int]:
    """(fixtures whose every request was answered correctly, fixtures)."""
    names = {o.fixture for o in outcomes}
    passing = {n for n in names if all(o.ok for o in outcomes if o.fixture == n)}
    return len(passing), len(names)
