"""One message in the chat. Roles are told apart by alignment and tint, not headers: the
user's words sit in a tinted bubble on the right, exactly as typed; replies run the width
of the column as rendered Markdown. Under each message, icon actions with tooltips appear
on hover (always on the last reply), with the branch switcher and, for replies, the
figures in plain words. Beside the last reply's Regenerate, Versions writes several at once
(×2, ×3, ×4), which come back as versions ‹ 1/N ›. A note under a reply says
honestly how it ended ("Stopped", "Stopped at the 1024-token limit" with Continue, an
error with Retry). Pictures sent with a message show as thumbnails above its text; a click
opens one full size."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QEvent, Qt, Signal
from PySide6.QtGui import QEnterEvent, QGuiApplication, QResizeEvent, QTextCursor
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QMenu,
    QPushButton,
    QSizePolicy,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from app.constraints import describe_reply_constraint
from app.store import Message
from app.store.documents import message_documents
from app.views.chat.attachments import DocumentChips, ImageThumbnails
from app.views.chat.composer import MessageEdit
from app.views.chat.markdown_view import MarkdownBody, PlainTextView
from app.views.chat.message_parts import BranchSwitcher, Note, ToolCallCard, label, reply_note
from app.views.chat.reply_json import formatted_json, validity_mark
from app.views.chat.thinking_section import ThinkingSection
from app.views.chat.token_view import TokenView
from app.views.common import theme
from app.views.common.format import reply_details, reply_summary
from app.views.common.icons import IconButton
from engine.types import TokenLogprob

ROLE_NAMES = {"user": "You", "assistant": "Assistant", "tool": "Tool"}
NOTE_WRAP_WIDTH = 280  # px: a note longer than this wraps
REGENERATE_COUNTS = (2, 3, 4)  # Regenerate's menu: this many versions at once


class MessageWidget(QFrame):
    """A user message, a saved reply, or (with `message` None) the reply being streamed."""

    editSubmitted = Signal(int, str)
    regenerateRequested = Signal(int)  # how many new versions
    retryRequested = Signal(int)  # the message to answer again (a user message or a reply)
    continueRequested = Signal(int)  # the reply to continue
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
        body: MarkdownBody | None = None,
        note: Note | None = None,
        card_factory: Any = None,
        token_loader: Callable[[int], list[TokenLogprob] | None] | None = None,
        parent: QWidget | None = None,
    ) -> None:
        """`body` may be the already rendered body of the streamed reply, adopted as is;
        `note` overrides the note computed from a reply (a user message without a reply);
        `card_factory(call, parent)` may supply a call's card (MCP calls), else None;
        `token_loader(message id)` gives a reply's recorded tokens, for its token view (Inspect)."""
        super().__init__(parent)
        self.message = message
        self.role = message.role if message is not None else "assistant"
        meta = message.meta if message is not None else {}
        self.setObjectName("message")
        self.setProperty("role", self.role)
        self.setAccessibleName(ROLE_NAMES.get(self.role, self.role))
        # One Tab stop for the whole message (its text read out as its description), its
        # switcher and actions after it; a click in the text still selects it.
        self.setFocusPolicy(
            Qt.FocusPolicy.TabFocus if message is not None else Qt.FocusPolicy.NoFocus
        )
        if message is not None:
            self.setAccessibleDescription(message.content)
        self.cards: list[Any] = []
        self.editor: MessageEdit | None = None
        self.action_buttons: dict[str, IconButton] = {}
        self.switcher: BranchSwitcher | None = None
        self._hovered = False
        self._focused = False  # focus inside: the actions show for keyboard users too
        self._always_show_actions = False
        self._token_loader = token_loader
        self.token_view: TokenView | None = None
        self.thinking: ThinkingSection | None = None  # a reply's thought (None: a user's)

        self._layout = QVBoxLayout(self)
        self._layout.setContentsMargins(0, 0, 0, 0)
        self._layout.setSpacing(theme.SPACE.XS)

        self.tag = label("", "constraintTag", self, selectable=False)
        self.tag.setSizePolicy(QSizePolicy.Policy.Maximum, QSizePolicy.Policy.Fixed)
        self.tag.setWordWrap(False)
        self.tag.setVisible(False)
        if meta.get("constraint"):
            self.set_tag(
                describe_reply_constraint(
                    meta["constraint"],
                    meta.get("constraint_kind"),
                    meta.get("constraint_use"),
                    meta.get("tools_asked"),
                )
            )

        self.bubble: QFrame | None = None
        self.body: MarkdownBody | PlainTextView
        self.images: ImageThumbnails | None = None
        if message is not None and message.images:
            pictures = [(i.path, i.name) for i in message.images]
            self.images = ImageThumbnails(pictures, right=self.role == "user", parent=self)
            self._layout.addWidget(self.images)
        self.documents: DocumentChips | None = None
        if message is not None and (documents := message_documents(message.meta)):
            self.documents = DocumentChips(documents, right=self.role == "user", parent=self)
            self._layout.addWidget(self.documents)
        if self.role == "user" and message is not None:
            self._build_user_body(message.content)
        else:
            self._layout.addWidget(self.tag)
            self.thinking = ThinkingSection(self)  # above the answer; hidden without thinking
            stats = meta.get("stats") or {}
            seconds = meta.get("thinking_s") or stats.get("thinking_s") or 0.0
            self.thinking.show_thought(meta.get("reasoning") or "", float(seconds))
            self._layout.addWidget(self.thinking)
            self.body = body if body is not None else MarkdownBody(self)
            self.body.setParent(self)
            content = message.content if message is not None else ""
            # a JSON reply: formatted in a code block (the stored text stays the model's)
            self.body.set_markdown(formatted_json(content, meta) or content)
            self.body.setVisible(bool(message is None or message.content))
            self._layout.addWidget(self.body)
            self.valid_mark = label(validity_mark(meta), "validMark", self, selectable=False)
            self.valid_mark.setVisible(bool(self.valid_mark.text()))
            self._layout.addWidget(self.valid_mark)

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
            self._layout.addWidget(card)
            self.cards.append(card)

        self._build_note_row()
        self._build_footer(message, meta, branch, interactive)
        if note is None and message is not None and self.role == "assistant":
            note = reply_note(message)
        self.set_note(note, interactive=interactive)
        self.set_last_reply(last_reply)

    # ---- construction ----

    def _build_user_body(self, text: str) -> None:
        row = QHBoxLayout()
        row.setContentsMargins(0, 0, 0, 0)
        row.addStretch(1)
        self.bubble = QFrame(self)
        self.bubble.setObjectName("bubble")
        self.bubble.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Preferred)
        inner = QVBoxLayout(self.bubble)
        inner.setContentsMargins(theme.SPACE.L, theme.SPACE.M - 2, theme.SPACE.L, theme.SPACE.M - 2)
        self.body = PlainTextView(text, self.bubble)
        inner.addWidget(self.body)
        row.addWidget(self.bubble)
        self.bubble.setVisible(bool(text))  # a message of pictures only shows just them
        self._layout.addLayout(row)
        self._user_row = row

    def _build_note_row(self) -> None:
        self.note_row = QWidget(self)
        row = QHBoxLayout(self.note_row)
        row.setContentsMargins(0, 0, 0, 0)
        row.setSpacing(theme.SPACE.S)
        self.status = label("", "replyNote", self.note_row)
        self.status.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Preferred)
        self.note_action = QPushButton(self.note_row)
        self.note_action.setObjectName("noteAction")
        self.note_action.setCursor(Qt.CursorShape.PointingHandCursor)
        self.note_action.clicked.connect(self._note_action_clicked)
        if self.role == "user":
            self.status.setAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
            row.addWidget(self.status, 1)
            row.addWidget(self.note_action)
        else:
            row.addWidget(self.status)
            row.addWidget(self.note_action)
            row.addStretch(1)
        self._note_action_name = ""
        self.note_row.setVisible(False)
        self._layout.addWidget(self.note_row)

    def _build_footer(
        self, message: Message | None, meta: dict[str, Any], branch: tuple[int, int], on: bool
    ) -> None:
        self.footer = QWidget(self)
        self.footer.setObjectName("messageFooter")
        row = QHBoxLayout(self.footer)
        row.setContentsMargins(0, 0, 0, 0)
        row.setSpacing(theme.SPACE.XS)
        self.action_box = QWidget(self.footer)
        self.action_box.setObjectName("messageActions")
        actions = QHBoxLayout(self.action_box)
        actions.setContentsMargins(0, 0, 0, 0)
        actions.setSpacing(0)
        policy = QSizePolicy(QSizePolicy.Policy.Maximum, QSizePolicy.Policy.Preferred)
        policy.setRetainSizeWhenHidden(True)  # the row does not jump when they appear
        self.action_box.setSizePolicy(policy)
        self.stats = label(reply_summary(meta.get("stats", {}), self._content()), "stats", self)
        self.stats.setToolTip(reply_details(meta.get("stats", {})))
        self.stats.setWordWrap(False)  # one short line; its units never wrap apart
        self.stats.setVisible(bool(self.stats.text()))
        if message is not None and branch[1] > 1:  # made first: Tab meets it before the actions
            switcher = BranchSwitcher(*branch, parent=self.footer)
            switcher.setEnabled(on)
            switcher.stepped.connect(lambda step: self.branchStepped.emit(message.id, step))
            self.switcher = switcher
        if message is not None:
            self._action(actions, "Copy", "copy", "Copy the text", self._copy, True)
            if self.role == "user":
                self._action(
                    actions, "Edit", "edit", "Edit (keeps this version too)", self.start_edit, on
                )
            else:
                self._action(
                    actions,
                    "Regenerate",
                    "regenerate",
                    "Write a new version of this reply",
                    lambda: self.regenerateRequested.emit(1),
                    on,
                )
                self._action(
                    actions,
                    "Versions",
                    "versions",
                    "Versions: write 2, 3 or 4 new versions side by side",
                    lambda: None,
                    on,
                )
                self._versions_menu(self.action_buttons["Versions"])
                if meta.get("logprobs") and self._token_loader is not None:
                    self._action(
                        actions,
                        "Inspect",
                        "inspect",
                        "Inspect: each token's probability and what the constraint changed",
                        self.toggle_token_view,
                        True,
                    )
                    self.action_buttons["Inspect"].setCheckable(True)
        if self.role == "user":
            row.addStretch(1)
            row.addWidget(self.action_box)
            if self.switcher is not None:
                row.addWidget(self.switcher)
        else:  # the figures first: the actions' space, kept while hidden, trails them
            if self.switcher is not None:
                row.addWidget(self.switcher)
            row.addWidget(self.stats)
            row.addSpacing(theme.SPACE.XS)
            row.addWidget(self.action_box)
            row.addStretch(1)
        self.footer.setVisible(message is not None)
        self._layout.addWidget(self.footer)
        self._update_actions()

    def _action(
        self, row: QHBoxLayout, name: str, icon_name: str, tip: str, slot: Any, enabled: bool
    ) -> None:
        button = IconButton(icon_name, tip, self.action_box, size=16)
        button.setObjectName(f"action{name}")
        button.setAccessibleName(name)
        button.setEnabled(enabled)
        button.clicked.connect(slot)
        row.addWidget(button)
        self.action_buttons[name] = button

    def _versions_menu(self, button: QToolButton) -> None:
        menu = QMenu(button)
        for count in REGENERATE_COUNTS:
            action = menu.addAction(f"Write {count} versions")
            action.triggered.connect(lambda _=False, n=count: self.regenerateRequested.emit(n))
        button.setMenu(menu)
        button.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)

    def toggle_token_view(self) -> None:
        """Show the reply as its recorded tokens (its token view), or as text again."""
        if self.message is None or self._token_loader is None:
            return
        if self.token_view is None:
            tokens = self._token_loader(self.message.id)
            if not tokens:
                self.action_buttons["Inspect"].setChecked(False)
                self.action_buttons["Inspect"].setToolTip("No recorded tokens for this reply")
                return
            self.token_view = TokenView(tokens, self)
            self._layout.insertWidget(self._layout.indexOf(self.body) + 1, self.token_view)
            self.token_view.setVisible(False)
        inspecting = not self.token_view.isVisible()
        self.token_view.setVisible(inspecting)
        self.body.setVisible(not inspecting)
        self.action_buttons["Inspect"].setChecked(inspecting)

    def _content(self) -> str:
        return self.message.content if self.message is not None else ""

    # ---- state ----

    def set_last_reply(self, last: bool) -> None:
        """Only the last reply offers Regenerate (and Versions), and keeps its actions in view."""
        for name in ("Regenerate", "Versions"):
            if name in self.action_buttons:
                self.action_buttons[name].setVisible(last)
        self._always_show_actions = last
        self._update_actions()

    def set_interactive(self, enabled: bool) -> None:
        """Disable the actions that change the conversation while a reply is generated."""
        for name, button in self.action_buttons.items():
            if name != "Copy":
                button.setEnabled(enabled)
        self.note_action.setEnabled(enabled)
        if self.switcher is not None:
            self.switcher.setEnabled(enabled)
        for card in self.cards:
            card.set_interactive(enabled)

    def show_versions(self, index: int, count: int) -> BranchSwitcher:
        """The streamed reply as version `index` of `count` (a regenerate writing it in the
        place of the one shown before): its switcher, for the chat view to wire."""
        switcher = BranchSwitcher(index, count, parent=self.footer)
        row = self.footer.layout()
        assert isinstance(row, QHBoxLayout)
        row.insertWidget(0, switcher)
        self.switcher = switcher
        self.footer.setVisible(True)
        return switcher

    def set_tag(self, text: str) -> None:
        self.tag.setText(text)
        self.tag.setVisible(bool(text))

    # The streamed reply's status ("Reading the prompt… 40%") uses the note row, quietly.
    def set_status(self, text: str) -> None:
        self.set_note(Note(text) if text else None)

    def set_note(self, note: Note | None, *, interactive: bool = True) -> None:
        self.note = note
        if note is None:
            self.note_row.setVisible(False)
            return
        self.status.setText(note.text)
        # Short notes stay on one line; long ones (errors) wrap from a readable width.
        width = self.status.fontMetrics().horizontalAdvance(note.text) + 4
        self.status.setMinimumWidth(min(width, NOTE_WRAP_WIDTH))
        self.status.setProperty("kind", note.kind)
        self.status.style().unpolish(self.status)
        self.status.style().polish(self.status)
        self._note_action_name = note.action
        labels = {"retry": "Retry", "continue": "Continue"}
        self.note_action.setText(labels.get(note.action, ""))
        self.note_action.setToolTip(
            "Write the rest of this reply" if note.action == "continue" else "Ask again"
        )
        self.note_action.setVisible(bool(note.action) and self.message is not None)
        self.note_action.setEnabled(interactive)
        self.note_row.setVisible(True)

    def set_reasoning(self, text: str) -> None:
        """The streamed reply's thinking so far (shown in its thinking section)."""
        if self.thinking is not None:
            self.thinking.show_thinking(text)

    def set_text(self, text: str) -> None:
        if isinstance(self.body, MarkdownBody):
            self.body.set_markdown(text)
            self.body.setVisible(True)

    def _note_action_clicked(self) -> None:
        if self.message is None:
            return
        if self._note_action_name == "continue":
            self.continueRequested.emit(self.message.id)
        elif self._note_action_name == "retry":
            self.retryRequested.emit(self.message.id)

    def copy_text(self) -> None:
        """Copy the message's text (its Copy button; Edit → Copy while it has focus)."""
        self._copy()

    def _copy(self) -> None:
        if self.message is not None:
            QGuiApplication.clipboard().setText(self.message.content)
            button = self.action_buttons["Copy"]
            button.set_icon_name("check")
            button.setToolTip("Copied")

    # ---- hover ----

    def _update_actions(self) -> None:
        if hasattr(self, "action_box"):
            self.action_box.setVisible(self._hovered or self._focused or self._always_show_actions)

    def set_focus_within(self, focused: bool) -> None:
        """Focus entered or left this message (app.views.common.keyboard.MessageFocus tells it)."""
        self._focused = focused
        self._update_actions()

    def enterEvent(self, event: QEnterEvent) -> None:
        self._hovered = True
        self._update_actions()
        super().enterEvent(event)

    def leaveEvent(self, event: QEvent) -> None:
        self._hovered = False
        self._update_actions()
        if "Copy" in self.action_buttons:
            self.action_buttons["Copy"].set_icon_name("copy")
            self.action_buttons["Copy"].setToolTip("Copy the text")
        super().leaveEvent(event)

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        if self.bubble is not None:
            self.bubble.setMaximumWidth(int(self.width() * theme.USER_BUBBLE_RATIO))

    # ---- editing a user message ----

    def start_edit(self) -> None:
        """Swap the bubble for an editor; sending it makes a new version (a branch)."""
        if self.message is None or self.editor is not None or self.bubble is None:
            return
        card = QFrame(self)
        card.setObjectName("composerCard")
        inner = QVBoxLayout(card)
        inner.setContentsMargins(theme.SPACE.M, theme.SPACE.S, theme.SPACE.S, theme.SPACE.S)
        self.editor = MessageEdit(card)
        self.editor.setObjectName("composerEdit")
        self.editor.setPlainText(self.message.content)
        self.editor.setFixedHeight(96)
        row = QHBoxLayout()
        save = QPushButton("Send", card)
        save.setToolTip("Send this version (Enter); the original stays as version 1")
        cancel = QPushButton("Cancel", card)
        row.addStretch(1)
        row.addWidget(cancel)
        row.addWidget(save)
        inner.addWidget(self.editor)
        inner.addLayout(row)
        self.bubble.setVisible(False)
        self._layout.insertWidget(self._layout.indexOf(self.note_row), card)
        self._edit_card = card
        message_id = self.message.id
        self.editor.submitted.connect(lambda text: self.editSubmitted.emit(message_id, text))
        save.clicked.connect(lambda: self.editSubmitted.emit(message_id, self.editor.toPlainText()))
        cancel.clicked.connect(self.cancel_edit)
        self.editor.moveCursor(QTextCursor.MoveOperation.End)  # typing goes on from the end
        self.editor.setFocus()

    def cancel_edit(self) -> None:
        if self.editor is None or self.bubble is None:
            return
        self._edit_card.hide()
        self._edit_card.deleteLater()
        self.editor = None
        self.bubble.setVisible(True)
