"""MCP seen from Qt: the engine's McpHub (its own asyncio thread), the user's mcp.json and
the switches, as signals on the GUI thread.

The hub calls back on its thread; this bridge only re-emits through queued signals, so the
GUI never waits on a server. The configuration file is read here (small, checked at the
edge): a malformed file is reported with its line and the servers keep running as before.
Switches (per server, per tool), "always allow" and the tool-loop settings live in the
app's store.
"""

from __future__ import annotations

from concurrent.futures import Future
from pathlib import Path
from typing import Any

from PySide6.QtCore import QFileSystemWatcher, QObject, QTimer, Signal

from engine.mcp.catalog import CatalogTool, ToolCatalog
from engine.mcp.config import (
    EMPTY_CONFIG_TEXT,
    ImportOutcome,
    McpConfig,
    McpConfigError,
    import_servers,
    load_config,
    write_config_text,
)
from engine.mcp.results import ToolResult
from engine.mcp.turn import DEFAULT_MAX_STEPS, run_call
from engine.types import ToolCall

DEFAULT_CALL_TIMEOUT_S = 60

_DISABLED_SERVERS = "mcp_disabled_servers"
_DISABLED_TOOLS = "mcp_disabled_tools"
_ALWAYS_ALLOW = "mcp_always_allow"
_MAX_STEPS = "mcp_max_steps"
_CALL_TIMEOUT = "mcp_call_timeout_s"


def looks_like_mcp_config(path: str) -> bool:
    """Whether a dropped .json file is an MCP configuration ({"mcpServers": ...})."""
    from engine.files import FileRefused, read_limited

    try:  # a regular file only: a pipe would block the window, a device never end
        head = read_limited(path, 16 << 20, "configuration file")[: 1024 * 1024]
    except FileRefused:
        return False
    return b'"mcpServers"' in head


