"""MCP in the window (pytest-qt, tiny model, real SDK servers over stdio): the Tools panel's
server list, switches and mcp.json handling; tool cards that ask Allow once / Always allow /
Deny; results (images inline) stored with the conversation; error cards for servers that
crash, hang or write garbage, with the app still usable; Stop; no child left at quit."""

from __future__ import annotations

import json
import time

import pytest
from app_helpers import drop_files, screenshot, set_sampling
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
)
from mcp_support import (
    child_processes,
    config_text,
    misbehaving_entry,
    wait_no_children,
)
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel

from engine.mcp.results import DECLINED_TEXT


@pytest.fixture
def mcp_window(qtbot, tmp_path, tiny_engine):
    """A window over the tiny model whose mcp.json (in tmp) has the given servers, which the
    user approved earlier."""
    before = {p.pid for p in child_processes()}
    windows = []

    def make(servers: dict, start_timeout: float = 60.0, **settings):
        window = open_mcp_window(
            qtbot,
            tmp_path / f"data{len(windows)}",
            tmp_path / "config" / "mcp.json",
            tiny_engine,
            servers,
            start_timeout=start_timeout,
            **settings,
        )
        windows.append(window)
        return window

    yield make
    for window in windows:
        window.close()
        window.store.close()
    assert wait_no_children(before) == []  # quitting leaves no server behind


def report_figures(window) -> None:
    """Print, per MCP tool the model called: calls run, calls whose arguments validate
    against the tool's inputSchema, and seconds from the reply's last token to the result
    shown in its card (the closing note's figure; run with -s)."""
    import jsonschema

    by_tool: dict[str, list] = {}
    for entry in window.mcp_calls.calls.values():
        if entry.result is not None and entry.result.failure not in ("declined", "cancelled"):
            by_tool.setdefault(f"{entry.tool.server}/{entry.tool.name}", []).append(entry)
    for tool, entries in sorted(by_tool.items()):
        valid = sum(
            jsonschema.Draft202012Validator(e.tool.input_schema).is_valid(e.call.arguments)
            for e in entries
        )
        seconds = [round(e.after_last_token_s, 3) for e in entries]
        figure = {"tool": tool, "calls": len(entries), "valid": valid, "shown_after_s": seconds}
        print("MCP-GUI-FIGURE", json.dumps(figure))


def test_the_panel_lists_servers_tools_and_states(qtbot, mcp_window) -> None:
    window = mcp_window(
        {
            "paint": misbehaving_entry(env={"PAINT_TOKEN": "do-not-show-me"}),
            "broken": {"command": "/nonexistent/server"},
        }
    )

    # The server takes a moment to load the SDK: the panel says it is starting meanwhile.
    def starting() -> bool:
        tree = window.mcp_panel.tree
        items = [tree.topLevelItem(i) for i in range(tree.topLevelItemCount())]
        return any(i.text(0) == "paint" and i.text(1) == "starting…" for i in items)

    qtbot.waitUntil(starting, timeout=10_000)
    wait_ready(qtbot, window, "paint", "broken")
    panel = window.mcp_panel
    tree = panel.tree
    top = {
        tree.topLevelItem(i).text(0): tree.topLevelItem(i) for i in range(tree.topLevelItemCount())
    }
    assert top["paint"].text(1) == "ready · 7 tools"
    assert top["broken"].text(1) == "failed"
    assert "the program was not found" in top["broken"].toolTip(1)
    tools = {top["paint"].child(i).text(0): top["paint"].child(i) for i in range(8)}
    assert tools["paint.pick"].toolTip(0).startswith("Pick a colour for a room")
    # A schema llguidance cannot compile: listed, left out, the reason shown.
    legacy = tools["legacy.lookup"]
    assert legacy.text(1) == "left out"
    assert not legacy.flags() & Qt.ItemFlag.ItemIsUserCheckable  # no switch: never offered
    assert "unclosed group" in legacy.toolTip(1) and "not offered" in legacy.toolTip(1)
    panel.tree.setCurrentItem(legacy)
    assert "Not offered: its inputSchema is not a usable JSON schema" in panel.detail.text()
    # A keyword Corral cannot enforce: offered, with a warning that names it.
    loose = tools["loose.lookup"]
    assert loose.text(1) == "⚠ warning" and '"not"' in loose.toolTip(1)
    assert loose.flags() & Qt.ItemFlag.ItemIsUserCheckable
    assert "1 of 2 servers ready." in panel.status.text()
    # The tool loop's settings and their defaults: 8 steps a turn, 60 s a call.
    assert (panel.max_steps.value(), panel.timeout.value()) == (8, 60)
    panel.tree.setCurrentItem(top["paint"])
    assert "PAINT_TOKEN" in panel.detail.text() and "do-not-show-me" not in panel.detail.text()
    screenshot(window, "mcp_panel")

    # The per-tool switch takes the tool out of the next request, and is remembered.
    tools["paint.pick"].setCheckState(0, Qt.CheckState.Unchecked)
    names = [t["function"]["name"] for t in window.mcp_calls.tool_definitions([])]
    assert "paint.pick" not in names and "echo.text" in names
    assert "legacy.lookup" not in names
    assert window.mcp.disabled_tools() == {("paint", "paint.pick")}
    # The server switch stops it; switching on starts it again.
    top["paint"].setCheckState(0, Qt.CheckState.Unchecked)
    qtbot.waitUntil(lambda: window.mcp.snapshots["paint"].state.value == "off", timeout=20_000)
    assert window.mcp_calls.tool_definitions([]) == []
    assert server_item(window, "paint").text(1) == "off"
    server_item(window, "paint").setCheckState(0, Qt.CheckState.Checked)
    qtbot.waitUntil(lambda: window.mcp.snapshots["paint"].state.value == "ready", timeout=20_000)
    assert window.mcp.disabled_servers() == set()


