"""The window by keyboard alone (QTest key events only, the tiny model): start a chat, apply
a schema through the Format control, send, stop, regenerate, switch chats, open a reply's
token view (Inspect) and Preferences, tab through the inspector, and no text box changes
that the keys did not type into (the System prompt box used to take Tab as text)."""

from __future__ import annotations

from app_helpers import TINY_TEMPERATURE, close_window, make_window, set_sampling, wait_idle
from PySide6.QtCore import Qt, QTimer
from PySide6.QtWidgets import (
    QAbstractSpinBox,
    QApplication,
    QLineEdit,
    QPlainTextEdit,
    QTextEdit,
    QWidget,
)

SCHEMA = '{"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}'
CTRL, SHIFT = Qt.KeyboardModifier.ControlModifier, Qt.KeyboardModifier.ShiftModifier


def _boxes(root: QWidget) -> dict[int, tuple[QWidget, str]]:
    """Every editable text box under `root`, with its text now."""
    found: dict[int, tuple[QWidget, str]] = {}
    for box in root.findChildren(QWidget):
        if isinstance(box, QLineEdit) and not box.isReadOnly():
            found[id(box)] = (box, box.text())
        elif isinstance(box, (QPlainTextEdit, QTextEdit)) and not box.isReadOnly():
            found[id(box)] = (box, box.toPlainText())
        elif isinstance(box, QAbstractSpinBox):
            found[id(box)] = (box, box.text())
    return found


def _focus() -> QWidget | None:
    return QApplication.focusWidget()


def _key(qtbot, key: Qt.Key, mods: Qt.KeyboardModifier = Qt.KeyboardModifier.NoModifier):
    target = _focus()
    assert target is not None, "nothing has keyboard focus"
    qtbot.keyClick(target, key, mods)


def _tab_to(qtbot, wanted: QWidget, backwards: bool = False, limit: int = 60) -> None:
    for _ in range(limit):
        if _focus() is wanted:
            return
        _key(qtbot, Qt.Key.Key_Backtab if backwards else Qt.Key.Key_Tab)
    raise AssertionError(f"Tab never reached {wanted!r} (stopped at {_focus()!r})")


def _activated(qtbot, window: QWidget) -> None:
    """What a window manager does for a new dialog, which offscreen Qt leaves undone."""
    qtbot.waitUntil(window.isVisible, timeout=3000)
    window.activateWindow()
    qtbot.waitUntil(lambda: QApplication.activeWindow() is window, timeout=3000)


def _in_popup(qtbot, *keys: Qt.Key) -> None:
    """Press `keys` in the menu that the next key opens (a menu runs its own event loop)."""

    def press() -> None:
        popup = QApplication.activePopupWidget()
        if popup is None:
            QTimer.singleShot(20, press)
            return
        for key in keys:
            qtbot.keyClick(popup, key)

    QTimer.singleShot(20, press)


