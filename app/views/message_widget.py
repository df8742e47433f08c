"""One message in the chat: header with actions and branch switcher, Markdown body,
tool-call cards and the statistics line."""

from __future__ import annotations

import json
from typing import Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QFontDatabase, QGuiApplication
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from app.store import Message
from app.views.composer import MessageEdit
from app.views.format import format_stats
from app.views.markdown_view import ChunkedMarkdown

ROLE_NAMES = {"user": "You", "assistant": "Assistant", "tool": "Tool"}


def _small(label: QLabel, name: str) -> QLabel:
    label.setObjectName(name)
    label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
    label.setWordWrap(True)
    return label


class BranchSwitcher(QWidget):
    """ "‹ 2/3 ›": step between the versions of a message."""

    stepped = Signal(int)

    def __init__(self, index: int, count: int, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("branchSwitcher")
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(2)
        self.previous = QToolButton(self, autoRaise=True)
        self.previous.setText("‹")
        self.previous.setToolTip("Previous version")
        self.label = QLabel(f"{index}/{count}", self)
        self.next = QToolButton(self, autoRaise=True)
        self.next.setText("›")
        self.next.setToolTip("Next version")
        self.previous.setEnabled(index > 1)
        self.next.setEnabled(index < count)
        for w in (self.previous, self.label, self.next):
            layout.addWidget(w)
        self.previous.clicked.connect(lambda: self.stepped.emit(-1))
        self.next.clicked.connect(lambda: self.stepped.emit(1))


class ToolCallCard(QFrame):
    """A tool call: its name and arguments, then its result or a field to give one."""

    resultSubmitted = Signal(str, str, str)  # call id, tool name, result text
    runRequested = Signal(str, str, object)  # call id, tool name, arguments

    def __init__(
        self,
        call: dict[str, Any],
        result: str | None,
        *,
        builtin: bool,
        interactive: bool,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.call = call
        self.setObjectName("toolCard")
        self.setFrameShape(QFrame.Shape.StyledPanel)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(10, 8, 10, 8)
        title = QLabel(f"Tool call · <b>{call['name']}</b>", self)
        title.setObjectName("toolTitle")
        layout.addWidget(title)
        args = QLabel(json.dumps(call.get("arguments", {}), indent=2, ensure_ascii=False), self)
        args.setObjectName("toolArguments")
        args.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        args.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        args.setWordWrap(True)
        layout.addWidget(args)
        self.result_field: QLineEdit | None = None
        self.run_button: QPushButton | None = None
        if result is not None:
            shown = QLabel(f"Result: {result}", self)
            _small(shown, "toolResult")
            layout.addWidget(shown)
            return
        row = QHBoxLayout()
        self.result_field = QLineEdit(self)
        self.result_field.setPlaceholderText("Type the tool's result and press Enter")
        self.result_field.setEnabled(interactive)
        send = QPushButton("Send result", self)
        send.setEnabled(interactive)
        row.addWidget(self.result_field, 1)
        row.addWidget(send)
        if builtin:
            self.run_button = QPushButton("Run built-in", self)
            self.run_button.setEnabled(interactive)
            self.run_button.clicked.connect(
                lambda: self.runRequested.emit(call["id"], call["name"], call.get("arguments"))
            )
            row.addWidget(self.run_button)
        layout.addLayout(row)
        self.result_field.returnPressed.connect(self._submit)
        send.clicked.connect(self._submit)

    def set_interactive(self, enabled: bool) -> None:
        for w in self.findChildren(QPushButton) + self.findChildren(QLineEdit):
            w.setEnabled(enabled)

    def _submit(self) -> None:
        if self.result_field is not None and self.result_field.text().strip():
            self.resultSubmitted.emit(
                self.call["id"], self.call["name"], self.result_field.text().strip()
            )


class MessageWidget(QFrame):
    """A user or assistant message (or the reply being streamed when `message` is None)."""

    editSubmitted = Signal(int, str)
    regenerateRequested = Signal()
    branchStepped = Signal(int, int)  # message id, -1 or +1
    toolResultSubmitted = Signal(str, str, str)
    toolRunRequested = Signal(str, str, object)

    def __init__(
        self,
        message: Message | None,
        *,
        branch: tuple[int, int] = (1, 1),
        last_reply: bool = False,
        tool_results: dict[str, str] | None = None,
        builtins: frozenset[str] = frozenset(),
        interactive: bool = True,
        body: ChunkedMarkdown | None = None,
        card_factory: Any = None,
        parent: QWidget | None = None,
    ) -> None:
        """`body` may be the already rendered body of the streamed reply, adopted as is;
        `card_factory(call, parent)` may supply a call's card (MCP calls), else None."""
        super().__init__(parent)
        self.message = message
        role = message.role if message is not None else "assistant"
        meta = message.meta if message is not None else {}
        self.setObjectName("message")
        self.setProperty("role", role)
        self.cards: list[Any] = []
        self.editor: MessageEdit | None = None

        layout = QVBoxLayout(self)
        layout.setContentsMargins(12, 8, 12, 8)
        layout.setSpacing(4)
        header = QHBoxLayout()
        header.setSpacing(6)
        name = QLabel(ROLE_NAMES.get(role, role), self)
        name.setObjectName("roleName")
        header.addWidget(name)
        self.badge = QLabel(self)
        self.badge.setObjectName("constraintBadge")
        self.badge.setVisible(False)
        if meta.get("constraint"):
            self.set_badge(f"Constrained: {meta['constraint']}")
        header.addWidget(self.badge)
        header.addStretch(1)
        if message is not None and branch[1] > 1:
            switcher = BranchSwitcher(*branch, parent=self)
            switcher.setEnabled(interactive)
            switcher.stepped.connect(lambda step: self.branchStepped.emit(message.id, step))
            header.addWidget(switcher)
            self.switcher: BranchSwitcher | None = switcher
        else:
            self.switcher = None
        self.action_buttons: dict[str, QToolButton] = {}
        if message is not None:
            if role == "user":
                self._action(
                    header,
                    "Edit",
                    "Edit this message (starts a new branch)",
                    self.start_edit,
                    interactive,
                )
            if role == "assistant":
                self._action(header, "Copy", "Copy the reply", self._copy, True)
                self._action(
                    header,
                    "Regenerate",
                    "Generate a new version of this reply",
                    self.regenerateRequested.emit,
                    interactive,
                )
                self.set_last_reply(last_reply)
        layout.addLayout(header)

        self.body = body if body is not None else ChunkedMarkdown(self)
        self.body.setParent(self)
        self.body.set_markdown(message.content if message is not None else "")
        self.body.setVisible(bool(message is None or message.content))
        layout.addWidget(self.body)

        results = tool_results or {}
        for call in meta.get("tool_calls", []):
            card = card_factory(call, self) if card_factory is not None else None
            if card is None:
                card = ToolCallCard(
                    call,
                    results.get(call["id"]),
                    builtin=call["name"] in builtins,
                    interactive=interactive,
                    parent=self,
                )
                card.resultSubmitted.connect(self.toolResultSubmitted)
                card.runRequested.connect(self.toolRunRequested)
            layout.addWidget(card)
            self.cards.append(card)

        self.status = _small(QLabel(self), "replyStatus")
        self.status.setVisible(False)
        layout.addWidget(self.status)
        notes = []
        if (
            message is not None
            and role == "assistant"
            and not message.content
            and not meta.get("tool_calls")
        ):
            notes.append("The model ended its reply without any text.")
        if meta.get("stop_reason") == "cancelled":
            notes.append("Stopped.")
        if meta.get("incomplete"):
            notes.append("Incomplete: the reply ended before the constraint was satisfied.")
        if meta.get("error"):
            notes.append(f"Error: {meta['error']}")
        if notes:
            self.set_status(" ".join(notes))
        self.stats = _small(QLabel(format_stats(meta.get("stats", {})), self), "stats")
        self.stats.setVisible(bool(meta.get("stats")))
        layout.addWidget(self.stats)

    def _action(self, row: QHBoxLayout, text: str, tip: str, slot: Any, enabled: bool) -> None:
        button = QToolButton(self, autoRaise=True)
        button.setText(text)
        button.setToolTip(tip)
        button.setObjectName(f"action{text}")
        button.setEnabled(enabled)
        button.clicked.connect(slot)
        row.addWidget(button)
        self.action_buttons[text] = button

    def set_last_reply(self, last: bool) -> None:
        """Only the last reply of the chat offers Regenerate."""
        if "Regenerate" in self.action_buttons:
            self.action_buttons["Regenerate"].setVisible(last)

    def set_interactive(self, enabled: bool) -> None:
        """Disable the actions that change the conversation while a reply is generated."""
        for name, button in self.action_buttons.items():
            if name != "Copy":
                button.setEnabled(enabled)
        if self.switcher is not None:
            self.switcher.setEnabled(enabled)
        for card in self.cards:
            card.set_interactive(enabled)

    def set_badge(self, text: str) -> None:
        self.badge.setText(text)
        self.badge.setVisible(bool(text))

    def set_status(self, text: str) -> None:
        self.status.setText(text)
        self.status.setVisible(bool(text))

    def set_text(self, text: str) -> None:
        self.body.set_markdown(text)
        self.body.setVisible(True)

    def _copy(self) -> None:
        if self.message is not None:
            QGuiApplication.clipboard().setText(self.message.content)

    def start_edit(self) -> None:
        """Swap the body for an editor; sending it makes a new branch."""
        if self.message is None or self.editor is not None:
            return
        layout = self.layout()
        assert isinstance(layout, QVBoxLayout)
        editor = self.editor = MessageEdit(self)
        self.editor.setPlainText(self.message.content)
        self.editor.setFixedHeight(90)
        row = QHBoxLayout()
        save = QPushButton("Send as new version", self)
        cancel = QPushButton("Cancel", self)
        row.addStretch(1)
        row.addWidget(cancel)
        row.addWidget(save)
        index = layout.indexOf(self.body)
        self.body.setVisible(False)
        layout.insertWidget(index + 1, self.editor)
        layout.insertLayout(index + 2, row)
        self._edit_row = [self.editor, save, cancel]
        message_id = self.message.id
        self.editor.submitted.connect(lambda text: self.editSubmitted.emit(message_id, text))
        save.clicked.connect(lambda: self.editSubmitted.emit(message_id, editor.toPlainText()))
        cancel.clicked.connect(self.cancel_edit)
        self.editor.setFocus()

    def cancel_edit(self) -> None:
        if self.editor is None:
            return
        for w in self._edit_row:
            w.deleteLater()
        self.editor = None
        self.body.setVisible(True)