def test_a_malformed_mcp_json_names_the_line_and_changes_nothing(qtbot, mcp_window, tmp_path):
    window = mcp_window({"paint": misbehaving_entry()})
    wait_ready(qtbot, window, "paint")
    config = window.mcp.config_path
    # Saved from an editor ("Edit mcp.json"): the file watcher reloads it.
    config.write_text('{\n  "mcpServers": {\n    "paint": {"command": 42}\n  }\n}\n')
    status = window.mcp_panel.status
    qtbot.waitUntil(lambda: status.property("error") is True, timeout=10_000)
    assert status.property("error") is True
    assert f'{config}, line 3: server "paint": "command" must be a non-empty string' in (
        status.text()
    )
    assert "nothing was applied" in status.text()
    assert window.mcp.snapshots["paint"].state.value == "ready"  # still running

    # Importing a malformed file (drag-in) names its line and changes nothing either.
    bad = tmp_path / "other_mcp.json"
    bad.write_text('{"mcpServers": {\n  "x": {"url": "ftp://nope"}\n}}')
    assert drop_files(window.mcp_panel, [bad])
    assert "other_mcp.json, line 2" in status.text() and "nothing was imported" in status.text()
    # A good file dropped on the window is imported and its server starts, once the user
    # has seen what it runs and said Start.
    config.write_text(config_text({"paint": misbehaving_entry()}))
    window.mcp.reload()
    good = tmp_path / "claude_desktop_config.json"
    good.write_text(config_text({"banner": misbehaving_entry("banner")}))
    assert drop_files(window, [good])
    window.mcp_panel.consent_dialog.start_button.click()
    assert "Imported banner" in status.text()
    wait_ready(qtbot, window, "paint", "banner")
    assert json.loads(config.read_text())["mcpServers"].keys() == {"paint", "banner"}


