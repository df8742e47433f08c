"""A reply's token view in the window (tiny random model, which wants to repeat its last
token: a JSON schema overrides it and forces tokens): a reply's Inspect action shows its
tokens coloured by probability with the summary line, a token's alternatives on hover and
click; the tokens are stored with the message (an old database gains the table), so the
token view opens after a restart and the JSON export carries them."""

from __future__ import annotations

import json
import sqlite3

from app_helpers import close_window, make_window, screenshot, set_sampling, wait_idle
from PySide6.QtCore import QEvent, QPoint, QPointF, Qt
from PySide6.QtGui import QMouseEvent, QTextCursor
from PySide6.QtWidgets import QApplication

from app.store import Store
from app.store.db import SCHEMA_VERSION, _v1_initial
from app.store.export import to_json
from engine.constraints.sources import json_schema_constraint
from engine.types import TokenAlternative, TokenLogprob

SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string", "maxLength": 6}, "age": {"type": "integer"}},
    "required": ["name", "age"],
    "additionalProperties": False,
}


def _ask(qtbot, window, text: str) -> None:
    window.composer.edit.setPlainText(text)
    qtbot.keyClick(window.composer.edit, Qt.Key.Key_Return)
    wait_idle(qtbot, window)


def _token_point(view, index: int) -> QPoint:
    """The middle of token `index` of a TokenView as drawn, in its viewport."""

    def shown(token: TokenLogprob) -> int:
        return len(token.text.replace("\n", "↵\n")) or 1  # as TokenView writes it

    start = sum(shown(t) for t in view.tokens[:index])
    cursor = QTextCursor(view.text.document())
    cursor.setPosition(start)
    left = view.text.cursorRect(cursor)
    cursor.setPosition(start + 1)  # after its first character: on the same line
    right = view.text.cursorRect(cursor)
    return QPoint((left.left() + right.left()) // 2, left.center().y())


def _hover(widget, pos: QPoint) -> None:
    """A mouse move over `widget` (QTest's moves the cursor, which offscreen Qt ignores)."""
    event = QMouseEvent(
        QEvent.Type.MouseMove,
        QPointF(pos),
        QPointF(widget.mapToGlobal(pos)),
        Qt.MouseButton.NoButton,
        Qt.MouseButton.NoButton,
        Qt.KeyboardModifier.NoModifier,
    )
    QApplication.sendEvent(widget, event)


def test_token_view_opens_on_a_stored_reply_after_a_restart(qtbot, tmp_path, tiny_engine):
    window = make_window(qtbot, tmp_path, tiny_engine)
    set_sampling(window, temperature=0.0, max_tokens=24)
    window.controller.set_constraint(json_schema_constraint(SCHEMA, "person"))
    _ask(qtbot, window, "A person, please")
    reply = window.chat.message_widgets()[-1]
    assert reply.message.meta["logprobs"] > 0 and "Inspect" in reply.action_buttons
    conversation = window.controller.conversation_id
    close_window(window)

    again = make_window(qtbot, tmp_path, tiny_engine)
    assert again.controller.conversation_id == conversation
    reply = again.chat.message_widgets()[-1]
    button = reply.action_buttons["Inspect"]
    button.click()
    view = reply.token_view
    assert view is not None and view.isVisible() and not reply.body.isVisible()
    tokens = view.tokens
    assert "".join(t.text for t in tokens) == reply.message.content
    overridden = sum(t.overridden for t in tokens)
    forced = sum(t.forced and not t.closing for t in tokens)
    assert overridden > 0 and forced > 0  # the schema forbids what the model wants
    steered = sum(t.overridden and not t.forced and not t.closing for t in tokens)
    # the reply was closed to fit its 24 tokens: Corral's tokens are marked, after a restart
    corrals = sum(t.closing for t in tokens)
    assert corrals > 0 and tokens[-1].closing
    assert view.summary.text() == (
        f"{len(tokens)} tokens: {steered} steered by the format, {forced} forced, "
        f"{corrals} written by Corral to close the reply"
    )
    assert "forced" in view.legend.text() and "steered" in view.legend.text()
    # a token the constraint overrode: click it and its alternatives stay shown
    index = next(i for i, t in enumerate(tokens) if t.overridden and not t.forced)
    qtbot.mouseClick(view.text.viewport(), Qt.MouseButton.LeftButton, pos=_token_point(view, index))
    assert view.pinned == index
    detail = view.detail.text()
    assert "Steered: the format did not allow" in detail and "The model wanted:" in detail
    assert "Forced" not in detail  # one word per kind
    assert f"{tokens[index].allowed} tokens allowed here" in detail
    assert "✗ not allowed" in detail  # its first choice
    # hovering another token shows that one's
    _hover(view.text.viewport(), _token_point(view, 0))
    qtbot.waitUntil(lambda: view.detail.text().startswith(f"“{tokens[0].text}”"), timeout=5000)
    assert "Forced: the format left no other token" in view.detail.text()
    assert "Steered" not in view.detail.text()  # never both words for one token
    height = view.detail.height()
    _hover(view.text.viewport(), _token_point(view, index))
    qtbot.waitUntil(lambda: view.detail.text().startswith(f"“{tokens[index].text}”"))
    assert view.detail.height() == height  # details in one place that does not move
    screenshot(again, "token_inspector")
    button.click()  # back to the text
    assert not view.isVisible() and reply.body.isVisible()

    exported = to_json(again.store, conversation)
    (message,) = [m for m in exported["messages"] if m["id"] == reply.message.id]
    assert [TokenLogprob.from_dict(t).token for t in message["logprobs"]] == [
        t.token for t in tokens
    ]
    close_window(again)


def test_no_token_view_when_recording_is_off(qtbot, tmp_path, tiny_engine):
    window = make_window(qtbot, tmp_path, tiny_engine)
    set_sampling(window, temperature=0.0, max_tokens=4)
    window.prefs.record_logprobs = False
    window.core.set_preferences(window.prefs)
    assert window.controller.logprobs is None
    _ask(qtbot, window, "Hi")
    reply = window.chat.message_widgets()[-1]
    assert "logprobs" not in reply.message.meta and "Inspect" not in reply.action_buttons
    assert window.store.token_logprobs(reply.message.id) is None
    close_window(window)


def test_an_old_database_gains_the_token_table(tmp_path):
    path = tmp_path / "corral.sqlite3"
    old = sqlite3.connect(path, isolation_level=None)
    _v1_initial(old)
    old.execute("PRAGMA user_version = 1")
    old.execute(
        "INSERT INTO conversations (id, title, created_at, updated_at) VALUES (1, 'Old', 0, 0)"
    )
    old.execute(
        "INSERT INTO messages (id, conversation_id, parent_id, role, content, meta,"
        " created_at, visited_at) VALUES (1, 1, NULL, 'assistant', 'Hello', '{}', 0, 0)"
    )
    old.close()
    store = Store.open(tmp_path)
    try:
        assert store.db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        message = store.message(1)
        assert message is not None and message.content == "Hello"
        assert store.token_logprobs(1) is None
        token = TokenLogprob(
            5, "Hello", -0.25, -1.5, (TokenAlternative(7, "Hi", -0.5, False),), 12, False, True
        )
        store.set_token_logprobs(1, [token])
        assert store.token_logprobs(1) == [token]
        assert json.dumps(to_json(store, 1)["messages"][0]["logprobs"])
    finally:
        store.close()