def test_everything_by_keyboard_and_no_text_box_changes_unasked(qtbot, tmp_path, tiny_engine):
    window = make_window(qtbot, tmp_path, tiny_engine)
    set_sampling(window, temperature=TINY_TEMPERATURE, max_tokens=24)
    edit = window.composer.edit
    qtbot.waitUntil(lambda: _focus() is edit, timeout=3000)  # the composer takes the first keys
    before = _boxes(window)

    qtbot.keyClicks(edit, "first chat")
    _key(qtbot, Qt.Key.Key_Return)
    wait_idle(qtbot, window)
    first = window.controller.conversation_id
    assert _focus() is edit and edit.toPlainText() == ""

    _key(qtbot, Qt.Key.Key_N, CTRL)  # a new chat, and the composer keeps the keys
    second = window.controller.conversation_id
    assert second != first and _focus() is edit
    set_sampling(window, temperature=TINY_TEMPERATURE, max_tokens=24)

    # Format: Tab reaches the button (with a visible name), Space opens its menu, the
    # second entry opens the editor; Tab moves out of the schema box to Apply.
    _tab_to(qtbot, window.constraint_bar.button)
    assert window.constraint_bar.button.accessibleName() or window.constraint_bar.button.text()
    _in_popup(qtbot, Qt.Key.Key_Down, Qt.Key.Key_Down, Qt.Key.Key_Return)
    _key(qtbot, Qt.Key.Key_Space)
    qtbot.waitUntil(lambda: getattr(window.files, "constraint_editor", None) is not None)
    editor = window.files.constraint_editor
    _activated(qtbot, editor)
    assert _focus() is editor.text
    qtbot.keyClicks(editor.text, SCHEMA)
    qtbot.waitUntil(editor.apply_button.isEnabled, timeout=10_000)
    _tab_to(qtbot, editor.apply_button)
    assert editor.text.toPlainText() == SCHEMA  # Tab moved on, it typed nothing
    _key(qtbot, Qt.Key.Key_Space)
    qtbot.waitUntil(lambda: window.controller.conversation.constraint is not None, timeout=5000)
    _activated(qtbot, window)

    # send, stop at once (Esc), then regenerate (Ctrl+R)
    assert _focus() is edit, f"the composer lost focus to {_focus()!r} after the editor"
    qtbot.keyClicks(edit, "a number")
    _key(qtbot, Qt.Key.Key_Return)
    assert window.controller.busy and window.actions_by_name["stop"].isEnabled()
    qtbot.waitUntil(lambda: bool(window.controller.reply_text()), timeout=30_000)
    _key(qtbot, Qt.Key.Key_Escape)
    wait_idle(qtbot, window)
    assert not window.actions_by_name["stop"].isEnabled()
    replies = [m for m in window.controller.path() if m.role == "assistant"]
    assert len(replies) == 1
    assert _focus() is edit
    _key(qtbot, Qt.Key.Key_R, CTRL)
    wait_idle(qtbot, window)
    last = window.chat.message_widgets()[-1]
    assert last.switcher is not None  # ‹ 2/2 ›: the regenerated version beside the first

    # next and previous chat
    _key(qtbot, Qt.Key.Key_BracketRight, CTRL | SHIFT)
    assert window.controller.conversation_id == first and _focus() is edit
    _key(qtbot, Qt.Key.Key_BracketLeft, CTRL | SHIFT)
    assert window.controller.conversation_id == second and _focus() is edit

    # Inspect on the reply: Shift+Tab back from the composer into the reply shows its
    # actions (hidden until hovered or focused) and reaches the button
    last = window.chat.message_widgets()[-1]
    inspect = last.action_buttons["Inspect"]
    _tab_to(qtbot, inspect, backwards=True)
    assert inspect.isVisible()
    _key(qtbot, Qt.Key.Key_Space)
    assert last.token_view is not None and last.token_view.isVisible()

    # the inspector: every control by Tab, and none of them takes a Tab as text
    _key(qtbot, Qt.Key.Key_I, CTRL | SHIFT)
    assert window.inspector.isVisible()
    panel = window.settings_panel
    _tab_to(qtbot, panel.system_prompt)
    for _ in range(3):
        _key(qtbot, Qt.Key.Key_Tab)
        assert _focus() is not panel.system_prompt
    _tab_to(qtbot, panel.system_prompt, backwards=True)
    _key(qtbot, Qt.Key.Key_Tab, CTRL)  # a tab character only where the user asks for one
    assert panel.system_prompt.toPlainText() == "\t"
    _key(qtbot, Qt.Key.Key_Backspace)
    assert panel.system_prompt.toPlainText() == ""

    # Preferences opens and closes by keyboard
    _key(qtbot, Qt.Key.Key_Comma, CTRL)
    dialog = window.preferences.dialog
    _activated(qtbot, dialog)
    for _ in range(12):  # Tab through its first controls
        _key(qtbot, Qt.Key.Key_Tab)
    _key(qtbot, Qt.Key.Key_Escape)
    qtbot.waitUntil(lambda: not dialog.isVisible(), timeout=3000)
    _activated(qtbot, window)

    after = _boxes(window)
    typed = {id(edit)}
    changed = [
        (box.objectName() or type(box).__name__, text, after[key][1])
        for key, (box, text) in before.items()
        if key in after and key not in typed and after[key][1] != text
    ]
    assert changed == []
    for cid in (first, second):
        assert window.store.conversation(cid).settings.system_prompt == ""
    close_window(window)


def _tab_chain(qtbot, start: QWidget, count: int) -> list[QWidget | None]:
    start.setFocus(Qt.FocusReason.TabFocusReason)
    chain: list[QWidget | None] = []
    for _ in range(count):
        _key(qtbot, Qt.Key.Key_Tab)
        chain.append(_focus())
    return chain