def test_edit_and_import_buttons(qtbot, mcp_window, tmp_path, monkeypatch) -> None:
    """Edit mcp.json creates the file if needed and hands it to the user's editor; Import…
    picks a file and adds its servers."""
    from PySide6.QtGui import QDesktopServices
    from PySide6.QtWidgets import QFileDialog

    window = mcp_window({})
    config = window.mcp.config_path
    config.unlink()
    opened: list[str] = []
    # The OS hand-off to an editor cannot happen in a test; record what would be opened.
    monkeypatch.setattr(QDesktopServices, "openUrl", lambda url: opened.append(url.toLocalFile()))
    window.mcp_panel.edit_button.click()
    assert opened == [str(config)]
    assert json.loads(config.read_text()) == {"mcpServers": {}}
    assert "No MCP servers yet" in window.mcp_panel.status.text()

    other = tmp_path / "cursor_mcp.json"
    other.write_text(config_text({"paint": misbehaving_entry()}))
    monkeypatch.setattr(QFileDialog, "getOpenFileName", lambda *a, **k: (str(other), ""))
    window.mcp_panel.import_button.click()
    assert window.mcp.snapshots == {}  # nothing written or started before the user's OK
    window.mcp_panel.consent_dialog.start_button.click()
    assert "Imported paint from cursor_mcp.json." in window.mcp_panel.status.text()
    wait_ready(qtbot, window, "paint")
    assert window.mcp.snapshots["paint"].state.value == "ready"
    assert list(json.loads(config.read_text())["mcpServers"]) == ["paint"]


def test_deny_tells_the_model_and_always_allow_runs_without_asking(qtbot, mcp_window) -> None:
    window = mcp_window({"paint": misbehaving_entry()}, mcp_max_steps=1)
    wait_ready(qtbot, window, "paint")
    use_tool(window, "paint.pick")
    window.send("Paint the kitchen")
    card = last_card(qtbot, window, "ask")
    assert set(card.buttons) == {"once", "always", "deny"}
    assert not window.controller.busy  # waiting for the user, not busy
    screenshot(window, "mcp_card_ask")
    card.buttons["deny"].click()
    qtbot.waitUntil(lambda: not window.controller.busy and len(tool_messages(window)) == 1)
    (told,) = tool_messages(window)
    assert told.content == DECLINED_TEXT and told.meta["mcp"]["failure"] == "declined"
    # The model was told: its next reply was generated from a history with that message.
    qtbot.waitUntil(lambda: window.controller.path()[-1].role == "assistant", timeout=30_000)
    request = window.controller.build_request(
        window.controller.path(), window.controller.conversation
    )
    assert {
        "role": "tool",
        "tool_call_id": told.meta["tool_call_id"],
        "name": "paint.pick",
        "content": DECLINED_TEXT,
    } in request.messages
    assert "Declined — the model was told." in card_text(cards(window)[0])

    # Always allow: this call runs, and the next turn's call runs without asking.
    window.send("Paint the hall")
    card = last_card(qtbot, window, "ask")
    card.buttons["always"].click()
    qtbot.waitUntil(lambda: len(tool_messages(window)) == 2, timeout=30_000)
    qtbot.waitUntil(lambda: not window.controller.busy, timeout=30_000)
    window.send("And the bedroom")
    qtbot.waitUntil(lambda: len(tool_messages(window)) == 3, timeout=30_000)
    results = tool_messages(window)[1:]
    assert all("coat(s) of" in m.content for m in results)
    asked = [
        c for c in window.mcp_calls.calls.values() if c.call.id == results[1].meta["tool_call_id"]
    ]
    assert asked and asked[0].state == "done"
    assert window.mcp.is_always_allowed(asked[0].tool)
    qtbot.waitUntil(lambda: not window.controller.busy, timeout=30_000)
    report_figures(window)


def test_results_show_images_and_are_stored_with_the_conversation(qtbot, mcp_window) -> None:
    window = mcp_window({"paint": misbehaving_entry()}, mcp_max_steps=1)
    wait_ready(qtbot, window, "paint")
    allow_once(qtbot, window, "picture", "Show me a picture", max_tokens=40, results=1)
    stored = tool_messages(window)[0]
    assert [b["type"] for b in stored.meta["mcp"]["blocks"]] == ["text", "image", "resource_link"]

    def shows_image() -> bool:
        return any(
            label.objectName() == "toolImage" and not label.pixmap().isNull()
            for label in cards(window)[0].findChildren(QLabel)
        )

    assert shows_image()
    assert "Link: pixel.png — file:///tmp/pixel.png" in card_text(cards(window)[0])
    assert '"width": 1' in card_text(cards(window)[0])  # structured content, shown as JSON
    screenshot(window, "mcp_card_result")
    # Reopened later (another conversation in between), the stored result shows the same.
    conversation = window.controller.conversation_id
    window.new_chat()
    window.controller.open_conversation(conversation)
    assert shows_image()

    # A tool's own error (isError) is an error card, and the model reads it as one.
    allow_once(qtbot, window, "fail", "Try the failing tool", max_tokens=40, results=2)
    assert tool_messages(window)[1].content == "Error: the disk is full"
    text = card_text(cards(window)[-1])
    assert "The tool reported an error:" in text and "the disk is full" in text
    assert cards(window)[-1].property("error") is True
    report_figures(window)


