"""Keep-alives: what a reply sends while it has nothing to say, so that a client with a
read timeout does not give up on a long prompt (tens of seconds for an agent's 20k-token
prompt on a laptop) or a wait in the queue.

Each streaming dialect sends what its official clients read past: an SSE comment line
(`: keep-alive`) for chat and text completions and for Responses, Anthropic's own `ping`
event for Messages (the writers' `keep_alive()`). A request that does not stream gets its
status and headers once nothing has come for `keep_alive_s`, then a space every
`keep_alive_s` ahead of its JSON body: whitespace before a JSON value is valid JSON, so
every client parses the body as it would have. The price: from then on the status is 200,
and a reply that fails after that sends its error body under it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

SSE_COMMENT = b": keep-alive\n\n"
JSON_SPACE = b" "
T = TypeVar("T")


class Ticker:
    """Awaits a source of batches, yielding None each time `every` seconds pass without
    one (None or 0: never). The pending read survives a tick, so nothing is lost."""

    def __init__(self, every: float | None) -> None:
        self.every = every or None
        self._pending: asyncio.Future[Any] | None = None

    async def next(self, read: Callable[[], Awaitable[T]]) -> T | None:
        """`read()`'s next value, or None when `every` seconds passed first."""
        if self._pending is None:
            self._pending = asyncio.ensure_future(read())
        done, _ = await asyncio.wait({self._pending}, timeout=self.every)
        if not done:
            return None
        value: T = self._pending.result()
        self._pending = None
        return value

    def close(self) -> None:
        if self._pending is not None:
            self._pending.cancel()
            self._pending = None
