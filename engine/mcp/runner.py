"""One MCP server's life on the MCP thread's event loop: start, list and check its tools,
serve calls, notice when it dies, stop.

The runner owns the SDK `Client` for its server; everything it learns is published as an
immutable `ServerSnapshot`. Every wait is bounded: starting by `start_timeout`, each call
by its own timeout, stopping by the SDK's shutdown sequence (close stdin, SIGTERM, SIGKILL
to the process group).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any

import anyio

from engine.mcp.catalog import MAX_TOOLS_PER_SERVER, ToolInfo, check_tool
from engine.mcp.config import MCPServerConfig
from engine.mcp.redaction import redact
from engine.mcp.results import Failure, ToolResult, from_call_result
from engine.mcp.transport import StderrTail, StreamWatch, WatchedTransport

_MAX_LIST_PAGES = 20


class ServerState(StrEnum):
    OFF = "off"  # switched off, or not started yet
    STARTING = "starting"
    READY = "ready"
    FAILED = "failed"
    NEEDS_OK = "needs_ok"  # new or changed: waits for the user's OK (the app's; never the hub's)


@dataclass(frozen=True)
class ServerSnapshot:
    """What one server is doing, for display; secrets are already scrubbed."""

    name: str
    state: ServerState
    description: str  # the command line or URL, without secrets
    transport: str
    detail: str = ""  # why it failed, or a warning while it runs
    stderr_tail: str = ""
    tools: tuple[ToolInfo, ...] = ()
    server_info: str = ""  # the server's own name and version
    fingerprint: str = ""  # of the configuration it runs (MCPServerConfig.fingerprint)


def _leaf(exc: BaseException) -> BaseException:
    """The first real error inside (nested) exception groups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _message(exc: BaseException) -> str:
    if isinstance(exc, FileNotFoundError):
        return f"the program was not found ({exc.filename or exc})"
    if isinstance(exc, PermissionError):
        return f"the program may not be run ({exc.filename or exc})"
    text = str(exc).strip() or type(exc).__name__
    return text if len(text) < 400 else text[:400] + "…"


