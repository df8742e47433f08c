"""Nothing starts without the user, and secrets stay secret, in the window (pytest-qt, tiny
model, real servers: mcp-server-time and the SDK fixture server).

A real drop of an mcpServers file on the window and a real file-open event (what a Finder
double-click or Open With sends) show what would run and start nothing, writing nothing,
until Start; Cancel leaves everything as it was. A server another program adds to or
changes in mcp.json waits for the user's OK. *Always allow* belongs to a configuration:
changing the server's arguments, or importing another server of the same name, clears it.
A server whose arguments and URL path carry tokens never shows them: not in any widget, the
logs or the stored conversation."""

from __future__ import annotations

import json
import logging

import pytest
from app_helpers import drop_files, screenshot
from mcp_app_support import (
    allow_once,
    card_text,
    cards,
    last_card,
    open_mcp_window,
    server_item,
    tool_messages,
    use_tool,
    wait_ready,
    widget_texts,
)
from mcp_support import (
    child_processes,
    config_text,
    misbehaving_entry,
    stdio_entry,
    time_server_command,
    wait_no_children,
)
from PySide6.QtWidgets import QApplication

GHP = "ghp_" + "R4nd0mT0kenV4lu3Xq9Zk2Lm7Np1Bv8Cw3Dy"
SK = "sk-" + "Zq8Wm2Xr5Tn7Yp3Kd9Lf4Hs6Gj1Vb0Nc8Mx2Qa7"
LEAKY = misbehaving_entry("banner")
LEAKY["args"] += ["--token", GHP]
REMOTE = {"url": f"https://example.invalid/mcp/{SK}"}


def assert_hidden(text: str) -> None:
    for token in (GHP, SK, GHP[4:], SK[3:]):
        assert token not in text


@pytest.fixture
def consent_window(qtbot, tmp_path, tiny_engine, caplog):
    """Opens windows (servers approved only when asked); at the end no server is left and
    no log record holds a token."""
    caplog.set_level(logging.DEBUG)
    before = {p.pid for p in child_processes()}
    windows = []

    def make(servers: dict, *, approved: bool = True, **settings):
        window = open_mcp_window(
            qtbot,
            tmp_path / f"data{len(windows)}",
            tmp_path / "config" / "mcp.json",
            tiny_engine,
            servers,
            approved=approved,
            **settings,
        )
        windows.append(window)
        return window

    yield make
    for window in windows:
        window.close()
        window.store.close()
    assert wait_no_children(before) == []
    assert_hidden(caplog.text)


def started_servers(before: set[int]) -> list[str]:
    """Command lines of the server processes started since `before`."""
    return [" ".join(p.cmdline()) for p in child_processes() if p.pid not in before]


def dialog_of(qtbot, window):
    panel = window.mcp_panel
    qtbot.waitUntil(lambda: panel.consent_dialog is not None and panel.consent_dialog.isVisible())
    return panel.consent_dialog


def test_a_dropped_file_starts_nothing_until_start(qtbot, consent_window, tmp_path) -> None:
    window = consent_window({})
    config = window.mcp.config_path
    written = config.read_bytes()
    time_command = time_server_command()
    dropped = tmp_path / "claude_desktop_config.json"
    servers = {"time": stdio_entry(time_command), "leaky": LEAKY, "remote": REMOTE}
    dropped.write_text(config_text(servers))
    before = {p.pid for p in child_processes()}

    assert drop_files(window, [dropped])
    dialog = dialog_of(qtbot, window)
    shown = widget_texts(dialog)
    assert "claude_desktop_config.json would add 3 MCP servers" in shown
    assert f"Runs: {' '.join(time_command)}" in shown
    assert "misbehaving.py --mode banner --token …" in shown
    assert "Connects to: https://example.invalid/…" in shown
    assert dialog.cancel_button.isDefault()  # Enter does not start programs
    screenshot(dialog, "mcp_start_dialog")
    qtbot.wait(1500)  # time enough for a server to have started, had anything started one
    assert config.read_bytes() == written and started_servers(before) == []
    assert window.mcp.snapshots == {}
    assert_hidden(widget_texts(window))

    dialog.cancel_button.click()
    assert window.mcp_panel.consent_dialog is None
    assert "Nothing was imported from claude_desktop_config.json." in (
        window.mcp_panel.status.text()
    )
    qtbot.wait(500)
    assert config.read_bytes() == written and started_servers(before) == []

    # The same file again, and Start: written, and started.
    assert drop_files(window, [dropped])
    dialog_of(qtbot, window).start_button.click()
    assert list(json.loads(config.read_text())["mcpServers"]) == ["time", "leaky", "remote"]
    wait_ready(qtbot, window, "time", "leaky", "remote")
    states = {name: s.state.value for name, s in window.mcp.snapshots.items()}
    assert states == {"time": "ready", "leaky": "ready", "remote": "failed"}
    assert any("mcp-server-time" in line for line in started_servers(before))
    for name in ("time", "leaky", "remote"):  # each server's details, shown in turn
        window.mcp_panel.tree.setCurrentItem(server_item(window, name))
        assert_hidden(widget_texts(window))
    assert "could not connect to https://example.invalid/…" in window.mcp_panel.detail.text()


