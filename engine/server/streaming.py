"""Engine events into the event loop, and out as a server-sent-event stream."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from engine.runtime.handle import RequestHandle
from engine.server.errors import APIError
from engine.server.responses import (
    SSE_DONE,
    ChunkWriter,
    IndexedEvent,
    encode_sse,
    error_message,
    failure,
    status_for,
)


class EventChannel:
    """Engine events (with their choice's index) handed from the engine thread to the
    event loop, read in batches."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._queue: asyncio.Queue[IndexedEvent] = asyncio.Queue()

    def push(self, event: IndexedEvent) -> None:
        """Engine thread. Never raises: the engine's loop must not fail for the server."""
        try:
            self._loop.call_soon_threadsafe(self._queue.put_nowait, event)
        except RuntimeError:  # the loop has closed (server stopped); nobody is listening
            pass

    async def next_batch(self) -> list[IndexedEvent]:
        """The next event and every other one already waiting."""
        events = [await self._queue.get()]
        while not self._queue.empty():
            events.append(self._queue.get_nowait())
        return events


async def sse_stream(
    writer: ChunkWriter,
    events: list[IndexedEvent],
    channel: EventChannel | None,
    handles: list[RequestHandle],
) -> AsyncIterator[bytes]:
    """The SSE body: `events` already received, then the channel's until every choice has
    finished, then [DONE]. An error after the stream began goes out as an `{"error": ...}`
    event (the `openai` client raises it). Leaving early (the client disconnected) cancels
    the replies."""
    try:
        for payload in writer.opening():
            yield encode_sse(payload)
        while True:
            for payload in writer.chunks(events):
                yield encode_sse(payload)
            if writer.done or channel is None:
                break
            events = await channel.next_batch()
        failed = failure(writer.finished())
        if failed is not None:
            error = APIError(
                status_for(failed),
                error_message(failed),
                code=failed.error_code or "generation_failed",
            )
            yield encode_sse(error.body())
        yield SSE_DONE
    finally:
        for handle in handles:
            if not handle.done():
                handle.cancel()  # the client went away (or the server is stopping)
