"""The log file and crash reports (engine/logs.py): secrets set in Preferences and mcp.json
never reach the file, an exception on a worker thread or in a slot is logged with its
traceback and shown in a dialog whose Copy puts the report on the clipboard, the file
rotates at its size, and the level chosen in Preferences decides what is written."""

from __future__ import annotations

import json
import logging
import socket
import threading

import pytest
from app_helpers import close_window
from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication

from engine import logs
from engine.mcp.redaction import redact

# Secrets no pattern would find: only knowing them at run time keeps them out of the log.
API_KEY = "staple-horse-battery-42"
ENV_VALUE = "correct-pony-lantern-7"


@pytest.fixture
def log_dir(tmp_path, monkeypatch):
    folder = tmp_path / "logs"
    monkeypatch.setenv("CORRAL_LOG_DIR", str(folder))
    yield folder
    logs.close_logging()


def _window(qtbot, tmp_path, eng):
    """The window as `python -m app` builds it: with the log file and the crash hooks."""
    from app.application import build_window
    from app.jobs.engine_bridge import EngineBridge
    from app.jobs.mcp_job import McpBridge
    from app.store import Store

    store = Store.open(tmp_path / "data")
    mcp = McpBridge(store, tmp_path / "mcp.json")
    window = build_window(store, EngineBridge(eng), mcp, diagnostics=True)
    qtbot.addWidget(window)
    window.resize(1180, 780)
    window.show()
    qtbot.waitExposed(window)
    return window


def _set_log_level(qtbot, window, level: str) -> None:
    """Preferences → Log, as a user picks it."""
    window.preferences.show()
    dialog = window.preferences.dialog
    qtbot.waitUntil(dialog.isVisible)
    dialog.log_level.setCurrentIndex(dialog.log_level.findData(level))
    dialog.close()
    assert window.core.prefs.log_level == level


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _log_text(folder) -> str:
    for handler in logging.getLogger("app").handlers:
        handler.flush()
    return "".join(p.read_text(encoding="utf-8") for p in sorted(folder.glob("corral.log*")))


def test_secrets_from_preferences_and_mcp_never_reach_the_log(
    qtbot, tmp_path, tiny_engine, log_dir
):
    assert redact(f"key {API_KEY} env {ENV_VALUE}") == f"key {API_KEY} env {ENV_VALUE}"
    window = _window(qtbot, tmp_path, tiny_engine)
    _set_log_level(qtbot, window, "debug")

    # The server's API key, typed in Preferences; the server logs its settings at debug.
    window.preferences.show()
    dialog = window.preferences.dialog
    group = dialog.findChild(type(window.server.preferences_section()), "serverSettings")
    port = _free_port()
    group.enabled.setChecked(True)
    group.port.setValue(port)
    group.api_key.setText(API_KEY)
    with qtbot.waitSignal(window.server.job.started, timeout=30_000):
        dialog.close()
    # An MCP server with a secret in its env; a server that prints it to its stderr.
    (tmp_path / "mcp.json").write_text(
        json.dumps(
            {"mcpServers": {"notes": {"command": "notes-server", "env": {"TOKEN": ENV_VALUE}}}}
        )
    )
    window.mcp.reload()
    logging.getLogger("engine.mcp.runner").warning("notes said on stderr: using %s", ENV_VALUE)
    # An uncaught exception whose message holds the key.
    thread = threading.Thread(target=_raise, args=(f"auth failed for {API_KEY}",))
    thread.start()
    thread.join()
    qtbot.waitUntil(lambda: getattr(window, "crash_dialog", None) is not None, timeout=5000)

    text = _log_text(log_dir)
    assert (
        f"local server settings: ServerConfig(host='127.0.0.1', port={port}" in text
    )  # it was logged
    assert "mcp.json read: 1 servers" in text
    assert "notes said on stderr: using co…" in text
    assert "auth failed for st…" in text
    assert API_KEY not in text
    assert ENV_VALUE not in text
    assert API_KEY not in window.crash_dialog.report.toPlainText()
    window.crash_dialog.close()
    window.server.set_settings(False, port, API_KEY)
    close_window(window)


def _raise(message: str) -> None:
    raise RuntimeError(message)


@pytest.mark.qt_no_exception_capture
def test_an_uncaught_exception_is_logged_and_shown_with_copy(qtbot, tmp_path, tiny_engine, log_dir):
    window = _window(qtbot, tmp_path, tiny_engine)
    thread = threading.Thread(target=_raise, args=("worker fell over",), name="worker-7")
    thread.start()
    thread.join()
    qtbot.waitUntil(lambda: getattr(window, "crash_dialog", None) is not None, timeout=5000)
    dialog = window.crash_dialog
    assert dialog.isVisible()
    assert "RuntimeError: worker fell over" in dialog.report.toPlainText()
    dialog.copy_button.click()
    assert "worker fell over" in QApplication.clipboard().text()
    text = _log_text(log_dir)
    assert "Uncaught exception in thread worker-7" in text
    assert "Traceback (most recent call last)" in text
    assert "in _raise\n    raise RuntimeError(message)" in text
    dialog.close()

    # In a slot on the GUI thread: logged, shown, and the window goes on working.
    window.crash_dialog = None
    QTimer.singleShot(0, lambda: _raise("slot fell over"))
    qtbot.waitUntil(lambda: window.crash_dialog is not None, timeout=5000)
    assert "slot fell over" in window.crash_dialog.report.toPlainText()
    assert "Uncaught exception in the main thread" in _log_text(log_dir)
    window.crash_dialog.close()
    window.new_chat()
    window.send("still here")
    qtbot.waitUntil(lambda: not window.controller.busy, timeout=60_000)
    assert [c.title for c in window.store.conversations()] == ["still here"]
    close_window(window)


def test_the_log_rotates_at_its_size(log_dir):
    path = logs.setup_logging("info", max_bytes=4000, backups=2)
    assert path == log_dir / "corral.log"
    for i in range(200):
        logging.getLogger("engine.test").warning("line %d of a log that grows past its size", i)
    names = sorted(p.name for p in log_dir.iterdir())
    assert names == ["corral.log", "corral.log.1", "corral.log.2"]  # the oldest went
    assert all(p.stat().st_size <= 4000 for p in log_dir.iterdir())
    assert "line 199 " in path.read_text()
    default = logs.setup_logging()
    handler = next(h for h in logging.getLogger("app").handlers if hasattr(h, "maxBytes"))
    assert (handler.maxBytes, handler.backupCount) == (2 * 1024 * 1024, 5)
    assert default == path


def test_the_level_in_preferences_decides_what_is_written(qtbot, tmp_path, tiny_engine, log_dir):
    window = _window(qtbot, tmp_path, tiny_engine)
    (tmp_path / "mcp.json").write_text(json.dumps({"mcpServers": {}}))
    window.mcp.reload()  # logs at info
    assert "mcp.json read" not in _log_text(log_dir)  # warnings only, the default
    _set_log_level(qtbot, window, "info")
    window.mcp.reload()
    assert "mcp.json read: 0 servers" in _log_text(log_dir)
    logging.getLogger("app.chat").debug("a debug line")
    assert "a debug line" not in _log_text(log_dir)
    _set_log_level(qtbot, window, "debug")
    logging.getLogger("app.chat").debug("a debug line")
    assert "a debug line" in _log_text(log_dir)
    close_window(window)
