"""The MCP hub: every configured server, run on one asyncio thread of its own.

Not the GUI thread, not the engine thread: the hub's thread runs an event loop where the
official `mcp` SDK talks to the servers. Other threads use the hub's methods, which hand
work to the loop and return at once (futures for calls). The loop owns all server state
and publishes it as immutable snapshots: `snapshots()` from any thread, and the
`on_change` callback (called on the hub's thread) after each change.

`close()` stops every server (the SDK closes stdin, then signals the process group) and
the thread; it is registered with `atexit` too, so no server outlives the process.
"""

from __future__ import annotations

import asyncio
import atexit
import logging
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import Future
from typing import Any

from engine.mcp.catalog import ToolCatalog, build_catalog
from engine.mcp.config import McpConfig
from engine.mcp.redaction import install_log_redaction
from engine.mcp.results import ToolResult
from engine.mcp.runner import ServerRunner, ServerSnapshot, ServerState

DEFAULT_CALL_TIMEOUT_S = 60.0
DEFAULT_START_TIMEOUT_S = 60.0
_STOP_GRACE_S = 10.0

ChangeFn = Callable[[dict[str, ServerSnapshot]], None]


class McpHub:
    """Starts, stops and calls the servers of an `McpConfig`."""

    def __init__(
        self,
        config: McpConfig | None = None,
        *,
        call_timeout: float = DEFAULT_CALL_TIMEOUT_S,
        start_timeout: float = DEFAULT_START_TIMEOUT_S,
        on_change: ChangeFn | None = None,
    ) -> None:
        """`call_timeout` is the default per call (seconds); `start_timeout` bounds a
        server's start (process launch, handshake and tool listing)."""
        self.call_timeout = call_timeout
        self.start_timeout = start_timeout
        self.on_change = on_change
        self._config = config or McpConfig()
        self._disabled: set[str] = set()
        self._runners: dict[str, ServerRunner] = {}
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._snapshots: dict[str, ServerSnapshot] = {}
        self._closed = False
        # The SDK logs parse failures with tracebacks; our snapshots report them instead.
        logging.getLogger("mcp").setLevel(logging.CRITICAL)
        install_log_redaction()  # httpx logs each request's full URL, tokens and all
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run_loop, name="corral-mcp", daemon=True)
        self._thread.start()
        atexit.register(self.close)
        self._loop.call_soon_threadsafe(self._publish_all)  # on_change runs on the hub's thread

    # ---- any thread ----

    @property
    def config(self) -> McpConfig:
        return self._config

    def snapshots(self) -> dict[str, ServerSnapshot]:
        """Every configured server's latest snapshot, in config order."""
        return dict(self._snapshots)

    def start(self, disabled: Iterable[str] = ()) -> Future[None]:
        """Start every server that is not in `disabled` nor marked disabled in the file."""
        return self._submit(self._apply(set(disabled)))

    def set_config(self, config: McpConfig) -> Future[None]:
        """Use a new configuration: removed or changed servers stop, new ones start."""
        return self._submit(self._set_config(config))

    def set_enabled(self, name: str, enabled: bool) -> Future[None]:
        """Switch one server on (it starts) or off (it stops)."""
        return self._submit(self._switch(name, enabled))

    def restart(self, name: str) -> Future[None]:
        """Stop a server (if it runs) and start it again."""
        return self._submit(self._restart(name))

    def catalog(
        self, *, reserved: Iterable[str] = (), disabled_tools: Iterable[tuple[str, str]] = ()
    ) -> ToolCatalog:
        """The tools of the ready servers, named for the model (see build_catalog)."""
        ready = [s for s in self._snapshots.values() if s.state == ServerState.READY]
        return build_catalog(
            [(s.name, s.tools) for s in ready],
            reserved=reserved,
            disabled_tools=disabled_tools,
            fingerprints={s.name: s.fingerprint for s in ready},
        )

    def call(
        self,
        server: str,
        tool: str,
        arguments: dict[str, Any],
        timeout: float | None = None,
    ) -> Future[ToolResult]:
        """Call `tool` (its server's own name) on `server`. The future always ends in a
        ToolResult (failures included) unless it is cancelled, which cancels the call."""
        seconds = self.call_timeout if timeout is None else timeout
        return self._submit(self._call(server, tool, arguments, seconds))

    def wait_until_settled(self, timeout: float) -> bool:
        """Block until no server is starting (for the CLI and tests); False on timeout."""
        settled = threading.Event()

        def check(_: object = None) -> None:
            if all(s.state != ServerState.STARTING for s in self._snapshots.values()):
                settled.set()

        previous = self.on_change

        def watch(snapshots: dict[str, ServerSnapshot]) -> None:
            if previous is not None:
                previous(snapshots)
            check()

        self.on_change = watch
        try:
            check()
            return settled.wait(timeout)
        finally:
            self.on_change = previous

    def close(self) -> None:
        """Stop every server and the loop. Safe to call twice and from atexit."""
        if self._closed:
            return
        self._closed = True
        atexit.unregister(self.close)
        try:
            stopping = asyncio.run_coroutine_threadsafe(self._stop_all(), self._loop)
            stopping.result(_STOP_GRACE_S)
        except Exception:  # a server that ignores every signal must not hang the quit
            pass
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)

    # ---- the hub's thread ----

    def _run_loop(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_forever()
        self._loop.close()

    def _submit(self, coro: Any) -> Future[Any]:
        if self._closed:
            coro.close()
            future: Future[Any] = Future()
            future.set_exception(RuntimeError("the MCP hub is closed"))
            return future
        return asyncio.run_coroutine_threadsafe(coro, self._loop)

    def _publish_all(self) -> None:
        snapshots: dict[str, ServerSnapshot] = {}
        for server in self._config.servers:
            runner = self._runners.get(server.name)
            if runner is not None:
                snapshots[server.name] = runner.snapshot
            else:
                off = ServerSnapshot(
                    server.name,
                    ServerState.OFF,
                    server.describe(),
                    server.transport,
                    fingerprint=server.fingerprint(),
                )
                previous = self._snapshots.get(server.name)
                keep = previous is not None and previous.state == ServerState.FAILED
                snapshots[server.name] = previous if keep and previous else off
        self._snapshots = snapshots
        if self.on_change is not None:
            try:
                self.on_change(dict(snapshots))
            except Exception:  # a listener's bug must not stop the servers
                logging.getLogger(__name__).exception("MCP on_change listener failed")

    def _publish(self, snapshot: ServerSnapshot) -> None:
        if snapshot.name in self._runners:
            self._publish_all()

    def _wanted(self) -> set[str]:
        return {
            s.name for s in self._config.servers if not s.disabled and s.name not in self._disabled
        }

    async def _switch(self, name: str, enabled: bool) -> None:
        if enabled:
            self._disabled.discard(name)
        else:
            self._disabled.add(name)
        await self._apply()

    async def _apply(self, disabled: set[str] | None = None) -> None:
        if disabled is not None:
            self._disabled = disabled
        wanted = self._wanted()
        await asyncio.gather(*(self._stop(n) for n in list(self._runners) if n not in wanted))
        for name in wanted:
            if name not in self._runners:
                self._launch(name)
        self._publish_all()

    def _launch(self, name: str) -> None:
        config = self._config.server(name)
        if config is None:
            return
        runner = ServerRunner(config, self._publish, start_timeout=self.start_timeout)
        self._runners[name] = runner
        task = self._loop.create_task(runner.run(), name=f"mcp-{name}")
        self._tasks[name] = task

        def finished(_: asyncio.Task[None]) -> None:
            # The runner ended (failed, or stopped): keep its last snapshot, drop it.
            if self._runners.get(name) is runner:
                self._snapshots[name] = runner.snapshot
                del self._runners[name]
                del self._tasks[name]
                self._publish_all()

        task.add_done_callback(finished)

    async def _stop(self, name: str) -> None:
        runner, task = self._runners.get(name), self._tasks.get(name)
        if runner is None or task is None:
            return
        runner.stop()
        await asyncio.wait({task})

    async def _restart(self, name: str) -> None:
        await self._stop(name)
        self._snapshots.pop(name, None)
        self._disabled.discard(name)
        if name in self._wanted():
            self._launch(name)
        self._publish_all()

    async def _set_config(self, config: McpConfig) -> None:
        old = self._config
        changed = [
            s.name for s in old.servers if config.server(s.name) != s and s.name in self._runners
        ]
        await asyncio.gather(*(self._stop(n) for n in changed))
        self._config = config
        for name in list(self._snapshots):
            if config.server(name) is None or name in changed:
                self._snapshots.pop(name, None)
        await self._apply()

    async def _stop_all(self) -> None:
        await asyncio.gather(*(self._stop(n) for n in list(self._runners)))

    async def _call(
        self, server: str, tool: str, arguments: dict[str, Any], timeout: float
    ) -> ToolResult:
        runner = self._runners.get(server)
        if runner is None:
            state = self._snapshots.get(server)
            why = state.state.value if state else "not configured"
            return ToolResult.failed(
                server, tool, "not_running", f'the tool server "{server}" is not running ({why})'
            )
        return await runner.call(tool, arguments, timeout)
