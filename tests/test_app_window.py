"""The window's frame: conversations list and search, settings and presets, menus with
standard shortcuts, remembered window state, file-open events, model errors as messages,
and an app package that never imports MLX."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from app_helpers import REPO, close_window, make_window, screenshot
from PySide6.QtGui import QFileOpenEvent, QKeySequence
from PySide6.QtWidgets import QApplication


def test_sidebar_new_search_rename_delete(qtbot, tmp_path, tiny_engine):
    window = make_window(qtbot, tmp_path, tiny_engine)
    store, c = window.store, window.controller
    first = c.conversation_id
    window.actions_by_name["new"].trigger()
    assert c.conversation_id == first  # an empty chat is reused, not piled up
    store.add_message(first, None, "user", "the pangolin question")
    window.actions_by_name["new"].trigger()
    second = c.conversation_id
    assert second != first
    store.rename_conversation(first, "Animals")
    window.refresh_sidebar()
    window.sidebar.search.setText("pangolin")  # matches content, not only titles
    qtbot.waitUntil(lambda: window.sidebar.titles() == ["Animals"], timeout=3000)
    window.sidebar.search.clear()
    qtbot.waitUntil(lambda: len(window.sidebar.titles()) == 2, timeout=3000)
    window.sidebar.renameRequested.emit(second, "Plans")
    assert "Plans" in window.sidebar.titles()
    window.sidebar.list.setCurrentRow(window.sidebar.titles().index("Animals"))
    assert c.conversation_id == first
    assert window.chat.message_widgets()[0].message.content == "the pangolin question"
    window.sidebar.deleteRequested.emit(first)
    assert window.sidebar.titles() == ["Plans"] and c.conversation_id == second
    close_window(window)


def test_settings_and_presets_are_saved_per_conversation(qtbot, tmp_path, tiny_engine):
    window = make_window(qtbot, tmp_path, tiny_engine)
    panel, store = window.settings_panel, window.store
    window.settings_dock.show()
    panel.temperature.setValue(0.3)
    panel.top_k.setValue(40)
    panel.seed.setValue(1234)
    panel.preset.setCurrentText("Programmer")
    panel.preset.activated.emit(panel.preset.currentIndex())
    conv = window.controller.conversation
    assert conv.settings.temperature == 0.3 and conv.settings.top_k == 40
    assert conv.settings.seed == 1234
    assert conv.settings.system_prompt == store.presets()["Programmer"]
    request = window.controller.build_request([], conv)
    assert request.messages[0]["role"] == "system" and request.sampling.top_k == 40
    panel.system_prompt.setPlainText("Talk like a pirate.")
    panel.presetSaved.emit("Pirate", panel.system_prompt.toPlainText())
    assert store.presets()["Pirate"] == "Talk like a pirate."
    assert panel.preset.findText("Pirate") >= 0
    screenshot(window, "settings_panel")
    window.store.add_message(conv.id, None, "user", "x")
    window.new_chat()  # a new chat starts from the current settings
    assert window.controller.conversation.settings.system_prompt == "Talk like a pirate."
    panel.seed.setValue(-1)
    assert window.controller.conversation.settings.seed is None  # "Random"
    close_window(window)


def test_standard_shortcuts_and_remembered_window_state(qtbot, tmp_path, tiny_engine):
    window = make_window(qtbot, tmp_path, tiny_engine)
    acts = window.actions_by_name
    for name, key in (
        ("new", QKeySequence.StandardKey.New),
        ("find", QKeySequence.StandardKey.Find),
        ("close", QKeySequence.StandardKey.Close),
    ):
        assert acts[name].shortcuts()[
            : len(QKeySequence.keyBindings(key))
        ] == QKeySequence.keyBindings(key)
    assert QKeySequence("Ctrl+,") in acts["preferences"].shortcuts()
    assert {QKeySequence("Esc"), QKeySequence("Ctrl+.")} <= set(acts["stop"].shortcuts())
    acts["find"].trigger()
    assert window.sidebar.search.hasFocus() or QApplication.focusWidget() is None
    window.resize(760, 560)  # within the offscreen screen (800x600)
    window.tools_dock.show()
    window.close()
    window.store.close()
    again = make_window(qtbot, tmp_path, tiny_engine)
    assert (again.width(), again.height()) == (760, 560)
    assert again.tools_dock.isVisible()
    close_window(again)


def test_files_opened_through_the_os_become_constraints(qtbot, tmp_path, tiny_engine):
    from app.application import create_application

    window = make_window(qtbot, tmp_path, tiny_engine)
    app, opener = create_application([])
    opener.attach(window.open_files)
    grammar = tmp_path / "verdict.gbnf"
    grammar.write_text('root ::= "guilty" | "not guilty"\n')
    QApplication.sendEvent(app, QFileOpenEvent(str(grammar)))
    qtbot.waitUntil(window.constraint_bar.chip.isVisible, timeout=10_000)
    assert "verdict.gbnf" in window.constraint_bar.chip.label.text()
    app.removeEventFilter(opener)
    close_window(window)


def test_model_errors_are_messages_not_tracebacks(qtbot, tmp_path):
    from app.jobs.engine_bridge import EngineBridge
    from app.store import Store
    from app.views.main_window import MainWindow

    bridge = EngineBridge()  # its own engine: a failed load unloads the engine's model
    window = MainWindow(Store.open(tmp_path), bridge)
    qtbot.addWidget(window)
    window.show()
    window.load_model(str(tmp_path / "no-such-model"))
    qtbot.waitUntil(window.notice.isVisible, timeout=30_000)
    assert "could not be loaded" in window.notice.text() and "no-such-model" in window.notice.text()
    assert "Traceback" not in window.notice.text()
    assert window.model_bar.picker.text() == "Model: none"
    window.send("hello")  # no model: the reply fails with a message
    qtbot.waitUntil(lambda: not window.controller.busy, timeout=30_000)
    assert "no model is loaded" in window.notice.text()
    screenshot(window, "model_error")
    window.close()
    window.store.close()
    bridge.close()


def test_app_starts_and_never_imports_mlx(tmp_path):
    """`python -m app` shows its window while the model is still loading, and nothing the
    GUI imports (constraint checks included) pulls in MLX."""
    missing = tmp_path / "no-model"  # fails fast; the window must not wait for it anyway
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "app",
            "--data-dir",
            str(tmp_path),
            "--model",
            str(missing),
            "--report-startup",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "QT_QPA_PLATFORM": "offscreen"},
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    events = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    assert [e["event"] for e in events] == ["shown", "model_failed"]
    assert events[0]["model_loading"] is True and "no-model" in events[1]["error"]
    probe = (
        "import sys, pathlib\n"
        "import app.__main__, app.views.main_window, app.controller\n"
        "from app.constraints import check_file, check_source\n"
        "from app.tools import parse_tools_text, builtin_tools\n"
        f"p = pathlib.Path({str(tmp_path)!r}) / 'g.lark'\n"
        "p.write_text('start: \"a\"')\n"
        "assert check_file(p).ok and check_source('regex', 'a+').ok\n"
        'parse_tools_text(\'[{"type": "function", "function": {"name": "f"}}]\')\n'
        "builtin_tools()\n"
        "print(sorted(m for m in sys.modules if m == 'mlx' or m.startswith('mlx.')))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "[]"


_REFCOUNTS = """
import sys
from PySide6.QtWidgets import QApplication, QLabel
from app.qt_compat import guard_refcounts
app = QApplication([])
applied = guard_refcounts()
label = QLabel()
none, true = sys.getrefcount(None), sys.getrefcount(True)
for _ in range(30_000):
    label.setText("x")  # a void method
    label.windowTitleChanged.emit("x")  # a signal emit
