"""Layout that fits: at 800x500, 1024x700 and 1440x900, light and dark, with the chats
sidebar and the inspector open, over a conversation full of long words, wide code, a
table, a tool call and notes, no widget is clipped (geometry checks, not pixel diffs):
panels dock or float over the chat, bubbles reflow, code scrolls inside its block."""

from __future__ import annotations

import pytest
from app_helpers import close_window, make_window, screenshot
from PySide6.QtCore import QPoint, QRect, Qt
from PySide6.QtWidgets import (
    QAbstractButton,
    QAbstractScrollArea,
    QAbstractSpinBox,
    QApplication,
    QComboBox,
    QLabel,
    QLineEdit,
    QWidget,
)

from app.constraints import check_source
from app.store import ToolsConfig

SIZES = [(800, 500), (1024, 700), (1440, 900)]
LONG_WORD = "Pneumonoultramicroscopicsilicovolcanoconiosis" * 3
WIDE_CODE = "result = compute(" + ", ".join(f"arg{i}={i}" for i in range(20)) + ")"
REPLY = f"""Here is the plan, with a word that does not fit: {LONG_WORD}.

```python
{WIDE_CODE}
```

| Step | What happens | Time |
|---|---|---|
| 1 | The model reads your message | 0.4 s |
| 2 | It writes the reply, word by word | 2 s |

1. first
2. second, which is a longer item that has to wrap onto another line at narrow widths
"""


def _fill(window) -> None:
    store, conv = window.store, window.controller.conversation
    q = store.add_message(conv.id, None, "user", f"Explain it simply.\n{LONG_WORD}")
    stats = {"ttft_s": 0.4, "total_s": 3.0, "generated_tokens": 60, "decode_tps": 21.0}
    a = store.add_message(
        conv.id, q.id, "assistant", REPLY, {"stats": stats, "stop_reason": "length"}
    )
    q2 = store.add_message(conv.id, a.id, "user", "And the weather in Oslo?")
    call = {"id": "c1", "name": "get_weather", "arguments": {"city": "Oslo", "unit": "C"}}
    a2 = store.add_message(
        conv.id, q2.id, "assistant", "", {"tool_calls": [call], "constraint": "tools: auto (x)"}
    )
    store.add_message(conv.id, a2.id, "tool", "4 °C", {"tool_call_id": "c1", "name": "x"})
    store.rename_conversation(conv.id, "A plan " + LONG_WORD)
    window.refresh_sidebar()
    window.render_chat()
    # Both chips in the composer, with long words: a format kept with the tools.
    checked = check_source("json_schema", '{"type": "object"}', "weekly_shopping_list.json")
    window.controller.set_constraint(checked.spec)
    builtins = ["calculator", "current_datetime", "convert_units"]
    window.controller.set_tools(ToolsConfig(builtins=builtins, tool_choice="required"))


def _scroll_viewport(widget: QWidget, window: QWidget) -> QWidget | None:
    """The viewport of the scroll area `widget` lives in, if any (it may scroll there)."""
    parent = widget.parentWidget()
    while parent is not None and parent is not window:
        area = parent.parentWidget()
        if isinstance(area, QAbstractScrollArea) and area.viewport() is parent:
            return parent
        parent = parent.parentWidget()
    return None


def settle() -> None:
    """Let pending layout requests run (each level of nesting posts its own)."""
    for _ in range(6):
        QApplication.processEvents()


