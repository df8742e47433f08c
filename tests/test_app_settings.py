"""Settings people expect: Preferences applied at once and remembered (appearance, chat
text size, the model to start with, what new chats start from), light and dark following
the system with an override, each model's recommended sampling shown and used, tools saved
with the conversation and shown on the chip, and the welcome's example prompts."""

from __future__ import annotations

import json
import shutil

from app_helpers import close_window, make_window, screenshot, wait_idle
from PySide6.QtGui import QColor, QPalette
from PySide6.QtWidgets import QApplication

from app.store import ChatSettings, ToolsConfig


def _lightness(window, widget) -> int:
    for _ in range(3):  # let the palette change reach every widget
        QApplication.processEvents()
    image = window.grab().toImage()
    spot = widget.mapTo(window, widget.rect().bottomLeft())
    spot.setX(spot.x() + widget.width() // 2)
    spot.setY(spot.y() - 8)
    return image.pixelColor(spot).lightness()


def test_preferences_apply_at_once_and_are_remembered(qtbot, tmp_path, tiny_engine):
    from app.views.common import theme

    window = make_window(qtbot, tmp_path, tiny_engine)
    try:
        window.preferences.show()
        dialog = window.preferences.dialog
        dialog.appearance.setCurrentIndex(dialog.appearance.findData("dark"))
        assert theme.colors().dark  # at once, no OK button
        assert _lightness(window, window.chat) < 80
        size = theme.type_scale().chat
        dialog.chat_size.setValue(int(size) + 4)
        assert theme.type_scale().chat == int(size) + 4
        dialog.new_prompt.setCurrentIndex(dialog.new_prompt.findText("Programmer"))
        dialog.follow_model.setChecked(False)
        dialog.temperature.setValue(0.3)
        dialog.max_tokens.setValue(256)
        dialog.tool_boxes["calculator"].setChecked(True)
        dialog.kv_budget.setValue(512)
        dialog.max_rows.setValue(3)
        assert tiny_engine.max_rows == 3  # at once: the engine admits at most 3 replies
        dialog.speculative.setChecked(False)
        assert not tiny_engine.speculative  # at once: replies stop guessing ahead
        dialog.default_model.setCurrentIndex(dialog.default_model.findData("default"))
        screenshot(dialog, "preferences")
        dialog.close()
        close_window(window)

        again = make_window(qtbot, tmp_path, tiny_engine)  # a restart keeps every choice
        assert again.prefs.appearance == "dark" and theme.colors().dark
        assert again.prefs.chat_font_pt == int(size) + 4
        assert again.prefs.kv_budget_mb == 512 and again.prefs.default_model == "default"
        assert again.prefs.max_rows == 3 and tiny_engine.max_rows == 3
        assert not again.prefs.speculative and not tiny_engine.speculative
        again.bridge.set_max_rows(8)  # the session's shared engine goes back to the default
        again.bridge.set_speculative(True)
        assert again.store.get_setting("model_spec") == "default"  # where the app starts
        again.store.add_message(again.controller.conversation_id, None, "user", "hi")
        conv = again.controller.conversation
        again.constraint_bar.anyJsonRequested.emit()  # this chat has a constraint...
        again.new_chat()
        fresh = again.controller.conversation
        assert fresh.id != conv.id
        # ...a new chat starts from the user's defaults, and never from that constraint.
        assert fresh.settings.system_prompt == again.store.presets()["Programmer"]
        assert fresh.settings.temperature == 0.3 and fresh.settings.max_tokens == 256
        assert fresh.settings.top_p == 1.0 and fresh.settings.top_k is None  # top-k: the model's
        assert fresh.tools == ToolsConfig(builtins=["calculator"])
        assert fresh.constraint is None and not again.constraint_bar.chip.isVisible()
        assert again.tools_chip.text() == "Tools: Calculator (auto)"
        assert again.settings_panel.preset.currentText() == "Programmer"
        close_window(again)
    finally:
        theme.apply_appearance("system")
        theme.set_chat_pt(None)


def test_light_and_dark_follow_the_system_unless_overridden(qtbot, tmp_path, tiny_engine):
    """A system switch to dark (a new application palette) recolours the whole window,
    code and all; the Light override keeps it light whatever the system does."""
    from app.views.common import theme

    window = make_window(qtbot, tmp_path, tiny_engine)
    store, conv = window.store, window.controller.conversation
    q = store.add_message(conv.id, None, "user", "Show me code")
    store.add_message(
        conv.id, q.id, "assistant", "```python\ndef add(a, b):\n    return a + b\n```"
    )
    window.render_chat()
    app = QApplication.instance()
    light = app.palette()
    dark = theme.palette_for(theme.Appearance.DARK)
    try:
        assert _lightness(window, window.chat) > 200
        app.setPalette(dark)  # what the system's switch to dark does to a Qt app
        QApplication.processEvents()
        assert _lightness(window, window.chat) < 80
        block = window.chat.message_widgets()[-1].body.code_views()[0]
        assert "#" in block.text.toHtml() and theme.colors().dark
        screenshot(window, "dark_mode")
        theme.apply_appearance("light")  # the override beats the system
        assert _lightness(window, window.chat) > 200
        theme.apply_appearance("system")
    finally:
        app.setPalette(light)
        theme.apply_appearance("system")
    close_window(window)


def test_the_models_recommended_sampling_is_shown_and_used(qtbot, tmp_path, tiny_model_dir):
    from app.application import build_window
    from app.jobs.engine_bridge import EngineBridge
    from app.store import Store

    model = tmp_path / "model"
    shutil.copytree(tiny_model_dir, model)
    (model / "generation_config.json").write_text(
        json.dumps({"do_sample": True, "temperature": 0.35, "top_p": 0.8, "top_k": 20})
    )
    bridge = EngineBridge()
    window = build_window(Store.open(tmp_path / "data"), bridge)
    qtbot.addWidget(window)
    window.show()
    window.models.load(str(model))
    panel = window.settings_panel
    qtbot.waitUntil(lambda: panel.temperature.value() == 0.35, timeout=60_000)
    assert panel.top_p.value() == 0.8 and panel.top_k.value() == 20
    assert panel.temperature.property("followsModel") is True
    assert "from its generation_config.json" in panel.defaults_hint.text()
    conv = window.controller.conversation
    request = window.controller.build_request([], conv)
    assert (request.sampling.temperature, request.sampling.top_p) == (0.35, 0.8)
    panel.temperature.setValue(0.9)  # the user's own value wins, the rest still follow
    request = window.controller.build_request([], window.controller.conversation)
    assert (request.sampling.temperature, request.sampling.top_p) == (0.9, 0.8)
    window.show_settings()
    screenshot(window, "model_defaults")
    close_window(window)
    bridge.close()


def test_tools_chip_menu_turns_tools_on_and_is_saved_with_the_chat(qtbot, tmp_path, tiny_engine):
    window = make_window(qtbot, tmp_path, tiny_engine)
    chip = window.tools_chip
    assert chip.text() == "Tools" and chip.property("active") is False
    chip.menu_.aboutToShow.emit()  # fill the menu as opening it would
    actions = {a.text(): a for a in chip.menu_.actions()}
    # Built-ins are shown by their titles; the chat stores the names the model calls.
    actions["Calculator"].trigger()
    actions["Clock"].trigger()
    conv = window.controller.conversation
    assert conv.tools.builtins == ["calculator", "current_datetime"]
    assert chip.text() == "Tools: Calculator, Clock (auto)"
    chip.menu_.aboutToShow.emit()
    actions = {a.text(): a for a in chip.menu_.actions()}
    actions["The model must call a tool"].trigger()
    assert window.controller.conversation.tools.tool_choice == "required"
    assert chip.text().endswith("(must call one)") and "must call one" in chip.toolTip()
    assert window.tools_panel.choice.currentData() == "required"  # the panel agrees
    chip.menu_.aboutToShow.emit()
    actions = {a.text(): a for a in chip.menu_.actions()}
    actions["Edit tools…"].trigger()
    assert window.inspector.isVisible() and window.inspector_tabs.currentIndex() == 1
    other = window.controller.conversation_id
    window.store.add_message(other, None, "user", "keep me")
    window.new_chat()  # another chat has its own tools (the user's defaults: none)
    assert window.tools_chip.text() == "Tools"
    window.sidebar.list.setCurrentRow(window.sidebar.titles().index("New chat", 1))
    assert window.controller.conversation_id == other
    assert window.tools_chip.text() == "Tools: Calculator, Clock (must call one)"
    close_window(window)


def test_an_example_prompt_applies_its_schema_and_sends(qtbot, tmp_path, tiny_engine):
    from app.views.chat.welcome import EXAMPLES

    window = make_window(qtbot, tmp_path, tiny_engine)
    window.store.set_chat_settings(
        window.controller.conversation_id, ChatSettings(temperature=10.0, max_tokens=8)
    )
    assert window.chat.welcome.isVisible()
    # both say documents (and, for a model that reads them, pictures) can be dropped: the
    # welcome's target and the empty composer
    assert "Drop a document or picture" in window.chat.welcome.drop_target.text.text()
    assert "drop a document" in window.composer.edit.placeholderText()
    screenshot(window, "welcome")
    card = next(b for b in window.chat.welcome.buttons if b.example.grammar == "recipe.json")
    from PySide6.QtCore import Qt

    qtbot.mouseClick(card, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(
        lambda: window.controller.busy or bool(window.chat.message_widgets()), timeout=10_000
    )
    wait_idle(qtbot, window)
    assert window.constraint_bar.chip.label.text() == "Reply as: recipe.json (JSON schema)"
    widgets = window.chat.message_widgets()
    assert widgets[0].message.content == card.example.prompt
    assert widgets[1].tag.text() == "Reply as: recipe.json (JSON schema)"
    assert not window.chat.welcome.isVisible()
    assert any(e.tool == "current_datetime" and e.must_call for e in EXAMPLES)
    close_window(window)


def test_dark_palette_colours_are_derived_not_hard_coded():
    from app.views.common import theme

    sheets = {}
    for appearance in (theme.Appearance.LIGHT, theme.Appearance.DARK):
        palette = theme.palette_for(appearance)
        c = theme.colors(palette)
        assert c.dark == (appearance == theme.Appearance.DARK)
        surface = palette.color(QPalette.ColorRole.Base)
        # Secondary text sits between the text and the background, in either mode.
        lo, hi = sorted([surface.lightness(), c.text.lightness()])
        assert lo < c.secondary.lightness() < hi
        assert c.user_bubble != surface and c.code_background != surface
        assert isinstance(c.accent, QColor)
        sheets[appearance] = (theme.style_sheet(c), theme.css(surface), theme.css(c.user_bubble))
    light, dark = sheets[theme.Appearance.LIGHT], sheets[theme.Appearance.DARK]
    assert light[2] in light[0] and dark[2] in dark[0]
    assert light[1] not in dark[0]  # no light background colour left in the dark sheet
