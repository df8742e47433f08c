"""Replies that show what they are (pytest-qt): a JSON reply as a formatted code block with
"Valid against <schema>" (or the reason it is not); a tool error styled as an error;
regenerate saying "Writing version 2 of 2…" from its first token, ×N "Writing N
versions…", and identical versions at a low temperature explained; the welcome's tool
example making the default model call the clock, its answer free of the prompt's result
markup and tagged in the chip's words, the Tools menu showing the rule chosen."""

from __future__ import annotations

import json

from app_helpers import TINY_TEMPERATURE, close_window, make_window, set_sampling, wait_idle
from PySide6.QtWidgets import QLabel

from app.views.chat.markdown_view import CodeBlockView

RECIPE = {"name": "Pancakes", "steps": ["Mix", "Fry"], "serves": 2}


def _reply(window, content: str, meta: dict):
    conv = window.controller.conversation
    asked = window.store.add_message(conv.id, None, "user", "Give me a recipe.")
    replied = window.store.add_message(conv.id, asked.id, "assistant", content, meta)
    window.store.set_active_leaf(conv.id, replied.id)
    window.render_chat()
    return window.chat.message_widgets()[-1]


def _codes(widget) -> list[CodeBlockView]:
    return [v for v in widget.body.views if isinstance(v, CodeBlockView)]


def test_a_json_reply_is_a_formatted_code_block_marked_valid(qtbot, tmp_path, tiny_engine):
    window = make_window(qtbot, tmp_path, tiny_engine)
    minified = json.dumps(RECIPE, separators=(",", ":"))
    meta = {
        "constraint": "recipe.json",
        "constraint_kind": "json_schema",
        "as_written": {"valid": True},
        "stop_reason": "stop",
    }
    widget = _reply(window, minified, meta)
    (code,) = _codes(widget)
    assert code.language == "json"
    assert code.code.strip() == json.dumps(RECIPE, indent=2)  # two-space indent, one key a line
    assert widget.valid_mark.isVisible()
    assert widget.valid_mark.text() == "✓ Valid against recipe.json"
    assert window.store.message(widget.message.id).content == minified  # stored as written
    close_window(window)


def test_an_invalid_json_reply_says_why_and_is_not_marked_valid(qtbot, tmp_path, tiny_engine):
    window = make_window(qtbot, tmp_path, tiny_engine)
    meta = {
        "constraint": "recipe.json",
        "constraint_kind": "json_schema",
        "as_written": {
            "valid": False,
            "keyword": "minimum",
            "path": "/serves",
            "message": "0 is less than the minimum of 1",
        },
        "stop_reason": "stop",
    }
    widget = _reply(window, json.dumps({**RECIPE, "serves": 0}), meta)
    assert len(_codes(widget)) == 1  # still shown formatted
    assert not widget.valid_mark.isVisible()
    assert "Not valid against your schema as written (minimum at /serves)" in widget.status.text()
    close_window(window)


def test_plain_text_and_a_json_scalar_stay_body_text(qtbot, tmp_path, tiny_engine):
    window = make_window(qtbot, tmp_path, tiny_engine)
    widget = _reply(window, "42", {"stop_reason": "stop"})
    assert _codes(widget) == [] and not widget.valid_mark.isVisible()
    close_window(window)


def test_a_tool_error_is_styled_as_an_error(qtbot, tmp_path, tiny_engine):
    from PySide6.QtWidgets import QLabel

    window = make_window(qtbot, tmp_path, tiny_engine)
    conv = window.controller.conversation
    asked = window.store.add_message(conv.id, None, "user", "What is 1/0?")
    call = {"id": "call_0", "name": "calculator", "arguments": {"expression": "1/0"}}
    reply = window.store.add_message(conv.id, asked.id, "assistant", "", {"tool_calls": [call]})
    result = window.store.add_message(
        conv.id,
        reply.id,
        "tool",
        "Error: division by zero",
        {"tool_call_id": "call_0", "name": "calculator"},
    )
    window.store.set_active_leaf(conv.id, result.id)
    window.render_chat()
    card = window.chat.message_widgets()[-1].cards[0]
    errors = [w for w in card.findChildren(QLabel) if w.objectName() == "toolError"]
    assert [e.text() for e in errors] == ["The tool reported an error: division by zero"]
    assert not [w for w in card.findChildren(QLabel) if w.objectName() == "toolResult"]
    close_window(window)


