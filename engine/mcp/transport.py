"""Connections to MCP servers, watched: the SDK's stdio and Streamable HTTP transports with
what the runner needs to tell a user what went wrong.

- `StderrTail` keeps the last few KB a server wrote to stderr (shown when it fails).
- `WatchedTransport` wraps a transport's read stream: it notes lines on stdout that are not
  JSON-RPC ("garbage") and when the stream ends (the server exited or hung up), which the
  SDK's Client does not expose.

Runs on the MCP thread's event loop only.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections import deque
from types import TracebackType
from typing import Any, TextIO

import anyio

from engine.mcp.config import MCPServerConfig
from engine.mcp.redaction import install_log_redaction

TAIL_BYTES = 4096
_GARBAGE_EXCERPT = 160


class StderrTail:
    """A pipe for a server's stderr whose last TAIL_BYTES are kept (read by the loop)."""

    def __init__(self) -> None:
        self._chunks: deque[bytes] = deque()
        self._size = 0
        read_fd, write_fd = os.pipe()
        os.set_blocking(read_fd, False)
        self.write_end: TextIO = os.fdopen(write_fd, "w")
        self._read_fd = read_fd
        self._closed = False
        asyncio.get_running_loop().add_reader(read_fd, self._read)

    def _read(self) -> None:
        try:
            data = os.read(self._read_fd, 65536)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:  # every writer has gone
            self._stop_reading()
            return
        self._chunks.append(data)
        self._size += len(data)
        while self._size - len(self._chunks[0]) >= TAIL_BYTES:
            self._size -= len(self._chunks.popleft())

    def _stop_reading(self) -> None:
        if not self._closed:
            self._closed = True
            asyncio.get_running_loop().remove_reader(self._read_fd)
            os.close(self._read_fd)

    def text(self) -> str:
        """The last lines the server wrote to stderr."""
        data = b"".join(self._chunks)[-TAIL_BYTES:]
        text = data.decode("utf-8", "replace")
        return text[text.find("\n") + 1 :] if len(data) == TAIL_BYTES else text

    def close(self) -> None:
        """Stop reading (after the server process is gone)."""
        with contextlib.suppress(OSError):
            self.write_end.close()
        with contextlib.suppress(BlockingIOError, OSError):
            self._read()  # whatever is left
        self._stop_reading()


class StreamWatch:
    """What the read stream has seen: garbage lines, and whether it ended."""

    def __init__(self) -> None:
        self.ended = anyio.Event()
        self.garbage_lines = 0
        self.garbage_excerpt = ""
        self.http_error = ""  # the last HTTP error status, which the SDK does not report

    def note_garbage(self, exc: Exception) -> None:
        self.garbage_lines += 1
        if self.garbage_excerpt:
            return
        # The SDK hands over pydantic's error, which holds the offending line as its input.
        errors = getattr(exc, "errors", None)
        line: Any = None
        if callable(errors):
            try:
                line = errors()[0].get("input")
            except Exception:  # another kind of error: describe it as it is
                line = None
        text = line if isinstance(line, str) else f"({type(exc).__name__}: {exc})"
        if len(text) > _GARBAGE_EXCERPT:
            text = text[:_GARBAGE_EXCERPT] + "…"
        self.garbage_excerpt = repr(text) if isinstance(line, str) else text

    def describe_garbage(self) -> str:
        """A sentence about the non-MCP output, or "" when there was none."""
        if not self.garbage_lines:
            return ""
        count = self.garbage_lines
        what = "a line that is" if count == 1 else f"{count} lines that are"
        return f"it wrote {what} not MCP (JSON-RPC) to stdout, e.g. {self.garbage_excerpt}"


class _WatchedReadStream:
    """Delegates to the SDK's read stream; reports garbage items and the end of the stream."""

    def __init__(self, inner: Any, watch: StreamWatch) -> None:
        self._inner = inner
        self._watch = watch

    def __getattr__(self, name: str) -> Any:  # last_context and anything else the SDK reads
        return getattr(self._inner, name)

    async def receive(self) -> Any:
        try:
            item = await self._inner.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._watch.ended.set()
            raise
        if isinstance(item, Exception):
            self._watch.note_garbage(item)
        return item

    def __aiter__(self) -> _WatchedReadStream:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def aclose(self) -> None:
        self._watch.ended.set()
        await self._inner.aclose()

    async def __aenter__(self) -> _WatchedReadStream:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()


class WatchedTransport:
    """An MCP transport (async context manager yielding (read, write)) for one server."""

    def __init__(self, config: MCPServerConfig, watch: StreamWatch, stderr: StderrTail | None):
        self._config = config
        self._watch = watch
        self._stderr = stderr
        self._inner: Any = None

    async def __aenter__(self) -> tuple[Any, Any]:
        from mcp.client.stdio import StdioServerParameters, stdio_client
        from mcp.client.streamable_http import streamable_http_client
        from mcp.shared._httpx_utils import create_mcp_http_client

        config = self._config
        if config.transport == "stdio":
            assert self._stderr is not None
            params = StdioServerParameters(
                command=config.command,
                args=list(config.args),
                env=dict(config.env) or None,
                cwd=config.cwd,
                encoding_error_handler="replace",
            )
            self._inner = stdio_client(params, errlog=self._stderr.write_end)
        else:
            http = create_mcp_http_client(headers=dict(config.headers) or None)
            # Whichever httpx the SDK uses logs each request's URL: redact on its logger.
            install_log_redaction([type(http).__module__.split(".")[0]])
            watch = self._watch

            async def note_status(response: Any) -> None:
                if response.status_code >= 400:
                    watch.http_error = f"HTTP {response.status_code} {response.reason_phrase}"

            http.event_hooks = {"request": [], "response": [note_status]}
            self._http = http
            self._inner = streamable_http_client(config.url, http_client=http)
        read, write = await self._inner.__aenter__()
        return _WatchedReadStream(read, self._watch), write

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        try:
            result: bool | None = await self._inner.__aexit__(exc_type, exc, tb)
        finally:
            self._watch.ended.set()
            http = getattr(self, "_http", None)
            if http is not None:
                await http.aclose()
        return result
