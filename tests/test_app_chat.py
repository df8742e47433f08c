"""The chat window with a real engine (tiny random model): streaming, stop (a quiet
"Stopped"; Retry when nothing was written), a reply cut at its length limit and Continue,
regenerate, edit-and-branch, branch switching, persistence across a restart."""

from __future__ import annotations

from app_helpers import (
    TINY_TEMPERATURE,
    close_window,
    make_window,
    screenshot,
    set_sampling,
    wait_idle,
)
from PySide6.QtCore import Qt


def test_send_streams_a_rendered_reply(qtbot, tmp_path, tiny_engine):
    window = make_window(qtbot, tmp_path, tiny_engine)
    set_sampling(window, temperature=TINY_TEMPERATURE, max_tokens=120, seed=1)
    deltas: list[str] = []
    window.controller.replyText.connect(deltas.append)
    window.composer.edit.setPlainText("Tell me a story")
    qtbot.keyClick(window.composer.edit, Qt.Key.Key_Return)
    assert window.composer.edit.toPlainText() == ""
    assert window.controller.busy and window.composer.button.accessibleName() == "Stop"
    wait_idle(qtbot, window)
    assert len(deltas) > 1  # the text arrived in pieces, not at the end
    widgets = window.chat.message_widgets()
    assert [w.message.role for w in widgets] == ["user", "assistant"]
    reply = widgets[1]
    assert reply.message.content and reply.body.toPlainText().strip()
    assert "to first word" in reply.stats.text() and "words/s" in reply.stats.text()
    assert "reused from the cache" in reply.stats.toolTip()  # the details, on hover
    assert window.sidebar.titles() == ["Tell me a story"]
    screenshot(window, "chat_reply")
    close_window(window)


def _send(qtbot, window, text: str) -> None:
    window.composer.edit.setPlainText(text)
    qtbot.keyClick(window.composer.edit, Qt.Key.Key_Return)
    assert window.controller.busy


def test_stop_mid_reply_with_escape(qtbot, tmp_path, tiny_engine):
    window = make_window(qtbot, tmp_path, tiny_engine)
    set_sampling(window, temperature=TINY_TEMPERATURE, max_tokens=4000, seed=2)
    _send(qtbot, window, "Write a very long essay")
    qtbot.waitUntil(lambda: len(window.chat.reply_text_shown) > 20, timeout=30_000)
    screenshot(window, "chat_streaming")
    streamed_body = window.chat.reply.body
    qtbot.keyClick(window, Qt.Key.Key_Escape)
    wait_idle(qtbot, window, timeout=10_000)
    reply = window.chat.message_widgets()[-1]
    assert reply.body is streamed_body  # the saved reply adopts what was rendered, no re-render
    assert reply.message.meta["stop_reason"] == "cancelled"
    assert 0 < reply.message.meta["stats"]["generated_tokens"] < 4000
    assert reply.status.text() == "Stopped" and reply.status.property("kind") == "quiet"
    assert not reply.note_action.isVisibleTo(window)  # nothing to retry: the text is there
    assert not window.notice.isVisible()  # a stop is not an error
    assert window.composer.button.accessibleName() == "Send"
    close_window(window)


def test_stop_during_prompt_processing(qtbot, tmp_path, tiny_engine):
    window = make_window(qtbot, tmp_path, tiny_engine)
    set_sampling(window, temperature=TINY_TEMPERATURE, max_tokens=4000)
    progress: list[tuple[int, int]] = []
    window.controller.replyPrefill.connect(lambda done, total: progress.append((done, total)))
    _send(qtbot, window, "many different words " * 2000)  # a long prompt, read in chunks
    qtbot.waitUntil(lambda: bool(progress), timeout=30_000)
    assert "Reading your message" in window.chat.reply.status.text()
    window.composer.button.click()  # the Send button reads Stop while busy
    wait_idle(qtbot, window, timeout=10_000)
    assert progress[-1][0] < progress[-1][1]  # stopped part-way through the prompt
    widgets = window.chat.message_widgets()
    assert [w.message.role for w in widgets] == ["user"]  # no reply was kept, the question is
    assert not window.notice.isVisible()  # no red banner for a stop
    question = widgets[0]
    assert question.status.text() == "Stopped before any reply"
    assert question.note_action.isVisibleTo(window) and question.note_action.text() == "Retry"
    screenshot(window, "chat_stopped_before_reply")
    set_sampling(window, max_tokens=3)
    question.note_action.click()  # Retry answers the same question
    wait_idle(qtbot, window)
    widgets = window.chat.message_widgets()
    assert [w.message.role for w in widgets] == ["user", "assistant"]
    assert widgets[1].message.parent_id == question.message.id
    close_window(window)


