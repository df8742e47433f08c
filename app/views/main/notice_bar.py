"""Strips above and below the chat: the dismissible notice for errors and confirmations
(with an optional action, such as loading the previous model again), and the loading strip
that says what the model is doing while it loads."""

from __future__ import annotations

import logging
from collections.abc import Callable

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QProgressBar,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from app.views.common import theme
from app.views.common.announce import announce
from app.views.common.icons import IconButton

log = logging.getLogger("app.views.main.notice_bar")


class NoticeBar(QFrame):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("noticeBar")
        layout = QHBoxLayout(self)
        layout.setContentsMargins(theme.SPACE.L, theme.SPACE.S, theme.SPACE.S, theme.SPACE.S)
        layout.setSpacing(theme.SPACE.S)
        self.label = QLabel(self)
        self.label.setObjectName("noticeText")
        self.label.setWordWrap(True)
        self.label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.action = QPushButton(self)
        self.action.setObjectName("noteAction")
        self.action.hide()
        self.second_action = QPushButton(self)  # an alternative way out, when there is one
        self.second_action.setObjectName("noteAction")
        self.second_action.hide()
        close = IconButton("close", "Dismiss", self, size=16)
        layout.addWidget(self.label, 1)
        layout.addWidget(self.action)
        layout.addWidget(self.second_action)
        layout.addWidget(close)
        close.clicked.connect(self.hide)
        self.action.clicked.connect(self._act)
        self.second_action.clicked.connect(self._act_second)
        self._callback: Callable[[], None] | None = None
        self._second_callback: Callable[[], None] | None = None
        self.hide()

    def show_message(
        self,
        text: str,
        kind: str = "info",
        action: str = "",
        callback: Callable[[], None] | None = None,
        second_action: str = "",
        second_callback: Callable[[], None] | None = None,
    ) -> None:
        if kind == "error" and text:
            log.error("shown to the user: %s", text)  # every error the window shows
            announce(self, text, assertive=True)  # spoken at once: it is not in focus
        self.setProperty("kind", kind)
        for widget in (self, self.label):  # re-apply the style sheet for the new kind
            widget.style().unpolish(widget)
            widget.style().polish(widget)
        self.label.setText(text)
        self._callback = callback
        self.action.setText(action)
        self.action.setVisible(bool(action and callback))
        self._second_callback = second_callback
        self.second_action.setText(second_action)
        self.second_action.setVisible(bool(second_action and second_callback))
        self.setVisible(bool(text))

    def _act(self) -> None:
        callback = self._callback
        self.hide()
        if callback is not None:
            callback()

    def _act_second(self) -> None:
        callback = self._second_callback
        self.hide()
        if callback is not None:
            callback()

    def text(self) -> str:
        return self.label.text() if self.isVisible() else ""


_IMPORT_STAGES = ("Reading GGUF", "Converting weights", "Writing weights", "Imported")


class LoadingStrip(QWidget):
    """ "Loading SmolLM2-135M-Instruct… 40%": shown above the composer while a model loads."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("loadingStrip")
        layout = QVBoxLayout(self)
        layout.setContentsMargins(theme.SPACE.XS, 0, theme.SPACE.XS, 0)
        layout.setSpacing(theme.SPACE.XS)
        self.label = QLabel(self)
        self.label.setObjectName("loadingStrip")
        self.label.setWordWrap(True)
        self.bar = QProgressBar(self)
        self.bar.setRange(0, 100)
        self.bar.setTextVisible(False)
        self.bar.setFixedHeight(4)
        layout.addWidget(self.label)
        layout.addWidget(self.bar)
        self.name = ""
        self.hide()

    def start(self, name: str) -> None:
        self.name = name
        self.progress("", 0.0)
        self.show()

    def progress(self, stage: str, fraction: float) -> None:
        percent = int(round(fraction * 100))
        self.bar.setValue(percent)
        if stage in _IMPORT_STAGES:
            what = f"Importing {self.name} — only on its first use"
        elif stage.startswith("Dequantizing"):
            what = f"Preparing {self.name} for this computer"
        else:
            what = f"Loading {self.name}"
        done = f" {percent}%." if percent > 0 else ""  # "Loading X… 40%." / "Loading X…"
        self.label.setText(
            f"{what}…{done} You can type already: your message is sent when it is ready."
        )

    def finish(self) -> None:
        self.hide()