def clipped_widgets(window: QWidget) -> list[str]:
    """Visible widgets cut off by the window, by their parent (outside scroll areas), by the
    sides of the scroll area they scroll in, or squeezed below the size their text needs."""
    problems = []
    frame = window.rect()
    for widget in window.findChildren(QWidget):
        if not widget.isVisible() or widget.isWindow() or widget.width() == 0:
            continue
        if isinstance(widget.parentWidget(), QLineEdit | QAbstractSpinBox | QComboBox):
            continue  # a Qt control's own parts (a spin box's text field, a clear button)
        name = f"{type(widget).__name__}#{widget.objectName()}"
        rect = QRect(widget.mapTo(window, QPoint(0, 0)), widget.size())
        viewport = _scroll_viewport(widget, window)
        if viewport is not None:
            area = QRect(viewport.mapTo(window, QPoint(0, 0)), viewport.size())
            if rect.left() < area.left() - 1 or rect.right() > area.right() + 1:
                problems.append(f"{name} {rect} sticks out of its scroll area {area}")
        else:
            if not frame.contains(rect):
                problems.append(f"{name} {rect} is outside the window {frame}")
            parent = widget.parentWidget()
            if parent is not None and parent is not window:
                outer = QRect(parent.mapTo(window, QPoint(0, 0)), parent.size())
                if not outer.adjusted(-1, -1, 1, 1).contains(rect):
                    problems.append(f"{name} {rect} is cut by its parent {outer}")
        if isinstance(widget, QLabel) and widget.wordWrap() and widget.text():
            needed = widget.heightForWidth(widget.width())
            if needed > widget.height() + 1:
                problems.append(f"{name} '{widget.text()[:30]}' needs {needed}px height")
        elif isinstance(
            widget, QLabel | QAbstractButton | QComboBox | QLineEdit | QAbstractSpinBox
        ):
            hint = widget.minimumSizeHint()
            if widget.width() + 1 < hint.width() or widget.height() + 1 < hint.height():
                problems.append(f"{name} {widget.size()} is smaller than it needs ({hint})")
    return problems


@pytest.mark.parametrize("appearance", ["light", "dark"])
@pytest.mark.parametrize(("width", "height"), SIZES)
def test_nothing_is_clipped(qtbot, tmp_path, tiny_engine, width, height, appearance):
    from app.views.common import theme

    window = make_window(qtbot, tmp_path, tiny_engine)
    theme.apply_appearance(appearance)
    try:
        _fill(window)
        window.resize(width, height)
        window.shell.set_sidebar_open(True)
        for tab in (window.show_tools, window.show_settings):  # the Chat tab ends in front
            tab()
            settle()
            problems = clipped_widgets(window)
            assert not problems, "\n".join(problems)
        chat = window.chat
        viewport = chat.viewport().width()
        # Bubbles reflow: every message fits the conversation's width...
        assert all(w.width() <= viewport for w in chat.message_widgets())
        user = chat.message_widgets()[0]
        assert user.bubble.width() <= user.width() * 0.8 + 1
        # ...and the wide code scrolls inside its block.
        (code,) = chat.message_widgets()[1].body.code_views()
        assert code.text.horizontalScrollBar().maximum() > 0
        # Both chips fit the composer: shortened where narrow, the tools' rule always shown.
        label = window.constraint_bar.chip.label
        shown = label.shown_text()
        assert label.short == "weekly_shopping_list.json (paused)"  # a tool call is required
        assert shown in (label.text(), label.short) or (
            shown.startswith("weekly_") and shown.endswith("…")
        )
        assert window.tools_chip.shown_text().endswith("(must call one)")
        if width == 1440:  # room for whole words
            assert not shown.endswith("…") and not window.tools_chip.shown_text().endswith("…")
        placements = window.shell.placements
        assert placements["inspector"] == ("docked" if width >= 1024 else "overlay")
        if placements["inspector"] == "overlay":  # the chat keeps its width under it
            assert window.chat_area.width() >= width - 260
        else:
            assert window.chat_area.width() >= 440
        window.chat.verticalScrollBar().setValue(window.chat.verticalScrollBar().maximum())
        screenshot(window, f"layout_{width}x{height}_{appearance}")
    finally:
        theme.apply_appearance("system")
        close_window(window)


def test_an_overlay_panel_closes_with_a_click_beside_it(qtbot, tmp_path, tiny_engine):
    window = make_window(qtbot, tmp_path, tiny_engine)
    window.resize(800, 500)
    window.show_settings()
    shell = window.shell
    assert shell.placements["inspector"] == "overlay" and shell.scrim.isVisible()
    assert window.inspector.geometry().right() == shell.width() - 1
    qtbot.mouseClick(shell.scrim, Qt.MouseButton.LeftButton)
    assert not window.inspector.isVisible() and not shell.scrim.isVisible()
    assert not window.settings_action.isChecked()
    window.resize(600, 440)  # narrower than sidebar + chat: the sidebar floats too
    window.toggle_sidebar()
    window.toggle_sidebar()
    assert shell.placements["sidebar"] == "overlay"
    assert window.chat_area.geometry().left() == 0
    close_window(window)


