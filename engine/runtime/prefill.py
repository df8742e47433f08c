"""Prompt processing: a prompt's tokens fed into a KV cache in chunks.

Every token fed to the model is appended to `fed`, so the caller always knows exactly which
tokens the KV cache holds (for the prefix cache). The scheduler (`engine.runtime.scheduler`) feeds
one chunk at a time between decode steps; the decode loop is `engine.runtime.batch`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import mlx.core as mx

PREFILL_CHUNK = 256


class Cancelled(Exception):
    """Raised inside the engine thread when a request is cancelled mid-prefill."""


def feed(
    model: Any,
    cache: list[Any],
    tokens: list[int],
    fed: list[int],
    **inputs: Any,
) -> None:
    """Run `tokens` through the model into `cache` in one forward pass; note them in `fed`.
    `inputs`: what a prompt with images gives the model besides its tokens
    (`input_embeddings`, `position_ids`, ...: `engine.runtime.vision.VisionPrompt.inputs`)."""
    model(mx.array(tokens)[None], cache=cache, **inputs)
    mx.eval([c.state for c in cache])
    fed.extend(tokens)


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
    """Feed all of `tokens` into `cache` in chunks, checking for cancellation between them.

    Raises Cancelled; the tokens of completed chunks are in `fed` and in the cache.
    """
    total = len(tokens)
    done = 0
    while done < total:
        if cancel.is_set():
            raise Cancelled
        chunk = tokens[done : done + chunk_size]
        feed(model, cache, chunk, fed)
        done += len(chunk)
        if on_progress:
            on_progress(done, total)
    if total > chunk_size:
        mx.clear_cache()
