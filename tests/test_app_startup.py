"""The real app process on a real (virtual) X display: `app.__main__.main()` with Qt's xcb
platform plugin under Xvfb. The window appears while the model loads, a message typed and
sent meanwhile waits and goes out when the model is ready, the reply arrives, and the app
quits cleanly. This is the check that fails when the xcb plugin's libraries are missing."""

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

# Runs `python -m app`'s main() with a driver that acts like a user: it types into the
# composer with real key events while the model is loading, then reports what happened.
_DRIVER = r"""
import json, sys, time
from PySide6.QtCore import QTimer, Qt
from PySide6.QtGui import QGuiApplication
from PySide6.QtTest import QTest
from app import __main__ as entry
from app.store import ChatSettings
from app.views.main import window as main_window

started = time.perf_counter()
def emit(event, **extra):
    print(json.dumps({"event": event, "t_s": round(time.perf_counter() - started, 3), **extra}),
          flush=True)

build = main_window.MainWindow.__init__
def drive(self, *args, **kwargs):
    build(self, *args, **kwargs)
    window = self
    def shown():
        conv = window.controller.conversation
        window.store.set_chat_settings(conv.id, ChatSettings(max_tokens=8))
        emit("shown", platform=QGuiApplication.platformName(), loading=window.bridge.loading,
             strip=window.loading_strip.isVisible())
        edit = window.composer.edit
        edit.setFocus()
        QTest.keyClicks(edit, "Hello there")
        QTest.keyClick(edit, Qt.Key.Key_Return)
        emit("sent", loading=window.bridge.loading, busy=window.controller.busy,
             status=window.chat.reply.status.text() if window.chat.reply else "")
    def ready(_info):
        emit("model_ready", busy=window.controller.busy)
    def finished(result):
        def report():  # once the window has shown the saved reply
            emit("reply", text_length=len(result.text), error=result.error,
                 roles=[w.role for w in window.chat.message_widgets()])
            window.quit()
        QTimer.singleShot(0, report)
    window.bridge.modelLoaded.connect(ready)
    window.controller.replyFinished.connect(finished)
    window.bridge.loadStarted.connect(lambda _spec: QTimer.singleShot(0, shown))
main_window.MainWindow.__init__ = drive
code = entry.main(sys.argv[1:])
emit("exit", code=code)
sys.exit(code)
"""


def _start_xvfb() -> tuple[subprocess.Popen[bytes], str]:
    """Xvfb on a free display number (it writes the number it chose to a pipe)."""
    read, write = os.pipe()
    proc = subprocess.Popen(
        ["Xvfb", "-displayfd", str(write), "-screen", "0", "1280x800x24", "-nolisten", "tcp"],
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


def test_real_app_on_a_virtual_display_sends_a_message_typed_while_loading(
    tmp_path: Path, default_model_dir: Path
) -> None:
    if shutil.which("Xvfb") is None:
        pytest.fail("Xvfb is missing: ./bootstrap.sh test installs it (Debian package xvfb)")
    xvfb, display = _start_xvfb()
    try:
        env = {
            **os.environ,
            "DISPLAY": display,
            "QT_QPA_PLATFORM": "xcb",
        }
        proc = subprocess.run(
            [
                sys.executable,
                "-c",
                _DRIVER,
                "--data-dir",
                str(tmp_path / "data"),
                "--model",
                "default",
            ],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=180,
        )
    finally:
        xvfb.terminate()
        xvfb.wait(timeout=10)
    assert "Could not load the Qt platform plugin" not in proc.stderr, proc.stderr[-3000:]
    assert proc.returncode == 0, proc.stderr[-3000:]
    events = {}
    for line in proc.stdout.splitlines():
        if line.startswith("{"):
            event = json.loads(line)
            events[event["event"]] = event
    assert list(events) == ["shown", "sent", "model_ready", "reply", "exit"], proc.stdout
    shown, sent = events["shown"], events["sent"]
    assert shown["platform"] == "xcb"  # a real X11 window, not offscreen
    assert shown["loading"] and shown["strip"]  # the window says the model is loading
    assert sent["loading"] and sent["busy"]  # typed and sent before the model was ready...
    assert "loading" in sent["status"]
    assert events["reply"]["error"] is None  # ...and answered once it was
    assert events["reply"]["roles"] == ["user", "assistant"]
    assert events["exit"]["code"] == 0
