"""Bench section `server`: the same prompt and settings streamed over HTTP (the official
`openai` client against the server on a loopback port: chat completions and Responses; the
official `anthropic` client: Messages) and straight through the Engine, alternating, in
one run.

Both sides are timed from the caller's seat: TTFT from sending the request to the first
text, decode tokens/s as the tokens after the first over the time from the first text to
the last. Every run after the warm-up finds the prompt in the prefix cache, on both sides
alike. Each run is also paired with the engine's own figures for that same reply (its
TTFT and tokens/s as the engine thread saw them), so the keys measure what the caller
loses on the way, not how fast the model happened to run: on a shared, busy machine the
model's speed varies far more from run to run than the server costs.

- `server_ttft_overhead_ms`: median over HTTP runs of (caller's TTFT - engine's TTFT)
  minus the same median over direct runs.
- `server_tps_ratio`: median over HTTP runs of (caller's tokens/s / engine's tokens/s)
  over the same median for direct runs.
- `messages_tps_ratio`, `messages_ttft_overhead_ms`: the same for Anthropic's Messages.
- `responses_tps_ratio`, `responses_ttft_overhead_ms`: the same for OpenAI's Responses.
The plain medians of each side are printed beside them. Replies are at most 32 tokens
(`--tokens`, less if given): the figures compare two views of one reply, whose length
matters little. Each figure says whether its
spread over the rounds can tell (`<key>_can_tell`, else `<key>_cannot_tell` with why;
`benchmarks/rounds.py`): ratios within 0.05, TTFT overheads within 5% of the direct TTFT.
- `agent_replay_ok`: the recorded conversations of Claude Code, Codex and OpenCode
  (tests/fixtures/agents/) whose every request is answered in the dialect's schema, over
  all of them (benchmarks/agents/replay.py; goal 1.0).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.rounds import SPREAD_TOLERANCE, rounds_for, spread, verdict
from engine.engine import Engine
from engine.types import ChatEvent, ChatRequest, SamplingSettings, TextDelta

PROMPT = "Write a long, detailed story about a lighthouse keeper and a storm."
SERVER_TOKENS = 32  # at most, a reply


@dataclass
class Run:
    ttft_s: float  # seen by the caller
    tps: float  # seen by the caller
    engine_ttft_s: float  # the engine's own figures for the same reply
    engine_tps: float
    tokens: int


def _direct_run(engine: Engine, tokens: int) -> Run:
    request = ChatRequest(
        [{"role": "user", "content": PROMPT}], SamplingSettings(temperature=0.0, max_tokens=tokens)
    )
    stamps: list[float] = []

    def on_event(event: ChatEvent) -> None:
        if isinstance(event, TextDelta):
            stamps.append(time.perf_counter())

    sent = time.perf_counter()
    result = engine.submit(request, on_event).result()
    if result.error:
        raise RuntimeError(result.error)
    s = result.stats
    return _run(sent, stamps, s.generated_tokens, s.ttft_s, s.decode_tps)


def _http_run(client: Any, model: str, tokens: int) -> Run:
    stamps: list[float] = []
    generated = 0
    stats: dict[str, Any] = {}
    sent = time.perf_counter()
    stream = client.chat.completions.create(
        model=model,
        messages=[{"role": "user", "content": PROMPT}],
        max_tokens=tokens,
        temperature=0.0,
        stream=True,
        stream_options={"include_usage": True},
    )
    for chunk in stream:
        if chunk.choices and chunk.choices[0].delta.content:
            stamps.append(time.perf_counter())
        if chunk.model_extra and "corral" in chunk.model_extra:
            stats = chunk.model_extra["corral"]
        if chunk.usage is not None:
            generated = chunk.usage.completion_tokens
    return _run(sent, stamps, generated, stats["ttft_ms"] / 1e3, stats["decode_tps"])


def _messages_run(client: Any, model: str, tokens: int) -> Run:
    stamps: list[float] = []
    generated = 0
    stats: dict[str, Any] = {}
    sent = time.perf_counter()
    stream = client.messages.create(
        model=model,
        messages=[{"role": "user", "content": PROMPT}],
        max_tokens=tokens,
        stream=True,
        extra_body={"temperature": 0.0},
    )
    for event in stream:
        if event.type == "content_block_delta" and getattr(event.delta, "text", ""):
            stamps.append(time.perf_counter())
        elif event.type == "message_delta":
            stats = (event.model_extra or {}).get("corral", {})
            generated = event.usage.output_tokens
    return _run(sent, stamps, generated, stats["ttft_ms"] / 1e3, stats["decode_tps"])


def _responses_run(client: Any, model: str, tokens: int) -> Run:
    stamps: list[float] = []
    generated = 0
    stats: dict[str, Any] = {}
    sent = time.perf_counter()
    stream = client.responses.create(
        model=model,
        input=PROMPT,
        max_output_tokens=tokens,
        temperature=0.0,
        stream=True,
        store=False,
    )
    for event in stream:
        if event.type == "response.output_text.delta" and event.delta:
            stamps.append(time.perf_counter())
        elif event.type in ("response.completed", "response.incomplete"):
            stats = (event.response.model_extra or {}).get("corral", {})
            generated = event.response.usage.output_tokens
    return _run(sent, stamps, generated, stats["ttft_ms"] / 1e3, stats["decode_tps"])


def _run(
    sent: float, stamps: list[float], generated: int, engine_ttft: float, engine_tps: float
) -> Run:
    if not stamps:
        raise RuntimeError("the reply had no text")
    span = stamps[-1] - stamps[0]
    tps = (generated - 1) / span if generated > 1 and span > 0 else 0.0
    return Run(stamps[0] - sent, tps, engine_ttft, engine_tps, generated)


def _ratio(runs: list[Run]) -> float:
    return statistics.median(r.tps / r.engine_tps for r in runs if r.engine_tps > 0)


def _lag(runs: list[Run]) -> float:
    return statistics.median(r.ttft_s - r.engine_ttft_s for r in runs)


def run_server_bench(engine: Engine, args: argparse.Namespace) -> dict[str, Any]:
    """Figures of the server against the engine alone, alternating runs, medians compared."""
    import anthropic
    import openai

    from engine.server import HTTPServer, ServerConfig

    model_info = engine.snapshot.model
    assert model_info is not None
    name = model_info.name
    server = HTTPServer(engine, ServerConfig(port=0))
    server.start()
    client = openai.OpenAI(base_url=server.url + "/v1", api_key="bench", max_retries=0)
    claude = anthropic.Anthropic(base_url=server.url, api_key="bench", max_retries=0)
    sides: dict[str, Callable[[int], Run]] = {
        "direct": lambda n: _direct_run(engine, n),
        "http": lambda n: _http_run(client, name, n),
        "messages": lambda n: _messages_run(claude, name, n),
        "responses": lambda n: _responses_run(client, name, n),
    }
    runs: dict[str, list[Run]] = {side: [] for side in sides}
    order = list(sides)
    rounds = rounds_for(args, 3)  # replies of seconds on a real model: 3 rounds tell
    # each figure compares a reply seen by the caller with the same reply seen by the
    # engine, so it needs no long reply: 32 tokens are seconds on a real model
    tokens = min(args.tokens, SERVER_TOKENS)
    try:
        for run in sides.values():  # warm-up: kernels, the prompt in the cache, connections
            run(4)
        for i in range(rounds):
            shift = i % len(order)  # each side takes each place in turn
            for side in order[shift:] + order[:shift]:
                runs[side].append(sides[side](tokens))
    finally:
        client.close()
        claude.close()
        server.stop()
    direct, http = runs["direct"], runs["http"]
    direct_ratio = _ratio(direct)

    def ratio(side: str) -> float | None:
        return round(_ratio(runs[side]) / direct_ratio, 3) if direct_ratio else None

    def overhead(side: str) -> float:
        return round((_lag(runs[side]) - _lag(direct)) * 1e3, 2)

    direct_ttft_ms = statistics.median(r.ttft_s for r in direct) * 1e3

    def spreads(side: str) -> dict[str, Any]:
        """Each round's ratio and TTFT lag against that round's direct run, spread, and
        whether each spread can tell."""
        paired = list(zip(runs[side], direct, strict=True))
        ratios = [
            (s.tps / s.engine_tps) / (d.tps / d.engine_tps)
            for s, d in paired
            if s.engine_tps > 0 and d.engine_tps > 0 and d.tps > 0
        ]
        lags = [
            ((s.ttft_s - s.engine_ttft_s) - (d.ttft_s - d.engine_ttft_s)) * 1e3 for s, d in paired
        ]
        prefix = "server" if side == "http" else side
        ratio_spread, lag_spread = spread(ratios), spread(lags, 2)
        lag_tolerance = round(max(1.0, SPREAD_TOLERANCE * direct_ttft_ms), 2)
        return {
            f"{prefix}_tps_ratio_spread": ratio_spread,
            f"{prefix}_ttft_overhead_spread_ms": lag_spread,
            **verdict(f"{prefix}_tps_ratio", ratio_spread, len(ratios)),
            **verdict(
                f"{prefix}_ttft_overhead_ms",
                lag_spread,
                len(lags),
                tolerance=lag_tolerance,
                unit="ms",
            ),
        }

    return {
        "server_tps_ratio": ratio("http"),
        "server_ttft_overhead_ms": overhead("http"),
        "server_http_decode_tps": round(statistics.median(r.tps for r in http), 2),
        "server_direct_decode_tps": round(statistics.median(r.tps for r in direct), 2),
        "server_http_ttft_ms": round(statistics.median(r.ttft_s for r in http) * 1e3, 2),
        "server_direct_ttft_ms": round(statistics.median(r.ttft_s for r in direct) * 1e3, 2),
        "server_tokens": min(r.tokens for runs_ in runs.values() for r in runs_),
        "server_runs": rounds,
        **spreads("http"),
        **spreads("messages"),
        **spreads("responses"),
        "messages_tps_ratio": ratio("messages"),
        "messages_ttft_overhead_ms": overhead("messages"),
        "messages_decode_tps": round(statistics.median(r.tps for r in runs["messages"]), 2),
        "responses_tps_ratio": ratio("responses"),
        "responses_ttft_overhead_ms": overhead("responses"),
        "responses_decode_tps": round(statistics.median(r.tps for r in runs["responses"]), 2),
        **agent_replay(),
    }


def agent_replay() -> dict[str, Any]:
    """`agent_replay_ok`: the recorded agent conversations (tests/fixtures/agents/) whose
    every request the server answers in its dialect's schema, over all of them; replayed
    on the tiny random model with a long context (agents' prompts run to many thousands of
    tokens), on an engine of its own."""
    import tempfile

    from benchmarks.agents.replay import conversations_passing, load_fixtures, replay
    from benchmarks.tiny_model import build_tiny_model
    from engine.library.load import ensure_default_model
    from engine.server import HTTPServer, ServerConfig

    fixtures = load_fixtures()
    if not fixtures:
        return {"agent_replay_ok": None}
    with tempfile.TemporaryDirectory(prefix="corral-replay-") as tmp:
        folder = build_tiny_model(Path(tmp) / "model", ensure_default_model(), context=65536)
        engine = Engine()
        try:
            engine.load_model(str(folder)).result()
            config = ServerConfig(
                port=0, serve_any_model_name=True, responses_db=Path(tmp) / "responses.db"
            )
            server = HTTPServer(engine, config)
            server.start()
            try:
                outcomes = replay(server.url, "any-name", fixtures)
            finally:
                server.stop()
        finally:
            engine.close()
    for outcome in outcomes:
        if not outcome.ok:
            print(f"  agent replay: {outcome.fixture} request {outcome.index}: {outcome.problem}")
    passing, total = conversations_passing(outcomes)
    return {"agent_replay_ok": round(passing / total, 3), "agent_replay_conversations": total}