def test_a_reply_cut_at_its_limit_says_so_and_continues(qtbot, tmp_path, tiny_engine):
    window = make_window(qtbot, tmp_path, tiny_engine)
    set_sampling(window, temperature=TINY_TEMPERATURE, max_tokens=6, seed=4)
    _send(qtbot, window, "Write a long story")
    wait_idle(qtbot, window)
    reply = window.chat.message_widgets()[-1]
    assert reply.message.meta["stop_reason"] == "length"
    assert reply.status.text() == "Stopped at the 6-token limit"
    assert reply.note_action.isVisibleTo(window) and reply.note_action.text() == "Continue"
    screenshot(window, "chat_length_limit")
    first = reply.message
    reply.note_action.click()
    wait_idle(qtbot, window)
    widgets = window.chat.message_widgets()
    assert len(widgets) == 2
    continued = widgets[-1].message
    # The longer reply is a new version that starts with the cut one's text.
    assert continued.id != first.id and continued.parent_id == first.parent_id
    assert continued.content.startswith(first.content)
    assert len(continued.content) > len(first.content)
    assert continued.meta["continued_from"] == first.id
    assert widgets[-1].switcher is not None and widgets[-1].switcher.label.text() == "2/2"
    request = window.controller.build_request(
        window.controller.path(), window.controller.conversation
    )
    assert request.messages[-1]["content"] == continued.content
    close_window(window)


def test_regenerate_keeps_the_old_reply_as_a_branch(qtbot, tmp_path, tiny_engine):
    window = make_window(qtbot, tmp_path, tiny_engine)
    set_sampling(window, temperature=TINY_TEMPERATURE, max_tokens=20)
    _send(qtbot, window, "Hello")
    wait_idle(qtbot, window)
    first = window.chat.message_widgets()[-1].message
    window.chat.message_widgets()[-1].action_buttons["Regenerate"].click()
    wait_idle(qtbot, window)
    widgets = window.chat.message_widgets()
    second = widgets[-1].message
    assert len(widgets) == 2 and second.id != first.id and second.parent_id == first.parent_id
    assert widgets[-1].switcher is not None and widgets[-1].switcher.label.text() == "2/2"
    widgets[-1].switcher.previous.click()
    shown = window.chat.message_widgets()[-1]
    assert shown.message.id == first.id and shown.switcher.label.text() == "1/2"
    assert shown.body.markdown == first.content
    close_window(window)


def test_regenerate_writes_the_new_version_in_place(qtbot, tmp_path, tiny_engine):
    """While a new version is written it stands where the old one stood (not under it),
    says "Writing version 2 of 2…" with its ‹ 2/2 ›, and ‹ shows the old one meanwhile."""
    window = make_window(qtbot, tmp_path, tiny_engine)
    set_sampling(window, temperature=TINY_TEMPERATURE, max_tokens=60)
    _send(qtbot, window, "Hello")
    wait_idle(qtbot, window)
    old = window.chat.message_widgets()[-1].message
    seen: list[tuple[list[str], str, str]] = []

    def look(_text: str) -> None:
        shown = [w.message.role for w in window.chat.message_widgets() if w.isVisible()]
        reply = window.chat.reply
        seen.append((shown, reply.status.text(), reply.switcher.label.text()))

    window.controller.replyText.connect(look)
    window.chat.message_widgets()[-1].action_buttons["Regenerate"].click()
    qtbot.waitUntil(lambda: len(seen) >= 2, timeout=30_000)
    assert seen[-1][0] == ["user"]  # the old reply is not shown above the new one
    assert seen[-1][1].startswith("Writing version 2 of 2…") and seen[-1][2] == "2/2"
    # by keyboard too: going back from the composer, its switcher comes before the sidebar
    back, item = [], window.composer.edit.previousInFocusChain()
    while item is not window.composer.edit and not window.sidebar.isAncestorOf(item):
        back.append(item)
        item = item.previousInFocusChain()
    assert item is not window.composer.edit  # the walk met the sidebar
    assert window.chat.reply.switcher.previous in back
    window.chat.reply.switcher.previous.click()  # the old one, a click away
    peek = window.chat.previous
    assert peek.isVisible() and not window.chat.reply.isVisible()
    assert peek.message.id == old.id and peek.switcher.label.text() == "1/2"
    assert peek.body.markdown == old.content
    peek.switcher.next.click()
    assert window.chat.reply.isVisible() and not peek.isVisible()
    wait_idle(qtbot, window)
    assert window.chat.previous is None
    widgets = window.chat.message_widgets()
    assert [w.message.role for w in widgets] == ["user", "assistant"]
    assert widgets[-1].message.id != old.id and widgets[-1].switcher.label.text() == "2/2"
    close_window(window)


