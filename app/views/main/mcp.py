"""MCP in the main window: the MCP panel under the Tools panel (the inspector's Tools tab)
and MCP cards in the chat. The MCP bridge and its call coordinator (the controller's tool
source) are built with the app's other parts, in app.application."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QFrame, QScrollArea, QSplitter

from app.chat.controller import ChatController
from app.views.main.parts import WindowParts
from app.views.mcp.card import make_card
from app.views.mcp.panel import McpPanel


def stored_result(controller: ChatController, call_id: str) -> dict[str, Any] | None:
    """The stored MCP result of a call on the open conversation's path, if any."""
    for message in controller.path():
        if message.role == "tool" and message.meta.get("tool_call_id") == call_id:
            mcp = message.meta.get("mcp")
            return mcp if isinstance(mcp, dict) else None
    return None


def install_mcp_views(window: WindowParts) -> McpPanel:
    """Put the MCP panel under `window`'s tools panel and MCP cards in its chat; returns
    the panel."""
    panel = McpPanel(window.mcp, window.window())
    scroll = QScrollArea(window.window())  # a short dock scrolls instead of squeezing the panel
    scroll.setWidgetResizable(True)
    scroll.setFrameShape(QFrame.Shape.NoFrame)
    scroll.setWidget(panel)
    area = QSplitter(Qt.Orientation.Vertical, window.window())
    area.setObjectName("toolsArea")
    area.addWidget(window.tools_panel)
    area.addWidget(scroll)
    area.setStretchFactor(0, 1)
    area.setStretchFactor(1, 1)
    window.inspector.set_tools_widget(area)  # the inspector's Tools tab
    calls, controller = window.mcp_calls, window.controller
    window.chat.card_factory = lambda call, parent: make_card(
        calls, call, stored_result(controller, call["id"]), parent
    )
    return panel