class ServerRunner:
    """Runs one server until `stop()`; publishes snapshots through `publish`."""

    def __init__(
        self,
        config: MCPServerConfig,
        publish: Callable[[ServerSnapshot], None],
        *,
        start_timeout: float = 60.0,
    ) -> None:
        self.config = config
        self._publish_fn = publish
        self._start_timeout = start_timeout
        self._secrets = config.secrets()
        self._stop = anyio.Event()
        self._life: anyio.CancelScope | None = None
        self._client: Any = None
        self._watch = StreamWatch()
        self._stderr: StderrTail | None = None
        self.snapshot = ServerSnapshot(
            config.name,
            ServerState.OFF,
            config.describe(),
            config.transport,
            fingerprint=config.fingerprint(),
        )

    # ---- state ----

    def _publish(self, state: ServerState, **changes: Any) -> None:
        for key in ("detail", "stderr_tail", "server_info"):
            if key in changes:
                changes[key] = redact(changes[key], self._secrets)
        self.snapshot = replace(self.snapshot, state=state, **changes)
        self._publish_fn(self.snapshot)

    def _failed(self, tool: str, failure: Failure, message: str, seconds: float) -> ToolResult:
        """A failed call; its message (with any excerpt of the server's output) redacted."""
        return ToolResult.failed(
            self.config.name, tool, failure, redact(message, self._secrets), seconds
        )

    def _stderr_text(self) -> str:
        return redact(self._stderr.text(), self._secrets) if self._stderr is not None else ""

    # ---- life ----

    async def run(self) -> None:
        """Start the server and keep it until `stop()` or until it dies."""
        from mcp import Client
        from mcp.types import Implementation

        self._publish(ServerState.STARTING, detail="", stderr_tail="", tools=())
        self._watch = StreamWatch()
        if self.config.transport == "stdio":
            self._stderr = StderrTail()
        ready = False
        failure = ""
        try:
            with anyio.CancelScope() as life:
                self._life = life
                life.deadline = anyio.current_time() + self._start_timeout
                async with AsyncExitStack() as stack:
                    client = Client(
                        WatchedTransport(self.config, self._watch, self._stderr),
                        client_info=Implementation(name="Corral", version="0.1"),
                    )
                    await stack.enter_async_context(client)
                    tools = await self._list_tools(client)
                    life.deadline = math.inf
                    ready = True
                    self._client = client
                    info = client.server_info
                    self._publish(
                        ServerState.READY,
                        tools=tools,
                        server_info=f"{info.name} {info.version}".strip() if info else "",
                        detail=self._watch.describe_garbage(),
                    )
                    await self._wait_for_stop_or_end()
                    self._client = None
            if life.cancelled_caught and not ready and not self._stop.is_set():
                failure = f"it did not finish starting within {self._start_timeout:g} s"
        except Exception as exc:  # whatever the SDK or the process raised: shown, not raised
            failure = _message(_leaf(exc))
            if self._watch.http_error:
                failure += f" ({self._watch.http_error})"
            if self.config.transport == "http" and not ready:
                failure = f"could not connect to {self.config.describe()}: {failure}"
        finally:
            self._client = None
            if self._stderr is not None:
                self._stderr.close()
        if self._stop.is_set():
            self._publish(ServerState.OFF, detail="", stderr_tail=self._stderr_text())
            return
        if not failure:
            failure = "the server exited" if ready else "the server closed the connection"
        garbage = self._watch.describe_garbage()
        detail = failure + (f"; {garbage}" if garbage else "")
        self._publish(ServerState.FAILED, detail=detail, stderr_tail=self._stderr_text())

    async def _wait_for_stop_or_end(self) -> None:
        async with anyio.create_task_group() as group:

            async def until(event: anyio.Event) -> None:
                await event.wait()
                group.cancel_scope.cancel()

            group.start_soon(until, self._stop)
            group.start_soon(until, self._watch.ended)

    def stop(self) -> None:
        """Ask the server to stop (on the loop). A start in progress is cancelled."""
        self._stop.set()
        if self._client is None and self._life is not None:
            self._life.cancel()

    async def _list_tools(self, client: Any) -> tuple[ToolInfo, ...]:
        listed: list[Any] = []
        cursor = None
        for _ in range(_MAX_LIST_PAGES):
            page = await client.list_tools(cursor=cursor)
            listed += page.tools
            cursor = page.next_cursor
            if cursor is None or len(listed) >= MAX_TOOLS_PER_SERVER:
                break
        tools: list[ToolInfo] = []
        for tool in listed[:MAX_TOOLS_PER_SERVER]:
            # llguidance compiles each schema; off the loop, so other servers keep going.
            tools.append(
                await anyio.to_thread.run_sync(
                    check_tool, tool.name, tool.description, tool.input_schema
                )
            )
        return tuple(tools)

    # ---- calls ----

    async def call(self, tool: str, arguments: dict[str, Any], timeout: float) -> ToolResult:
        """Call `tool`; every outcome (timeout, crash, MCP error) is a ToolResult."""
        from mcp import MCPError
        from mcp_types import CONNECTION_CLOSED

        name = self.config.name
        client = self._client
        if client is None or self.snapshot.state != ServerState.READY:
            state = self.snapshot.state.value
            return ToolResult.failed(
                name, tool, "not_running", f'the tool server "{name}" is not running ({state})'
            )
        started = time.perf_counter()

        def elapsed() -> float:
            return time.perf_counter() - started

        try:
            with anyio.fail_after(timeout):
                result = await client.call_tool(tool, arguments)
        except TimeoutError:
            garbage = self._watch.describe_garbage()
            message = f'the tool server "{name}" did not answer within {timeout:g} s'
            message += f" ({garbage})" if garbage else ""
            return self._failed(tool, "timeout", message, elapsed())
        except Exception as exc:
            leaf = _leaf(exc)
            closed = isinstance(leaf, MCPError) and leaf.code == CONNECTION_CLOSED
            if closed or self._watch.ended.is_set():
                await anyio.sleep(0.05)  # let the last stderr lines arrive
                tail = self._stderr_text().strip()
                message = f'the tool server "{name}" stopped during the call'
                message += f". Its last output: {tail[-600:]}" if tail else ""
                return self._failed(tool, "server_exited", message, elapsed())
            message = f'the tool server "{name}" answered with an error: {_message(leaf)}'
            if self._watch.http_error:
                message += f" ({self._watch.http_error})"
            return self._failed(tool, "protocol", message, elapsed())
        return from_call_result(result, name, tool, elapsed())
