"""The mouse wheel scrolls the page, not the value under the pointer.

Qt gives combo boxes, spin boxes and sliders the wheel (and focus by it) as soon as the
pointer passes over them: scrolling Preferences changed "New chats start with" and the chat
text size on the way down, saved at once. One filter on the application fixes this for
every such control, in every window, including those built later: each is given
`StrongFocus` (focus by click or Tab, never by the wheel) when it is first polished, and a
wheel event over one without focus goes to the scroll area round it, which scrolls. A
control with focus (clicked or tabbed to) takes the wheel as before."""

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


def _guarded(widget: QObject) -> QWidget | None:
    """The value control `widget` is (or belongs to: a spin box's line edit), else None.
    Scroll bars are sliders that should always take the wheel."""
    current = widget if isinstance(widget, QWidget) else None
    for _ in range(2):  # the control itself, or its direct child (a spin box's editor)
        if current is None:
            return None
        if isinstance(current, GUARDED) and not isinstance(current, QScrollBar):
            return current
        current = current.parentWidget()
    return None


class WheelGuard(QObject):
    """The application-wide filter (install with `install_wheel_guard`)."""

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        kind = event.type()
        if kind == QEvent.Type.Polish and isinstance(watched, GUARDED):
            if not isinstance(watched, QScrollBar) and isinstance(watched, QWidget):
                if watched.focusPolicy() & Qt.FocusPolicy.WheelFocus == Qt.FocusPolicy.WheelFocus:
                    watched.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
        elif kind == QEvent.Type.Wheel:
            control = _guarded(watched)
            if control is not None and not control.hasFocus() and isinstance(event, QWheelEvent):
                _scroll_page(control, event)
                return True
        return False


def _scroll_page(control: QWidget, event: QWheelEvent) -> None:
    """Give `event` to the scroll area round `control` (Qt does not pass a synthesized
    wheel event on to parents, and a real one only when ignored, so it is sent on here)."""
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


def install_wheel_guard() -> WheelGuard:
    """Install the filter on the running QApplication (once; later calls return it)."""
    global _guard
    app = QApplication.instance()
    if _guard is None and app is not None:
        _guard = WheelGuard(app)
        app.installEventFilter(_guard)
    assert _guard is not None, "install_wheel_guard needs a QApplication"
    return _guard
