"""Engine events into the event loop, and out as a server-sent-event stream.

`relay` is the one stream loop every dialect shares: a `StreamWriter` (OpenAI's chunks,
Anthropic's message events, the Responses events) turns batches of engine events into SSE
bytes, and leaving early (the client disconnected) cancels the replies.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Protocol

from engine.runtime.handle import RequestHandle
from engine.server.errors import APIError
from engine.server.keepalive import SSE_COMMENT, Ticker
from engine.server.responses import (
    SSE_DONE,
    ChunkWriter,
    IndexedEvent,
    encode_sse,
    error_message,
    failure,
    status_for,
)
from engine.types import ChatResult


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


class StreamWriter(Protocol):
    """A dialect's stream: SSE bytes for the start, each batch of events, and the end."""

    @property
    def done(self) -> bool:
        """Every reply of the request has finished."""
        ...

    def opening(self) -> list[bytes]: ...

    def feed(self, events: list[IndexedEvent]) -> list[bytes]: ...

    def ending(self) -> list[bytes]:
        """After the last event: the stream's last words (an error event where a reply
        failed)."""
        ...

    def keep_alive(self) -> bytes:
        """What goes out while there is nothing to send, that the dialect's clients read
        past (engine.server.keepalive)."""
        ...


def generation_error(results: list[ChatResult]) -> APIError | None:
    """The error of a request whose replies did not all finish, if any."""
    failed = failure(results)
    if failed is None:
        return None
    return APIError(
        status_for(failed), error_message(failed), code=failed.error_code or "generation_failed"
    )


class ChatChunkStream:
    """OpenAI's chat and text completion chunks, ended by `[DONE]`. An error after the
    stream began goes out as an `{"error": ...}` event (the `openai` client raises it)."""

    def __init__(self, writer: ChunkWriter) -> None:
        self.writer = writer

    @property
    def done(self) -> bool:
        return self.writer.done

    def opening(self) -> list[bytes]:
        return [encode_sse(payload) for payload in self.writer.opening()]

    def feed(self, events: list[IndexedEvent]) -> list[bytes]:
        return [encode_sse(payload) for payload in self.writer.chunks(events)]

    def ending(self) -> list[bytes]:
        error = generation_error(self.writer.finished())
        return ([encode_sse(error.body())] if error is not None else []) + [SSE_DONE]

    def keep_alive(self) -> bytes:
        return SSE_COMMENT


async def relay(
    writer: StreamWriter,
    events: list[IndexedEvent],
    channel: EventChannel | None,
    handles: list[RequestHandle],
    keep_alive_s: float | None = None,
) -> AsyncIterator[bytes]:
    """The SSE body: `events` already received, then the channel's until every reply has
    finished, then the writer's ending; the writer's keep-alive whenever `keep_alive_s`
    pass with nothing to send. Leaving early (the client disconnected, or the server is
    stopping) cancels the replies."""
    ticker = Ticker(keep_alive_s)
    try:
        for piece in writer.opening():
            yield piece
        while True:
            for piece in writer.feed(events):
                yield piece
            if writer.done or channel is None:
                break
            batch = await ticker.next(channel.next_batch)
            if batch is None:
                yield writer.keep_alive()
            events = batch or []
        for piece in writer.ending():
            yield piece
    finally:
        ticker.close()
        for handle in handles:
            if not handle.done():
                handle.cancel()  # the client went away (or the server is stopping)
