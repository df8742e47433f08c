"""Shared pieces for the MCP GUI tests: a window whose mcp.json (in tmp) lists given servers
(approved beforehand, as a user who OK'd them earlier, unless told otherwise), waiting for
servers to settle, every text a window shows (to look for leaked secrets), and driving the
tiny model into a tool call and its card."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from app_helpers import set_sampling
from mcp_support import config_text


def open_mcp_window(
    qtbot: Any,
    data_dir: Path,
    config: Path,
    engine: Any,
    servers: dict,
    *,
    approved: bool = True,
    start_timeout: float = 60.0,
    **settings: Any,
) -> Any:
    """A shown MainWindow over `engine` whose mcp.json at `config` lists `servers`; with
    `approved`, the user has OK'd these exact configurations before."""
    from app.application import build_window
    from app.jobs.engine_bridge import EngineBridge
    from app.jobs.mcp_job import McpBridge
    from app.store import Store
    from engine.mcp.config import parse_config

    config.parent.mkdir(exist_ok=True)
    config.write_text(config_text(servers))
    store = Store.open(data_dir)
    for key, value in settings.items():
        store.set_setting(key, value)
    bridge = McpBridge(store, config, start_timeout=start_timeout)
    if approved:
        bridge.approve_servers(list(parse_config(config.read_text()).servers))
    window = build_window(store, EngineBridge(engine), bridge)
    qtbot.addWidget(window)
    window.resize(1180, 780)
    window.show()
    qtbot.waitExposed(window)
    window.mcp.start()
    window.show_tools()
    return window


def wait_ready(qtbot: Any, window: Any, *names: str, timeout: int = 30_000) -> None:
    """Until each named server is ready or failed."""

    def settled() -> bool:
        snaps = window.mcp.snapshots
        return all(n in snaps and snaps[n].state.value in ("ready", "failed") for n in names)

    qtbot.waitUntil(settled, timeout=timeout)


def server_item(window: Any, name: str) -> Any:
    tree = window.mcp_panel.tree
    items = [tree.topLevelItem(i) for i in range(tree.topLevelItemCount())]
    return next(item for item in items if item.text(0) == name)


def widget_texts(root: Any) -> str:
    """Every text `root` and the widgets under it (dialogs included) can show: labels,
    buttons, tooltips, line and text edits, tree items and their tooltips, window titles."""
    from PySide6.QtWidgets import (
        QAbstractButton,
        QLabel,
        QLineEdit,
        QPlainTextEdit,
        QStatusBar,
        QTextEdit,
        QTreeWidget,
        QWidget,
    )

    texts: list[str] = []
    for widget in [root, *root.findChildren(QWidget)]:
        texts += [widget.toolTip(), widget.windowTitle(), widget.accessibleName()]
        if isinstance(widget, (QLabel, QAbstractButton, QLineEdit)):
            texts.append(widget.text())
        if isinstance(widget, QStatusBar):
            texts.append(widget.currentMessage())
        if isinstance(widget, QPlainTextEdit):
            texts.append(widget.toPlainText())
        if isinstance(widget, QTextEdit):
            texts += [widget.toPlainText(), widget.toHtml()]
        if isinstance(widget, QTreeWidget):
            stack = [widget.topLevelItem(i) for i in range(widget.topLevelItemCount())]
            while stack:
                item = stack.pop()
                for column in range(widget.columnCount()):
                    texts += [item.text(column), item.toolTip(column)]
                stack += [item.child(i) for i in range(item.childCount())]
    return "\n".join(t for t in texts if t)


def use_tool(window: Any, name: str, max_tokens: int = 48) -> None:
    """The open conversation's first reply must call `name`; then one step, then text."""
    from dataclasses import replace

    conv = window.controller.conversation
    window.store.set_tools(conv.id, replace(conv.tools, tool_choice=name))
    set_sampling(window, temperature=1.0, max_tokens=max_tokens, seed=3)


def cards(window) -> list:
    """The MCP cards of the messages shown, in order."""
    from app.views.mcp.card import McpCallCard

    shown = [card for widget in window.chat.message_widgets() for card in widget.cards]
    return [card for card in shown if isinstance(card, McpCallCard)]


def last_card(qtbot, window, state: str | None = None, timeout: int = 30_000):
    def found():
        shown = cards(window)
        return bool(shown) and (state is None or shown[-1].state == state)

    qtbot.waitUntil(found, timeout=timeout)
    return cards(window)[-1]


def card_text(card: Any) -> str:
    from PySide6.QtWidgets import QLabel

    return "\n".join(label.text() for label in card.findChildren(QLabel))


def tool_messages(window) -> list:
    return [m for m in window.controller.path() if m.role == "tool"]


def allow_once(
    qtbot, window, tool: str, prompt: str, max_tokens: int, results: int | None = None
) -> None:
    """Make the reply to `prompt` call `tool` and allow the call once; with `results`, wait
    until that many tool results are stored and the turn is over."""
    use_tool(window, tool, max_tokens=max_tokens)
    window.send(prompt)
    last_card(qtbot, window, "ask").buttons["once"].click()
    if results is not None:
        qtbot.waitUntil(lambda: len(tool_messages(window)) == results, timeout=30_000)
        qtbot.waitUntil(lambda: not window.controller.busy, timeout=30_000)