def test_a_long_reply_is_one_tab_stop_with_its_switcher_then_actions(qtbot, tmp_path, tiny_engine):
    """Forty paragraphs are one stop (the reply, its text as its accessible description);
    then its ‹ 2/2 › switcher, then Copy … Inspect; Ctrl+C there copies the reply."""
    window = make_window(qtbot, tmp_path, tiny_engine)
    conv = window.controller.conversation
    asked = window.store.add_message(conv.id, None, "user", "Tell me a long story.")
    long = "\n\n".join(f"Paragraph {i} of the story." for i in range(40))
    window.store.add_message(conv.id, asked.id, "assistant", "The short version.")
    reply = window.store.add_message(conv.id, asked.id, "assistant", long, {"logprobs": True})
    window.store.set_active_leaf(conv.id, reply.id)
    window.render_chat()
    _activated(qtbot, window)
    question, answer = window.chat.message_widgets()
    assert len(answer.body.views) == 40 and answer.accessibleDescription() == long
    chain = _tab_chain(qtbot, question, 10)
    # the question's own actions, then the reply: one stop however long it is
    reached = chain.index(answer)
    assert set(chain[:reached]) <= set(question.action_buttons.values())
    switcher = answer.switcher
    actions = answer.action_buttons
    after = [w for w in chain[reached + 1 :] if w is not None]
    assert after[0] is switcher.previous  # ‹ of ‹ 2/2 › (› is off: this is the last)
    assert after.index(switcher.previous) < after.index(actions["Copy"])
    assert after.index(actions["Copy"]) < after.index(actions["Inspect"])
    assert all(not isinstance(w, QTextEdit) for w in after)  # no paragraph in between
    answer.setFocus(Qt.FocusReason.TabFocusReason)
    _key(qtbot, Qt.Key.Key_C, CTRL)
    assert QApplication.clipboard().text() == long
    close_window(window)


def test_preferences_close_comes_after_the_pages_controls(qtbot, tmp_path, tiny_engine):
    window = make_window(qtbot, tmp_path, tiny_engine)
    window.preferences.show()
    dialog = window.preferences.dialog
    _activated(qtbot, dialog)
    close = dialog.buttons.button(dialog.buttons.StandardButton.Close)
    chain = _tab_chain(qtbot, dialog.tabs.tabBar(), 6)
    assert chain[0] is dialog.appearance and close in chain
    assert chain.index(close) > chain.index(dialog.chat_size)
    dialog.close()
    close_window(window)


def test_the_composer_placeholder_shows_whole_at_800_by_500(qtbot, tmp_path, tiny_engine):
    window = make_window(qtbot, tmp_path, tiny_engine)
    window.resize(800, 500)
    qtbot.waitUntil(lambda: window.width() == 800, timeout=3000)
    QApplication.processEvents()
    edit = window.composer.edit
    room = edit.viewport().width() - 2 * edit.document().documentMargin()
    assert edit.fontMetrics().horizontalAdvance(edit.placeholderText()) <= room
    close_window(window)


def test_shift_tab_from_the_composer_reaches_the_chat_not_the_sidebar(qtbot, tmp_path, tiny_engine):
    """Messages rendered after the window was built stand in the Tab order where they are
    seen (before the composer); closing the inspector from inside it gives the keys back
    to the composer, not to the toolbar."""
    window = make_window(qtbot, tmp_path, tiny_engine)
    set_sampling(window, temperature=TINY_TEMPERATURE, max_tokens=6)
    _activated(qtbot, window)
    edit = window.composer.edit
    qtbot.keyClicks(edit, "hello")
    _key(qtbot, Qt.Key.Key_Return)
    wait_idle(qtbot, window)
    edit.setFocus()
    question, answer = window.chat.message_widgets()
    backwards = []
    for _ in range(12):
        _key(qtbot, Qt.Key.Key_Backtab)
        backwards.append(_focus())
    first_outside = next(w for w in backwards if not window.chat.isAncestorOf(w))
    assert window.chat.isAncestorOf(backwards[0])  # the reply's last action, first
    assert answer in backwards and question in backwards
    assert backwards.index(answer) < backwards.index(question)
    assert backwards.index(first_outside) > backwards.index(question)
    # the inspector opened and closed by its shortcut from inside it
    _key(qtbot, Qt.Key.Key_I, CTRL | SHIFT)
    window.settings_panel.system_prompt.setFocus()
    _key(qtbot, Qt.Key.Key_I, CTRL | SHIFT)
    assert not window.shell.inspector_open and _focus() is edit
    close_window(window)