def test_toolbar_and_status_bar_fit_800_wide_through_a_model_load(qtbot, tmp_path, tiny_model_dir):
    """At the narrowest size, loading a model with a long name (progress in the toolbar,
    then the name and its size in the status bar) never pushes the model picker or the
    panel buttons into the toolbar's overflow menu, and clips nothing."""
    import shutil

    from app.application import build_window
    from app.jobs.engine_bridge import EngineBridge
    from app.store import Store

    model = tmp_path / "SmolLM2-135M-Instruct-a-long-name"
    shutil.copytree(tiny_model_dir, model)
    bridge = EngineBridge()
    window = build_window(Store.open(tmp_path / "data"), bridge)
    qtbot.addWidget(window)
    window.resize(800, 500)
    window.show()
    qtbot.waitExposed(window)

    def fits(when: str) -> None:
        settle()
        assert window.width() == 800, when
        panel_button = window.toolbar.widgetForAction(window.settings_action)
        assert window.model_bar.isVisible() and panel_button.isVisible(), when
        problems = clipped_widgets(window)
        assert not problems, f"{when}:\n" + "\n".join(problems)

    window.models.load(str(model))
    fits("loading")
    qtbot.waitUntil(lambda: bridge.model_info is not None, timeout=60_000)
    window.models.update_status()
    fits("loaded")
    picker = window.model_bar.picker
    qtbot.waitUntil(lambda: picker.text().endswith("MB"), timeout=30_000)  # size on disk
    fits("loaded, with its size")
    assert picker.text().startswith("SmolLM2-") and model.name in picker.toolTip()
    assert window.model_label.text().startswith("Model in memory: ")
    screenshot(window, "layout_800x500_after_load")
    close_window(window)
    bridge.close()


def test_toolbar_and_download_window_fit_800_wide_through_a_download(
    qtbot, tmp_path, tiny_model_dir, monkeypatch
):
    """At the narrowest size, a download started from the picker's download window shows
    its progress there and as a chip in the toolbar, and neither clips anything (nor does
    the window when a long repo id and the size check fill it)."""
    from hf_hub_server import HubServer

    from engine.engine import Engine

    monkeypatch.setenv("CORRAL_CACHE_DIR", str(tmp_path / "corral"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    repo = "corral-test/" + "a-long-model-name-" * 3 + "4bit"
    eng = Engine()
    with HubServer({repo: tiny_model_dir}) as hub:
        monkeypatch.setenv("HF_ENDPOINT", hub.url)
        window = make_window(qtbot, tmp_path / "data", eng)
        window.resize(800, 500)
        try:
            window.library.show_download()
            dialog = window.library.download_dialog
            hub.delay = 0.003
            dialog.repo.setText(repo)
            dialog.start.click()
            qtbot.waitUntil(lambda: dialog.progress.value() >= 10, timeout=30_000)
            settle()
            assert dialog.geometry().right() <= window.geometry().right() + 1  # kept on it
            assert not clipped_widgets(dialog), "\n".join(clipped_widgets(dialog))
            screenshot(dialog, "download_window")
            dialog.close()
            settle()
            assert window.width() == 800
            assert window.model_bar.download_chip.isVisible()
            panel_button = window.toolbar.widgetForAction(window.settings_action)
            assert window.model_bar.picker.isVisible() and panel_button.isVisible()
            problems = clipped_widgets(window)
            assert not problems, "\n".join(problems)
            screenshot(window, "layout_800x500_downloading")
            window.library.cancel_download()
            qtbot.waitUntil(lambda: not window.model_bar.download_chip.isVisible(), timeout=30_000)
            assert "resume" in window.notice.text()  # said in the window: its own is closed
        finally:
            close_window(window)
            eng.close()
