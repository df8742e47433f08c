"""A conversation longer than the model reads: the window says so with the numbers and
offers to leave out the oldest messages (kept in the chat) or to turn tools off."""

from __future__ import annotations

from app_helpers import (
    TINY_TEMPERATURE,
    close_window,
    make_window,
    screenshot,
    set_sampling,
    wait_idle,
)


def _send(qtbot, window, text: str) -> None:
    assert window.controller.send(text)
    wait_idle(qtbot, window)


def test_long_conversation_offers_to_leave_out_the_oldest_messages(
    qtbot, tmp_path, short_engine
) -> None:
    window = make_window(qtbot, tmp_path, short_engine)
    set_sampling(window, temperature=TINY_TEMPERATURE, max_tokens=4)
    c = window.controller
    for i in range(3):  # about 60 tokens a turn, replies included: they fit in 256
        _send(qtbot, window, f"turn {i}: " + "word " * 45)
    assert window.notice.text() == ""
    _send(qtbot, window, "last turn: " + "word " * 90)
    text = window.notice.text()
    assert "tokens; this model reads at most 256." in text and text.startswith("Prompt is ")
    assert window.notice.action.text() == "Leave out oldest messages"
    assert not window.notice.second_action.isVisible()  # no tools were offered
    screenshot(window, "context_exceeded")
    path_before = [m.id for m in c.path()]
    window.notice.action.click()

    def answered() -> None:
        assert c.path()[-1].role == "assistant", window.notice.text()
        assert not c.busy

    qtbot.waitUntil(answered, timeout=60_000)
    path = c.path()
    assert "error" not in path[-1].meta
    assert [m.id for m in path[:-1]] == path_before  # nothing was deleted
    assert c.left_out_count() >= 2 and c.path()[c.left_out_count()].role == "user"
    close_window(window)


def test_tools_that_overflow_the_context_can_be_turned_off(qtbot, tmp_path, short_engine):
    from dataclasses import replace

    window = make_window(qtbot, tmp_path, short_engine)
    set_sampling(window, temperature=TINY_TEMPERATURE, max_tokens=4)
    c = window.controller
    c.new_conversation()
    tools = [
        {
            "type": "function",
            "function": {
                "name": f"lookup_{i}",
                "description": "Looks one thing up in a large catalogue of things. " * 2,
                "parameters": {"type": "object", "properties": {"q": {"type": "string"}}},
            },
        }
        for i in range(6)
    ]
    conv = c.conversation
    c.set_tools(replace(conv.tools, definitions=tools))
    _send(qtbot, window, "hi")
    assert "the tool definitions take" in window.notice.text()
    assert window.notice.second_action.text() == "Turn tools off"
    window.notice.second_action.click()
    wait_idle(qtbot, window)
    assert c.conversation.tools.tool_choice == "none"
    assert c.conversation.tools.definitions == tools  # still configured, just not offered
    assert c.path()[-1].role == "assistant"
    close_window(window)
