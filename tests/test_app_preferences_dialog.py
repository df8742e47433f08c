"""Preferences in pages (app/views/preferences/dialog.py): General, Chat defaults, Models,
Server, Tools, Advanced; new chats that follow the model show the model's own sampling
(not the engine's 0.70/1.00) greyed, with where it comes from; pages never scroll sideways."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel, QScrollArea

from app.preferences import Preferences
from app.tools import builtin_tools
from app.views.preferences.dialog import PreferencesDialog

PAGES = ["General", "Chat defaults", "Models", "Server", "Tools", "Advanced"]


def _dialog(qtbot, **kwargs) -> PreferencesDialog:
    server = QLabel("the local server's settings")
    dialog = PreferencesDialog(
        Preferences(),
        presets={"Programmer": "You write code."},
        builtin_tools=builtin_tools(),
        sections=[("Local server", server)],
        **kwargs,
    )
    qtbot.addWidget(dialog)
    dialog.show()
    qtbot.waitExposed(dialog)
    return dialog


def _page_of(dialog: PreferencesDialog, widget) -> str:
    for index in range(dialog.tabs.count()):
        if dialog.tabs.widget(index).isAncestorOf(widget):
            return dialog.tabs.tabText(index)
    raise AssertionError(f"{widget!r} is on no page")


def test_preferences_are_in_pages(qtbot):
    dialog = _dialog(qtbot)
    assert [dialog.tabs.tabText(i) for i in range(dialog.tabs.count())] == PAGES
    where = {
        "General": [dialog.appearance, dialog.chat_size, dialog.log_level],
        "Chat defaults": [dialog.new_prompt, dialog.follow_model, dialog.temperature],
        "Models": [dialog.default_model, dialog.kv_budget, dialog.max_rows],
        "Tools": list(dialog.tool_boxes.values()),
        "Advanced": [dialog.speculative, dialog.kv_bits, dialog.allow_extra],
    }
    for page, widgets in where.items():
        assert {_page_of(dialog, w) for w in widgets} == {page}
    server = next(w for w in dialog.findChildren(QLabel) if w.text().startswith("the local"))
    assert _page_of(dialog, server) == "Server"
    for index in range(dialog.tabs.count()):
        scroll = dialog.tabs.widget(index)
        assert isinstance(scroll, QScrollArea)
        assert scroll.horizontalScrollBarPolicy() == Qt.ScrollBarPolicy.ScrollBarAlwaysOff


def test_new_chats_following_the_model_show_its_own_sampling(qtbot):
    dialog = _dialog(qtbot, model_defaults={"temperature": 0.2, "top_p": 0.9}, model_name="SmolLM2")
    assert dialog.follow_model.isChecked()
    assert (dialog.temperature.value(), dialog.top_p.value()) == (0.2, 0.9)
    assert not dialog.temperature.isEnabled() and not dialog.top_p.isEnabled()
    assert not dialog.follow_hint.isHidden()
    assert "SmolLM2's recommended values" in dialog.follow_hint.text()
    changed = []
    dialog.changed.connect(changed.append)
    dialog.follow_model.setChecked(False)  # the user's own values, starting from the model's
    assert dialog.temperature.isEnabled() and dialog.follow_hint.isHidden()
    assert changed[-1].new_chat.temperature == 0.2
