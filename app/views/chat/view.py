"""The conversation: message widgets in a centred, readable column inside a scroll area, the
reply being streamed, and the welcome view when the chat is empty.

Streamed text is rendered at most every RENDER_INTERVAL_MS, whatever the token rate, and
only its last paragraph is parsed and laid out again, so rendering never stalls the event
loop. When the reply is saved, its widget for the stored message adopts the streamed body
instead of rendering it all again. The view sticks to the bottom while a reply grows
unless the user has scrolled up to read.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtWidgets import QHBoxLayout, QScrollArea, QSizePolicy, QVBoxLayout, QWidget

from app.store import Message
from app.views.chat.markdown_view import MarkdownBody
from app.views.chat.message_parts import Note
from app.views.chat.message_widget import MessageWidget
from app.views.chat.thinking_section import THINKING
from app.views.chat.welcome import Welcome
from app.views.common import theme

RENDER_INTERVAL_MS = 50
_STICK_SLACK = 48  # px from the bottom that still count as "at the bottom"


@dataclass
class Entry:
    """A message to show and what its widget needs to know."""

    message: Message
    branch: tuple[int, int] = (1, 1)
    last_reply: bool = False
    tool_results: dict[str, str] = field(default_factory=dict)
    note: Note | None = None  # for a user message still waiting for its reply

    def key(self, builtins: frozenset[str]) -> str:
        m = self.message
        note = [self.note.text, self.note.kind, self.note.action] if self.note else None
        return json.dumps(
            [m.id, m.content, m.meta, self.branch, self.tool_results, sorted(builtins), note],
            sort_keys=True,
            default=str,
        )


class ChatView(QScrollArea):
    """Shows the active path and the streaming reply; forwards the widgets' requests."""

    editSubmitted = Signal(int, str)
    regenerateRequested = Signal(int)  # how many new versions
    retryRequested = Signal(int)
    continueRequested = Signal(int)
    branchStepped = Signal(int, int)
    toolResultSubmitted = Signal(str, str, str)
    toolRunRequested = Signal(str, str, object)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("chatView")
        self.setWidgetResizable(True)
        self.setFrameShape(QScrollArea.Shape.NoFrame)
        # Tab goes to each message (which scrolls into view), not to the frame round them
        self.setFocusPolicy(Qt.FocusPolicy.NoFocus)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.container = QWidget(self)
        self.container.setObjectName("chatColumn")
        centre = QHBoxLayout(self.container)
        centre.setContentsMargins(theme.SPACE.XL, theme.SPACE.XL, theme.SPACE.XL, theme.SPACE.L)
        self.column_widget = QWidget(self.container)
        self.column_widget.setMaximumWidth(theme.CHAT_MAX_WIDTH)
        # Stretches either side centre the column once it reaches its maximum width.
        centre.addStretch(1)
        centre.addWidget(self.column_widget, 1000)
        centre.addStretch(1)
        self.column = QVBoxLayout(self.column_widget)
        self.column.setContentsMargins(0, 0, 0, 0)
        self.column.setSpacing(theme.SPACE.L)
        self.welcome = Welcome(self.column_widget)
        self.empty = self.welcome  # the empty-chat view (older name)
        self.column.addWidget(self.welcome)
        self.column.addStretch(1)
        self.setWidget(self.container)
        self.widgets: dict[str, MessageWidget] = {}
        self.order: list[MessageWidget] = []
        self.reply: MessageWidget | None = None
        self.card_factory: Any = None  # (call, parent) -> a card for MCP calls, or None
        self.token_loader: Any = None  # message id -> its token logprobs, or None
        self._reply_text = ""
        self._reply_reasoning = ""  # the streamed reply's thinking so far
        self._writing = ""  # what the streamed reply is, when a new version of one
        # Regenerate: the version shown before the one being written, a click away (‹)
        self.previous: MessageWidget | None = None
        self._builtins: frozenset[str] = frozenset()
        self._handoff: MarkdownBody | None = None  # a finished reply's rendered body
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
        self._builtins = builtins
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
            widget.hide()  # at once: deletion waits for the event loop
            widget.deleteLater()
        if self._handoff is not None:  # not adopted: the reply was not kept
            self._handoff.deleteLater()
            self._handoff = None
        for widget in self.order:
            if widget in order:
                self.column.removeWidget(widget)
        for index, widget in enumerate(order):
            self.column.insertWidget(1 + index, widget)
            widget.show()  # now, not when the layout's queued show runs
        self.widgets, self.order = keep, order
        self._show_welcome(not order and self.reply is None)
        self.set_interactive(interactive)

    def _show_welcome(self, shown: bool) -> None:
        """The welcome fills the view (centred by its own stretches) and starts at the top;
        messages start at the top and the view follows the newest."""
        self.welcome.setVisible(shown)
        item = self.column.itemAt(self.column.count() - 1)
        spacer = item.spacerItem() if item is not None else None
        if spacer is not None:
            grow = QSizePolicy.Policy.Minimum if shown else QSizePolicy.Policy.Expanding
            spacer.changeSize(0, 0, QSizePolicy.Policy.Minimum, grow)
            self.column.setStretch(self.column.count() - 1, 0 if shown else 1)
            self.column.invalidate()
        if shown:
            self._stick = False
            self.verticalScrollBar().setValue(0)

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
            note=entry.note,
            card_factory=self.card_factory,
            token_loader=self.token_loader,
            parent=self.column_widget,
        )
        widget.editSubmitted.connect(self.editSubmitted)
        widget.regenerateRequested.connect(self.regenerateRequested)
        widget.retryRequested.connect(self.retryRequested)
        widget.continueRequested.connect(self.continueRequested)
        widget.branchStepped.connect(self.branchStepped)
        widget.toolResultSubmitted.connect(self.toolResultSubmitted)
        widget.toolRunRequested.connect(self.toolRunRequested)
        return widget

    def message_widgets(self) -> list[MessageWidget]:
        return list(self.order)

    def restyle(self) -> None:
        """Re-render every message for a new chat text size."""
        for widget in self.order + ([self.reply] if self.reply else []):
            widget.body.restyle()

    # ---- the streaming reply ----

    def begin_reply(
        self,
        tag: str = "",
        prefix: str = "",
        writing: str = "",
        *,
        versions: tuple[int, int] | None = None,
        previous: Message | None = None,
        previous_index: int = 1,
    ) -> MessageWidget:
        """Start showing a reply; `prefix` is the text of a reply being continued, `writing`
        what it is when it is a new version ("Writing version 2 of 2…"), shown from the
        first token to the last. A new version (`versions`: its number and the count) is
        written in the place of `previous` (version `previous_index`), whose switcher's ‹
        shows it again meanwhile."""
        self.end_reply()
        self._writing = writing
        self.reply = MessageWidget(None, parent=self.column_widget)
        self.reply.setProperty("streaming", True)
        if isinstance(self.reply.body, MarkdownBody):
            self.reply.body.streaming = True
        self.reply.set_tag(tag)
        self.reply.set_status(writing or "Waiting for the model…")
        if prefix:
            self.reply.set_text(prefix)
        self.column.insertWidget(self.column.count() - 1, self.reply)
        self.reply.show()
        if versions is not None and previous is not None:
            self._keep_previous(previous, previous_index, versions)
        self._show_welcome(False)
        self._reply_text = prefix
        self._reply_reasoning = ""
        self._stick = True
        return self.reply

    def _keep_previous(self, previous: Message, index: int, versions: tuple[int, int]) -> None:
        assert self.reply is not None
        self.previous = MessageWidget(
            previous,
            branch=(index, versions[1]),
            builtins=self._builtins,
            interactive=False,
            card_factory=self.card_factory,
            token_loader=self.token_loader,
            parent=self.column_widget,
        )
        self.previous.hide()
        self.column.insertWidget(self.column.indexOf(self.reply), self.previous)
        back = self.previous.switcher
        assert back is not None
        back.setEnabled(True)  # the rest of the old reply waits: only › back to the new one
        back.previous.setEnabled(False)
        back.previous.setToolTip("Earlier versions: once this one is written")
        back.stepped.connect(lambda step: self.show_previous(step < 0))
        ahead = self.reply.show_versions(*versions)
        ahead.previous.setToolTip("The version shown before this one")
        ahead.stepped.connect(lambda step: self.show_previous(step < 0))

    def show_previous(self, shown: bool) -> None:
        """While a new version is written in its place, show the one before it (or the new
        one again); focus follows to the switcher of the one shown."""
        if self.previous is None or self.reply is None:
            return
        self.previous.setVisible(shown)
        self.reply.setVisible(not shown)
        target = self.previous if shown else self.reply
        if target.switcher is not None:
            button = target.switcher.next if shown else target.switcher.previous
            button.setFocus(Qt.FocusReason.OtherFocusReason)

    def reply_prefill(self, done: int, total: int) -> None:
        if self.reply is not None and not self._reply_text:
            percent = 100 * done // max(total, 1)
            reading = f"Reading your message… {percent}%"
            self.reply.set_status(f"{self._writing} {reading}" if self._writing else reading)

    def update_reply(self, text: str) -> None:
        self._reply_text = text
        if not self._render_timer.isActive():
            self._render_timer.start()

    def update_reasoning(self, text: str) -> None:
        """The streamed reply's thinking so far (models that think first)."""
        self._reply_reasoning = text
        if not self._render_timer.isActive():
            self._render_timer.start()

    def _render_reply(self) -> None:
        if self.reply is not None:
            if self._reply_reasoning:
                self.reply.set_reasoning(self._reply_reasoning)
            self.reply.set_text(self._reply_text)
            # until the answer begins, the answer area says the model is thinking
            thinking = bool(self._reply_reasoning) and not self._reply_text
            self.reply.set_status(THINKING if thinking else self._writing)

    def end_reply(self, keep_body: bool = False) -> None:
        """Remove the streaming widget; with `keep_body`, the saved reply's widget may adopt
        its rendered body on the next `set_entries`."""
        self._render_timer.stop()
        if self.previous is not None:
            self.column.removeWidget(self.previous)
            self.previous.hide()
            self.previous.deleteLater()
            self.previous = None
        if self.reply is not None:
            if keep_body and self._reply_text and isinstance(self.reply.body, MarkdownBody):
                self._render_reply()  # the last text may not be rendered yet
                self.reply.body.finish()
                self._handoff = self.reply.body
                self._handoff.setParent(self.column_widget)
                self._handoff.hide()
            self.column.removeWidget(self.reply)
            self.reply.hide()
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
