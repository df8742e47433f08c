"""A model whose prompt passes are slow on purpose: the long prefill an agent's prompt takes
on a laptop, made without depending on this machine's speed (the keep-alive test and the
serving bench).

`slowed(engine, delay_s)` wraps the engine's loaded model so that every forward pass over
more than one token (a prompt chunk: the engine decodes one token a pass when it does not
draft) sleeps `delay_s` first, and restores it after.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


class SlowPrefill:
    """`model`, with each pass over more than one token `delay_s` longer; `fail_next`
    makes the next such pass fail after its delay (a reply failing mid-prefill)."""

    def __init__(self, model: Any, delay_s: float) -> None:
        self._model = model
        self.delay_s = delay_s
        self.fail_next = False

    def __call__(self, inputs: Any, *args: Any, **kwargs: Any) -> Any:
        if inputs.shape[-1] > 1:
            time.sleep(self.delay_s)
            if self.fail_next:
                self.fail_next = False
                raise RuntimeError("the prompt pass failed")
        return self._model(inputs, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._model, name)


@contextmanager
def slowed(engine: Any, delay_s: float) -> Iterator[SlowPrefill]:
    """The engine's model slowed for the duration (an Engine: `engine.run` reaches the
    loaded model on its thread)."""
    wrapped: list[SlowPrefill] = []

    def wrap(loaded: Any) -> None:
        wrapped.append(SlowPrefill(loaded.model, delay_s))
        loaded.model = wrapped[0]

    def unwrap(loaded: Any) -> None:
        loaded.model = wrapped[0]._model

    engine.run(wrap).result()
    try:
        yield wrapped[0]
    finally:
        engine.run(unwrap).result()
