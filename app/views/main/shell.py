"""The window's body: the conversations sidebar on the left, the chat in the middle, the
inspector (chat settings, tools) on the right, as in LM Studio and Jan.

The chat always keeps at least CHAT_MIN_WIDTH: a side panel sits beside it while there is
room, and floats over it (with a dimmed backdrop; a click outside closes it) when there is
not; a floating inspector ends above the composer's area (`keep_clear`), so Send, Format
and Tools stay visible and clickable. So every width from 800 px up, and narrower, shows
a usable chat with either panel.
"""

from __future__ import annotations

from enum import StrEnum

from PySide6.QtCore import QEvent, QObject, QPoint, QRect, Signal
from PySide6.QtGui import QMouseEvent, QResizeEvent
from PySide6.QtWidgets import QWidget

SIDEBAR_WIDTH = 248
INSPECTOR_WIDTH = 330
CHAT_MIN_WIDTH = 440
OVERLAY_MAX_SHARE = 0.86  # an overlay never covers more of the window than this
OVERLAY_GAP = 4  # between a floating inspector and the composer's area under it
OVERLAY_MIN_HEIGHT = 160  # a floating inspector this short at least, whatever is under it


class Placement(StrEnum):
    HIDDEN = "hidden"
    DOCKED = "docked"
    OVERLAY = "overlay"


class _Scrim(QWidget):
    """The dimmed backdrop under an overlay panel; a click on it closes the panel."""

    clicked = Signal()

    def __init__(self, parent: QWidget) -> None:
        super().__init__(parent)
        self.setObjectName("scrim")
        self.setAutoFillBackground(False)
        from PySide6.QtCore import Qt

        self.setAttribute(Qt.WidgetAttribute.WA_StyledBackground)

    def mousePressEvent(self, event: QMouseEvent) -> None:
        self.clicked.emit()
        event.accept()


