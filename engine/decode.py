"""Prompt processing: a prompt's tokens fed into a KV cache in chunks, one chunk at a time.

Every token fed to the model is appended to `fed`, so the caller always knows exactly which
tokens the KV cache holds (for the prefix cache). The decode loop is `engine.batch`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import mlx.core as mx

PREFILL_CHUNK = 256


class Cancelled(Exception):
    """Raised inside the engine thread when a request is cancelled mid-prefill."""


def prefill_chunks(
    model: Any,
    cache: list[Any],
    tokens: list[int],
    fed: list[int],
    *,
    chunk_size: int = PREFILL_CHUNK,
) -> Iterator[int]:
    """Feed `tokens` into `cache` one chunk per iteration, yielding how many are done.

    Stopping early leaves the completed chunks' tokens in `fed` and in the cache.
    """
    total = len(tokens)
    done = 0
    while done < total:
        chunk = tokens[done : done + chunk_size]
        model(mx.array(chunk)[None], cache=cache)
        mx.eval([c.state for c in cache])
        fed.extend(chunk)
        done += len(chunk)
        yield done
    if total > chunk_size:
        mx.clear_cache()


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
    """Feed all of `tokens` into `cache`, checking for cancellation between chunks.

    Raises Cancelled; the tokens of completed chunks are in `fed` and in the cache.
    """
    if cancel.is_set():
        raise Cancelled
    for done in prefill_chunks(model, cache, tokens, fed, chunk_size=chunk_size):
        if on_progress:
            on_progress(done, len(tokens))
        if cancel.is_set() and done < len(tokens):
            raise Cancelled
