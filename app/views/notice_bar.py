"""A dismissible message strip above the chat for errors and confirmations."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QToolButton, QWidget


class NoticeBar(QFrame):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("noticeBar")
        layout = QHBoxLayout(self)
        layout.setContentsMargins(12, 6, 6, 6)
        self.label = QLabel(self)
        self.label.setWordWrap(True)
        self.label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        close = QToolButton(self, autoRaise=True)
        close.setText("✕")
        close.setToolTip("Dismiss")
        layout.addWidget(self.label, 1)
        layout.addWidget(close)
        close.clicked.connect(self.hide)
        self.hide()

    def show_message(self, text: str, kind: str = "info") -> None:
        self.setProperty("kind", kind)
        for widget in (self, self.label):  # re-apply the style sheet for the new kind
            widget.style().unpolish(widget)
            widget.style().polish(widget)
        self.label.setText(text)
        self.setVisible(bool(text))

    def text(self) -> str:
        return self.label.text() if self.isVisible() else ""
