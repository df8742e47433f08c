"""The composer: a card at the bottom of the chat with a text field that grows with its text
(one line to MAX_LINES, then it scrolls), a row for the chips (constraint, tools) and the
round Send button, which turns into Stop while a reply is written. Enter sends, Shift+Enter
starts a new line; files dropped on it become constraints or tools, or (pictures) images
attached to the message. Images waiting to be sent show as thumbnails above the text; the
paperclip button attaches more (disabled, saying why, for a model that does not read
images), and a picture pasted from the clipboard is attached too."""

from __future__ import annotations

from PySide6.QtCore import QEvent, QMimeData, QObject, QSize, Qt, Signal
from PySide6.QtGui import (
    QDragEnterEvent,
    QDragMoveEvent,
    QDropEvent,
    QImage,
    QKeyEvent,
    QResizeEvent,
    QTextCursor,
)
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QPlainTextEdit,
    QSizePolicy,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from app.chat.attachments import Attachment
from app.store.documents import AttachedDocument
from app.views.chat.attachments import AttachmentStrip
from app.views.common import theme
from app.views.common.drops import dropped_paths
from app.views.common.icons import IconButton, icon
from app.views.common.keyboard import place_in_chain

MAX_LINES = 8
# Short enough to show whole in the narrowest window (800 px with the sidebar docked).
PLACEHOLDER = "Ask anything, or drop a document or picture here"
PLACEHOLDER_NO_IMAGES = "Ask anything, or drop a document here"
PLACEHOLDER_LOADING = "Type now: it is sent when the model is ready"
EDIT_TIP = "Enter sends, Shift+Enter starts a new line"
ATTACH_TIP = "Attach documents or images (Ctrl+Shift+A), or drop or paste them here"
ATTACH_DOCUMENTS_TIP = "Attach documents (Ctrl+Shift+A): PDF, Word, HTML, Markdown, text"


class MessageEdit(QPlainTextEdit):
    """A plain-text editor where Enter submits and Shift+Enter inserts a line break."""

    submitted = Signal(str)
    filesDropped = Signal(list)  # local paths
    imagePasted = Signal(QImage)  # a picture pasted from the clipboard (when accepted)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setTabChangesFocus(True)
        self.accepts_images = False  # the composer's editor takes pasted pictures

    # A picture on the clipboard (or copied image files) is attached, never pasted as text.
    def canInsertFromMimeData(self, source: QMimeData) -> bool:
        if self.accepts_images and (source.hasImage() or dropped_paths(source)):
            return True
        return super().canInsertFromMimeData(source)

    def insertFromMimeData(self, source: QMimeData) -> None:
        if self.accepts_images and dropped_paths(source):
            self.filesDropped.emit(dropped_paths(source))
        elif self.accepts_images and source.hasImage():
            image = source.imageData()
            self.imagePasted.emit(image if isinstance(image, QImage) else QImage())
        else:
            super().insertFromMimeData(source)

    def keyPressEvent(self, event: QKeyEvent) -> None:
        if event.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter):
            mods = event.modifiers()
            if mods & Qt.KeyboardModifier.ShiftModifier:
                self.insertPlainText("\n")
            elif not mods & (Qt.KeyboardModifier.AltModifier | Qt.KeyboardModifier.MetaModifier):
                self.submitted.emit(self.toPlainText())
            else:
                super().keyPressEvent(event)
            return
        super().keyPressEvent(event)

    # File drags are taken whole (as constraint or tools files), never inserted as text.
    def dragEnterEvent(self, event: QDragEnterEvent) -> None:
        if dropped_paths(event.mimeData()):
            event.acceptProposedAction()
        else:
            super().dragEnterEvent(event)

    def dragMoveEvent(self, event: QDragMoveEvent) -> None:
        if dropped_paths(event.mimeData()):
            event.acceptProposedAction()
        else:
            super().dragMoveEvent(event)

    def dropEvent(self, event: QDropEvent) -> None:
        paths = dropped_paths(event.mimeData())
        if paths:
            event.acceptProposedAction()
            self.filesDropped.emit(paths)
        else:
            super().dropEvent(event)


