"""The message composer: Enter sends, Shift+Enter starts a new line, files dropped on it
become constraints. Its button reads Send, or Stop while a reply is generated."""

from __future__ import annotations

from PySide6.QtCore import QMimeData, Qt, Signal
from PySide6.QtGui import QDragEnterEvent, QDragMoveEvent, QDropEvent, QKeyEvent
from PySide6.QtWidgets import QHBoxLayout, QPlainTextEdit, QPushButton, QSizePolicy, QWidget


def dropped_paths(mime: QMimeData) -> list[str]:
    """Local file paths carried by a drag (file URLs only)."""
    if not mime.hasUrls():
        return []
    return [url.toLocalFile() for url in mime.urls() if url.isLocalFile()]


class MessageEdit(QPlainTextEdit):
    """A plain-text editor where Enter submits and Shift+Enter inserts a line break."""

    submitted = Signal(str)
    filesDropped = Signal(list)  # local paths

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setTabChangesFocus(True)

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

    # File drags are taken whole (as constraint files), never inserted as text.
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


class Composer(QWidget):
    """The text field and its Send/Stop button."""

    sendRequested = Signal(str)
    stopRequested = Signal()
    filesDropped = Signal(list)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.edit = MessageEdit(self)
        self.edit.setObjectName("composer")
        self.edit.setPlaceholderText(
            "Message Corral — Enter to send, Shift+Enter for a new line, drop a grammar to "
            "constrain the reply"
        )
        self.edit.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.edit.setFixedHeight(76)
        self.button = QPushButton("Send", self)
        self.button.setObjectName("sendButton")
        self.button.setDefault(True)
        self.button.setMinimumWidth(80)
        self._busy = False
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.edit, 1)
        layout.addWidget(self.button, 0, Qt.AlignmentFlag.AlignBottom)
        self.edit.submitted.connect(self._submit)
        self.edit.filesDropped.connect(self.filesDropped)
        self.button.clicked.connect(self._clicked)

    @property
    def busy(self) -> bool:
        return self._busy

    def set_busy(self, busy: bool) -> None:
        """While busy the button stops the reply; Enter does not send."""
        self._busy = busy
        self.button.setText("Stop" if busy else "Send")
        self.button.setToolTip("Stop the reply (Esc)" if busy else "Send (Enter)")

    def text(self) -> str:
        return self.edit.toPlainText()

    def _clicked(self) -> None:
        if self._busy:
            self.stopRequested.emit()
        else:
            self._submit(self.edit.toPlainText())

    def _submit(self, text: str) -> None:
        if self._busy or not text.strip():
            return
        self.sendRequested.emit(text)
