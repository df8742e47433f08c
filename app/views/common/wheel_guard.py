"""The mouse wheel scrolls the page, not the value under the pointer.

Qt gives combo boxes, spin boxes and sliders the wheel (and focus by it) as soon as the
pointer passes over them: scrolling Preferences changed "New chats start with" and the chat
text size on the way down, saved at once. `guard_wheel(root)`, called on each window and
dialog once built, fixes this for every such control under it: each is given
`StrongFocus` (focus by click or Tab, never by the wheel), and a wheel event over one
without focus goes to the scroll area round it, which scrolls. A control with focus
(clicked or tabbed to) takes the wheel as before. The filter sits on those controls only
(a spin box's text field passes the wheel up to it), so no other event pays for it."""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject, QPointF, Qt
from PySide6.QtGui import QWheelEvent
from PySide6.QtWidgets import (
    QAbstractScrollArea,
    QAbstractSlider,
    QAbstractSpinBox,
    QApplication,
    QComboBox,
    QScrollBar,
    QWidget,
)

GUARDED = (QComboBox, QAbstractSpinBox, QAbstractSlider)


class WheelGuard(QObject):
    """The filter on each guarded control (installed by `guard_wheel`)."""

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if (
            event.type() == QEvent.Type.Wheel
            and isinstance(event, QWheelEvent)
            and isinstance(watched, QWidget)
            and not watched.hasFocus()
        ):
            _scroll_page(watched, event)
            return True
        return False


def _scroll_page(control: QWidget, event: QWheelEvent) -> None:
    """Give `event` to the scroll area round `control` (sent on here: Qt passes a wheel
    event a filter consumed to nobody else)."""
    area = control.parentWidget()
    while area is not None and not isinstance(area, QAbstractScrollArea):
        area = area.parentWidget()
    if area is None:
        event.ignore()
        return
    viewport = area.viewport()
    global_pos = event.globalPosition()
    moved = QWheelEvent(
        QPointF(viewport.mapFromGlobal(global_pos.toPoint())),
        global_pos,
        event.pixelDelta(),
        event.angleDelta(),
        event.buttons(),
        event.modifiers(),
        event.phase(),
        event.inverted(),
        event.source(),
    )
    QApplication.sendEvent(viewport, moved)
    event.accept()


_guard: WheelGuard | None = None


def guard_wheel(root: QWidget) -> int:
    """Guard every combo box, spin box and slider under `root` (and `root`); return how
    many there are. Calling it again on the same window guards only new controls."""
    global _guard
    if _guard is None:
        _guard = WheelGuard(QApplication.instance())
    controls = [root, *root.findChildren(QWidget)]
    found = 0
    for control in controls:
        if not isinstance(control, GUARDED) or isinstance(control, QScrollBar):
            continue
        found += 1
        if control.property("wheelGuarded"):
            continue
        if control.focusPolicy() & Qt.FocusPolicy.WheelFocus == Qt.FocusPolicy.WheelFocus:
            control.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
        control.installEventFilter(_guard)
        control.setProperty("wheelGuarded", True)
    return found
