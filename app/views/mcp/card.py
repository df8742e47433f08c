"""The card of an MCP tool call: its arguments, then Allow once / Always allow this tool /
Deny, "Running…", or the result: text, images inline, resource links, structured content,
the tool's own errors and Corral's (timeout, server gone) as an error card.

It follows its call's state in `McpCalls` (signals), and shows a stored result as is when
the conversation is opened again.
"""

from __future__ import annotations

import base64
import json
from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtGui import QFontDatabase, QPixmap
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QPushButton, QVBoxLayout, QWidget

from engine.mcp.results import ToolResult

IMAGE_MAX_WIDTH = 360
_FAILURE_TITLES = {
    "timeout": "No answer",
    "server_exited": "The server stopped",
    "not_running": "The server is not running",
    "protocol": "The server answered with an error",
    "invalid_arguments": "Not sent",
    "unknown_tool": "Unknown tool",
}


def _label(text: str, name: str, parent: QWidget, *, mono: bool = False) -> QLabel:
    label = QLabel(text, parent)
    label.setObjectName(name)
    label.setWordWrap(True)
    label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
    label.setTextFormat(Qt.TextFormat.PlainText)
    if mono:
        label.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
    return label


def _image(block: dict[str, Any], parent: QWidget) -> QLabel | None:
    pixmap = QPixmap()
    try:
        data = base64.b64decode(block.get("data", ""), validate=True)
    except ValueError:
        return None
    if not pixmap.loadFromData(data):
        return None
    if pixmap.width() > IMAGE_MAX_WIDTH:
        pixmap = pixmap.scaledToWidth(IMAGE_MAX_WIDTH, Qt.TransformationMode.SmoothTransformation)
    label = QLabel(parent)
    label.setObjectName("toolImage")
    label.setPixmap(pixmap)
    return label


class McpCallCard(QFrame):
    """One MCP call in a reply. `calls` is the app's McpCalls; `stored` a stored result."""

    def __init__(
        self,
        call: dict[str, Any],
        calls: Any,
        stored: dict[str, Any] | None = None,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.call = call
        self.calls = calls
        self.setObjectName("toolCard")
        self.setProperty("mcp", True)
        self.setFrameShape(QFrame.Shape.StyledPanel)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(10, 8, 10, 8)
        entry = calls.lookup(call) if stored is None else None
        server = (stored or {}).get("server") or (entry.tool.server if entry else "")
        title = QLabel(f"Tool call · <b>{call['name']}</b>", self)
        title.setObjectName("toolTitle")
        title.setToolTip(f"MCP server: {server}" if server else "")
        layout.addWidget(title)
        arguments = json.dumps(call.get("arguments", {}), indent=2, ensure_ascii=False)
        layout.addWidget(_label(arguments, "toolArguments", self, mono=True))
        self.body = QWidget(self)
        self.body_layout = QVBoxLayout(self.body)
        self.body_layout.setContentsMargins(0, 4, 0, 0)
        layout.addWidget(self.body)
        self.buttons: dict[str, QPushButton] = {}
        self.state = ""
        if stored is not None:
            self._show_result(ToolResult.from_dict(stored), stored.get("after_last_token_s"))
        else:
            calls.stateChanged.connect(self._changed)
            self._changed(call["id"])

    def _clear(self) -> None:
        while self.body_layout.count():
            item = self.body_layout.takeAt(0)
            widget = item.widget() if item is not None else None
            if widget is not None:
                widget.deleteLater()
        self.buttons = {}

    def _changed(self, call_id: str) -> None:
        if call_id != self.call["id"]:
            return
        entry = self.calls.calls.get(call_id)
        state = entry.state if entry is not None else "ask"
        if state == self.state:
            return
        self.state = state
        self._clear()
        if state == "ask":
            self._show_question()
        elif state == "running":
            label = _label("Running… (Stop cancels the call)", "hint", self.body)
            self.body_layout.addWidget(label)
        elif entry is not None and entry.result is not None:
            self._show_result(entry.result, entry.after_last_token_s or None)

    def _show_question(self) -> None:
        row = QHBoxLayout()
        question = _label("Run this tool?", "hint", self.body)
        row.addWidget(question, 1)
        for key, text, tip in (
            ("once", "Allow once", "Run this call"),
            ("always", "Always allow this tool", "Run this call and later calls of this tool"),
            ("deny", "Deny", "Do not run it; the model is told you declined"),
        ):
            button = QPushButton(text, self.body)
            button.setObjectName(f"mcp{key.capitalize()}")
            button.setToolTip(tip)
            row.addWidget(button)
            self.buttons[key] = button
        call_id = self.call["id"]
        self.buttons["once"].clicked.connect(lambda: self.calls.allow(call_id))
        self.buttons["always"].clicked.connect(lambda: self.calls.allow(call_id, always=True))
        self.buttons["deny"].clicked.connect(lambda: self.calls.deny(call_id))
        holder = QWidget(self.body)
        holder.setLayout(row)
        self.body_layout.addWidget(holder)

    def _show_result(self, result: ToolResult, seconds: float | None) -> None:
        self._clear()
        self.state = "done"
        self.setProperty("error", bool(result.is_error))
        if result.failure == "declined":
            self.body_layout.addWidget(_label("Declined — the model was told.", "hint", self.body))
            return
        if result.failure == "cancelled":
            self.body_layout.addWidget(_label("Cancelled.", "hint", self.body))
            return
        if result.failure is not None:
            heading = _FAILURE_TITLES.get(result.failure, "Error")
            text = result.text.removeprefix("Error: ")
            self.body_layout.addWidget(_label(f"{heading}: {text}", "toolError", self.body))
            return
        if result.is_error:
            self.body_layout.addWidget(
                _label("The tool reported an error:", "toolError", self.body)
            )
        for block in result.blocks:
            self._show_block(block)
        if not result.structured_in_text():
            text = json.dumps(result.structured, indent=2, ensure_ascii=False)
            self.body_layout.addWidget(_label(text, "toolResult", self.body, mono=True))
        if seconds:
            note = f"{result.server} · {result.duration_s:.2f} s on the server"
            self.body_layout.addWidget(_label(note, "stats", self.body))

    def _show_block(self, block: dict[str, Any]) -> None:
        kind = block.get("type")
        if kind == "image":
            image = _image(block, self.body)
            if image is not None:
                self.body_layout.addWidget(image)
                return
            self.body_layout.addWidget(
                _label("[an image that could not be read]", "hint", self.body)
            )
        elif kind == "resource_link":
            name, uri = block.get("name", ""), block.get("uri", "")
            text = f"Link: {name} — {uri}"
            if block.get("description"):
                text += f"\n{block['description']}"
            self.body_layout.addWidget(_label(text, "toolResult", self.body))
        elif kind == "resource":
            text = f"{block.get('uri', '')}\n{block.get('text', '')}".strip()
            self.body_layout.addWidget(_label(text, "toolResult", self.body, mono=True))
        else:
            self.body_layout.addWidget(_label(str(block.get("text", "")), "toolResult", self.body))

    def set_interactive(self, enabled: bool) -> None:
        """The approval buttons stay usable: a call waits for them, whatever else runs."""


def make_card(
    calls: Any, call: dict[str, Any], stored: dict[str, Any] | None, parent: QWidget
) -> McpCallCard | None:
    """A card for `call` if it is an MCP call (stored result, or a tool MCP offers)."""
    if stored is not None:
        return McpCallCard(call, calls, stored, parent)
    if calls.lookup(call) is None:
        return None
    return McpCallCard(call, calls, None, parent)
