"""The Edit menu acts on the text box with focus (Select All, Cut, Paste, Undo in the
composer, and nothing else changes), and the View toggles show check marks that follow the
panels."""

from __future__ import annotations

from app_helpers import close_window, make_window
from PySide6.QtWidgets import QApplication


def test_edit_menu_acts_on_the_focused_text_box(qtbot, tmp_path, tiny_engine):
    window = make_window(qtbot, tmp_path, tiny_engine)
    acts = window.actions_by_name
    edit = window.composer.edit
    prompt_before = window.settings_panel.system_prompt.toPlainText()
    edit.setFocus()
    qtbot.waitUntil(edit.hasFocus)
    qtbot.keyClicks(edit, "hello menus")
    acts["edit_selectAll"].trigger()
    assert edit.textCursor().selectedText() == "hello menus"
    acts["edit_cut"].trigger()
    assert edit.toPlainText() == ""
    assert QApplication.clipboard().text() == "hello menus"
    acts["edit_paste"].trigger()
    acts["edit_paste"].trigger()
    assert edit.toPlainText() == "hello menushello menus"
    acts["edit_undo"].trigger()
    assert edit.toPlainText() == "hello menus"
    acts["edit_selectAll"].trigger()
    acts["edit_copy"].trigger()
    assert QApplication.clipboard().text() == "hello menus"
    assert window.settings_panel.system_prompt.toPlainText() == prompt_before
    close_window(window)


def test_view_toggles_show_check_marks(qtbot, tmp_path, tiny_engine):
    window = make_window(qtbot, tmp_path, tiny_engine)  # 1180 wide: panels dock
    acts = window.actions_by_name
    for name in ("sidebar", "settings", "tools"):
        assert acts[name].isCheckable(), name
    assert window.server.log_dock.toggleViewAction().isCheckable()
    assert acts["sidebar"].isChecked() and window.sidebar.isVisible()
    assert not acts["settings"].isChecked() and not acts["tools"].isChecked()

    acts["settings"].trigger()
    assert window.shell.inspector_open
    assert acts["settings"].isChecked() and not acts["tools"].isChecked()
    acts["tools"].trigger()  # the other tab: the marks move with it
    assert window.shell.inspector_open
    assert acts["tools"].isChecked() and not acts["settings"].isChecked()
    acts["tools"].trigger()  # the open tab again: the panel closes
    assert not window.shell.inspector_open
    assert not acts["tools"].isChecked() and not acts["settings"].isChecked()

    acts["sidebar"].trigger()
    assert not window.sidebar.isVisible() and not acts["sidebar"].isChecked()
    acts["sidebar"].trigger()
    assert window.sidebar.isVisible() and acts["sidebar"].isChecked()
    close_window(window)


def test_keyboard_shortcuts_lists_one_native_shortcut_per_action(qtbot, tmp_path, tiny_engine):
    from PySide6.QtGui import QKeySequence

    window = make_window(qtbot, tmp_path, tiny_engine)
    window.keys.show_shortcuts()
    table = window.keys.shortcuts_dialog.table
    rows = {
        table.topLevelItem(i).text(1): table.topLevelItem(i).text(2)
        for i in range(table.topLevelItemCount())
    }
    undo = QKeySequence(QKeySequence.StandardKey.Undo).toString(
        QKeySequence.SequenceFormat.NativeText
    )
    assert rows["Undo"] == undo  # not "Ctrl+Z, F14, Undo"
    menu_rows = [
        table.topLevelItem(i).text(2)
        for i in range(table.topLevelItemCount())
        if table.topLevelItem(i).text(0).split(" → ")[0] in ("File", "Edit", "Chat", "View", "Help")
    ]
    assert menu_rows and all(", " not in keys for keys in menu_rows)
    assert rows["Write 3 Versions"] == QKeySequence("Ctrl+Shift+R").toString(
        QKeySequence.SequenceFormat.NativeText
    )
    window.keys.shortcuts_dialog.reject()
    close_window(window)
