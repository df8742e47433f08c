"""Bench section `server`: the same prompt and settings streamed over HTTP (the official
`openai` client against the server on a loopback port) and straight through the Engine,
alternating, in one run.

Both sides are timed from the caller's seat: TTFT from sending the request to the first
text, decode tokens/s as the tokens after the first over the time from the first text to
the last. Every run after the first finds the prompt in the prefix cache, on both sides
alike, so the difference is the server's own overhead.
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

from engine.engine import Engine
from engine.types import ChatRequest, SamplingSettings, TextDelta

PROMPT = "Write a long, detailed story about a lighthouse keeper and a storm."


def _direct_run(engine: Engine, tokens: int) -> tuple[float, float, int]:
    request = ChatRequest(
        [{"role": "user", "content": PROMPT}], SamplingSettings(temperature=0.0, max_tokens=tokens)
    )
    stamps: list[float] = []

    def on_event(event: Any) -> None:
        if isinstance(event, TextDelta):
            stamps.append(time.perf_counter())

    sent = time.perf_counter()
    result = engine.submit(request, on_event).result()
    if result.error:
        raise RuntimeError(result.error)
    return _figures(sent, stamps, result.stats.generated_tokens)


def _http_run(client: Any, model: str, tokens: int) -> tuple[float, float, int]:
    stamps: list[float] = []
    generated = 0
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
        if chunk.usage is not None:
            generated = chunk.usage.completion_tokens
    return _figures(sent, stamps, generated)


def _figures(sent: float, stamps: list[float], generated: int) -> tuple[float, float, int]:
    if not stamps:
        raise RuntimeError("the reply had no text")
    span = stamps[-1] - stamps[0]
    tps = (generated - 1) / span if generated > 1 and span > 0 else 0.0
    return stamps[0] - sent, tps, generated


def run_server_bench(engine: Engine, args: argparse.Namespace) -> dict[str, Any]:
    """Figures of the server against the engine alone, alternating runs, medians compared."""
    import openai

    from engine.server import HTTPServer, ServerConfig

    assert engine.snapshot.model is not None
    model = engine.snapshot.model.name
    server = HTTPServer(engine, ServerConfig(port=0))
    server.start()
    client = openai.OpenAI(base_url=server.url + "/v1", api_key="bench", max_retries=0)
    direct_ttft, direct_tps, http_ttft, http_tps, counts = [], [], [], [], []
    try:
        _direct_run(engine, 4)  # warm-up: kernels, the prompt in the cache, a connection
        _http_run(client, model, 4)
        for i in range(args.repeats):
            order = ("direct", "http") if i % 2 == 0 else ("http", "direct")
            for side in order:
                if side == "direct":
                    ttft, tps, n = _direct_run(engine, args.tokens)
                    direct_ttft.append(ttft)
                    direct_tps.append(tps)
                else:
                    ttft, tps, n = _http_run(client, model, args.tokens)
                    http_ttft.append(ttft)
                    http_tps.append(tps)
                counts.append(n)
    finally:
        client.close()
        server.stop()
    direct, http = statistics.median(direct_tps), statistics.median(http_tps)
    return {
        "server_tps_ratio": round(http / direct, 3) if direct else None,
        "server_ttft_overhead_ms": round(
            (statistics.median(http_ttft) - statistics.median(direct_ttft)) * 1e3, 2
        ),
        "server_http_decode_tps": round(http, 2),
        "server_direct_decode_tps": round(direct, 2),
        "server_http_ttft_ms": round(statistics.median(http_ttft) * 1e3, 2),
        "server_direct_ttft_ms": round(statistics.median(direct_ttft) * 1e3, 2),
        "server_tokens": min(counts),
        "server_runs": args.repeats,
    }
