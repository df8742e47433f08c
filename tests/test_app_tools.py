"""Tools in the window: definitions loaded and validated in the panel, a required call
rendered as a card, a typed result that lets the conversation continue."""

from __future__ import annotations

import json

from app_helpers import (
    TINY_TEMPERATURE,
    close_window,
    drop_files,
    make_window,
    screenshot,
    set_sampling,
    wait_idle,
)
from PySide6.QtCore import Qt

WEATHER = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Current weather for a city",
            "parameters": {
                "type": "object",
                "properties": {
                    "city": {"enum": ["Oslo", "Paris", "Lima"]},
                    "unit": {"enum": ["C", "F"]},
                },
                "required": ["city", "unit"],
            },
        },
    }
]


def _load_tools(qtbot, window, tmp_path, tools) -> None:
    path = tmp_path / "tools.json"
    path.write_text(json.dumps(tools))
    assert drop_files(window, [path])  # a tools list dropped on the window loads as tools
    qtbot.waitUntil(lambda: bool(window.controller.conversation.tools.definitions), timeout=10_000)


def test_required_call_renders_as_a_card_and_a_typed_result_continues(qtbot, tmp_path, tiny_engine):
    window = make_window(qtbot, tmp_path, tiny_engine)
    set_sampling(window, temperature=TINY_TEMPERATURE, max_tokens=40)
    _load_tools(qtbot, window, tmp_path, WEATHER)
    panel = window.tools_panel
    # Loading tools brings the Tools tab forward; the chip says what is on, in plain words.
    assert window.inspector.isVisible() and window.inspector_tabs.currentIndex() == 1
    assert "get_weather" in panel.status.text()
    assert window.tools_chip.text() == "Tools: get_weather (auto)"
    panel.set_choice("required")
    assert window.controller.conversation.tools.tool_choice == "required"
    assert window.tools_chip.text() == "Tools: get_weather (must call one)"

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
    window.show_tools()
    panel = window.tools_panel
    bad = [{"type": "function", "function": {"name": "bad name!", "parameters": {}}}]
    panel.editor.setPlainText(json.dumps(bad))
    qtbot.waitUntil(lambda: "Not applied" in panel.status.text(), timeout=10_000)
    assert "invalid name" in panel.status.text() and not panel.apply_button.isEnabled()
    panel.editor.setPlainText(json.dumps(WEATHER, indent=2))
    qtbot.waitUntil(panel.apply_button.isEnabled, timeout=10_000)
    panel.apply_button.click()
    assert window.controller.conversation.tools.definitions == WEATHER
    assert panel.choice.findData("get_weather") >= 0  # a named choice is offered
    assert panel.choice.itemText(panel.choice.findData("get_weather")) == "Must call get_weather"
    screenshot(window, "tools_panel")
    close_window(window)


def test_run_a_builtin_tool_from_its_card(qtbot, tmp_path, tiny_engine):
    from app.store import ToolsConfig
    from app.tools import run_builtin

    window = make_window(qtbot, tmp_path, tiny_engine)
    set_sampling(window, temperature=0.0, max_tokens=30)
    panel = window.tools_panel
    window.show_tools()
    assert panel.builtin_list.count() >= 1 and not panel.no_builtins.isVisible()
    item = panel.builtin_list.findItems("Calculator", Qt.MatchFlag.MatchExactly)[0]
    assert item.toolTip().startswith("calculator: ")  # the name the model calls it by
    item.setCheckState(Qt.CheckState.Checked)  # offers the built-in to the model
    panel.set_choice("calculator")  # ...and makes it call it
    assert window.controller.conversation.tools == ToolsConfig(
        builtins=["calculator"], tool_choice="calculator"
    )
    assert window.tools_chip.text() == "Tools: Calculator (must call Calculator)"
    # The tiny random model cannot finish a free-text argument, so the call it would make
    # is stored as a reply; what is tested is the card running the built-in.
    conv = window.controller.conversation
    question = window.store.add_message(conv.id, None, "user", "What is 6 times 7?")
    call = {"id": "call_0", "name": "calculator", "arguments": {"expression": "6 * 7"}}
    window.store.add_message(
        conv.id,
        question.id,
        "assistant",
        "",
        {"tool_calls": [call], "constraint": "tools: calculator"},
    )
    window.render_chat()
    reply = window.chat.message_widgets()[-1]
    assert call["name"] == "calculator" and reply.cards[0].run_button is not None
    title = reply.cards[0].findChild(type(reply.status), "toolTitle")
    assert title.text() == "Calls the tool Calculator" and "calculator" in title.toolTip()
    reply.cards[0].run_button.click()  # runs on a worker thread, then the chat continues
    qtbot.waitUntil(
        lambda: (
            [m.role for m in window.controller.path()][-2:] == ["tool", "assistant"]
            and not window.controller.busy
        ),
        timeout=60_000,
    )
    tool_message = window.controller.path()[-2]
    assert tool_message.content == run_builtin("calculator", call["arguments"]) == "42"
    request = window.controller.build_request(window.controller.path()[:-1], conv)
    assert request.messages[-1] == {
        "role": "tool",
        "content": "42",
        "tool_call_id": "call_0",
        "name": "calculator",
    }
    assert request.tool_choice == "auto"  # after the results the model may answer in text
    close_window(window)


def test_chips_say_how_a_grammar_goes_with_the_tools(qtbot, tmp_path, tiny_engine):
    """A grammar and tools together: under auto the chip says a reply fits the grammar or
    is a tool call (and replies do); under required it says the grammar is paused, and
    the tools chip carries the reason the reply gave."""
    window = make_window(qtbot, tmp_path, tiny_engine)
    set_sampling(window, temperature=TINY_TEMPERATURE, max_tokens=40, seed=3)
    grammar = tmp_path / "verdict.lark"
    grammar.write_text('start: "yes" | "no"\n')
    window.files.open_constraint_file(str(grammar))
    chip, tools_chip = window.constraint_bar.chip, window.tools_chip
    qtbot.waitUntil(chip.isVisible, timeout=10_000)
    assert chip.label.text() == "Reply as: verdict.lark (Lark grammar)"
    assert tools_chip.text() == "Tools"  # no tools on: the chip only offers them

    _load_tools(qtbot, window, tmp_path, WEATHER)
    qtbot.waitUntil(lambda: tools_chip.text() == "Tools: get_weather (auto)", timeout=10_000)
    assert chip.label.text() == "Reply as: verdict.lark (Lark grammar), or a tool call"
    window.send("Is it sunny in Oslo?")
    wait_idle(qtbot, window)
    widget = window.chat.message_widgets()[-1]
    reply = widget.message
    assert reply.content in ("yes", "no") or reply.meta["tool_calls"], reply.content
    # the reply says what it was held to in the chip's words (no call-format jargon)
    assert widget.tag.text() == "Reply as: verdict.lark (Lark grammar), or a tool call"

    window.tools_panel.set_choice("required")
    assert chip.label.text().endswith("— paused while tools are on")
    assert tools_chip.text() == "Tools: get_weather (must call one)"
    window.send("And in Lima?")
    wait_idle(qtbot, window)
    widget = window.chat.message_widgets()[-1]
    assert widget.message.meta["tool_calls"] and widget.tag.text() == "Tools (must call one)"
    assert tools_chip.text().endswith("⚠")
    assert "verdict.lark is paused while tools are on" in tools_chip.toolTip()
    screenshot(window, "chips_grammar_paused_by_tools")
    close_window(window)
