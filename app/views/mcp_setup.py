"""Wires MCP into a MainWindow: the MCP panel under the Tools panel, the call coordinator
as the controller's tool source, and MCP cards in the chat."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QFrame, QScrollArea, QSplitter

from app.jobs.mcp_calls import McpCalls
from app.jobs.mcp_job import McpBridge
from app.views.mcp_card import make_card
from app.views.mcp_panel import McpPanel
from engine.mcp.config import default_config_path


def stored_result(controller: Any, call_id: str) -> dict[str, Any] | None:
    """The stored MCP result of a call on the open conversation's path, if any."""
    for message in controller.path():
        if message.role == "tool" and message.meta.get("tool_call_id") == call_id:
            mcp = message.meta.get("mcp")
            return mcp if isinstance(mcp, dict) else None
    return None


def install_mcp(window: Any, bridge: McpBridge | None = None) -> McpBridge:
    """Add MCP to `window` (servers start with `bridge.start()`); returns the bridge."""
    if bridge is None:
        bridge = McpBridge(window.store, default_config_path(), window)
    panel = McpPanel(bridge, window)
    scroll = QScrollArea(window)  # a short dock scrolls instead of squeezing the panel
    scroll.setWidgetResizable(True)
    scroll.setFrameShape(QFrame.Shape.NoFrame)
    scroll.setWidget(panel)
    area = QSplitter(Qt.Orientation.Vertical, window)
    area.setObjectName("toolsArea")
    area.addWidget(window.tools_panel)
    area.addWidget(scroll)
    area.setStretchFactor(0, 1)
    area.setStretchFactor(1, 1)
    window.set_tools_area(area)  # the inspector's Tools tab
    calls = McpCalls(window.controller, bridge, window)
    window.controller.tool_source = calls
    calls.runningChanged.connect(window.controller.set_tools_running)
    controller = window.controller
    window.chat.card_factory = lambda call, parent: make_card(
        calls, call, stored_result(controller, call["id"]), parent
    )
    window.mcp_panel = panel
    window.mcp_calls = calls
    return bridge