class SendButton(QToolButton):
    """Round: an arrow to send, a square to stop. Enter (and a click) presses it; Space,
    typed by someone who thinks they are still in the text, goes back to the text as a
    space (`spaceTyped`) instead of sending a half-written message."""

    SIZE = 32
    spaceTyped = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("sendButton")
        self.setFixedSize(self.SIZE, self.SIZE)
        self.setIconSize(QSize(18, 18))
        self.setCursor(Qt.CursorShape.PointingHandCursor)
        self.set_busy(False)

    def set_busy(self, busy: bool) -> None:
        self.busy = busy
        self.setProperty("busy", busy)
        self.style().unpolish(self)
        self.style().polish(self)
        self.setAccessibleName("Stop" if busy else "Send")
        self.setToolTip("Stop the reply (Esc)" if busy else "Send (Enter)")
        self._refresh()

    def _refresh(self) -> None:
        c = theme.colors()
        color = c.surface if self.busy else c.accent_text
        self.setIcon(icon("stop" if self.busy else "send", color, 18, stroke=2.2))

    def changeEvent(self, event: QEvent) -> None:
        super().changeEvent(event)
        if event.type() == QEvent.Type.PaletteChange:
            self._refresh()

    def keyPressEvent(self, event: QKeyEvent) -> None:
        if event.key() == Qt.Key.Key_Space and not event.modifiers():
            if not event.isAutoRepeat():
                self.spaceTyped.emit()
            event.accept()
        elif event.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter):
            self.click()
            event.accept()
        else:
            super().keyPressEvent(event)

    def keyReleaseEvent(self, event: QKeyEvent) -> None:
        if event.key() == Qt.Key.Key_Space and not event.modifiers():
            event.accept()  # never a click
        else:
            super().keyReleaseEvent(event)


