"""Input that never surprises (pytest-qt, the tiny model): focus comes back to the composer
after sending, editing, a tool card's Run it and closing dialogs (never the sidebar's New
Chat button); New Chat reuses an empty chat; Delete Chat says what is lost and defaults to
Cancel; Ctrl+O on an mcpServers file offers the MCP import; the composer's Tab order; Space
on Send; the edit box's caret; the chat list holding still under the pointer."""

from __future__ import annotations

import json

from app_helpers import TINY_TEMPERATURE, close_window, make_window, set_sampling, wait_idle
from PySide6.QtCore import QEvent, Qt
from PySide6.QtGui import QKeySequence
from PySide6.QtWidgets import QApplication, QFileDialog, QMessageBox, QWidget

CTRL = Qt.KeyboardModifier.ControlModifier


def _focus() -> QWidget | None:
    return QApplication.focusWidget()


def _window(qtbot, tmp_path, tiny_engine, max_tokens: int = 4):
    window = make_window(qtbot, tmp_path, tiny_engine)
    set_sampling(window, temperature=TINY_TEMPERATURE, max_tokens=max_tokens)
    qtbot.waitUntil(lambda: _focus() is window.composer.edit, timeout=3000)
    return window


def _add_exchange(window, question: str = "Hello there", answer: str = "Hi."):
    conv = window.controller.conversation
    asked = window.store.add_message(conv.id, None, "user", question)
    replied = window.store.add_message(conv.id, asked.id, "assistant", answer)
    window.store.set_active_leaf(conv.id, replied.id)
    window.render_chat()
    return asked, replied


def test_focus_is_the_composer_after_send_and_after_an_edit(qtbot, tmp_path, tiny_engine):
    window = _window(qtbot, tmp_path, tiny_engine)
    window.composer.button.setFocus()  # sent by the button, not Enter
    window.composer.edit.setPlainText("First question")
    window.composer.button.click()
    assert _focus() is window.composer.edit
    wait_idle(qtbot, window)
    assert _focus() is window.composer.edit

    question = window.chat.message_widgets()[0]
    question.start_edit()
    editor = question.editor
    assert _focus() is editor
    assert editor.textCursor().position() == len("First question")  # caret at the end
    qtbot.keyClicks(editor, " again")
    assert editor.toPlainText() == "First question again"
    qtbot.keyClick(editor, Qt.Key.Key_Return)  # sends the edited version
    assert _focus() is window.composer.edit
    assert _focus() is not window.sidebar.new_button
    wait_idle(qtbot, window)
    assert _focus() is window.composer.edit
    close_window(window)


def test_focus_is_the_composer_after_run_it(qtbot, tmp_path, tiny_engine):
    window = _window(qtbot, tmp_path, tiny_engine)
    conv = window.controller.conversation
    question = window.store.add_message(conv.id, None, "user", "What is 6 times 7?")
    call = {"id": "call_0", "name": "calculator", "arguments": {"expression": "6 * 7"}}
    window.store.add_message(conv.id, question.id, "assistant", "", {"tool_calls": [call]})
    window.render_chat()
    run = window.chat.message_widgets()[-1].cards[0].run_button
    run.setFocus()
    qtbot.keyClick(run, Qt.Key.Key_Space)  # pressed from the keyboard
    assert _focus() is window.composer.edit
    qtbot.waitUntil(lambda: len(window.controller.path()) > 2, timeout=30_000)  # the result
    wait_idle(qtbot, window)
    assert _focus() is window.composer.edit
    close_window(window)


def test_focus_is_the_composer_after_preferences_and_shortcuts_close(qtbot, tmp_path, tiny_engine):
    window = _window(qtbot, tmp_path, tiny_engine)
    window.preferences.show()
    dialog = window.preferences.dialog
    dialog.chat_size.setFocus()
    dialog.close()
    qtbot.waitUntil(lambda: _focus() is window.composer.edit, timeout=3000)
    window.keys.show_shortcuts()
    window.keys.shortcuts_dialog.table.setFocus()
    window.keys.shortcuts_dialog.reject()
    qtbot.waitUntil(lambda: _focus() is window.composer.edit, timeout=3000)
    close_window(window)


def test_new_chat_reuses_an_empty_chat(qtbot, tmp_path, tiny_engine):
    window = _window(qtbot, tmp_path, tiny_engine)
    _add_exchange(window)
    used = window.controller.conversation_id
    window.new_chat()
    empty = window.controller.conversation_id
    assert empty != used
    window.controller.open_conversation(used)  # back to the chat with messages
    window.new_chat()  # and New Chat again: the empty one, not another
    assert window.controller.conversation_id == empty
    assert len(window.store.conversations()) == 2
    assert _focus() is window.composer.edit
    close_window(window)


