"""The inspector on the right of the chat (as in LM Studio and Jan): the open
conversation's settings and its tools, one tab each, scrolling when the window is short."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QScrollArea, QTabWidget, QVBoxLayout, QWidget

from app.views import theme
from app.views.icons import IconButton

SETTINGS_TAB, TOOLS_TAB = 0, 1


def scrolling(widget: QWidget, parent: QWidget) -> QScrollArea:
    """`widget` in a frameless vertical scroll area, so a short window never clips it."""
    area = QScrollArea(parent)
    area.setWidgetResizable(True)
    area.setFrameShape(QScrollArea.Shape.NoFrame)
    area.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
    area.setWidget(widget)
    return area


class Inspector(QWidget):
    """Tabs "Chat" (settings) and "Tools"; `closeRequested` when its ✕ is clicked."""

    closeRequested = Signal()

    def __init__(self, settings: QWidget, tools: QWidget, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("inspector")
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, theme.SPACE.XS, 0, 0)
        self.tabs = QTabWidget(self)
        self.tabs.setDocumentMode(True)
        self.tabs.addTab(scrolling(settings, self), "Chat")
        self.tabs.addTab(scrolling(tools, self), "Tools")
        close = IconButton("close", "Close the panel", self, size=16)
        close.clicked.connect(self.closeRequested)
        self.tabs.setCornerWidget(close, Qt.Corner.TopRightCorner)
        layout.addWidget(self.tabs)
