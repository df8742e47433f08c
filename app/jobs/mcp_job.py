"""MCP seen from Qt: the engine's McpHub (its own asyncio thread), the user's mcp.json and
the switches, as signals on the GUI thread.

The hub calls back on its thread; this bridge only re-emits through queued signals, so the
GUI never waits on a server. The configuration file is read here (small, checked at the
edge): a malformed file is reported with its line and the servers keep running as before.

Nothing starts without the user: only servers whose exact configuration (its fingerprint)
the user approved go to the hub. A server added or changed in mcp.json by another program
waits as "needs your OK" until `approve`; an import is read into a plan that the user
confirms (`plan_import`, then `confirm_import`) before anything is written or started.
Approvals, switches (per server, per tool), "always allow" (keyed by the server's
fingerprint and the tool, so a changed or same-named server inherits nothing) and the
tool-loop settings live in the app's store.
"""

from __future__ import annotations

import logging
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from PySide6.QtCore import QFileSystemWatcher, QObject, QTimer, Signal

from engine.logs import remember_secrets
from engine.mcp.catalog import CatalogTool, ToolCatalog
from engine.mcp.config import (
    EMPTY_CONFIG_TEXT,
    ImportOutcome,
    ImportPlan,
    McpConfig,
    McpConfigError,
    MCPServerConfig,
    apply_import,
    load_config,
    read_import,
    write_config_text,
)
from engine.mcp.results import ToolResult
from engine.mcp.runner import ServerSnapshot, ServerState
from engine.mcp.turn import DEFAULT_MAX_STEPS, run_call
from engine.types import ToolCall

log = logging.getLogger(__name__)

DEFAULT_CALL_TIMEOUT_S = 60

_DISABLED_SERVERS = "mcp_disabled_servers"
_DISABLED_TOOLS = "mcp_disabled_tools"
_ALWAYS_ALLOW = "mcp_always_allow_by_config"  # [fingerprint, tool] pairs
_APPROVED = "mcp_approved_servers"  # fingerprints of configurations the user let run
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
        self.config = McpConfig()  # everything in mcp.json
        self.pending: dict[str, MCPServerConfig] = {}  # in the file, not approved: not started
        self.problem = ""
        self.snapshots: dict[str, Any] = {}
        self._hub_snapshots: dict[str, ServerSnapshot] = {}
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
        """Whether the user chose "Always allow" for this tool of this exact configuration."""
        key = [tool.server_fingerprint, tool.name]
        return bool(tool.server_fingerprint) and key in self.store.get_setting(_ALWAYS_ALLOW, [])

    def allow_always(self, tool: CatalogTool) -> None:
        allowed = self.store.get_setting(_ALWAYS_ALLOW, [])
        key = [tool.server_fingerprint, tool.name]
        if tool.server_fingerprint and key not in allowed:
            self.store.set_setting(_ALWAYS_ALLOW, allowed + [key])

    def approved(self) -> set[str]:
        """Fingerprints of the configurations the user let run."""
        return set(self.store.get_setting(_APPROVED, []))

    def approve_servers(self, servers: list[MCPServerConfig]) -> None:
        """Let these exact configurations run (what the user saw and confirmed); the user's
        switch for each is turned on. Takes effect at the next reload."""
        approved = self.approved() | {s.fingerprint() for s in servers}
        self.store.set_setting(_APPROVED, sorted(approved))
        names = {s.name for s in servers}
        self.store.set_setting(_DISABLED_SERVERS, sorted(self.disabled_servers() - names))

    def approve(self, name: str, fingerprint: str) -> bool:
        """The user's OK for a waiting server, as shown (`fingerprint`): it starts. False
        (nothing approved) if the file has changed it since."""
        server = self.config.server(name)
        if server is None or server.fingerprint() != fingerprint:
            return False
        self.approve_servers([server])
        self.reload()
        return True

    def _forget_stale_approvals(self, config: McpConfig) -> None:
        """Approvals belong to an exact configuration: those of configurations no longer in
        the file are dropped, so changing a server and changing it back asks again."""
        present = {s.fingerprint() for s in config.servers}
        approved = self.store.get_setting(_APPROVED, [])
        if any(f not in present for f in approved):
            self.store.set_setting(_APPROVED, [f for f in approved if f in present])
        allowed = self.store.get_setting(_ALWAYS_ALLOW, [])
        if any(f not in present for f, _ in allowed):
            self.store.set_setting(_ALWAYS_ALLOW, [[f, t] for f, t in allowed if f in present])

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
        # Env and header values are secrets the log never writes, whatever prints them.
        remember_secrets(value for server in config.servers for value in server.secrets())
        log.info("mcp.json read: %d servers (%s)", len(config.servers), config.source)
        self._forget_stale_approvals(config)
        approved = self.approved()
        self.config = config
        self.pending = {
            s.name: s for s in config.servers if s.fingerprint() not in approved and not s.disabled
        }
        # The hub only ever sees what the user approved: it cannot start anything else.
        runnable = McpConfig(
            tuple(s for s in config.servers if s.fingerprint() in approved), config.source
        )
        if self._hub is None and not runnable.servers:
            self._on_snapshots({})
            return
        hub = self._ensure_hub(runnable)
        hub.set_config(runnable)

    def _ensure_hub(self, config: McpConfig | None = None) -> Any:
        if self._hub is None:
            from engine.mcp.hub import McpHub

            self._hub = McpHub(
                config or McpConfig(),
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

    def _on_snapshots(self, snapshots: dict[str, ServerSnapshot]) -> None:
        """The hub's snapshots, with the servers it does not run (waiting for an OK, or
        unapproved and disabled in the file) in file order."""
        self._hub_snapshots = snapshots
        merged: dict[str, ServerSnapshot] = {}
        approved = self.approved()
        for server in self.config.servers:
            # A server the file changed shows as waiting at once (the hub stops the old one).
            if server.name in snapshots and server.fingerprint() in approved:
                merged[server.name] = snapshots[server.name]
            elif server.fingerprint() not in approved:
                state = ServerState.OFF if server.disabled else ServerState.NEEDS_OK
                merged[server.name] = ServerSnapshot(
                    server.name,
                    state,
                    server.describe(),
                    server.transport,
                    fingerprint=server.fingerprint(),
                )
        self.snapshots = merged
        self.serversChanged.emit(merged)

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

    def plan_import(self, path: str | Path) -> ImportPlan:
        """Read a file's servers to show the user; writes and starts nothing. Raises
        McpConfigError (naming the file and line) for a malformed file or mcp.json."""
        return read_import(path, self.config_path)

    def confirm_import(self, plan: ImportPlan) -> ImportOutcome:
        """The user confirmed `plan` (as shown): its servers are approved, written to
        mcp.json and started. Servers disabled in the file are written, not approved."""
        self.approve_servers([s for s in plan.config.servers if not s.disabled])
        try:
            outcome = apply_import(plan, self.config_path)
        finally:
            self.reload()  # approvals of a write that failed are forgotten here
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
