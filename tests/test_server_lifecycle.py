"""The server's count of requests in flight stays true when the engine closes under it: a
request that finds the engine shutting down is answered 503 and no longer counted, so the
server's busy limit and the app's activity figure never drift."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
from server_support import serving

from engine.engine import Engine


class ClosesWhileSubmitting:
    """A real engine that is closed at the moment the server submits a request to it: the
    race between a shutdown and a request arriving, made certain."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    def __getattr__(self, name: str) -> Any:
        return getattr(self._engine, name)

    def submit_many(self, *args: Any, **kwargs: Any) -> Any:
        self._engine.close()
        return self._engine.submit_many(*args, **kwargs)


def test_engine_closed_at_submit_is_a_503_and_not_left_in_flight(tiny_model_dir: Path):
    engine = Engine()
    engine.load_model(str(tiny_model_dir)).result()
    try:
        with serving(ClosesWhileSubmitting(engine)) as server:
            body = {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2}
            reply = httpx.post(server.url + "/v1/chat/completions", json=body, timeout=60)
            assert reply.status_code == 503
            assert reply.json()["error"]["message"] == "the server is stopping"
            assert server.activity.active == 0
            assert server.activity.records[-1].status == 503
    finally:
        engine.close()
