"""Diagnostics (app/diagnostics.py, Help → Copy Diagnostics, `python -m app --diagnostics`):
every version a report needs and no secret; native crashes caught into the log folder and
offered at the next start; Show Logs saying where the folder is when nothing opens it; the
Info level recording model loads and errors."""

from __future__ import annotations

import os
import subprocess
import sys
from importlib import metadata

import pytest
from app_helpers import REPO, close_window
from PySide6.QtWidgets import QApplication

from engine import logs

API_KEY = "staple-horse-battery-42"  # no pattern finds it: only the stored setting does
TOKEN = "sk-ant-" + "Q" * 40  # looks like a key: the pattern finds it
NEW_KEY = "meadow-lantern-copper-7"  # the key kept in the secret store


@pytest.fixture
def log_dir(tmp_path, monkeypatch):
    folder = tmp_path / "logs"
    monkeypatch.setenv("CORRAL_LOG_DIR", str(folder))
    yield folder
    logs.close_logging()


def _run(args: list[str], env: dict[str, str], code: str | None = None):
    command = [sys.executable, "-c", code] if code else [sys.executable, "-m", "app", *args]
    return subprocess.run(
        command,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO), **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_command_line_diagnostics_has_every_version_and_no_secret(tmp_path, log_dir):
    from app.store import Store

    data = tmp_path / "data"
    store = Store.open(data)
    store.set_setting("server_api_key", API_KEY)  # an older Corral kept it here
    store.set_setting("model_spec", "default")
    store.close()
    from app.secrets import SERVER_API_KEY, SecretStore

    SecretStore(data).set(SERVER_API_KEY, NEW_KEY)  # where Corral keeps it now
    log_dir.mkdir()
    (log_dir / logs.LOG_FILE).write_text(
        "2026-11-28 01:00:00,000 INFO MainThread app: fine\n"
        f"2026-11-28 01:00:01,000 ERROR MainThread app: request with key {API_KEY} failed\n"
        f"2026-11-28 01:00:02,000 ERROR MainThread app: upstream said Bearer {TOKEN}\n"
        f"2026-11-28 01:00:03,000 ERROR MainThread app: server refused {NEW_KEY}\n",
        encoding="utf-8",
    )
    code = (
        "import sys; from app.__main__ import main; "
        f"rc = main(['--diagnostics', '--data-dir', {str(data)!r}]); "
        "print('MLX IMPORTED' if any(m.startswith('mlx') for m in sys.modules) else 'no mlx'); "
        "sys.exit(rc)"
    )
    # the folders lie in the home folder: the report writes it "~"
    done = _run([], {"CORRAL_LOG_DIR": str(log_dir), "HOME": str(tmp_path)}, code)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "no mlx" in out  # versions come from metadata: the app never imports MLX
    from PySide6.QtCore import qVersion

    import app

    for label, value in (
        ("Corral", app.__version__),
        ("Python", sys.version.split()[0]),
        ("Qt", qVersion()),
        ("MLX", metadata.version("mlx")),
        ("mlx-lm", metadata.version("mlx-lm")),
        ("llguidance", metadata.version("llguidance")),
        ("mlx-vlm", metadata.version("mlx-vlm")),
    ):
        assert f"\n{label}: {value}" in f"\n{out}", label
    for label in ("OS", "Chip", "Memory", "Model", "Data folder", "Log folder"):
        assert f"\n{label}: " in out, label
    assert "Data folder: ~/data" in out and "Log folder: ~/logs" in out
    assert str(tmp_path) not in out
    assert "request with key" in out and "upstream said" in out  # the last errors
    assert API_KEY not in out and TOKEN not in out and NEW_KEY not in out
    assert "fine" not in out  # info lines are not errors


def test_copy_diagnostics_names_the_model_and_its_dialects(qtbot, tmp_path, tiny_engine):
    from app_helpers import make_window

    window = make_window(qtbot, tmp_path, tiny_engine)
    window.actions_by_name["copy_diagnostics"].trigger()
    text = QApplication.clipboard().text()
    info = window.bridge.model_info
    assert f"Model: {info.name}" in text
    assert f"Model path: {info.path}" in text
    assert "Tool call syntax: " in text and "Thinking syntax: none" in text
    assert f"Data folder: {tmp_path}" in text
    assert "Diagnostics copied" in window.statusBar().currentMessage()
    close_window(window)


def test_a_native_crash_is_caught_and_offered_at_the_next_start(qtbot, tmp_path, log_dir):
    code = (
        "import faulthandler; from pathlib import Path; from engine import logs; "
        f"logs.catch_native_crashes(Path({str(log_dir)!r})); faulthandler._sigsegv()"
    )
    done = _run([], {}, code)
    assert done.returncode != 0  # it really died
    report = (log_dir / logs.NATIVE_CRASH_FILE).read_text()
    assert "Fatal Python error" in report

    from app.application import build_window
    from app.jobs.engine_bridge import EngineBridge
    from app.jobs.mcp_job import McpBridge
    from app.store import Store

    store = Store.open(tmp_path / "data")
    window = build_window(store, EngineBridge(), McpBridge(store, tmp_path / "mcp.json"), True)
    qtbot.addWidget(window)
    window.show()
    qtbot.waitUntil(lambda: window.crash_dialog is not None, timeout=5000)
    dialog = window.crash_dialog
    assert dialog.windowTitle() == "Corral quit unexpectedly"
    assert "Fatal Python error" in dialog.report.toPlainText()
    kept = sorted(log_dir.glob("native-crash-*.log"))
    assert len(kept) == 1 and "Fatal Python error" in kept[0].read_text()
    # this run writes into a fresh, empty file: nothing is offered twice
    assert (log_dir / logs.NATIVE_CRASH_FILE).read_text() == ""
    dialog.close()
    window.close()
    window.core.close()
    store.close()


def test_show_logs_says_where_the_folder_is_when_nothing_opens_it(
    qtbot, tmp_path, tiny_engine, log_dir, monkeypatch
):
    from app_helpers import make_window
    from PySide6.QtGui import QDesktopServices

    window = make_window(qtbot, tmp_path, tiny_engine)
    # a desktop without a file browser: the OS hand-off reports failure
    monkeypatch.setattr(QDesktopServices, "openUrl", lambda _url: False)
    window.actions_by_name["show_logs"].trigger()
    box = window.logs_box
    qtbot.waitUntil(box.isVisible, timeout=3000)
    assert box.informativeText() == str(log_dir)
    box.accept()
    close_window(window)


def test_info_level_records_model_loads_and_errors(qtbot, tmp_path, tiny_model_dir, log_dir):
    from app.application import build_window
    from app.jobs.engine_bridge import EngineBridge
    from app.jobs.mcp_job import McpBridge
    from app.store import Store

    store = Store.open(tmp_path / "data")
    store.set_setting("log_level", "info")
    bridge = EngineBridge()  # an engine of its own, which a failed load may leave empty
    window = build_window(store, bridge, McpBridge(store, tmp_path / "mcp.json"), True)
    qtbot.addWidget(window)
    window.show()
    with qtbot.waitSignal(bridge.modelLoaded, timeout=120_000):
        window.models.load(str(tiny_model_dir))
    with qtbot.waitSignal(bridge.loadFailed, timeout=60_000):
        window.models.load(str(tmp_path / "no-such-model"))
    text = (log_dir / logs.LOG_FILE).read_text()
    assert f"loading model {tiny_model_dir}" in text
    assert "model loaded in" in text
    assert " ERROR " in text and "no-such-model could not be loaded" in text
    assert "shown to the user" in text  # the notice the window showed for it
    window.close()
    window.core.close()
    store.close()
