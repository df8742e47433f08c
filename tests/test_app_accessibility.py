"""Every window's widgets as assistive technology sees them (through QAccessible): each
interactive widget has a name, and each control that takes focus shows it (its picture, or
its parent's, differs with focus), in light and dark. Walked: the main window with both
panels open and a reply's token view, Preferences, the model library, the shortcut list."""

from __future__ import annotations

import pytest
import shiboken6
from app_helpers import TINY_TEMPERATURE, close_window, make_window, set_sampling, wait_idle
from PySide6.QtCore import Qt
from PySide6.QtGui import QAccessible, QImage
from PySide6.QtWidgets import (
    QAbstractButton,
    QAbstractItemView,
    QAbstractSpinBox,
    QApplication,
    QComboBox,
    QLineEdit,
    QWidget,
)

INTERACTIVE = (QAbstractButton, QLineEdit, QComboBox, QAbstractSpinBox, QAbstractItemView)


def _walk(widget: QWidget) -> list[tuple[QWidget, str]]:
    """(widget, accessible name) of every widget under `widget` in its accessibility tree."""
    seen: list[tuple[QWidget, str]] = []
    root = QAccessible.queryAccessibleInterface(widget)
    stack = [root] if root is not None else []
    visited: set[int] = set()
    while stack:
        iface = stack.pop()
        if iface is None or not iface.isValid():
            continue
        obj = iface.object()
        if isinstance(obj, QWidget):
            if id(obj) in visited:
                continue
            visited.add(id(obj))
            seen.append((obj, iface.text(QAccessible.Text.Name)))
        stack.extend(iface.child(i) for i in range(iface.childCount()))
    return seen


def _unnamed(window: QWidget) -> list[str]:
    return [
        f"{type(w).__name__}({w.objectName()} in {type(w.parentWidget()).__name__})"
        for w, name in _walk(window)
        if isinstance(w, INTERACTIVE) and w.isVisible() and not name.strip()
    ]


def _picture(widget: QWidget) -> QImage:
    QApplication.processEvents()
    return widget.grab().toImage()


def _no_focus_shown(qtbot, window: QWidget) -> list[str]:
    """The visible controls that take Tab focus and look the same with it as without."""
    window.activateWindow()
    qtbot.waitUntil(lambda: QApplication.activeWindow() is window, timeout=3000)
    missing = []
    for widget, _name in _walk(window):
        if not shiboken6.isValid(widget):
            continue  # the chat re-rendered while the walk went on (events are processed)
        focusable = widget.focusPolicy() & Qt.FocusPolicy.TabFocus
        if not focusable or not widget.isVisible() or not widget.isEnabled():
            continue
        if widget.focusProxy() is not None:
            continue  # its proxy takes the focus and is checked itself
        holder = widget.parentWidget() or widget
        window.setFocus()  # somewhere else: the window itself takes no ring
        QApplication.focusWidget() and QApplication.focusWidget().clearFocus()
        plain = (_picture(widget), _picture(holder))
        widget.setFocus(Qt.FocusReason.TabFocusReason)
        if not widget.hasFocus():
            continue
        focused = (_picture(widget), _picture(holder))
        if plain[0] == focused[0] and plain[1] == focused[1]:
            missing.append(f"{type(widget).__name__}({widget.objectName()})")
        widget.clearFocus()
    return missing


@pytest.mark.parametrize("appearance", ["light", "dark"])
def test_every_control_is_named_and_shows_focus(qtbot, tmp_path, tiny_engine, appearance):
    window = make_window(qtbot, tmp_path, tiny_engine)
    from dataclasses import replace

    window.core.set_preferences(replace(window.prefs, appearance=appearance))
    set_sampling(window, temperature=TINY_TEMPERATURE, max_tokens=12)
    window.composer.edit.setPlainText("hello")
    qtbot.keyClick(window.composer.edit, Qt.Key.Key_Return)
    wait_idle(qtbot, window)
    window.resize(1400, 860)
    window.show_settings()
    reply = window.chat.message_widgets()[-1]
    reply.action_buttons["Inspect"].click()
    assert reply.token_view is not None and reply.token_view.isVisible()

    window.preferences.show()
    window.library.show()
    window.keys.show_shortcuts()
    windows = {
        "main window": window,
        "Preferences": window.preferences.dialog,
        "Model library": window.library.library_window,
        "Keyboard shortcuts": window.keys.shortcuts_dialog,
    }
    report = {}
    checked = 0
    for title, shown in windows.items():
        qtbot.waitUntil(shown.isVisible, timeout=3000)
        # Preferences is in pages: every page is checked, each while it is shown
        pages = range(shown.tabs.count()) if title == "Preferences" else [None]
        report[title] = {"unnamed": [], "no focus shown": []}
        for page in pages:
            if page is not None:
                shown.tabs.setCurrentIndex(page)
                QApplication.processEvents()
            report[title]["unnamed"] += _unnamed(shown)
            report[title]["no focus shown"] += _no_focus_shown(qtbot, shown)
            checked += sum(isinstance(w, INTERACTIVE) and w.isVisible() for w, _ in _walk(shown))
    print(f"{appearance}: {checked} interactive widgets checked; {report}")
    assert checked > 60
    assert {t: r for t, r in report.items() if r["unnamed"] or r["no focus shown"]} == {}
    for title in ("Preferences", "Model library", "Keyboard shortcuts"):
        windows[title].close()
    close_window(window)