class McpBridge(QObject):
    """Owns the McpHub (created when the first server is configured) for one app."""

    serversChanged = Signal(object)  # dict[str, ServerSnapshot]
    configProblem = Signal(str)  # "" when the file is fine
    callFinished = Signal(str, object)  # call id, ToolResult
    _snapshots = Signal(object)
    _callDone = Signal(str, object)

    def __init__(
        self,
        store: Any,
        config_path: str | Path,
        parent: QObject | None = None,
        *,
        start_timeout: float = 60.0,
    ) -> None:
        """`start_timeout` bounds each server's start (launch, handshake, tool list)."""
        super().__init__(parent)
        self.store = store
        self.start_timeout = start_timeout
        self.config_path = Path(config_path)
        self.config = McpConfig()
        self.problem = ""
        self.snapshots: dict[str, Any] = {}
        self._hub: Any = None
        self._calls: dict[str, Future[ToolResult]] = {}
        self._closed = False
        self._snapshots.connect(self._on_snapshots)
        self._callDone.connect(self._on_call_done)
        # Editors save by rewriting or by renaming over the file: watch both, reload once.
        self._reload_soon = QTimer(self, singleShot=True, interval=300)
        self._reload_soon.timeout.connect(self.reload)
        self._watcher = QFileSystemWatcher(self)
        self._watcher.fileChanged.connect(lambda _p: self._reload_soon.start())
        self._watcher.directoryChanged.connect(lambda _p: self._reload_soon.start())

    # ---- settings ----

    @property
    def max_steps(self) -> int:
        return int(self.store.get_setting(_MAX_STEPS, DEFAULT_MAX_STEPS))

    @max_steps.setter
    def max_steps(self, value: int) -> None:
        self.store.set_setting(_MAX_STEPS, max(1, int(value)))

    @property
    def call_timeout(self) -> float:
        return float(self.store.get_setting(_CALL_TIMEOUT, DEFAULT_CALL_TIMEOUT_S))

    @call_timeout.setter
    def call_timeout(self, seconds: float) -> None:
        self.store.set_setting(_CALL_TIMEOUT, max(1.0, float(seconds)))
        if self._hub is not None:
            self._hub.call_timeout = self.call_timeout

    def disabled_servers(self) -> set[str]:
        return set(self.store.get_setting(_DISABLED_SERVERS, []))

    def disabled_tools(self) -> set[tuple[str, str]]:
        return {(s, t) for s, t in self.store.get_setting(_DISABLED_TOOLS, [])}

    def is_always_allowed(self, tool: CatalogTool) -> bool:
        return [tool.server, tool.name] in self.store.get_setting(_ALWAYS_ALLOW, [])

    def allow_always(self, tool: CatalogTool) -> None:
        allowed = self.store.get_setting(_ALWAYS_ALLOW, [])
        if [tool.server, tool.name] not in allowed:
            self.store.set_setting(_ALWAYS_ALLOW, allowed + [[tool.server, tool.name]])

    # ---- servers ----

    def start(self) -> None:
        """Read mcp.json and start its enabled servers; watch the file for edits."""
        self._watch()
        self.reload()

    def reload(self) -> None:
        """Re-read mcp.json. A malformed file changes nothing and says where it is wrong."""
        if self._closed:
            return
        self._watch()
        try:
            config = load_config(self.config_path)
        except McpConfigError as exc:
            self._set_problem(f"{exc} — nothing was applied; the servers run as before.")
            return
        self._set_problem("")
        self.config = config
        if self._hub is None and not config.servers:
            self._on_snapshots({})
            return
        hub = self._ensure_hub()
        hub.set_config(config)

    def _ensure_hub(self) -> Any:
        if self._hub is None:
            from engine.mcp.hub import McpHub

            self._hub = McpHub(
                self.config,
                call_timeout=self.call_timeout,
                start_timeout=self.start_timeout,
                on_change=self._snapshots.emit,  # hub thread -> queued to the GUI thread
            )
            self._hub.start(self.disabled_servers())
        return self._hub

    def _set_problem(self, text: str) -> None:
        self.problem = text
        self.configProblem.emit(text)

    def _watch(self) -> None:
        folder = self.config_path.parent
        paths = [str(p) for p in (self.config_path, folder) if p.exists()]
        missing = [p for p in paths if p not in self._watcher.files() + self._watcher.directories()]
        if missing:
            self._watcher.addPaths(missing)

    def _on_snapshots(self, snapshots: dict[str, Any]) -> None:
        self.snapshots = snapshots
        self.serversChanged.emit(snapshots)

    def set_server_enabled(self, name: str, enabled: bool) -> None:
        disabled = self.disabled_servers()
        disabled = disabled - {name} if enabled else disabled | {name}
        self.store.set_setting(_DISABLED_SERVERS, sorted(disabled))
        if self._hub is not None:
            self._hub.set_enabled(name, enabled)

    def set_tool_enabled(self, server: str, tool: str, enabled: bool) -> None:
        disabled = self.disabled_tools()
        disabled = disabled - {(server, tool)} if enabled else disabled | {(server, tool)}
        self.store.set_setting(_DISABLED_TOOLS, sorted([s, t] for s, t in disabled))

    def restart(self, name: str) -> None:
        if self._hub is not None:
            self.store.set_setting(_DISABLED_SERVERS, sorted(self.disabled_servers() - {name}))
            self._hub.restart(name)

    def catalog(self, reserved: list[str] | None = None) -> ToolCatalog:
        """The enabled tools of the ready servers, named for the model."""
        if self._hub is None:
            return ToolCatalog()
        catalog: ToolCatalog = self._hub.catalog(
            reserved=reserved or [], disabled_tools=self.disabled_tools()
        )
        return catalog

    # ---- the file ----

    def ensure_config_file(self) -> Path:
        """mcp.json, created empty if it does not exist yet (for "Edit mcp.json")."""
        if not self.config_path.exists():
            write_config_text(self.config_path, EMPTY_CONFIG_TEXT)
            self._watch()
        return self.config_path

    def import_file(self, path: str | Path) -> ImportOutcome:
        """Add a file's servers to mcp.json; raises McpConfigError (nothing applied)."""
        outcome = import_servers(path, self.config_path)
        self.reload()
        return outcome

    # ---- calls ----

    def call(self, call_id: str, tool: CatalogTool, call: ToolCall) -> None:
        """Run a call off the GUI thread; `callFinished(call_id, ToolResult)` follows."""
        future = run_call(self._ensure_hub(), tool, call, self.call_timeout)
        self._calls[call_id] = future

        def done(f: Future[ToolResult]) -> None:
            if f.cancelled():
                return
            self._callDone.emit(call_id, f.result())

        future.add_done_callback(done)

    def cancel(self, call_id: str) -> bool:
        """Cancel a running call (the server is told); True if it was still running."""
        future = self._calls.pop(call_id, None)
        return bool(future is not None and future.cancel())

    def _on_call_done(self, call_id: str, result: ToolResult) -> None:
        if self._calls.pop(call_id, None) is not None:
            self.callFinished.emit(call_id, result)

    def close(self) -> None:
        """Stop every server (at quit)."""
        self._closed = True
        for future in self._calls.values():
            future.cancel()
        self._calls.clear()
        if self._hub is not None:
            self._hub.close()
