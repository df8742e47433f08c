"""Engine events into the event loop, and out as a server-sent-event stream."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from engine.engine import RequestHandle
from engine.server.errors import APIError
from engine.server.responses import SSE_DONE, ChunkWriter, encode_sse, error_message, status_for
from engine.types import ChatEvent, StopReason


class EventChannel:
    """Engine events handed from the engine thread to the event loop, read in batches."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._queue: asyncio.Queue[ChatEvent] = asyncio.Queue()

    def push(self, event: ChatEvent) -> None:
        """Engine thread. Never raises: the engine's loop must not fail for the server."""
        try:
            self._loop.call_soon_threadsafe(self._queue.put_nowait, event)
        except RuntimeError:  # the loop has closed (server stopped); nobody is listening
            pass

    async def next_batch(self) -> list[ChatEvent]:
        """The next event and every other one already waiting."""
        events = [await self._queue.get()]
        while not self._queue.empty():
            events.append(self._queue.get_nowait())
        return events


async def sse_stream(
    writer: ChunkWriter,
    events: list[ChatEvent],
    channel: EventChannel | None,
    handle: RequestHandle,
) -> AsyncIterator[bytes]:
    """The SSE body: `events` already received, then the channel's, then [DONE]. An error
    after the stream began goes out as an `{"error": ...}` event (the `openai` client raises
    it). Leaving early (the client disconnected) cancels the reply."""
    try:
        for payload in writer.opening():
            yield encode_sse(payload)
        while True:
            for payload in writer.chunks(events):
                yield encode_sse(payload)
            if writer.result is not None or channel is None:
                break
            events = await channel.next_batch()
        result = writer.result
        if result is not None and (result.error or result.stop_reason == StopReason.CANCELLED):
            error = APIError(
                status_for(result),
                error_message(result),
                code=result.error_code or "generation_failed",
            )
            yield encode_sse(error.body())
        yield SSE_DONE
    finally:
        if not handle.done():
            handle.cancel()  # the client went away (or the server is stopping)
