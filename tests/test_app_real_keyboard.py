"""The real app (`python -m app`, Qt's xcb plugin under Xvfb) on an 800×500 screen, driven by the
keyboard alone: send a message, regenerate it (Ctrl+R), write three versions
(Ctrl+Shift+R), open the reply's Inspect by Shift+Tab and Space, open Preferences (Ctrl+,),
Tab through it, close it with Esc; focus is back in the composer after each step."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from app_helpers import REPO

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="Xvfb is a Linux virtual display"
)

# A user at the keyboard: every action is a key event sent to the widget with focus
# (the chat's sampling is set first, so the tiny model's replies are short and varied).
_DRIVER = r"""
import json, sys, time
from PySide6.QtCore import QTimer, Qt
from PySide6.QtGui import QGuiApplication
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication
from app import __main__ as entry
from app.store import ChatSettings
from app.views.main import window as main_window

CTRL, SHIFT = Qt.KeyboardModifier.ControlModifier, Qt.KeyboardModifier.ShiftModifier
def emit(event, **extra):
    print(json.dumps({"event": event, **extra}), flush=True)

def focus():
    return QApplication.focusWidget()

def key(k, mods=Qt.KeyboardModifier.NoModifier):
    QTest.keyClick(focus(), k, mods)

build = main_window.MainWindow.__init__
def drive(self, *args, **kwargs):
    build(self, *args, **kwargs)
    w = self
    steps = []
    def then(check, action):
        steps.append((check, action))
    def tick():
        if not steps:
            return
        check, action = steps[0]
        if check():
            steps.pop(0)
            action()
        QTimer.singleShot(50, tick)
    idle = lambda: not w.controller.busy
    seen = []
    w.controller.replyText.connect(
        lambda _t: seen.append(w.chat.reply.status.text()) if w.chat.reply else None)

    def ready(_info):
        w.resize(800, 500)
        conv = w.controller.conversation
        w.store.set_chat_settings(conv.id, ChatSettings(temperature=10.0, max_tokens=6))
        w.settings_panel.set_settings(w.store.conversation(conv.id).settings)
        w.activateWindow()  # what a window manager does for a new window (Xvfb has none)
        then(lambda: focus() is w.composer.edit, send)
        QTimer.singleShot(50, tick)
    def send():
        QTest.keyClicks(focus(), "Hello there")
        key(Qt.Key.Key_Return)
        emit("sent", size=[w.width(), w.height()], platform=QGuiApplication.platformName())
        then(idle, regenerate)
    def regenerate():
        emit("replied", focus=focus() is w.composer.edit,
             roles=[m.role for m in w.controller.path()])
        seen.clear()
        key(Qt.Key.Key_R, CTRL)
        then(idle, versions)
    def versions():
        emit("regenerated", focus=focus() is w.composer.edit, seen=sorted(set(seen)),
             switcher=w.chat.message_widgets()[-1].switcher.label.text())
        seen.clear()
        key(Qt.Key.Key_R, CTRL | SHIFT)
        then(idle, inspect)
    def inspect():
        last = w.chat.message_widgets()[-1]
        emit("versions", focus=focus() is w.composer.edit, seen=sorted(set(seen)),
             switcher=last.switcher.label.text())
        button = last.action_buttons.get("Inspect")
        for _ in range(80):
            if focus() is button:
                break
            key(Qt.Key.Key_Backtab)
        reached = focus() is button
        key(Qt.Key.Key_Space)
        emit("inspect", reached=reached,
             shown=last.token_view is not None and last.token_view.isVisible())
        w.composer.edit.setFocus()  # as a click would; the keys go on from there
        key(Qt.Key.Key_Comma, CTRL)
        then(lambda: w.preferences.dialog is not None and w.preferences.dialog.isVisible(),
             preferences)
    def preferences():
        dialog = w.preferences.dialog
        dialog.activateWindow()
        values = (dialog.chat_size.value(), dialog.new_prompt.currentIndex())
        for _ in range(10):
            key(Qt.Key.Key_Tab)
        inside = dialog.isAncestorOf(focus()) if focus() else False
        key(Qt.Key.Key_Escape)
        def closed():
            emit("preferences", inside=inside, unchanged=values == (
                dialog.chat_size.value(), dialog.new_prompt.currentIndex()),
                fits=dialog.frameGeometry().width() <= 800
                and dialog.frameGeometry().height() <= 500)
            # the window's own focus (a window manager would make it active again)
            then(lambda: w.focusWidget() is w.composer.edit, lambda: (emit("back"), w.quit()))
        then(lambda: not dialog.isVisible(), closed)
    w.bridge.modelLoaded.connect(ready)
    w.bridge.loadFailed.connect(lambda message: (emit("load_failed", message=message), w.quit()))
main_window.MainWindow.__init__ = drive
code = entry.main(sys.argv[1:])
emit("exit", code=code)
sys.exit(code)
"""


def _start_xvfb() -> tuple[subprocess.Popen[bytes], str]:
    read, write = os.pipe()
    proc = subprocess.Popen(
        ["Xvfb", "-displayfd", str(write), "-screen", "0", "800x500x24", "-nolisten", "tcp"],
        pass_fds=(write,),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    os.close(write)
    with os.fdopen(read) as pipe:
        number = pipe.readline().strip()
    if not number:
        proc.kill()
        raise RuntimeError("Xvfb did not start")
    return proc, f":{number}"


def test_real_app_at_800x500_by_keyboard_alone(tmp_path: Path, tiny_model_dir: Path) -> None:
    if shutil.which("Xvfb") is None:
        pytest.fail("Xvfb is missing: ./bootstrap.sh test installs it (Debian package xvfb)")
    xvfb, display = _start_xvfb()
    try:
        env = {
            **os.environ,
            "DISPLAY": display,
            "QT_QPA_PLATFORM": "xcb",
            "CORRAL_LOG_DIR": str(tmp_path / "logs"),
        }
        proc = subprocess.run(
            [sys.executable, "-c", _DRIVER, "--data-dir", str(tmp_path / "data")]
            + ["--model", str(tiny_model_dir)],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
    finally:
        xvfb.terminate()
        xvfb.wait(timeout=10)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    events = {}
    for line in proc.stdout.splitlines():
        if line.startswith("{"):
            event = json.loads(line)
            events[event["event"]] = event
    assert list(events) == [
        "sent",
        "replied",
        "regenerated",
        "versions",
        "inspect",
        "preferences",
        "back",
        "exit",
    ], proc.stdout + proc.stderr[-3000:]
    assert events["sent"]["platform"] == "xcb" and events["sent"]["size"] == [800, 500]
    assert events["replied"]["roles"] == ["user", "assistant"] and events["replied"]["focus"]
    regenerated = events["regenerated"]
    assert regenerated["focus"] and regenerated["switcher"] == "2/2"
    assert regenerated["seen"] and all(
        s.startswith("Writing version 2 of 2…") for s in regenerated["seen"]
    )
    versions = events["versions"]
    assert versions["focus"] and versions["switcher"] == "3/5"
    assert all(s.startswith("Writing 3 versions (3 to 5 of 5)…") for s in versions["seen"])
    assert events["inspect"] == {"event": "inspect", "reached": True, "shown": True}
    prefs = events["preferences"]
    assert prefs["inside"] and prefs["unchanged"] and prefs["fits"]
    assert events["exit"]["code"] == 0
