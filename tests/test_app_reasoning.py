"""The window with a model that thinks first (the tiny Qwen3-like fixture): the reply's
thinking streams into a collapsed "Thought for N s" section above the answer (the answer
area says "Thinking…" meanwhile), is stored with the message and shown after a restart,
never sent back to the model; Chat settings' *Think before answering* and thinking budget
show only for such a model, are stored per chat, and steer the next reply."""

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


def _send(qtbot, window, text: str) -> None:
    window.composer.edit.setPlainText(text)
    qtbot.keyClick(window.composer.edit, Qt.Key.Key_Return)
    assert window.controller.busy


def _reply(window):
    widget = window.chat.message_widgets()[-1]
    assert widget.message.role == "assistant"
    return widget


def test_the_thought_streams_then_stays_collapsed_above_the_answer(
    qtbot, tmp_path, thinking_engine
):
    window = make_window(qtbot, tmp_path, thinking_engine)
    # a long budget, so the thinking lasts long enough to be seen streaming
    set_sampling(window, temperature=TINY_TEMPERATURE, max_tokens=300, seed=4)
    set_sampling(window, max_thinking_tokens=240)
    streamed: list[str] = []
    window.controller.replyReasoning.connect(streamed.append)
    _send(qtbot, window, "Why is the sky blue?")

    def thinking_shown() -> bool:
        reply = window.chat.reply
        return (
            reply is not None
            and reply.thinking.isVisibleTo(window)
            and reply.thinking.title == "Thinking…"
            and reply.status.text() == "Thinking…"
            and bool(reply.thinking.text)
        )

    qtbot.waitUntil(thinking_shown, timeout=30_000)
    assert window.chat.reply.body.markdown == ""  # no answer yet, only thinking
    wait_idle(qtbot, window)

    reply = _reply(window)
    meta = reply.message.meta
    reasoning = meta["reasoning"]
    assert reasoning and reasoning == streamed[-1].strip()
    assert meta["stats"]["thinking_tokens"] == 240 and meta["stats"]["thinking_forced_end"]
    # the answer is the answer alone; the thought sits above it, collapsed
    assert "<think>" not in reply.message.content and "</think>" not in reply.message.content
    assert reasoning not in reply.message.content
    assert reply.thinking.isVisibleTo(window) and not reply.thinking.expanded
    assert not reply.thinking.text_view.isVisibleTo(window)
    assert reply.thinking.title.startswith("Thought for ")
    assert reply.thinking.text == reasoning
    layout = reply.layout()
    assert layout.indexOf(reply.thinking) < layout.indexOf(reply.body)
    reply.thinking.toggle.click()
    assert reply.thinking.expanded and reply.thinking.text_view.isVisibleTo(window)
    assert reply.thinking.text_view.toPlainText() == reasoning
    screenshot(window, "chat_thought_open")
    # the figures count thinking and answer apart
    tip = reply.stats.toolTip()
    answer = meta["stats"]["answer_tokens"]
    assert "Thinking: 240\u00a0tokens" in tip and "ended by the budget" in tip
    assert f"Answer: {answer}\u00a0token" in tip and answer > 0

    # the next turn's request carries the answer only, never the thought
    c = window.controller
    request = c.build_request(c.path(), c.conversation)
    sent = [m["content"] for m in request.messages if m["role"] == "assistant"]
    assert sent == [reply.message.content]
    close_window(window)

    # a restart over the same data folder shows the same thought, collapsed
    window = make_window(qtbot, tmp_path, thinking_engine)
    again = _reply(window)
    assert again.thinking.isVisibleTo(window) and not again.thinking.expanded
    assert again.thinking.text == reasoning
    assert again.thinking.title == reply.thinking.title
    close_window(window)


def test_the_switch_shows_only_for_a_model_that_thinks(
    qtbot, tmp_path, tiny_engine, thinking_engine
):
    window = make_window(qtbot, tmp_path / "plain", tiny_engine)
    assert window.settings_panel.thinking_settings.isHidden()
    close_window(window)
    window = make_window(qtbot, tmp_path / "thinking", thinking_engine)
    panel = window.settings_panel.thinking_settings
    assert not panel.isHidden()
    assert panel.think.isChecked() and panel.budget.value() == 0
    assert panel.budget.text() == "No limit"
    close_window(window)


def test_the_budget_and_the_switch_are_stored_per_chat_and_steer_the_reply(
    qtbot, tmp_path, thinking_engine
):
    window = make_window(qtbot, tmp_path, thinking_engine)
    set_sampling(window, temperature=TINY_TEMPERATURE, max_tokens=40, seed=2)
    panel = window.settings_panel.thinking_settings
    panel.budget.setValue(6)  # as the user types it: saved with the conversation
    assert window.controller.conversation.settings.max_thinking_tokens == 6
    _send(qtbot, window, "Think a little")
    wait_idle(qtbot, window)
    first = _reply(window)
    assert first.message.meta["stats"]["thinking_tokens"] == 6
    assert first.thinking.isVisibleTo(window)

    panel.think.click()  # off: the next reply answers at once
    assert not panel.budget.isEnabled()
    assert window.controller.conversation.settings.think is False
    window.regenerate()
    wait_idle(qtbot, window)
    second = _reply(window)
    assert second.message.id != first.message.id
    assert "reasoning" not in second.message.meta
    assert second.message.meta["stats"]["thinking_tokens"] == 0
    assert not second.thinking.isVisibleTo(window)
    assert "Thinking:" not in second.stats.toolTip()
    assert "<think>" not in second.message.content
    first_id = window.controller.conversation_id

    # another chat starts from the defaults; going back shows this chat's own settings
    window.controller.new_conversation()
    assert panel.think.isChecked() and panel.budget.value() == 0
    window.controller.open_conversation(first_id)
    assert not panel.think.isChecked() and panel.budget.value() == 6
    close_window(window)
