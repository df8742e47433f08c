"""The question asked before MCP servers start: what each would run (its command and
arguments, or the host it connects to; secrets masked), with Start and Cancel.

Shown for an import (a dropped or opened file, Import…) and for a server that another
program added to or changed in mcp.json. Cancel is the default button: Enter does not
start programs. Every text is plain text (server names come from the file).
"""

from __future__ import annotations

from collections.abc import Iterable

from PySide6.QtCore import Qt
from PySide6.QtGui import QFont, QFontDatabase
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QFrame,
    QLabel,
    QScrollArea,
    QVBoxLayout,
    QWidget,
)

from engine.mcp.config import MCPServerConfig


def _label(text: str, parent: QWidget, name: str = "", *, mono: bool = False) -> QLabel:
    label = QLabel(text, parent)
    label.setTextFormat(Qt.TextFormat.PlainText)
    label.setWordWrap(True)
    label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
    if name:
        label.setObjectName(name)
    if mono:
        label.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
    return label


class McpStartDialog(QDialog):
    """Start these servers? `servers` as they would run; `replaces` names servers of the
    same name they would replace; `origin` says where they come from."""

    def __init__(
        self,
        servers: Iterable[MCPServerConfig],
        origin: str,
        *,
        replaces: Iterable[str] = (),
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.servers = list(servers)
        replaced = set(replaces)
        self.setObjectName("mcpStartDialog")
        self.setWindowTitle("Start MCP servers?")
        self.setWindowModality(Qt.WindowModality.WindowModal)
        layout = QVBoxLayout(self)
        count = len(self.servers)
        heading = (
            f"{origin} would add {count} MCP server{'s' if count != 1 else ''}. Each one is "
            "a program that runs with your permissions (or a service that gets your tools' "
            "data): start only what you trust."
        )
        layout.addWidget(_label(heading, self, "mcpStartHeading"))
        body = QWidget(self)
        rows = QVBoxLayout(body)
        rows.setContentsMargins(0, 0, 0, 0)
        for server in self.servers:
            name = _label(server.name, body, "mcpStartName")
            bold = QFont(name.font())
            bold.setBold(True)
            name.setFont(bold)
            rows.addWidget(name)
            verb = "Connects to" if server.transport == "http" else "Runs"
            rows.addWidget(_label(f"{verb}: {server.describe()}", body, "mcpStartWhat", mono=True))
            notes = []
            if server.name in replaced:
                notes.append(
                    f"Replaces your server “{server.name}”; what you allowed for it does not "
                    "carry over."
                )
            if server.disabled:
                notes.append("Disabled in the file: added, not started.")
            if notes:
                rows.addWidget(_label(" ".join(notes), body, "hint"))
        rows.addStretch(1)
        scroll = QScrollArea(self)  # 64 servers still fit on a screen
        scroll.setWidgetResizable(True)
        scroll.setFrameShape(QFrame.Shape.NoFrame)
        scroll.setWidget(body)
        layout.addWidget(scroll, 1)
        buttons = QDialogButtonBox(self)
        self.start_button = buttons.addButton("Start", QDialogButtonBox.ButtonRole.AcceptRole)
        self.cancel_button = buttons.addButton(QDialogButtonBox.StandardButton.Cancel)
        self.start_button.setAutoDefault(False)
        self.cancel_button.setDefault(True)
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        layout.addWidget(buttons)
        self.resize(560, min(520, 160 + 70 * count))
