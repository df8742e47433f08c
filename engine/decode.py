"""The unconstrained decode loop: chunked, cancellable prefill and pipelined sampling.

Like mlx-lm's `generate_step`, the forward pass for token n+1 is dispatched with
`mx.async_eval` before token n is read back with `.item()`, so Python's per-token work
overlaps the model's compute. Every token fed to the model is appended to `fed`, so the
caller always knows exactly which tokens the KV cache holds (for the prefix cache).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Generator
from typing import Any, cast

import mlx.core as mx

from engine.sampling import LogitsProcessor, Sampler

PREFILL_CHUNK = 256


def read_token(y: mx.array) -> int:
    """Wait for the sampled token `y` (a one-element integer array) and return its id."""
    return cast(int, y.item())


class Cancelled(Exception):
    """Raised inside the engine thread when a request is cancelled mid-prefill."""


def prefill(
    model: Any,
    cache: list[Any],
    tokens: list[int],
    fed: list[int],
    *,
    cancel: threading.Event,
    chunk_size: int = PREFILL_CHUNK,
    on_progress: Callable[[int, int], None] | None = None,
) -> None:
    """Feed `tokens` into `cache` in chunks, checking for cancellation between chunks.

    Raises Cancelled; the tokens of completed chunks are in `fed` and in the cache.
    """
    total = len(tokens)
    done = 0
    while done < total:
        if cancel.is_set():
            raise Cancelled
        chunk = tokens[done : done + chunk_size]
        model(mx.array(chunk)[None], cache=cache)
        mx.eval([c.state for c in cache])
        fed.extend(chunk)
        done += len(chunk)
        if on_progress:
            on_progress(done, total)
    if total > chunk_size:
        mx.clear_cache()


def decode_free(
    model: Any,
    cache: list[Any],
    first: list[int],
    fed: list[int],
    *,
    sampler: Sampler,
    processors: list[LogitsProcessor],
    history: list[int],
) -> Generator[int, None, None]:
    """Yield sampled token ids forever, starting by feeding `first` (the prompt's tail).

    `history` holds the tokens so far, for repetition penalties. The caller stops the
    generator when it has enough; the cache then holds `fed`.
    """
    context = mx.array(history, dtype=mx.int32) if processors else None

    def step(inputs: list[int] | mx.array) -> mx.array:
        nonlocal context
        x = mx.array(inputs, dtype=mx.int32) if isinstance(inputs, list) else inputs
        logits = model(x[None], cache=cache)[:, -1, :]
        if processors:
            context = mx.concatenate([context, x]) if context is not None else x
            for process in processors:
                logits = process(context, logits)
        logprobs = logits - mx.logsumexp(logits, axis=-1, keepdims=True)
        return sampler(logprobs)

    y = step(first)
    fed.extend(first)
    mx.async_eval(y)
    n = 0
    while True:
        next_y = step(y)
        mx.async_eval(next_y)
        token = read_token(y)
        fed.append(token)
        yield token
        n += 1
        if n % 256 == 0:
            mx.clear_cache()
        y = next_y