def test_delete_chat_says_what_is_lost_and_defaults_to_cancel(qtbot, tmp_path, tiny_engine):
    window = _window(qtbot, tmp_path, tiny_engine)
    _add_exchange(window)
    window.controller.rename_conversation(window.controller.conversation_id, "Trip plans")
    window.delete_chat()
    box = window.sidebar.delete_box
    qtbot.waitUntil(box.isVisible, timeout=3000)
    assert "Trip plans" in box.text()
    assert "cannot be undone" in box.informativeText()
    assert box.defaultButton() is box.button(QMessageBox.StandardButton.Cancel)
    assert box.escapeButton() is box.button(QMessageBox.StandardButton.Cancel)
    qtbot.keyClick(box, Qt.Key.Key_Return)  # Enter answers the default: Cancel
    qtbot.waitUntil(lambda: not box.isVisible(), timeout=3000)
    assert [c.title for c in window.store.conversations()] == ["Trip plans"]
    assert _focus() is window.composer.edit

    window.delete_chat()
    box = window.sidebar.delete_box
    qtbot.waitUntil(box.isVisible, timeout=3000)
    delete = next(b for b in box.buttons() if b.text() == "Delete")
    delete.click()
    qtbot.waitUntil(lambda: "Trip plans" not in [c.title for c in window.store.conversations()])
    close_window(window)


def test_ctrl_o_on_an_mcp_file_offers_the_import_not_a_schema(
    qtbot, tmp_path, tiny_engine, monkeypatch
):
    window = _window(qtbot, tmp_path, tiny_engine)
    mcp_file = tmp_path / "claude_desktop_config.json"
    mcp_file.write_text(json.dumps({"mcpServers": {"time": {"command": "mcp-server-time"}}}))
    # the OS file chooser cannot be driven in a test: it answers with the file
    monkeypatch.setattr(QFileDialog, "getOpenFileName", lambda *a, **k: (str(mcp_file), ""))
    assert QKeySequence("Ctrl+O") in window.actions_by_name["constrain_file"].shortcuts()
    qtbot.keyClick(window.composer.edit, Qt.Key.Key_O, CTRL)
    panel = window.mcp_panel
    qtbot.waitUntil(lambda: getattr(panel, "consent_dialog", None) is not None, timeout=5000)
    assert panel.consent_dialog.isVisible()
    assert window.controller.conversation.constraint is None  # not applied as a schema
    panel.consent_dialog.reject()
    assert window.controller.conversation.constraint is None
    close_window(window)


def test_tab_goes_through_the_composer_then_send_and_reaches_the_welcome(
    qtbot, tmp_path, tiny_engine
):
    window = _window(qtbot, tmp_path, tiny_engine)
    order: list[QWidget] = []
    for _ in range(20):
        focus = _focus()
        assert focus is not None
        order.append(focus)
        qtbot.keyClick(focus, Qt.Key.Key_Tab)
    first = order[: order.index(window.composer.button) + 1]
    assert first[0] is window.composer.edit
    assert window.constraint_bar.button in first and window.tools_chip in first
    assert first.index(window.constraint_bar.button) < first.index(window.tools_chip)
    cards = window.chat.welcome.buttons
    assert all(card in order for card in cards)
    assert window.chat.welcome.drop_target in order

    card = cards[0]
    card.setFocus()
    picked: list[object] = []
    window.chat.welcome.examplePicked.disconnect()
    window.chat.welcome.examplePicked.connect(picked.append)
    qtbot.keyClick(card, Qt.Key.Key_Return)
    assert picked == [card.example]
    close_window(window)


def test_space_on_send_types_a_space_and_does_not_send(qtbot, tmp_path, tiny_engine):
    window = _window(qtbot, tmp_path, tiny_engine)
    window.composer.edit.setPlainText("half a")
    sent: list[str] = []
    window.composer.sendRequested.connect(sent.append)
    send = window.composer.button
    send.setFocus()
    qtbot.keyClick(send, Qt.Key.Key_Space)
    assert sent == []
    assert _focus() is window.composer.edit
    assert window.composer.edit.toPlainText() == "half a "
    qtbot.keyClicks(window.composer.edit, "thought")
    send.setFocus()
    qtbot.keyClick(send, Qt.Key.Key_Return)  # Enter on Send sends
    assert sent == ["half a thought"]
    wait_idle(qtbot, window)
    close_window(window)


def test_chat_list_holds_still_under_the_pointer(qtbot, tmp_path, tiny_engine):
    window = _window(qtbot, tmp_path, tiny_engine)
    for title in ("Oldest", "Middle", "Newest"):
        _add_exchange(window, question=title)
        window.controller.rename_conversation(window.controller.conversation_id, title)
        window.controller.new_conversation()
    window.refresh_sidebar()
    titles = [t for t in window.sidebar.titles() if t != "New chat"]
    assert titles == ["Newest", "Middle", "Oldest"]
    QApplication.sendEvent(window.sidebar.list, QEvent(QEvent.Type.Enter))
    oldest = next(c for c in window.store.conversations() if c.title == "Oldest")
    # a reply lands in the oldest chat in the background: it becomes the newest
    window.store.add_message(oldest.id, oldest.active_leaf_id, "user", "More")
    window.refresh_sidebar()
    assert [t for t in window.sidebar.titles() if t != "New chat"] == titles  # still
    QApplication.sendEvent(window.sidebar.list, QEvent(QEvent.Type.Leave))
    assert [t for t in window.sidebar.titles() if t != "New chat"][0] == "Oldest"  # now
    close_window(window)