def test_a_file_opened_through_the_os_asks_first(qtbot, consent_window, tmp_path) -> None:
    """A Finder double-click or Open With arrives as a QFileOpenEvent on the application."""
    from PySide6.QtGui import QFileOpenEvent

    from app.application import FileOpenFilter

    window = consent_window({})
    config = window.mcp.config_path
    written = config.read_bytes()
    opened = tmp_path / "time.json"
    opened.write_text(config_text({"time": stdio_entry(time_server_command())}))
    before = {p.pid for p in child_processes()}
    app = QApplication.instance()
    opener = FileOpenFilter(app)  # as create_application installs it for the bundle
    app.installEventFilter(opener)
    try:
        opener.attach(window.files.open)
        QApplication.sendEvent(app, QFileOpenEvent(str(opened)))
        dialog = dialog_of(qtbot, window)
        assert "time.json would add 1 MCP server" in widget_texts(dialog)
        qtbot.wait(1000)
        assert config.read_bytes() == written and started_servers(before) == []
        dialog.start_button.click()
        wait_ready(qtbot, window, "time")
        assert window.mcp.snapshots["time"].state.value == "ready"
        assert "get_current_time" in window.mcp.catalog().names()
    finally:
        app.removeEventFilter(opener)


def test_an_outside_edit_waits_for_ok_and_clears_always_allow(qtbot, consent_window) -> None:
    paint = misbehaving_entry()
    window = consent_window({"paint": paint}, mcp_max_steps=1)
    wait_ready(qtbot, window, "paint")
    use_tool(window, "paint.pick")
    window.send("Paint the kitchen")
    last_card(qtbot, window, "ask").buttons["always"].click()
    qtbot.waitUntil(lambda: len(tool_messages(window)) == 1, timeout=30_000)
    qtbot.waitUntil(lambda: not window.controller.busy, timeout=30_000)
    assert window.mcp.is_always_allowed(window.mcp.catalog().lookup("paint.pick"))

    # Another program changes paint's arguments and adds a server: neither starts.
    before = {p.pid for p in child_processes()}
    changed = {**paint, "args": [*paint["args"], "--token", GHP]}
    added = stdio_entry(time_server_command())
    window.mcp.config_path.write_text(config_text({"paint": changed, "time": added}))

    def waiting() -> bool:
        snaps = window.mcp.snapshots
        return all(n in snaps and snaps[n].state.value == "needs_ok" for n in ("paint", "time"))

    qtbot.waitUntil(waiting, timeout=10_000)
    qtbot.waitUntil(lambda: window.mcp.catalog().names() == [], timeout=10_000)  # old one gone
    qtbot.wait(1000)
    assert started_servers(before) == []
    assert server_item(window, "paint").text(1) == "needs your OK"
    assert "2 new or changed in mcp.json wait for your OK" in window.mcp_panel.status.text()
    window.mcp_panel.tree.setCurrentItem(server_item(window, "paint"))
    assert window.mcp_panel.approve_button.isVisible()
    assert not window.mcp_panel.restart_button.isVisible()
    assert_hidden(widget_texts(window))
    screenshot(window, "mcp_needs_ok")

    window.mcp_panel.approve_button.click()
    dialog = dialog_of(qtbot, window)
    assert "misbehaving.py --mode normal --token …" in widget_texts(dialog)
    dialog.start_button.click()
    wait_ready(qtbot, window, "paint")
    assert window.mcp.snapshots["time"].state.value == "needs_ok"  # its own OK, not paint's
    tool = window.mcp.catalog().lookup("paint.pick")
    assert tool is not None and not window.mcp.is_always_allowed(tool)
    # The user sees it: the next call of the tool asks again.
    window.send("Paint the hall")
    assert last_card(qtbot, window, "ask").state == "ask"
    last_card(qtbot, window).buttons["deny"].click()
    qtbot.waitUntil(lambda: not window.controller.busy, timeout=30_000)

    # Changed back to what it was: the old approvals went when it left the file.
    window.mcp.config_path.write_text(config_text({"paint": paint, "time": added}))
    qtbot.waitUntil(lambda: window.mcp.snapshots["paint"].state.value == "needs_ok", timeout=10_000)


