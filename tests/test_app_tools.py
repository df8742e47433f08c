"""Tools in the window: definitions loaded and validated in the panel, a required call
rendered as a card, a typed result that lets the conversation continue."""

from __future__ import annotations

import json
import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from app_helpers import (  # noqa: E402
    TINY_TEMPERATURE,
    close_window,
    drop_files,
    make_window,
    screenshot,
    set_sampling,
    wait_idle,
)

WEATHER = [{
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather for a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"enum": ["Oslo", "Paris", "Lima"]},
                           "unit": {"enum": ["C", "F"]}},
            "required": ["city", "unit"],
        },
    },
}]


def _load_tools(qtbot, window, tmp_path, tools) -> None:
    path = tmp_path / "tools.json"
    path.write_text(json.dumps(tools))
    assert drop_files(window, [path])  # a tools list dropped on the window loads as tools
    qtbot.waitUntil(lambda: bool(window.controller.conversation.tools.definitions),
                    timeout=10_000)


def test_required_call_renders_as_a_card_and_a_typed_result_continues(qtbot, tmp_path,
                                                                      tiny_engine):
    window = make_window(qtbot, tmp_path, tiny_engine)
    set_sampling(window, temperature=TINY_TEMPERATURE, max_tokens=40)
    _load_tools(qtbot, window, tmp_path, WEATHER)
    panel = window.tools_panel
    assert window.tools_dock.isVisible() and "get_weather" in panel.status.text()
    panel.choice.setCurrentText("required")
    panel.choice.activated.emit(panel.choice.currentIndex())
    assert window.controller.conversation.tools.tool_choice == "required"

    window.send("What's the weather in Oslo?")
    wait_idle(qtbot, window)
    reply = window.chat.message_widgets()[-1]
    calls = reply.message.meta["tool_calls"]
    assert calls and calls[0]["name"] == "get_weather"
    assert calls[0]["arguments"]["city"] in ("Oslo", "Paris", "Lima")
    card = reply.cards[0]
    assert "get_weather" in card.findChild(type(reply.status), "toolTitle").text()
    assert card.result_field is not None and card.result_field.isEnabled()
    screenshot(window, "tool_call_card")

    for card in reply.cards:  # answer every call; the last answer sends the chat on
        card.result_field.setText("4 °C and raining")
        card.result_field.returnPressed.emit()
    qtbot.waitUntil(lambda: not window.controller.busy, timeout=60_000)
    path = window.controller.path()
    assert [m.role for m in path][:2] == ["user", "assistant"]
    assert [m.role for m in path][-2:] == ["tool", "assistant"]
    assert path[-2].meta["tool_call_id"] == calls[-1]["id"]
    answered = window.chat.message_widgets()[1].cards[0]
    assert answered.result_field is None  # the card now shows its result
    screenshot(window, "tool_result_continued")
    close_window(window)


def test_invalid_tool_definitions_show_the_problem(qtbot, tmp_path, tiny_engine):
    window = make_window(qtbot, tmp_path, tiny_engine)
    window.tools_dock.show()
    panel = window.tools_panel
    bad = [{"type": "function", "function": {"name": "bad name!", "parameters": {}}}]
    panel.editor.setPlainText(json.dumps(bad))
    qtbot.waitUntil(lambda: "Not applied" in panel.status.text(), timeout=10_000)
    assert "invalid name" in panel.status.text() and not panel.apply_button.isEnabled()
    panel.editor.setPlainText(json.dumps(WEATHER, indent=2))
    qtbot.waitUntil(panel.apply_button.isEnabled, timeout=10_000)
    panel.apply_button.click()
    assert window.controller.conversation.tools.definitions == WEATHER
    assert panel.choice.findText("get_weather") >= 0  # a named choice is offered
    screenshot(window, "tools_panel")
    close_window(window)