class Composer(QFrame):
    """The text field, the accessory row and the Send/Stop button."""

    sendRequested = Signal(str)
    stopRequested = Signal()
    filesDropped = Signal(list)
    imagePasted = Signal(QImage)
    attachRequested = Signal()  # the paperclip: choose documents or images

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("composerCard")
        self.edit = MessageEdit(self)
        self.edit.setObjectName("composerEdit")
        self.edit.setPlaceholderText(PLACEHOLDER)
        self.edit.setToolTip(EDIT_TIP)
        self.edit.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.edit.setFrameShape(QFrame.Shape.NoFrame)
        self.edit.document().setDocumentMargin(2)
        self.edit.accepts_images = True
        self.button = SendButton(self)
        self.attachments = AttachmentStrip(self)
        self.attach_button = IconButton("attach", ATTACH_TIP, self)
        self.attach_button.setAccessibleName("Attach documents or images")
        self.attach_button.clicked.connect(self.attachRequested)
        self._busy = False
        self._images_allowed = True
        self._waiting = False
        layout = QVBoxLayout(self)
        layout.setContentsMargins(theme.SPACE.M, theme.SPACE.S, theme.SPACE.S, theme.SPACE.S)
        layout.setSpacing(theme.SPACE.XS)
        layout.addWidget(self.attachments)
        layout.addWidget(self.edit)
        self.accessories = QHBoxLayout()
        self.accessories.setContentsMargins(0, 0, 0, 0)
        self.accessories.setSpacing(theme.SPACE.S)
        row = QHBoxLayout()
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(self.attach_button, 0, Qt.AlignmentFlag.AlignVCenter)
        row.addLayout(self.accessories, 1)
        row.addWidget(self.button, 0, Qt.AlignmentFlag.AlignBottom)
        layout.addLayout(row)
        self.edit.submitted.connect(self._submit)
        self.edit.filesDropped.connect(self.filesDropped)
        self.edit.imagePasted.connect(self.imagePasted)
        self.edit.textChanged.connect(self._fit)
        self.edit.installEventFilter(self)
        self.button.clicked.connect(self._clicked)
        self.button.spaceTyped.connect(self._space_typed)
        self.restyle()

    def add_accessory(self, widget: QWidget) -> None:
        """A chip or button in the row under the text (left to right, in call order)."""
        self.accessories.addWidget(widget)

    def finish_accessories(self) -> None:
        self.accessories.addStretch(1)

    @property
    def busy(self) -> bool:
        return self._busy

    def set_busy(self, busy: bool) -> None:
        """While busy the button stops the reply; Enter does not send."""
        self._busy = busy
        self.button.set_busy(busy)

    def set_waiting_for_model(self, waiting: bool) -> None:
        self._waiting = waiting
        self._show_placeholder()

    def _show_placeholder(self) -> None:
        ready = PLACEHOLDER if self._images_allowed else PLACEHOLDER_NO_IMAGES
        self.edit.setPlaceholderText(PLACEHOLDER_LOADING if self._waiting else ready)

    def text(self) -> str:
        return self.edit.toPlainText()

    # ---- images and documents waiting to be sent ----

    def add_attachment(self, attachment: Attachment) -> None:
        self.attachments.add(attachment)
        place_in_chain(self.attachments.items(), self.edit)  # Tab meets them before the text

    def add_document(self, document: AttachedDocument) -> None:
        self.attachments.add_document(document)
        place_in_chain(self.attachments.items(), self.edit)

    def tab_start(self) -> QWidget:
        """The composer's first stop in the Tab order: its first attachment, or its text."""
        items = self.attachments.items()
        return items[0] if items else self.edit

    def pending_images(self) -> list[Attachment]:
        return self.attachments.attachments()

    def pending_documents(self) -> list[AttachedDocument]:
        return self.attachments.pending_documents()

    def clear_attachments(self) -> None:
        self.attachments.clear()

    def set_images_allowed(self, allowed: bool, why_not: str = "") -> None:
        """Whether the model reads images: the paperclip and the placeholder offer
        documents always, pictures only then (the tooltip says why not)."""
        self._images_allowed = allowed
        self.attach_button.setToolTip(
            ATTACH_TIP if allowed else f"{ATTACH_DOCUMENTS_TIP}. Pictures: {why_not}."
        )
        self._show_placeholder()

    def restyle(self) -> None:
        self.edit.setFont(theme.font(theme.type_scale().chat))
        self._fit()

    def _fit(self) -> None:
        """One line when empty, growing with the text up to MAX_LINES."""
        lines = self.edit.document().documentLayout().documentSize().height()
        lines = max(1, min(MAX_LINES, int(lines)))
        line_height = self.edit.fontMetrics().lineSpacing()
        margin = int(self.edit.document().documentMargin() * 2) + 2
        height = lines * line_height + margin
        if height != self.edit.height():
            self.edit.setFixedHeight(height)
        self.edit.setVerticalScrollBarPolicy(
            Qt.ScrollBarPolicy.ScrollBarAsNeeded
            if lines >= MAX_LINES
            else Qt.ScrollBarPolicy.ScrollBarAlwaysOff
        )

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        self._fit()  # a narrower field wraps into more lines

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if watched is self.edit and event.type() in (QEvent.Type.FocusIn, QEvent.Type.FocusOut):
            self.setProperty("focused", event.type() == QEvent.Type.FocusIn)
            self.style().unpolish(self)
            self.style().polish(self)
        return super().eventFilter(watched, event)

    def _space_typed(self) -> None:
        self.edit.setFocus(Qt.FocusReason.OtherFocusReason)
        self.edit.moveCursor(QTextCursor.MoveOperation.End)
        self.edit.insertPlainText(" ")

    def _clicked(self) -> None:
        if self._busy:
            self.stopRequested.emit()
        else:
            self._submit(self.edit.toPlainText())

    def _submit(self, text: str) -> None:
        if self._busy or not (
            text.strip() or self.attachments.thumbs or self.attachments.documents
        ):
            return
        self.sendRequested.emit(text)
