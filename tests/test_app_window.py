"""The window's frame: conversations list with search and inline rename (the window title
follows), settings and presets, menus with standard shortcuts, remembered window state,
file-open events, an honest model box after a failed load, export, and an app package
that never imports MLX."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

from app_helpers import REPO, close_window, make_window, screenshot
from PySide6.QtCore import Qt
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
    window.sidebar.list.setCurrentRow(window.sidebar.titles().index("Animals"))
    assert c.conversation_id == first
    assert window.chat.message_widgets()[0].message.content == "the pangolin question"
    window.sidebar.deleteRequested.emit(first)
    assert window.sidebar.titles() == ["New chat"] and c.conversation_id == second
    close_window(window)


def test_rename_in_place_and_the_window_title_follows(qtbot, tmp_path, tiny_engine):
    window = make_window(qtbot, tmp_path, tiny_engine)
    cid = window.controller.conversation_id
    window.store.add_message(cid, None, "user", "plans for the weekend")
    window.refresh_sidebar()
    assert window.windowTitle() == "New chat — Corral"
    window.actions_by_name["rename"].trigger()  # F2 / Chat > Rename: an inline field
    editor = window.sidebar.rename_editor()
    assert editor is not None and editor.text() == "New chat"
    row = window.sidebar.list.visualItemRect(window.sidebar.list.item(0))
    assert editor.width() >= row.width() - 8 and editor.height() >= row.height() - 4
    editor.selectAll()
    qtbot.keyClicks(editor, "Weekend")
    qtbot.keyClick(editor, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: window.store.conversation(cid).title == "Weekend", timeout=3000)
    assert window.sidebar.titles() == ["Weekend"]
    assert window.windowTitle() == "Weekend — Corral"
    window.actions_by_name["rename"].trigger()
    qtbot.keyClick(window.sidebar.rename_editor(), Qt.Key.Key_Escape)  # Esc keeps the title
    qtbot.wait(50)
    assert window.store.conversation(cid).title == "Weekend"
    close_window(window)


def test_settings_and_presets_are_saved_per_conversation(qtbot, tmp_path, tiny_engine):
    window = make_window(qtbot, tmp_path, tiny_engine)
    panel, store = window.settings_panel, window.store
    window.show_settings()
    assert window.inspector.isVisible() and window.inspector_tabs.currentIndex() == 0
    assert panel.sampling_state.text() == "Model defaults" and not panel.reset_sampling.isEnabled()
    panel.temperature.setValue(0.3)
    panel.top_k.setValue(40)
    panel.seed.setValue(1234)
    assert panel.sampling_state.text() == "Custom" and panel.reset_sampling.isEnabled()
    assert panel.temperature.property("followsModel") is False
    assert panel.top_p.property("followsModel") is True  # untouched values follow the model
    panel.preset.setCurrentText("Programmer")
    panel.preset.activated.emit(panel.preset.currentIndex())
    conv = window.controller.conversation
    assert conv.settings.temperature == 0.3 and conv.settings.top_k == 40
    assert conv.settings.top_p is None and conv.settings.seed == 1234
    assert conv.settings.system_prompt == store.presets()["Programmer"]
    request = window.controller.build_request([], conv)
    assert request.messages[0]["role"] == "system" and request.sampling.top_k == 40
    # The preset box follows the prompt: edited by hand, it says Custom.
    assert panel.preset.currentText() == "Programmer"
    panel.system_prompt.setPlainText("Talk like a pirate.")
    assert panel.preset.currentText() == "Custom"
    panel.presetSaved.emit("Pirate", panel.system_prompt.toPlainText())
    assert store.presets()["Pirate"] == "Talk like a pirate."
    assert panel.preset.currentText() == "Pirate"
    screenshot(window, "settings_panel")
    panel.reset_sampling.click()
    conv = window.controller.conversation
    assert conv.settings.custom_fields() == [] and panel.sampling_state.text() == "Model defaults"
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
        bindings = QKeySequence.keyBindings(key)
        assert acts[name].shortcuts()[: len(bindings)] == bindings
    assert QKeySequence("Ctrl+,") in acts["preferences"].shortcuts()
    assert {QKeySequence("Esc"), QKeySequence("Ctrl+.")} <= set(acts["stop"].shortcuts())
    acts["find"].trigger()
    assert window.sidebar.search.hasFocus() or QApplication.focusWidget() is None
    window.resize(760, 560)  # within the offscreen screen (800x600)
    window.tools_action.trigger()
    assert window.inspector_tabs.currentIndex() == 1  # Tools brings its tab to the front
    close_window(window)
    again = make_window(qtbot, tmp_path, tiny_engine)
    assert (again.width(), again.height()) == (760, 560)
    assert again.inspector.isVisible() and again.inspector_tabs.currentIndex() == 1
    assert again.tools_action.isChecked() and not again.settings_action.isChecked()
    again.tools_action.trigger()  # a second click closes the panel
    assert not again.inspector.isVisible()
    close_window(again)


def test_files_opened_through_the_os_become_constraints(qtbot, tmp_path, tiny_engine):
    from app.application import create_application

    window = make_window(qtbot, tmp_path, tiny_engine)
    app, opener = create_application([])
    opener.attach(window.files.open)
    grammar = tmp_path / "verdict.gbnf"
    grammar.write_text('root ::= "guilty" | "not guilty"\n')
    QApplication.sendEvent(app, QFileOpenEvent(str(grammar)))
    qtbot.waitUntil(window.constraint_bar.chip.isVisible, timeout=30_000)
    assert window.constraint_bar.chip.label.text() == "Reply as: verdict.gbnf (GBNF grammar)"
    app.removeEventFilter(opener)
    close_window(window)


def test_a_failed_load_shows_what_is_loaded_and_keeps_the_previous_model(
    qtbot, tmp_path, tiny_model_dir
):
    from app.application import build_window
    from app.jobs.engine_bridge import EngineBridge
    from app.jobs.library_job import model_disk_size
    from app.store import ChatSettings, Store
    from app.views.common.format import format_bytes

    bridge = EngineBridge()  # its own pool: nothing loaded yet
    window = build_window(Store.open(tmp_path), bridge)
    qtbot.addWidget(window)
    window.show()
    picker = window.model_bar.picker

    # The first model fails to load: nothing is loaded, and a question waits with a way on.
    window.models.load(str(tmp_path / "no-such-model"))
    qtbot.waitUntil(window.notice.isVisible, timeout=30_000)
    text = window.notice.text()
    assert "could not be loaded" in text and "no-such-model" in text and "Traceback" not in text
    assert re.search(r"\w[.!?] No model is loaded now\.$", text), text  # whole sentences
    assert picker.text() == "No model"  # the picker shows what is loaded
    assert window.model_label.text() == "No model"
    assert not any(a.isChecked() for a in window.model_bar.menu.actions())
    assert not window.notice.action.isVisible()  # nothing was loaded before
    assert bridge.pool is not None and not bridge.pool.snapshot.served_models()  # unlisted
    screenshot(window, "model_error")

    window.send("hello")  # no model: the question stays, with why and a way forward
    qtbot.waitUntil(lambda: not window.controller.busy, timeout=30_000)
    question = window.chat.message_widgets()[-1]
    assert question.role == "user" and "no model is loaded" in question.status.text()
    assert question.note_action.isVisibleTo(window) and question.note_action.text() == "Retry"

    window.models.load(str(tiny_model_dir))
    assert window.loading_strip.isVisible() and "Loading" in window.loading_strip.label.text()
    qtbot.waitUntil(lambda: bridge.model_info is not None, timeout=60_000)
    assert not window.loading_strip.isVisible()
    assert picker.text().startswith(tiny_model_dir.name)
    # its size on disk beside its name, and it heads the picker's menu, ticked
    label = f"{tiny_model_dir.name} · {format_bytes(model_disk_size(str(tiny_model_dir)))}"
    qtbot.waitUntil(lambda: picker.text() == label, timeout=30_000)
    qtbot.waitUntil(
        lambda: window.model_bar.model_actions()[:1] == [(label, str(tiny_model_dir))],
        timeout=30_000,
    )
    assert [a.text() for a in window.model_bar.menu.actions() if a.isChecked()] == [label]
    window.store.set_chat_settings(
        window.controller.conversation_id, ChatSettings(max_tokens=4, temperature=10.0)
    )
    question.note_action.click()
    qtbot.waitUntil(lambda: not window.controller.busy, timeout=60_000)
    assert [w.role for w in window.chat.message_widgets()] == ["user", "assistant"]

    # Another model fails to load: the one loaded stays loaded, and the chat's model.
    window.models.load(str(tmp_path / "no-such-model"))
    qtbot.waitUntil(
        lambda: window.notice.isVisible() and "no-such-model" in window.notice.text(),
        timeout=30_000,
    )
    text = window.notice.text()
    assert "could not be loaded" in text and "No model is loaded now" not in text
    assert picker.text() == label and not window.notice.action.isVisible()
    assert bridge.model_info is not None and bridge.model_info.name == tiny_model_dir.name
    close_window(window)
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
        "import app.__main__, app.views.main.window, app.chat.controller\n"
        "from app.constraints import check_file, check_source\n"
        "from app.tools import parse_tools_text, builtin_tools\n"
        "from engine.library.defaults import sampling_defaults\n"
        f"p = pathlib.Path({str(tmp_path)!r}) / 'g.lark'\n"
        "p.write_text('start: \"a\"')\n"
        "assert check_file(p).ok and check_source('regex', 'a+').ok\n"
        'parse_tools_text(\'[{"type": "function", "function": {"name": "f"}}]\')\n'
        "builtin_tools()\n"
        "sampling_defaults(p.parent, 'x')\n"
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


def test_composer_keys_grow_and_export(qtbot, tmp_path, tiny_engine, monkeypatch):
    from PySide6.QtWidgets import QFileDialog

    window = make_window(qtbot, tmp_path, tiny_engine)
    edit = window.composer.edit
    one_line = edit.height()
    qtbot.keyClicks(edit, "line one")
    qtbot.keyClick(edit, Qt.Key.Key_Return, Qt.KeyboardModifier.ShiftModifier)
    qtbot.keyClicks(edit, "line two")
    assert edit.toPlainText() == "line one\nline two" and not window.controller.busy
    assert edit.height() > one_line  # the composer grows with its text...
    edit.setPlainText("\n".join(f"line {i}" for i in range(40)))
    assert edit.height() < 12 * edit.fontMetrics().lineSpacing()  # ...up to a limit
    edit.clear()
    assert edit.height() == one_line

    conv = window.controller.conversation
    window.store.rename_conversation(conv.id, "Trip: Oslo/Bergen?")
    q = window.store.add_message(conv.id, None, "user", "Export me")
    window.store.add_message(conv.id, q.id, "assistant", "**Done**", {"constraint": "x.lark"})
    folder = tmp_path / "exports"
    folder.mkdir()
    suggested: list[str] = []

    def save_dialog(_parent, _title, path, _filter, **_kw):
        suggested.append(path)
        from pathlib import Path

        return (str(folder / Path(path).name), "")

    monkeypatch.setattr(QFileDialog, "getSaveFileName", staticmethod(save_dialog))
    window.actions_by_name["export_md"].trigger()
    window.actions_by_name["export_json"].trigger()
    # The title becomes the file name (unsafe characters replaced); the second export
    # suggests the folder the first one went to.
    assert suggested[0].endswith("Trip- Oslo-Bergen.md")
    assert suggested[1] == str(folder / "Trip- Oslo-Bergen.json")
    assert "## Assistant (constrained: x.lark)" in (folder / "Trip- Oslo-Bergen.md").read_text()
    data = json.loads((folder / "Trip- Oslo-Bergen.json").read_text())
    assert [m["content"] for m in data["messages"]] == ["Export me", "**Done**"]
    close_window(window)