def test_an_import_of_the_same_name_inherits_no_approval(qtbot, consent_window, tmp_path):
    window = consent_window({"paint": misbehaving_entry()})
    wait_ready(qtbot, window, "paint")
    old_tool = window.mcp.catalog().lookup("paint.pick")
    window.mcp.allow_always(old_tool)  # what the card's Always allow does
    assert window.mcp.is_always_allowed(old_tool)

    other = tmp_path / "cursor_mcp.json"
    other.write_text(config_text({"paint": misbehaving_entry("banner")}))
    assert drop_files(window, [other])
    dialog = dialog_of(qtbot, window)
    assert "Replaces your server “paint”" in widget_texts(dialog)
    dialog.start_button.click()

    def replaced() -> bool:
        tool = window.mcp.catalog().lookup("paint.pick")
        return tool is not None and tool.server_fingerprint != old_tool.server_fingerprint

    qtbot.waitUntil(replaced, timeout=30_000)
    assert not window.mcp.is_always_allowed(window.mcp.catalog().lookup("paint.pick"))
    assert not window.mcp.is_always_allowed(old_tool)  # cleared, not merely unused


def test_tokens_show_nowhere_in_the_window_or_the_stored_conversation(
    qtbot, consent_window, tmp_path
) -> None:
    window = consent_window(
        {"leaky": LEAKY, "remote": REMOTE}, mcp_max_steps=1, mcp_call_timeout_s=1
    )
    wait_ready(qtbot, window, "leaky", "remote")
    # A call that times out (quoting the server's garbage output), then one that crashes it
    # (its stderr tail in the card).
    allow_once(qtbot, window, "hang", "Wait", max_tokens=32, results=1)
    assert "with key ghp_…" in card_text(cards(window)[-1])
    allow_once(qtbot, window, "crash", "Crash", max_tokens=32, results=2)
    assert "starting in banner mode with key ghp_…" in card_text(cards(window)[-1])
    qtbot.waitUntil(lambda: window.mcp.snapshots["leaky"].state.value == "failed")
    for name in ("remote", "leaky"):
        window.mcp_panel.tree.setCurrentItem(server_item(window, name))
        assert_hidden(widget_texts(window))
    assert "starting in banner mode with key ghp_…" in (window.mcp_panel.stderr_view.toPlainText())
    stored = [(m.content, m.meta) for m in window.controller.path()]
    assert len(stored) >= 4 and "with key ghp_…" in json.dumps(stored, ensure_ascii=False)
    assert_hidden(json.dumps(stored, ensure_ascii=False))
    # And on disk: every file of the data folder (the database and its journal).
    files = [p for p in (tmp_path / "data0").rglob("*") if p.is_file()]
    assert files
    for path in files:
        data = path.read_bytes()
        assert GHP.encode() not in data and SK.encode() not in data, path
