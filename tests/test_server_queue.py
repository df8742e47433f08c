"""One number for how many requests may wait: the README's, the engine's bound, and what
the server does at it. With the engine busy, exactly that many requests queue and the next
one is answered 503 `queue_full`; the queued ones are then all answered."""

from __future__ import annotations

import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
from server_support import serving

from engine.engine import DEFAULT_MAX_QUEUED

README = Path(__file__).resolve().parents[1] / "README.md"


def _waiting(engine) -> int:
    # Only to know when every request has reached the queue (no public count exists).
    with engine._queue_lock:
        return len(engine._queue)


def test_the_queue_holds_exactly_the_readme_bound_and_refuses_the_next(tiny_engine) -> None:
    stated = re.findall(r"up to (\d+) more requests wait for a row", README.read_text())
    assert stated == [str(DEFAULT_MAX_QUEUED)]  # said once, and true of the engine
    bound = tiny_engine.max_queued
    assert bound == DEFAULT_MAX_QUEUED
    gate = threading.Event()
    blocked = tiny_engine.run(lambda _: gate.wait(120))  # no request gets a row meanwhile
    body = {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 1}
    with serving(tiny_engine) as server, ThreadPoolExecutor(bound) as pool:
        url = server.url + "/v1/chat/completions"
        try:
            queued = [pool.submit(httpx.post, url, json=body, timeout=120) for _ in range(bound)]
            deadline = time.monotonic() + 60
            while _waiting(tiny_engine) < bound and time.monotonic() < deadline:
                time.sleep(0.02)
            assert _waiting(tiny_engine) == bound
            refused = httpx.post(url, json=body, timeout=30)
            assert refused.status_code == 503, refused.text
            assert refused.json()["error"]["code"] == "queue_full"
            assert refused.headers["Retry-After"] == "1"
            assert f"at most {bound}" in refused.json()["error"]["message"]
        finally:
            gate.set()
        blocked.result(timeout=60)
        answers = [future.result() for future in queued]
    assert [a.status_code for a in answers] == [200] * bound
