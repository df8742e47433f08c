"""The feeder keeps at most `limit()` requests in flight on the engine, and fewer as the
limit shrinks (how batch work lets interactive requests go first); every request's result
comes back once."""

from __future__ import annotations

import threading
from typing import Any

from engine.extract.feeder import Feeder
from engine.types import ChatRequest, SamplingSettings


class _Counting:
    """The tiny engine, counting requests in flight as the feeder submits them."""

    def __init__(self, engine: Any) -> None:
        self.engine = engine
        self.lock = threading.Lock()
        self.in_flight = 0
        self.most = 0
        self.seen: list[int] = []

    def submit(self, request: ChatRequest, on_event: Any) -> Any:
        def counted(event: Any) -> None:
            from engine.types import Finished

            if isinstance(event, Finished):
                with self.lock:
                    self.in_flight -= 1
            on_event(event)

        with self.lock:
            self.in_flight += 1
            self.most = max(self.most, self.in_flight)
            self.seen.append(self.in_flight)
        return self.engine.submit(request, counted)


def _requests(n: int):
    for i in range(n):
        yield (
            i,
            ChatRequest(
                [{"role": "user", "content": f"Count to {i}."}],
                SamplingSettings(temperature=0.0, max_tokens=12),
            ),
        )


def test_at_most_limit_in_flight_and_each_result_once(tiny_engine) -> None:
    engine = _Counting(tiny_engine)
    feeder: Feeder[int] = Feeder(engine, limit=lambda: 3)  # type: ignore[arg-type]
    results: list[int] = []
    assert feeder.run(_requests(10), lambda key, result: results.append(key))
    assert sorted(results) == list(range(10))
    assert engine.most <= 3


def test_a_shrinking_limit_leaves_one_in_flight(tiny_engine) -> None:
    engine = _Counting(tiny_engine)
    busy = {"interactive": 0}
    feeder: Feeder[int] = Feeder(engine, limit=lambda: max(1, 4 - busy["interactive"]))  # type: ignore[arg-type]
    results: list[int] = []

    def on_result(key: int, result: Any) -> None:
        results.append(key)
        busy["interactive"] = 8  # interactive requests arrived: batch work yields

    feeder.run(_requests(8), on_result)
    assert sorted(results) == list(range(8))
    after_first = engine.seen[4:]  # submissions after the first result
    assert after_first and max(after_first) == 1


def test_stop_submits_nothing_more(tiny_engine) -> None:
    engine = _Counting(tiny_engine)
    feeder: Feeder[int] = Feeder(engine, limit=lambda: 2)  # type: ignore[arg-type]
    results: list[int] = []

    def on_result(key: int, result: Any) -> None:
        results.append(key)
        feeder.stop.set()

    assert not feeder.run(_requests(10), on_result)
    assert 1 <= len(results) <= 2 and len(engine.seen) == 2