class Shell(QWidget):
    """Lays out sidebar | chat | inspector; `panelsChanged` fires when either opens or closes."""

    panelsChanged = Signal()

    def __init__(
        self, sidebar: QWidget, chat: QWidget, inspector: QWidget, parent: QWidget | None = None
    ) -> None:
        super().__init__(parent)
        self.setObjectName("shell")
        self.sidebar, self.chat, self.inspector = sidebar, chat, inspector
        for widget in (chat, sidebar, inspector):
            widget.setParent(self)
        self.scrim = _Scrim(self)
        self.scrim.clicked.connect(self.close_overlays)
        self.scrim.hide()
        self._sidebar_open = True
        self._inspector_open = False
        self.placements = {"sidebar": Placement.DOCKED, "inspector": Placement.HIDDEN}
        self._keep_clear: QWidget | None = None
        self.setMinimumSize(320, 240)

    def keep_clear(self, widget: QWidget) -> None:
        """A floating inspector ends above `widget` (inside the chat: the composer's area),
        so its controls (Send, Format, Tools) stay visible and clickable."""
        self._keep_clear = widget
        widget.installEventFilter(self)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if watched is self._keep_clear and event.type() in (
            QEvent.Type.Move,
            QEvent.Type.Resize,
            QEvent.Type.Show,
        ):
            if self.placements["inspector"] == Placement.OVERLAY:
                self._arrange()
        return False

    def _clear_height(self, height: int) -> int:
        """How tall the floating inspector may be: down to just above the kept-clear widget."""
        widget = self._keep_clear
        if widget is None or not widget.isVisible():
            return height
        top = widget.mapTo(self, QPoint(0, 0)).y() - OVERLAY_GAP
        return max(min(height, top), min(height, OVERLAY_MIN_HEIGHT))

    # ---- what the user asked for ----

    @property
    def sidebar_open(self) -> bool:
        return self._sidebar_open

    @property
    def inspector_open(self) -> bool:
        return self._inspector_open

    def set_sidebar_open(self, open_: bool) -> None:
        self._sidebar_open = open_
        if open_ and self._placement_if_opened("sidebar") == Placement.OVERLAY:
            self._inspector_open = self._inspector_open and self._docks("inspector")
        self._arrange()

    def set_inspector_open(self, open_: bool) -> None:
        self._inspector_open = open_
        if open_ and self._placement_if_opened("inspector") == Placement.OVERLAY:
            self._sidebar_open = self._sidebar_open and self._docks("sidebar")
        self._arrange()

    def close_overlays(self) -> None:
        if self.placements["sidebar"] == Placement.OVERLAY:
            self._sidebar_open = False
        if self.placements["inspector"] == Placement.OVERLAY:
            self._inspector_open = False
        self._arrange()

    # ---- layout ----

    def _placement_if_opened(self, panel: str) -> Placement:
        width = self.width()
        other = 0
        if panel == "inspector" and self._sidebar_open and self._sidebar_fits(width):
            other = SIDEBAR_WIDTH
        own = INSPECTOR_WIDTH if panel == "inspector" else SIDEBAR_WIDTH
        return Placement.DOCKED if width - other - own >= CHAT_MIN_WIDTH else Placement.OVERLAY

    @staticmethod
    def _sidebar_fits(width: int) -> bool:
        return width - SIDEBAR_WIDTH >= CHAT_MIN_WIDTH

    def _docks(self, panel: str) -> bool:
        return self.placements[panel] == Placement.DOCKED

    def _arrange(self) -> None:
        width, height = self.width(), self.height()
        sidebar = Placement.HIDDEN
        if self._sidebar_open:
            sidebar = Placement.DOCKED if self._sidebar_fits(width) else Placement.OVERLAY
        inspector = Placement.HIDDEN
        if self._inspector_open:
            left = SIDEBAR_WIDTH if sidebar == Placement.DOCKED else 0
            fits = width - left - INSPECTOR_WIDTH >= CHAT_MIN_WIDTH
            inspector = Placement.DOCKED if fits else Placement.OVERLAY
        if sidebar == Placement.OVERLAY and inspector == Placement.OVERLAY:
            sidebar = Placement.HIDDEN  # one overlay at a time: the one asked for last wins
            self._sidebar_open = False
        changed = self.placements != {"sidebar": sidebar, "inspector": inspector}
        self.placements = {"sidebar": sidebar, "inspector": inspector}

        left = SIDEBAR_WIDTH if sidebar == Placement.DOCKED else 0
        right = INSPECTOR_WIDTH if inspector == Placement.DOCKED else 0
        self.chat.setGeometry(QRect(left, 0, max(0, width - left - right), height))
        cap = int(width * OVERLAY_MAX_SHARE)
        self._place(self.sidebar, sidebar, QRect(0, 0, min(SIDEBAR_WIDTH, cap), height))
        inspector_width = (
            INSPECTOR_WIDTH if inspector == Placement.DOCKED else min(INSPECTOR_WIDTH, cap)
        )
        inspector_height = height if inspector == Placement.DOCKED else self._clear_height(height)
        self._place(
            self.inspector,
            inspector,
            QRect(width - inspector_width, 0, inspector_width, inspector_height),
        )
        overlay = Placement.OVERLAY in (sidebar, inspector)
        # Over the composer there is no backdrop either: a click there reaches it.
        scrim_height = inspector_height if inspector == Placement.OVERLAY else height
        self.scrim.setGeometry(QRect(0, 0, width, scrim_height))
        self.scrim.setVisible(overlay)
        if overlay:
            self.scrim.raise_()
            for widget, placement in ((self.sidebar, sidebar), (self.inspector, inspector)):
                if placement == Placement.OVERLAY:
                    widget.raise_()
        if changed:
            self.panelsChanged.emit()

    @staticmethod
    def _place(widget: QWidget, placement: Placement, rect: QRect) -> None:
        widget.setProperty("overlay", placement == Placement.OVERLAY)
        widget.style().unpolish(widget)
        widget.style().polish(widget)
        widget.setVisible(placement != Placement.HIDDEN)
        if placement != Placement.HIDDEN:
            widget.setGeometry(rect)

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        self._arrange()
