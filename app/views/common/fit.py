"""Windows that fit the screen they open on: a dialog asks for the size it likes, and is
given no more than the screen's available area (less a margin), so Close, Load and every
column stay reachable on an 800×500 display. What does not fit scrolls inside the dialog
(its lists and scroll areas do)."""

from __future__ import annotations

from PySide6.QtCore import QRect
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QWidget

MARGIN = 16  # px left free around a capped window, for the title bar's shadow and the Dock


def available_rect(widget: QWidget) -> QRect:
    """The available area of the screen `widget` opens on (its parent's screen when it has
    one, else the primary screen)."""
    parent = widget.parentWidget()
    anchor = parent.window() if parent is not None else widget
    screen = anchor.screen() or QGuiApplication.primaryScreen()
    return screen.availableGeometry()


def fit_to_screen(widget: QWidget) -> None:
    """Shrink `widget` (and its minimum size) to its screen's available area, and centre it
    over its parent or the screen; a window that fits already keeps its size."""
    area = available_rect(widget).adjusted(MARGIN, MARGIN, -MARGIN, -MARGIN)
    width = min(widget.width(), area.width())
    height = min(widget.height(), area.height())
    minimum = widget.minimumSize()
    widget.setMinimumSize(min(minimum.width(), width), min(minimum.height(), height))
    widget.resize(width, height)
    parent = widget.parentWidget()
    centre = parent.window().frameGeometry().center() if parent is not None else area.center()
    frame = QRect(0, 0, width, height)
    frame.moveCenter(centre)
    # inside the screen even when the parent window hangs off its edge
    frame.moveLeft(max(area.left(), min(frame.left(), area.right() - width + 1)))
    frame.moveTop(max(area.top(), min(frame.top(), area.bottom() - height + 1)))
    widget.move(frame.topLeft())
