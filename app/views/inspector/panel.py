"""The inspector on the right of the chat (as in LM Studio and Jan): the open
conversation's settings and its tools, one tab each, scrolling when the window is short."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QScrollArea, QTabWidget, QVBoxLayout, QWidget

from app.views.common import theme
from app.views.common.icons import IconButton

SETTINGS_TAB, TOOLS_TAB = 0, 1


def scrolling(widget: QWidget, parent: QWidget) -> QScrollArea:
    """`widget` in a frameless vertical scroll area, so a short window never clips it."""
    area = QScrollArea(parent)
    area.setWidgetResizable(True)
    area.setFrameShape(QScrollArea.Shape.NoFrame)
    area.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
    area.setFocusPolicy(Qt.FocusPolicy.NoFocus)  # its controls take focus, not the frame
    area.setWidget(widget)
    return area


class Inspector(QWidget):
    """Tabs "Chat" (settings) and "Tools"; `closeRequested` when its ✕ is clicked."""

    closeRequested = Signal()

    def __init__(self, settings: QWidget, tools: QWidget, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("inspector")
        # opaque: its style sheet background is painted, so nothing shows through it
        self.setAttribute(Qt.WidgetAttribute.WA_StyledBackground)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, theme.SPACE.XS, 0, 0)
        self.tabs = QTabWidget(self)
        self.tabs.setDocumentMode(True)
        self.tabs.addTab(scrolling(settings, self), "Chat")
        # The Tools tab scrolls a holder, so what it shows can be swapped (set_tools_widget)
        self._tools_holder = QWidget(self)
        self._tools_layout = QVBoxLayout(self._tools_holder)
        self._tools_layout.setContentsMargins(0, 0, 0, 0)
        self._tools_layout.addWidget(tools)
        self.tabs.addTab(scrolling(self._tools_holder, self), "Tools")
        close = IconButton("close", "Close the panel", self, size=16)
        close.clicked.connect(self.closeRequested)
        self.tabs.setCornerWidget(close, Qt.Corner.TopRightCorner)
        layout.addWidget(self.tabs)

    def set_tools_widget(self, widget: QWidget) -> None:
        """Show `widget` in the Tools tab instead (MCP puts the tools panel and its own
        panel in one splitter there, taking the tools panel out of this tab)."""
        while self._tools_layout.count():
            item = self._tools_layout.takeAt(0)
            old = item.widget() if item is not None else None
            if old is not None and old.parent() is self._tools_holder:
                old.hide()
        self._tools_layout.addWidget(widget)
        widget.show()