def test_regenerate_several_versions_at_once(qtbot, tmp_path, tiny_engine):
    """Write 3 versions (the Versions button's menu): three new versions decoded side by
    side, saved as branches beside the old reply, the first of them shown."""
    window = make_window(qtbot, tmp_path, tiny_engine)
    set_sampling(window, temperature=TINY_TEMPERATURE, max_tokens=12, seed=9)
    _send(qtbot, window, "Hello")
    wait_idle(qtbot, window)
    first = window.chat.message_widgets()[-1].message
    button = window.chat.message_widgets()[-1].action_buttons["Versions"]
    (three,) = [a for a in button.menu().actions() if a.text() == "Write 3 versions"]
    streamed: list[str] = []
    window.controller.replyText.connect(streamed.append)
    three.trigger()
    assert window.controller.busy
    wait_idle(qtbot, window)
    widgets = window.chat.message_widgets()
    shown = widgets[-1]
    assert len(widgets) == 2 and shown.switcher is not None
    assert shown.switcher.label.text() == "2/4"  # the old reply, then the three new ones
    versions = window.store.siblings(shown.message)
    assert [m.id for m in versions][0] == first.id
    texts = [m.content for m in versions[1:]]
    assert len(set(texts)) == 3  # seed, seed + 1, seed + 2: three different replies
    assert shown.message.id == versions[1].id and streamed[-1] == texts[0]
    screenshot(window, "chat_regenerate_versions")
    shown.switcher.next.click()
    assert window.chat.message_widgets()[-1].switcher.label.text() == "3/4"
    close_window(window)


def test_edit_branches_and_switches_back(qtbot, tmp_path, tiny_engine):
    window = make_window(qtbot, tmp_path, tiny_engine)
    set_sampling(window, temperature=TINY_TEMPERATURE, max_tokens=12)
    _send(qtbot, window, "first question")
    wait_idle(qtbot, window)
    _send(qtbot, window, "follow-up")
    wait_idle(qtbot, window)
    assert len(window.chat.message_widgets()) == 4
    user = window.chat.message_widgets()[0]
    user.action_buttons["Edit"].click()
    assert user.editor is not None
    user.editor.setPlainText("first question, edited")
    screenshot(window, "chat_editing")
    qtbot.keyClick(user.editor, Qt.Key.Key_Return)
    wait_idle(qtbot, window)
    widgets = window.chat.message_widgets()
    assert [w.message.content for w in widgets][0] == "first question, edited"
    assert len(widgets) == 2 and widgets[0].switcher.label.text() == "2/2"
    screenshot(window, "chat_branch")
    widgets[0].switcher.previous.click()  # back to the original branch, down to its end
    widgets = window.chat.message_widgets()
    assert [w.message.content for w in widgets][::2] == ["first question", "follow-up"]
    assert widgets[0].switcher.label.text() == "1/2"
    widgets[0].switcher.next.click()
    assert window.chat.message_widgets()[0].message.content == "first question, edited"
    close_window(window)


# Runs the real window in another process: one full exchange, then a second question
# whose reply is streaming when the process is killed.
_FIRST_RUN = """
import os, signal, sys
os.environ["QT_QPA_PLATFORM"] = "offscreen"
import engine
from PySide6.QtCore import QTimer
from app.application import create_application
from app.jobs.engine_bridge import EngineBridge
from app.store import ChatSettings, Store
from app.application import build_window

app, _ = create_application([])
store = Store.open(sys.argv[1])
window = build_window(store, EngineBridge())
window.show()
window.models.load(sys.argv[2])
conv = window.controller.conversation
store.set_chat_settings(conv.id, ChatSettings(temperature=10.0, max_tokens=8, seed=3))
answers = []

def finished(result):
    answers.append(result)
    if len(answers) == 1:  # the second reply runs long enough to be killed mid-way
        store.set_chat_settings(conv.id, ChatSettings(temperature=10.0, max_tokens=3000))
        QTimer.singleShot(0, lambda: window.send("second question"))

def text(so_far):
    if len(answers) == 1 and len(so_far) > 10:
        os.kill(os.getpid(), signal.SIGKILL)  # no clean shutdown at all

window.controller.replyFinished.connect(finished)
window.controller.replyText.connect(text)
window.send("first question")
app.exec()
"""


def test_conversation_survives_a_killed_app(qtbot, tmp_path, tiny_engine, tiny_model_dir):
    import subprocess
    import sys

    from app_helpers import REPO

    data = tmp_path / "data"
    proc = subprocess.run(
        [sys.executable, "-c", _FIRST_RUN, str(data), str(tiny_model_dir)],
        cwd=REPO,
        capture_output=True,
        timeout=180,
    )
    assert proc.returncode == -9, proc.stderr.decode()[-2000:]
    window = make_window(qtbot, data, tiny_engine)
    assert window.sidebar.titles() == ["first question"]
    messages = [w.message for w in window.chat.message_widgets()]
    # Everything up to the killed reply is there; only the reply in flight is lost.
    assert [m.role for m in messages] == ["user", "assistant", "user"]
    assert messages[0].content == "first question" and messages[1].content
    assert messages[2].content == "second question"
    assert window.controller.conversation.settings.max_tokens == 3000
    set_sampling(window, max_tokens=8)
    window.regenerate()  # the conversation carries on where it stopped
    wait_idle(qtbot, window)
    assert [w.message.role for w in window.chat.message_widgets()][-1] == "assistant"
    close_window(window)
