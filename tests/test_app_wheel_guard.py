"""The mouse wheel over Preferences and the inspector scrolls the page: a combo box or spin
box the pointer passes over keeps its value unless the user clicked or tabbed into it."""

from __future__ import annotations

from PySide6.QtCore import QPoint, QPointF, Qt
from PySide6.QtGui import QWheelEvent
from PySide6.QtWidgets import QApplication, QScrollArea, QWidget

from app.preferences import Preferences
from app.tools import builtin_tools
from app.views.common.wheel_guard import guard_wheel
from app.views.inspector.settings_panel import SettingsPanel
from app.views.preferences.dialog import PreferencesDialog

DOWN = -120  # one notch towards the user


def _wheel(widget: QWidget, notches: int = 1) -> None:
    """`notches` wheel notches down over the middle of `widget`, as Qt delivers them."""
    centre = QPointF(widget.rect().center())
    for _ in range(notches):
        event = QWheelEvent(
            centre,
            QPointF(widget.mapToGlobal(widget.rect().center())),
            QPoint(0, 0),
            QPoint(0, DOWN),
            Qt.MouseButton.NoButton,
            Qt.KeyboardModifier.NoModifier,
            Qt.ScrollPhase.NoScrollPhase,
            False,
        )
        QApplication.sendEvent(widget, event)


def _scroll_area(widget: QWidget) -> QScrollArea:
    parent = widget.parentWidget()
    while parent is not None and not isinstance(parent, QScrollArea):
        parent = parent.parentWidget()
    assert parent is not None
    return parent


def _dialog(qtbot) -> PreferencesDialog:
    dialog = PreferencesDialog(
        Preferences(),
        presets={"Programmer": "You write code.", "Teacher": "You explain."},
        builtin_tools=builtin_tools(),
    )
    qtbot.addWidget(dialog)
    assert guard_wheel(dialog) >= 8
    dialog.resize(520, 300)  # short: the page scrolls
    dialog.show()
    qtbot.waitExposed(dialog)
    return dialog


def test_wheel_over_unfocused_controls_in_preferences_changes_nothing_and_scrolls(qtbot):
    dialog = _dialog(qtbot)
    changes: list[object] = []
    dialog.changed.connect(changes.append)
    dialog.follow_model.setChecked(False)  # the sampling boxes enabled
    changes.clear()
    dialog.close_loops.setFocus()  # focus elsewhere, as after a click on a check box
    controls = [
        dialog.new_prompt,
        dialog.chat_size,
        dialog.appearance,
        dialog.temperature,
        dialog.max_tokens,
        dialog.kv_bits,
    ]
    before = [(c.currentIndex() if hasattr(c, "currentIndex") else c.value()) for c in controls]
    bar = _scroll_area(dialog.new_prompt).verticalScrollBar()
    bar.setValue(0)
    for control in controls:
        _wheel(control, 3)  # where Qt brings it (a spin box's text field passes it up)
    after = [(c.currentIndex() if hasattr(c, "currentIndex") else c.value()) for c in controls]
    assert after == before
    assert changes == []  # nothing saved
    assert bar.value() > 0  # the page scrolled instead
    assert all(not c.hasFocus() for c in controls)  # the wheel gave none of them focus


def test_a_focused_control_takes_the_wheel(qtbot):
    dialog = _dialog(qtbot)
    dialog.activateWindow()
    dialog.chat_size.setValue(14)
    dialog.chat_size.setFocus()
    qtbot.waitUntil(dialog.chat_size.hasFocus, timeout=3000)
    before = dialog.chat_size.value()
    _wheel(dialog.chat_size, 2)
    assert dialog.chat_size.value() < before  # it took the notches (down to its minimum)


def test_wheel_over_the_inspectors_settings_changes_nothing(qtbot):
    panel = SettingsPanel()
    qtbot.addWidget(panel)
    guard_wheel(panel)
    panel.show()
    qtbot.waitExposed(panel)
    edits: list[object] = []
    panel.changed.connect(edits.append)
    boxes = [
        panel.preset,
        *(w for w in panel.findChildren(QWidget) if w.inherits("QAbstractSpinBox")),
    ]
    assert len(boxes) > 3
    values = [b.text() if b.inherits("QAbstractSpinBox") else b.currentIndex() for b in boxes]
    for box in boxes:
        _wheel(box, 2)
    assert [
        b.text() if b.inherits("QAbstractSpinBox") else b.currentIndex() for b in boxes
    ] == values
    assert edits == []
    assert all(b.focusPolicy() == Qt.FocusPolicy.StrongFocus for b in boxes)
