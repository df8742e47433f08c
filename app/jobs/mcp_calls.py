"""The tool loop in the app: MCP calls of a finished reply are asked about, run, and their
results stored as tool messages, after which the controller continues the turn.

Each call goes ask → running → done. "Allow once" runs it; "Always allow this tool" runs it
and every later call of that tool without asking (kept in the store); "Deny" stores a tool
message telling the model the user declined. Stop cancels the running calls and ends the
turn. The step limit and the tools offered come from here too (`tool_definitions`,
`max_steps`), so the controller builds each request the same way the CLI's loop does.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Literal

from PySide6.QtCore import QObject, Signal

from engine.mcp.catalog import CatalogTool, ToolCatalog
from engine.mcp.results import CANCELLED_TEXT, DECLINED_TEXT, ToolResult
from engine.types import ToolCall, ToolDefinition

CallState = Literal["ask", "running", "done"]


@dataclass
class McpCall:
    """One MCP call the app knows about."""

    conversation_id: int
    call: ToolCall
    tool: CatalogTool
    state: CallState = "ask"
    result: ToolResult | None = None
    last_token_at: float = 0.0  # when its reply finished
    after_last_token_s: float = 0.0  # from then until the result was shown


class McpCalls(QObject):
    """Connects the controller's replies, the MCP bridge and the tool cards."""

    stateChanged = Signal(str)  # call id
    runningChanged = Signal(bool)

    def __init__(self, controller: Any, bridge: Any, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.controller = controller
        self.bridge = bridge
        self.calls: dict[str, McpCall] = {}
        self.catalog = ToolCatalog()
        controller.toolCallsReady.connect(self._on_tool_calls)
        controller.stopRequested.connect(self.stop)
        bridge.callFinished.connect(self._on_result)

    # ---- what the controller asks ----

    @property
    def max_steps(self) -> int:
        return int(self.bridge.max_steps)

    def tool_definitions(self, reserved: list[str]) -> list[ToolDefinition]:
        """The MCP tools to offer with a request (names clear of `reserved`)."""
        self.catalog = self.bridge.catalog(reserved)
        return self.catalog.definitions()

    @property
    def running(self) -> bool:
        return any(c.state == "running" for c in self.calls.values())

    # ---- a reply's calls ----

    def _on_tool_calls(self, conversation_id: int, calls: list[dict[str, Any]]) -> None:
        finished = time.perf_counter()
        for raw in calls:
            tool = self.catalog.lookup(raw["name"])
            if tool is None:
                continue  # not an MCP tool: the card asks the user for a result
            call = ToolCall(raw["id"], raw["name"], dict(raw.get("arguments") or {}))
            entry = McpCall(conversation_id, call, tool, last_token_at=finished)
            self.calls[call.id] = entry
            if self.bridge.is_always_allowed(tool):
                self._run(entry)
            else:
                self.stateChanged.emit(call.id)

    def lookup(self, call: dict[str, Any]) -> McpCall | None:
        """The MCP call for a card: known from this session, or (an unanswered call from an
        earlier one) a tool of the current catalog."""
        known = self.calls.get(call["id"])
        if known is not None:
            return known
        tool = self.catalog.lookup(call["name"]) or self.bridge.catalog().lookup(call["name"])
        conversation_id = self.controller.conversation_id
        if tool is None or conversation_id is None:
            return None
        entry = McpCall(
            conversation_id, ToolCall(call["id"], call["name"], call["arguments"]), tool
        )
        self.calls[call["id"]] = entry
        return entry

    def allow(self, call_id: str, always: bool = False) -> None:
        entry = self.calls.get(call_id)
        if entry is None or entry.state != "ask":
            return
        if always:
            self.bridge.allow_always(entry.tool)
            # The same tool asking elsewhere in this reply is allowed too.
            for other in list(self.calls.values()):
                if other is not entry and other.state == "ask" and other.tool == entry.tool:
                    self._run(other)
        self._run(entry)

    def deny(self, call_id: str) -> None:
        entry = self.calls.get(call_id)
        if entry is None or entry.state != "ask":
            return
        tool = entry.tool
        self._finish(entry, ToolResult.failed(tool.server, tool.name, "declined", DECLINED_TEXT))

    def stop(self) -> None:
        """Stop: cancel the running calls; the turn does not continue."""
        for entry in list(self.calls.values()):
            if entry.state == "running" and self.bridge.cancel(entry.call.id):
                tool = entry.tool
                result = ToolResult.failed(tool.server, tool.name, "cancelled", CANCELLED_TEXT)
                self._finish(entry, result, continue_turn=False)

    # ---- running ----

    def _run(self, entry: McpCall) -> None:
        was_running = self.running
        entry.state = "running"
        self.stateChanged.emit(entry.call.id)
        if not was_running:
            self.runningChanged.emit(True)
        self.bridge.call(entry.call.id, entry.tool, entry.call)

    def _on_result(self, call_id: str, result: ToolResult) -> None:
        entry = self.calls.get(call_id)
        if entry is not None and entry.state == "running":
            self._finish(entry, result)

    def _finish(self, entry: McpCall, result: ToolResult, continue_turn: bool = True) -> None:
        was_running = self.running
        entry.result = result
        entry.state = "done"
        meta = {"mcp": result.to_dict()}
        if was_running and not self.running:
            self.runningChanged.emit(False)
        # Stores the tool message (shown at once) and, with every call answered, continues.
        self.controller.submit_tool_result(
            entry.call.id,
            entry.call.name,
            result.text,
            meta=meta,
            conversation_id=entry.conversation_id,
            continue_turn=continue_turn,
        )
        if entry.last_token_at:  # the result is on screen now (the chat re-rendered)
            entry.after_last_token_s = time.perf_counter() - entry.last_token_at
        self.stateChanged.emit(entry.call.id)
