"""The conversation column: message widgets in a scroll area, plus the reply being streamed.

Streamed text is rendered at most every RENDER_INTERVAL_MS, whatever the token rate, and
only its last paragraph is laid out again (ChunkedMarkdown), so rendering never stalls
the event loop. When the reply is saved, its widget for the stored message adopts the
streamed body instead of rendering it all again. The view sticks to the bottom while a
reply grows unless the user has scrolled up to read.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtWidgets import QLabel, QScrollArea, QVBoxLayout, QWidget

from app.store import Message
from app.views.markdown_view import ChunkedMarkdown
from app.views.message_widget import MessageWidget

RENDER_INTERVAL_MS = 50
_STICK_SLACK = 48  # px from the bottom that still count as "at the bottom"

EMPTY_TEXT = (
    "<h2>Start a conversation</h2>"
    "<p>Type a message below. Drop a <code>.json</code> schema, <code>.lark</code>, "
    "<code>.gbnf</code> or <code>.regex</code> file anywhere on the window and every reply "
    "will fit it.</p>"
)


@dataclass
class Entry:
    """A message to show and what its widget needs to know."""

    message: Message
    branch: tuple[int, int] = (1, 1)
    last_reply: bool = False
    tool_results: dict[str, str] = field(default_factory=dict)

    def key(self, builtins: frozenset[str]) -> str:
        m = self.message
        return json.dumps(
            [m.id, m.content, m.meta, self.branch, self.tool_results, sorted(builtins)],
            sort_keys=True,
            default=str,
        )


class ChatView(QScrollArea):
    """Shows the active path and the streaming reply; forwards the widgets' requests."""

    editSubmitted = Signal(int, str)
    regenerateRequested = Signal()
    branchStepped = Signal(int, int)
    toolResultSubmitted = Signal(str, str, str)
    toolRunRequested = Signal(str, str, object)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("chatView")
        self.setWidgetResizable(True)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.container = QWidget(self)
        self.container.setObjectName("chatColumn")
        self.column = QVBoxLayout(self.container)
        self.column.setContentsMargins(16, 12, 16, 12)
        self.column.setSpacing(10)
        self.empty = QLabel(EMPTY_TEXT, self.container)
        self.empty.setObjectName("emptyState")
        self.empty.setWordWrap(True)
        self.empty.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.column.addWidget(self.empty)
        self.column.addStretch(1)
        self.setWidget(self.container)
        self.widgets: dict[str, MessageWidget] = {}
        self.order: list[MessageWidget] = []
        self.reply: MessageWidget | None = None
        self.card_factory: Any = None  # (call, parent) -> a card for MCP calls, or None
        self._reply_text = ""
        self._handoff: ChunkedMarkdown | None = None  # a finished reply's rendered body
        self._render_timer = QTimer(self, singleShot=True, interval=RENDER_INTERVAL_MS)
        self._render_timer.timeout.connect(self._render_reply)
        self._stick = True
        bar = self.verticalScrollBar()
        bar.valueChanged.connect(self._on_scrolled)
        bar.rangeChanged.connect(self._on_range)

    # ---- messages ----

    def set_entries(
        self, entries: list[Entry], *, interactive: bool, builtins: frozenset[str] = frozenset()
    ) -> None:
        """Show `entries`, reusing the widgets of messages that did not change."""
        keep: dict[str, MessageWidget] = {}
        order: list[MessageWidget] = []
        for entry in entries:
            key = entry.key(builtins)
            widget = self.widgets.pop(key, None) or keep.get(key)
            if widget is None:
                widget = self._make(entry, interactive, builtins)
            widget.set_last_reply(entry.last_reply)
            keep[key] = widget
            order.append(widget)
        for widget in self.widgets.values():
            self.column.removeWidget(widget)
            widget.deleteLater()
        if self._handoff is not None:  # not adopted: the reply was not kept
            self._handoff.deleteLater()
            self._handoff = None
        for widget in self.order:
            if widget in order:
                self.column.removeWidget(widget)
        for index, widget in enumerate(order):
            self.column.insertWidget(1 + index, widget)
        self.widgets, self.order = keep, order
        self.empty.setVisible(not order and self.reply is None)
        self.set_interactive(interactive)

    def set_interactive(self, enabled: bool) -> None:
        for widget in self.order:
            widget.set_interactive(enabled)

    def _make(self, entry: Entry, interactive: bool, builtins: frozenset[str]) -> MessageWidget:
        body = None
        if self._handoff is not None and self._handoff.markdown == entry.message.content:
            body, self._handoff = self._handoff, None
        widget = MessageWidget(
            entry.message,
            branch=entry.branch,
            last_reply=entry.last_reply,
            tool_results=entry.tool_results,
            builtins=builtins,
            interactive=interactive,
            body=body,
            card_factory=self.card_factory,
            parent=self.container,
        )
        widget.editSubmitted.connect(self.editSubmitted)
        widget.regenerateRequested.connect(self.regenerateRequested)
        widget.branchStepped.connect(self.branchStepped)
        widget.toolResultSubmitted.connect(self.toolResultSubmitted)
        widget.toolRunRequested.connect(self.toolRunRequested)
        return widget

    def message_widgets(self) -> list[MessageWidget]:
        return list(self.order)

    # ---- the streaming reply ----

    def begin_reply(self, badge: str = "") -> MessageWidget:
        self.end_reply()
        self.reply = MessageWidget(None, parent=self.container)
        self.reply.setProperty("streaming", True)
        self.reply.set_badge(badge)
        self.reply.set_status("Waiting for the model…")
        self.column.insertWidget(self.column.count() - 1, self.reply)
        self.empty.setVisible(False)
        self._reply_text = ""
        self._stick = True
        return self.reply

    def reply_prefill(self, done: int, total: int) -> None:
        if self.reply is not None and not self._reply_text:
            percent = 100 * done // max(total, 1)
            self.reply.set_status(f"Reading the prompt… {percent}% ({done}/{total} tokens)")

    def update_reply(self, text: str) -> None:
        self._reply_text = text
        if not self._render_timer.isActive():
            self._render_timer.start()

    def _render_reply(self) -> None:
        if self.reply is not None:
            self.reply.set_text(self._reply_text)
            self.reply.set_status("")

    def end_reply(self, keep_body: bool = False) -> None:
        """Remove the streaming widget; with `keep_body`, the saved reply's widget may adopt
        its rendered body on the next `set_entries`."""
        self._render_timer.stop()
        if self.reply is not None:
            if keep_body and self._reply_text:
                self._render_reply()  # the last text may not be rendered yet
                self._handoff = self.reply.body
                self._handoff.setParent(self.container)
                self._handoff.hide()
            self.column.removeWidget(self.reply)
            self.reply.deleteLater()
            self.reply = None

    @property
    def reply_text_shown(self) -> str:
        return self.reply.body.markdown if self.reply is not None else ""

    # ---- scrolling ----

    def _on_scrolled(self, value: int) -> None:
        bar = self.verticalScrollBar()
        self._stick = value >= bar.maximum() - _STICK_SLACK

    def _on_range(self, _minimum: int, maximum: int) -> None:
        if self._stick:
            self.verticalScrollBar().setValue(maximum)
