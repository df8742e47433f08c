"""The MCP part of the Tools panel: each server from mcp.json with its state (waiting for
your OK, starting, ready, failed with the tail of its stderr), its tools with descriptions,
a switch per server and per tool, Restart, Review and start… (for a server another program
added or changed), Edit mcp.json, Import (button, or drop a file on the panel; nothing is
written or started until the user confirms what would run), and the tool loop's settings
(steps per turn, call timeout).

Nothing here shows env values, headers or tokens: servers are described by their command
and masked arguments or the URL's host (engine.mcp.config.MCPServerConfig.describe).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from PySide6.QtCore import QSignalBlocker, Qt, QUrl
from PySide6.QtGui import (
    QDesktopServices,
    QDragEnterEvent,
    QDropEvent,
    QFontDatabase,
    QPalette,
)
from PySide6.QtWidgets import (
    QFileDialog,
    QFormLayout,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QSpinBox,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.views.common.drops import dropped_paths
from app.views.mcp.consent import McpStartDialog
from app.words import count
from engine.mcp.config import ImportPlan, McpConfigError

STATE_TEXT = {
    "off": "off",
    "starting": "starting…",
    "ready": "ready",
    "failed": "failed",
    "needs_ok": "needs your OK",
}
_ROLE = Qt.ItemDataRole.UserRole


log = logging.getLogger("app.views.mcp.panel")


class McpPanel(QWidget):
    """Shows and switches the servers of an McpBridge."""

    def __init__(self, bridge: Any, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.bridge = bridge
        self.setObjectName("mcpPanel")
        self.setAcceptDrops(True)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        header = QHBoxLayout()
        header.addWidget(QLabel("<b>MCP servers</b>", self), 1)
        self.edit_button = QPushButton("Edit mcp.json", self)
        self.edit_button.setToolTip(str(bridge.config_path))
        self.import_button = QPushButton("Import…", self)
        self.import_button.setToolTip("Add the servers of another mcp.json (or drop it here)")
        header.addWidget(self.edit_button)
        header.addWidget(self.import_button)
        layout.addLayout(header)
        self.status = QLabel(self)
        self.status.setObjectName("toolsStatus")
        self.status.setWordWrap(True)
        self.status.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        layout.addWidget(self.status)
        self.tree = QTreeWidget(self)
        self.tree.setObjectName("mcpServers")
        self.tree.setHeaderLabels(["Server / tool", "State"])
        self.tree.header().setStretchLastSection(False)
        self.tree.header().setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        self.tree.header().setSectionResizeMode(1, QHeaderView.ResizeMode.ResizeToContents)
        self.tree.setMinimumHeight(140)
        layout.addWidget(self.tree, 1)
        row = QHBoxLayout()
        self.detail = QLabel(self)
        self.detail.setObjectName("hint")
        self.detail.setWordWrap(True)
        self.detail.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        row.addWidget(self.detail, 1)
        self.restart_button = QPushButton("Restart", self)
        self.restart_button.setEnabled(False)
        row.addWidget(self.restart_button, 0, Qt.AlignmentFlag.AlignTop)
        self.approve_button = QPushButton("Review and start…", self)
        self.approve_button.setToolTip("See what this server runs, then start it or not")
        self.approve_button.setVisible(False)
        row.addWidget(self.approve_button, 0, Qt.AlignmentFlag.AlignTop)
        self.consent_dialog: McpStartDialog | None = None  # the question on screen, if any
        layout.addLayout(row)
        self.stderr_view = QPlainTextEdit(self)
        self.stderr_view.setObjectName("mcpStderr")
        self.stderr_view.setReadOnly(True)
        self.stderr_view.setMaximumHeight(90)
        self.stderr_view.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        self.stderr_view.setVisible(False)
        layout.addWidget(self.stderr_view)
        form = QFormLayout()
        self.max_steps = QSpinBox(self, minimum=1, maximum=64)
        self.max_steps.setToolTip("Rounds of tool calls in one turn before the model must answer")
        self.timeout = QSpinBox(self, minimum=1, maximum=3600, suffix=" s")
        self.timeout.setToolTip("How long one MCP call may take")
        form.addRow("Tool steps per turn", self.max_steps)
        form.addRow("Call timeout", self.timeout)
        layout.addLayout(form)

        self.max_steps.setValue(bridge.max_steps)
        self.timeout.setValue(int(bridge.call_timeout))
        self.max_steps.valueChanged.connect(self._set_max_steps)
        self.timeout.valueChanged.connect(self._set_timeout)
        self.edit_button.clicked.connect(self.edit_config)
        self.import_button.clicked.connect(self.choose_import)
        self.restart_button.clicked.connect(self.restart_selected)
        self.approve_button.clicked.connect(self.review_selected)
        self.tree.itemChanged.connect(self._item_changed)
        self.tree.currentItemChanged.connect(lambda *_: self._show_selected())
        bridge.serversChanged.connect(self.show_servers)
        bridge.configProblem.connect(self.show_problem)
        self.show_servers(bridge.snapshots)
        self.show_problem(bridge.problem)

    # ---- showing ----

    def show_problem(self, text: str) -> None:
        if text:
            log.error("MCP: %s", text)
        self.status.setProperty("error", bool(text))
        self.status.setText(text or self._summary())
        self.status.style().unpolish(self.status)
        self.status.style().polish(self.status)

    def _summary(self) -> str:
        if not self.bridge.config.servers:
            return "No MCP servers yet: add them with Edit mcp.json, or drop an mcp.json here."
        ready = sum(1 for s in self.bridge.snapshots.values() if s.state.value == "ready")
        text = f"{ready} of {count(len(self.bridge.config.servers), 'server')} ready."
        waiting = len(self.bridge.pending)
        if waiting:
            text += (
                f" {waiting} new or changed in mcp.json wait{'s' if waiting == 1 else ''} for "
                "your OK: select it and click Review and start…"
            )
        return text

    def show_servers(self, snapshots: dict[str, Any]) -> None:
        selected = self._selected_server()
        disabled_servers = self.bridge.disabled_servers()
        disabled_tools = self.bridge.disabled_tools()
        with QSignalBlocker(self.tree):
            self.tree.clear()
            for name, snapshot in snapshots.items():
                config = self.bridge.config.server(name)
                item = QTreeWidgetItem(self.tree, [name, self._state_text(snapshot)])
                item.setData(0, _ROLE, ("server", name))
                item.setFlags(item.flags() | Qt.ItemFlag.ItemIsUserCheckable)
                on = name not in disabled_servers and not (config and config.disabled)
                item.setCheckState(0, Qt.CheckState.Checked if on else Qt.CheckState.Unchecked)
                item.setToolTip(0, snapshot.description)
                if snapshot.state.value == "failed":
                    item.setToolTip(1, snapshot.detail)
                for tool in snapshot.tools:
                    self._tool_item(item, name, tool, (name, tool.name) not in disabled_tools)
                item.setExpanded(snapshot.state.value == "ready")
                if name == selected:
                    self.tree.setCurrentItem(item)
        self._show_selected()
        if not self.bridge.problem:
            self.show_problem("")

    def _state_text(self, snapshot: Any) -> str:
        text: str = STATE_TEXT.get(snapshot.state.value, snapshot.state.value)
        if snapshot.state.value == "ready":
            usable = sum(1 for t in snapshot.tools if t.error is None)
            text += f" · {usable} tool{'s' if usable != 1 else ''}"
        return text

    def _tool_item(self, parent: QTreeWidgetItem, server: str, tool: Any, on: bool) -> None:
        item = QTreeWidgetItem(parent, [tool.name, ""])
        item.setData(0, _ROLE, ("tool", server, tool.name))
        tip = tool.description or "(no description)"
        if tool.error is not None:
            item.setText(1, "left out")
            item.setToolTip(0, f"{tip}\n\nNot offered: {tool.error}")
            item.setToolTip(1, tool.error)
            # Greyed but selectable, so the reason can be read below the list.
            grey = self.palette().color(QPalette.ColorGroup.Disabled, QPalette.ColorRole.Text)
            item.setForeground(0, grey)
            item.setForeground(1, grey)
            item.setFlags(item.flags() & ~Qt.ItemFlag.ItemIsUserCheckable)
            return
        item.setFlags(item.flags() | Qt.ItemFlag.ItemIsUserCheckable)
        item.setCheckState(0, Qt.CheckState.Checked if on else Qt.CheckState.Unchecked)
        if tool.warnings:
            item.setText(1, "⚠ warning")
            tip += "\n\n" + "\n".join(f"⚠ {w}" for w in tool.warnings)
            item.setToolTip(1, "\n".join(tool.warnings))
        item.setToolTip(0, tip)

    def _selected_server(self) -> str | None:
        item = self.tree.currentItem()
        while item is not None and item.parent() is not None:
            item = item.parent()
        data = item.data(0, _ROLE) if item is not None else None
        return str(data[1]) if data else None

    def _show_selected(self) -> None:
        name = self._selected_server()
        snapshot = self.bridge.snapshots.get(name) if name else None
        waiting = snapshot is not None and snapshot.state.value == "needs_ok"
        self.restart_button.setEnabled(snapshot is not None and not waiting)
        self.restart_button.setVisible(not waiting)
        self.approve_button.setVisible(waiting)
        if snapshot is None:
            self.detail.setText("")
            self.stderr_view.setVisible(False)
            return
        lines = [snapshot.description]
        if waiting:
            lines.append("Not started: it is new or changed in mcp.json and waits for your OK.")
        if snapshot.server_info:
            lines.append(snapshot.server_info)
        if snapshot.detail:
            prefix = "Failed: " if snapshot.state.value == "failed" else "Note: "
            lines.append(prefix + snapshot.detail)
        current = self.tree.currentItem()
        data = current.data(0, _ROLE) if current is not None else None
        if data and data[0] == "tool":
            tool = next((t for t in snapshot.tools if t.name == data[2]), None)
            if tool is not None:
                lines.append(f"{tool.name}: {tool.description or '(no description)'}")
                lines += [f"⚠ {w}" for w in tool.warnings]
                if tool.error:
                    lines.append(f"Not offered: {tool.error}")
        self.detail.setText("\n".join(lines))
        tail = snapshot.stderr_tail.strip()
        self.stderr_view.setPlainText(tail)
        self.stderr_view.setVisible(bool(tail))

    # ---- actions ----

    def _item_changed(self, item: QTreeWidgetItem, column: int) -> None:
        data = item.data(0, _ROLE)
        if column != 0 or not data:
            return
        on = item.checkState(0) == Qt.CheckState.Checked
        if data[0] == "server":
            self.bridge.set_server_enabled(data[1], on)
        else:
            self.bridge.set_tool_enabled(data[1], data[2], on)

    def restart_selected(self) -> None:
        name = self._selected_server()
        if name is not None:
            self.bridge.restart(name)

    def review_selected(self) -> None:
        """Show what the selected waiting server runs; Start approves exactly that."""
        name = self._selected_server()
        server = self.bridge.pending.get(name) if name else None
        if server is None:
            return
        fingerprint = server.fingerprint()
        dialog = McpStartDialog([server], "mcp.json (changed outside Corral)", parent=self)
        dialog.accepted.connect(lambda: self._approved(server.name, fingerprint))
        self._ask(dialog)

    def _approved(self, name: str, fingerprint: str) -> None:
        if not self.bridge.approve(name, fingerprint):
            self.status.setText(f"{name} changed again in mcp.json: review it once more.")

    def _ask(self, dialog: McpStartDialog) -> None:
        if self.consent_dialog is not None:
            self.consent_dialog.reject()  # one question at a time: the newest one
        self.consent_dialog = dialog
        dialog.finished.connect(lambda _r: self._asked(dialog))
        dialog.open()  # window-modal; the servers and the chat keep going meanwhile

    def _asked(self, dialog: McpStartDialog) -> None:
        if self.consent_dialog is dialog:
            self.consent_dialog = None
        dialog.deleteLater()

    def _set_max_steps(self, value: int) -> None:
        self.bridge.max_steps = value

    def _set_timeout(self, value: int) -> None:
        self.bridge.call_timeout = value

    def edit_config(self) -> None:
        """Open mcp.json (created if missing) in the user's editor; saving it reloads."""
        try:
            path = self.bridge.ensure_config_file()
        except (OSError, McpConfigError) as exc:
            self.show_problem(f"Cannot create {self.bridge.config_path}: {exc}")
            return
        QDesktopServices.openUrl(QUrl.fromLocalFile(str(path)))

    def choose_import(self) -> None:
        path, _ = QFileDialog.getOpenFileName(
            self, "Import MCP servers", "", "MCP configuration (*.json);;All files (*)"
        )
        if path:
            self.import_file(path)

    def import_file(self, path: str) -> None:
        """Show what a file's servers would run and add them only if the user says Start;
        a malformed file names its line and nothing changes."""
        try:
            plan = self.bridge.plan_import(path)
        except (OSError, McpConfigError) as exc:
            self.show_problem(f"{exc} — nothing was imported.")
            return
        origin = Path(path).name
        if not plan.config.servers:
            self.show_problem("")
            self.status.setText(f"{origin} lists no MCP servers: nothing was imported.")
            return
        dialog = McpStartDialog(plan.config.servers, origin, replaces=plan.replaces, parent=self)
        dialog.accepted.connect(lambda: self._import_confirmed(plan, origin))
        dialog.rejected.connect(lambda: self.status.setText(f"Nothing was imported from {origin}."))
        self.status.setText(f"{origin}: confirm what it would start…")
        self._ask(dialog)

    def _import_confirmed(self, plan: ImportPlan, origin: str) -> None:
        try:
            outcome = self.bridge.confirm_import(plan)
        except (OSError, McpConfigError) as exc:
            self.show_problem(f"{exc} — nothing was imported.")
            return
        names = outcome.added + outcome.replaced
        log.info("MCP servers imported from %s: %s", origin, ", ".join(names))
        self.show_problem("")
        self.status.setText(f"Imported {', '.join(names)} from {origin}.")

    def dragEnterEvent(self, event: QDragEnterEvent) -> None:
        if any(p.lower().endswith(".json") for p in dropped_paths(event.mimeData())):
            event.acceptProposedAction()

    def dropEvent(self, event: QDropEvent) -> None:
        paths = [p for p in dropped_paths(event.mimeData()) if p.lower().endswith(".json")]
        if paths:
            event.acceptProposedAction()
            self.import_file(paths[0])
