"""Preferences → Local server → one button per coding agent: the server started if it is
off, the agent's configuration and a launcher written into Corral's folder (never the
agent's own files), and the one command to run, with Copy; the key never in a file."""

from __future__ import annotations

import shlex
import socket
import tomllib
from pathlib import Path

import pytest
from app_helpers import close_window, make_window
from PySide6.QtGui import QGuiApplication


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_claude_codes_button_starts_the_server_and_gives_one_command(
    qtbot, tmp_path: Path, tiny_engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"  # where the agents keep their own settings
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    window = make_window(qtbot, tmp_path / "data", tiny_engine)
    server = window.server
    try:
        section = server.preferences_section()
        assert list(section.agent_buttons) == ["claude", "codex", "opencode"]
        assert [b.text() for b in section.agent_buttons.values()] == [
            "Claude Code", "Codex", "OpenCode",
        ]  # fmt: skip
        port = _free_port()
        section.port.setValue(port)
        assert not server.job.running and not section.enabled.isChecked()
        section.agent_buttons["claude"].click()
        dialog = server.agent_dialog
        assert dialog is not None and dialog.isVisible()
        assert dialog.status.text() == "Starting Corral's server for Claude Code…"
        assert not dialog.copy_button.isEnabled()
        qtbot.waitUntil(lambda: dialog.command != "", timeout=30_000)
        url = f"http://127.0.0.1:{port}"
        assert server.job.url == url and section.enabled.isChecked()
        assert section.any_model.isChecked()  # agents ask for their own model names
        model = tiny_engine.snapshot.model.name
        assert dialog.status.text() == f"Corral's server is running at {url} with {model}."
        launcher = tmp_path / "data" / "agents" / "claude.sh"
        assert dialog.command == f"sh {shlex.quote(str(launcher))}"
        assert dialog.command_field.text() == dialog.command
        script = launcher.read_text()
        assert f"export ANTHROPIC_BASE_URL={url}" in script and "exec claude --model" in script
        assert "Claude Code's own settings are not touched" in dialog.note.text()
        dialog.copy_button.click()
        assert QGuiApplication.clipboard().text() == dialog.command
        assert dialog.copy_button.text() == "Copied"
        dialog.close()
        assert list(home.iterdir()) == []  # nothing in ~/.claude, ~/.codex, ~/.config
    finally:
        close_window(window)


def test_codexs_button_with_a_key_keeps_it_out_of_every_file(
    qtbot, tmp_path: Path, tiny_engine
) -> None:
    window = make_window(qtbot, tmp_path / "data", tiny_engine)
    server = window.server
    try:
        section = server.preferences_section()
        section.port.setValue(_free_port())
        section.api_key.setText("s3cret-key")
        section.agent_buttons["codex"].click()
        dialog = server.agent_dialog
        qtbot.waitUntil(lambda: dialog.command != "", timeout=30_000)
        folder = tmp_path / "data" / "agents"
        config = tomllib.loads((folder / "codex" / "config.toml").read_text())
        provider = config["model_providers"]["corral"]
        assert provider["base_url"] == f"{server.job.url}/v1"
        assert provider["wire_api"] == "responses"
        assert all("s3cret-key" not in p.read_text() for p in folder.rglob("*") if p.is_file())
        # the command carries the key for its run; the dialog shows it masked
        assert dialog.command.startswith("CORRAL_API_KEY=s3cret-key sh ")
        assert "s3cret-key" not in dialog.command_field.text()
        assert dialog.command_field.text().startswith("CORRAL_API_KEY=•••••• sh ")
        # the server already answers: a second agent's command comes at once
        section.agent_buttons["opencode"].click()
        second = server.agent_dialog
        assert second is not dialog and second.command.endswith("opencode.sh")
        second.close()
        dialog.close()
    finally:
        close_window(window)
