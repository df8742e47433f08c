"""Shared pieces for the model pool's tests: a second tiny model (its own weights, the
same tokenizer), pools over tiny models, waiting for a model's state, and a watcher that
records every snapshot the pool publishes while a test runs."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from engine.pool import ModelPool, ModelSettings
from engine.types import ChatRequest, SamplingSettings

MiB = 1 << 20
KV = ModelSettings(kv_budget_bytes=48 * MiB)  # a small, fixed prompt cache per model


def ask(
    text: str = "Hello there", model: str | None = None, max_tokens: int = 4, **sampling: Any
) -> ChatRequest:
    """A greedy request for `model` (None: the pool's default)."""
    sampling.setdefault("temperature", 0.0)
    return ChatRequest(
        [{"role": "user", "content": text}],
        SamplingSettings(max_tokens=max_tokens, **sampling),
        model=model,
    )


def make_pool(*specs: str | Path, **options: Any) -> ModelPool:
    """A pool listing `specs` (tiny models), each with a small fixed KV budget, drafting
    decided by acceptance alone (as the session's tiny engine)."""
    options.setdefault("engine_options", {"learn_pass_cost": False})
    options.setdefault("wire_memory", False)
    pool = ModelPool(**options)
    for spec in specs:
        pool.add_model(str(spec), settings=KV)
    return pool


def wait_until(check: Callable[[], bool], timeout: float = 60.0, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what or check}")
        time.sleep(0.02)


def state_of(pool: ModelPool, name: str) -> str:
    snap = pool.snapshot.pool
    assert snap is not None
    found = snap.find(name)
    assert found is not None, name
    return found.state