@pytest.mark.parametrize(
    ("tool", "expected"),
    [
        ("crash", 'The server stopped: the tool server "paint" stopped during the call'),
        ("hang", 'No answer: the tool server "paint" did not answer within 1 s'),
    ],
)
def test_a_crashing_or_hanging_server_gives_an_error_card(qtbot, mcp_window, tool, expected):
    window = mcp_window({"paint": misbehaving_entry()}, mcp_max_steps=1, mcp_call_timeout_s=1)
    wait_ready(qtbot, window, "paint")
    allow_once(qtbot, window, tool, "Go", max_tokens=32, results=1)
    text = card_text(cards(window)[0])
    assert expected in text
    error = [
        lbl for lbl in cards(window)[0].findChildren(QLabel) if lbl.objectName() == "toolError"
    ]
    assert error, "an error card"
    report_figures(window)
    if tool == "crash":
        assert "fatal: the crash tool was called" in text
        qtbot.waitUntil(lambda: window.mcp.snapshots["paint"].state.value == "failed")
        window.mcp_panel.tree.setCurrentItem(window.mcp_panel.tree.topLevelItem(0))
        assert "fatal: the crash tool was called" in window.mcp_panel.stderr_view.toPlainText()
        screenshot(window, "mcp_crash")
        window.mcp_panel.restart_button.click()
        qtbot.waitUntil(
            lambda: window.mcp.snapshots["paint"].state.value == "ready", timeout=30_000
        )
    # The app is usable: the next message gets a reply.
    set_sampling(window, temperature=1.0, max_tokens=8)
    conv = window.controller.conversation
    from dataclasses import replace

    window.store.set_tools(conv.id, replace(conv.tools, tool_choice="none"))
    count = len(window.controller.path())
    window.send("Still there?")
    qtbot.waitUntil(lambda: len(window.controller.path()) == count + 2, timeout=30_000)


def test_garbage_on_stdout_fails_the_server_with_a_clear_message(qtbot, mcp_window) -> None:
    window = mcp_window({"noise": misbehaving_entry("garbage")}, start_timeout=3.0)
    wait_ready(qtbot, window, "noise")
    item = window.mcp_panel.tree.topLevelItem(0)
    assert item.text(1) == "failed"
    assert "not MCP (JSON-RPC) to stdout, e.g. 'Hello! I am not JSON-RPC (0)'" in item.toolTip(1)


def test_stop_cancels_the_call_and_the_turn(qtbot, mcp_window) -> None:
    window = mcp_window({"paint": misbehaving_entry()}, mcp_max_steps=3)
    wait_ready(qtbot, window, "paint")
    allow_once(qtbot, window, "hang", "Wait for it", max_tokens=32)
    qtbot.waitUntil(lambda: window.controller.busy and window.composer.busy)
    assert "Running…" in card_text(cards(window)[-1])
    started = time.monotonic()
    window.composer.button.click()  # Stop
    qtbot.waitUntil(lambda: not window.controller.busy, timeout=10_000)
    assert time.monotonic() - started < 20  # not the 60 s call timeout: Stop cancelled it
    (stored,) = tool_messages(window)
    assert stored.meta["mcp"]["failure"] == "cancelled"
    qtbot.wait(300)
    assert window.controller.path()[-1].role == "tool"  # the turn ended: no further reply
    assert "Cancelled." in card_text(cards(window)[-1])
    assert window.composer.button.accessibleName() == "Send"  # no longer Stop