print(applied, none - sys.getrefcount(None), true - sys.getrefcount(True), sys.getrefcount(None))
"""


def test_many_qt_calls_do_not_exhaust_none():
    """PySide6 6.12.0 on Python 3.11 drops a reference to None per void call and to True
    per signal emit, until the interpreter aborts. In a child process (so an abort cannot
    take the tests down): either this PySide6 does not leak, or the guard is on and None
    keeps far more references than any session can drop."""
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen")
    run = subprocess.run(
        [sys.executable, "-c", _REFCOUNTS], capture_output=True, text=True, env=env, cwd=REPO
    )
    assert run.returncode == 0, run.stderr[-2000:]
    applied, leaked_none, leaked_true, none_left = run.stdout.split()
    if applied == "True":
        assert int(none_left) > 1 << 39
    else:  # no guard: then the binding must not leak (a 30,000-call loop leaks 30,000)
        assert int(leaked_none) < 1000 and int(leaked_true) < 1000


def test_dark_palette_follows_the_system(qtbot, tmp_path, tiny_engine):
    """With a dark system palette every part of the window is drawn from it (no hard-coded
    light colours): a screenshot of a rich conversation in dark mode."""
    from PySide6.QtGui import QColor, QPalette

    window = make_window(qtbot, tmp_path, tiny_engine)
    store, conv = window.store, window.controller.conversation
    q = store.add_message(conv.id, None, "user", "Give me a function and call the weather tool.")
    a = store.add_message(
        conv.id,
        q.id,
        "assistant",
        "Here it is:\n\n```python\ndef add(a, b):\n    return a + b\n```\n\n- **fast**\n- *typed*",
        {
            "constraint": "answer.lark",
            "stats": {
                "ttft_s": 0.12,
                "decode_tps": 41.5,
                "generated_tokens": 30,
                "prompt_tokens": 60,
                "cached_tokens": 48,
                "forced_tokens": 5,
                "mask_overhead_ms": 0.4,
            },
            "tool_calls": [{"id": "c1", "name": "get_weather", "arguments": {"city": "Oslo"}}],
        },
    )
    store.select_branch(a.id)
    app = QApplication.instance()
    light = app.palette()
    dark = QPalette()
    for role, colour in (
        (QPalette.ColorRole.Window, "#1e1e1e"),
        (QPalette.ColorRole.WindowText, "#e6e6e6"),
        (QPalette.ColorRole.Base, "#252526"),
        (QPalette.ColorRole.AlternateBase, "#2d2d30"),
        (QPalette.ColorRole.Text, "#e6e6e6"),
        (QPalette.ColorRole.Button, "#333337"),
        (QPalette.ColorRole.ButtonText, "#e6e6e6"),
        (QPalette.ColorRole.Mid, "#6b6b6b"),
        (QPalette.ColorRole.Midlight, "#3c3c3c"),
        (QPalette.ColorRole.Highlight, "#2f65ca"),
        (QPalette.ColorRole.HighlightedText, "#ffffff"),
        (QPalette.ColorRole.PlaceholderText, "#8a8a8a"),
        (QPalette.ColorRole.Link, "#6ea8ff"),
    ):
        dark.setColor(role, QColor(colour))
    app.setPalette(dark)
    try:
        window.render_chat()
        reply = window.chat.message_widgets()[-1]
        assert reply.cards and not reply.badge.isHidden() and "48/60" in reply.stats.text()
        screenshot(window, "dark_mode")
        image = window.grab().toImage()
        # The chat column is drawn from the dark Base colour, not a light default.
        empty_spot = window.chat.mapTo(window, window.chat.rect().center())
        empty_spot.setY(window.chat.mapTo(window, window.chat.rect().bottomLeft()).y() - 20)
        assert image.pixelColor(empty_spot).lightness() < 80
    finally:
        app.setPalette(light)
    close_window(window)


def test_composer_keys_and_export(qtbot, tmp_path, tiny_engine, monkeypatch):
    from PySide6.QtCore import Qt
    from PySide6.QtWidgets import QFileDialog

    window = make_window(qtbot, tmp_path, tiny_engine)
    edit = window.composer.edit
    qtbot.keyClicks(edit, "line one")
    qtbot.keyClick(edit, Qt.Key.Key_Return, Qt.KeyboardModifier.ShiftModifier)
    qtbot.keyClicks(edit, "line two")
    assert edit.toPlainText() == "line one\nline two" and not window.controller.busy
    conv = window.controller.conversation
    q = window.store.add_message(conv.id, None, "user", "Export me")
    window.store.add_message(conv.id, q.id, "assistant", "**Done**", {"constraint": "x.lark"})
    for fmt in ("md", "json"):
        target = tmp_path / f"chat.{fmt}"
        monkeypatch.setattr(
            QFileDialog,
            "getSaveFileName",
            staticmethod(lambda *a, target=target, **k: (str(target), "")),
        )
        window.actions_by_name[f"export_{fmt}"].trigger()
        assert target.exists()
    assert "## Assistant (constrained: x.lark)" in (tmp_path / "chat.md").read_text()
    data = json.loads((tmp_path / "chat.json").read_text())
    assert [m["content"] for m in data["messages"]] == ["Export me", "**Done**"]
    close_window(window)
