"""Preferences → Local server → "Use with Claude Code, Codex or OpenCode…": the dialog shows
the lines `python -m engine launch AGENT --print` would, for the port and key in the form."""

from __future__ import annotations

import tomllib

from PySide6.QtWidgets import QApplication, QDialog, QLabel

from app.views.server.controls import ServerSettingsGroup


def _app() -> QApplication:
    app = QApplication.instance() or QApplication([])
    assert isinstance(app, QApplication)
    return app


def test_the_dialog_shows_each_agents_settings_for_the_forms_port() -> None:
    _app()
    group = ServerSettingsGroup(True, 9123, "s3cret", any_model=False)
    dialog = group.show_agent_instructions()
    text = dialog.text.toPlainText()
    assert "export ANTHROPIC_BASE_URL=http://127.0.0.1:9123" in text
    assert "export ANTHROPIC_AUTH_TOKEN=s3cret" in text
    dialog.agent.setCurrentIndex(1)  # Codex
    text = dialog.text.toPlainText()
    toml = "\n".join(line[4:] for line in text.splitlines() if line.startswith("#   "))
    provider = tomllib.loads(toml)["model_providers"]["corral"]
    assert provider["base_url"] == "http://127.0.0.1:9123/v1"
    assert provider["wire_api"] == "responses"
    dialog.agent.setCurrentIndex(3)  # OpenCode through its Anthropic provider
    assert "@ai-sdk/anthropic" in dialog.text.toPlainText()
    dialog.close()


def test_the_dialog_asks_for_any_model_name_when_it_is_off() -> None:
    _app()
    groups = [ServerSettingsGroup(True, 9123, "", any_model=any_) for any_ in (False, True)]
    off, on = (group.show_agent_instructions() for group in groups)
    assert "any model name" in _note(off) and "any model name" not in _note(on)


def _note(dialog: QDialog) -> str:
    return " ".join(label.text() for label in dialog.findChildren(QLabel))