def test_regenerate_says_which_version_it_writes(qtbot, tmp_path, tiny_engine):
    window = make_window(qtbot, tmp_path, tiny_engine)
    set_sampling(window, temperature=TINY_TEMPERATURE, max_tokens=6)
    window.send("Tell me something")
    wait_idle(qtbot, window)
    seen: list[str] = []
    window.controller.replyText.connect(
        lambda _t: seen.append(window.chat.reply.status.text()) if window.chat.reply else None
    )
    window.regenerate()
    assert window.chat.reply.status.text() == "Writing version 2 of 2…"  # before any token
    wait_idle(qtbot, window)
    assert seen and all(s.startswith("Writing version 2 of 2…") for s in seen)  # throughout
    assert window.chat.message_widgets()[-1].switcher.label.text() == "2/2"

    window.regenerate(3)
    assert window.chat.reply.status.text() == "Writing 3 versions (3 to 5 of 5)…"
    wait_idle(qtbot, window)
    assert window.chat.message_widgets()[-1].switcher.label.text() == "3/5"
    close_window(window)


def test_identical_versions_at_a_low_temperature_are_explained(qtbot, tmp_path, tiny_engine):
    window = make_window(qtbot, tmp_path, tiny_engine)
    set_sampling(window, temperature=0.0, max_tokens=4)
    window.send("Tell me something")
    wait_idle(qtbot, window)
    window.regenerate(3)
    wait_idle(qtbot, window)
    texts = {m.content for m in window.store.siblings(window.controller.path()[-1])}
    assert len(texts) == 1  # greedy: every version the same
    assert window.notice.isVisible()
    text = window.notice.label.text()
    assert text.startswith("The 3 versions are identical: at temperature 0")
    assert "Raise the temperature" in text
    assert window.notice.property("kind") == "info"  # not an error
    close_window(window)


def test_the_welcome_tool_example_works_with_the_default_model(qtbot, tmp_path, default_engine):
    import time

    from app.views.chat.welcome import EXAMPLES

    window = make_window(qtbot, tmp_path, default_engine)
    set_sampling(window, max_tokens=40)
    (example,) = [e for e in EXAMPLES if e.tool]
    window.use_example(example)
    assert "(must call" in window.tools_chip.text()
    wait_idle(qtbot, window, timeout=300_000)
    reply = window.controller.path()[-1]
    (call,) = reply.meta["tool_calls"]
    assert call["name"] == example.tool
    card = window.chat.message_widgets()[-1].cards[0]
    assert card.run_button.toolTip() == "Run the Clock tool on this machine"
    card.run_button.click()
    qtbot.waitUntil(lambda: any(m.role == "tool" for m in window.controller.path()), timeout=30_000)
    (tool,) = [m for m in window.controller.path() if m.role == "tool"]
    assert tool.content.startswith(time.strftime("%Y-"))  # the clock answered, no error
    wait_idle(qtbot, window, timeout=300_000)  # the model's answer from it
    # The answer after the result: no raw result markup (the default model copies it from
    # the prompt), and its tag says the chip's rule and what it meant for this reply.
    call_reply, answer = window.chat.message_widgets()[-2:]
    assert "tool_response" not in answer.message.content
    assert "tool_response" not in answer.body.markdown
    assert call_reply.tag.text() == "Tools (must call Clock)"
    assert answer.tag.text() == "Tools (must call Clock, then auto)"
    assert window.tools_chip.text() == "Tools: Clock (must call Clock)"
    # The Tools menu shows that rule selected; the tool is "Clock" wherever it is shown.
    window.tools_chip.menu_.aboutToShow.emit()
    checked = [a.text() for a in window.tools_chip.menu_.actions() if a.isChecked()]
    assert checked == ["Clock", "The model must call Clock"]
    shown = [label.text() for label in window.findChildren(QLabel) if label.isVisible()]
    assert "Calls the tool Clock" in shown
    assert not [text for text in shown if "current_datetime" in text]
    close_window(window)
