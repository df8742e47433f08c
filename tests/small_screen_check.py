"""Run by tests/test_app_small_screen.py in a process whose offscreen screen is 800×500
(QT_QPA_PLATFORM=offscreen:configfile=…): opens the window at that size and every dialog
(Preferences, the model library, the shortcut list, the format editor, Extract, the
coding agent's command) over a real engine,
and prints one JSON line: the screen's available rectangle and each dialog's frame.

Usage: python tests/small_screen_check.py MODEL_DIR DATA_DIR
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import engine  # noqa: E402,F401  (OpenBLAS before MLX)


def _settle(seconds: float = 0.3) -> None:
    from PySide6.QtWidgets import QApplication

    end = time.monotonic() + seconds
    while time.monotonic() < end:
        QApplication.processEvents()
        time.sleep(0.01)


def main(model_dir: str, data_dir: str) -> int:

    from app.application import build_window, create_application
    from app.jobs.engine_bridge import EngineBridge
    from app.store import Store
    from engine.engine import Engine

    app, _opener = create_application(sys.argv[:1])
    eng = Engine()
    eng.load_model(model_dir).result()
    store = Store.open(Path(data_dir))
    window = build_window(store, EngineBridge(eng))
    window.resize(800, 500)
    window.move(0, 0)
    window.show()
    _settle()
    window.preferences.show()
    window.library.show()
    window.keys.show_shortcuts()
    window.files.open_constraint_editor()
    window.show_extract()
    from app.views.server.agent_instructions import AgentDialog

    agent = AgentDialog("claude", Path(data_dir) / "agents", "", lambda: None, window)
    agent.ready("http://127.0.0.1:8080")  # its longest state: the command and the notes
    agent.open()
    _settle(1.0)
    dialogs = {
        "Preferences": window.preferences.dialog,
        "Model library": window.library.library_window,
        "Keyboard shortcuts": window.keys.shortcuts_dialog,
        "Reply format": window.files.constraint_editor,
        "Extract": window.extract_window,
        "Use with Claude Code": agent,
    }
    screen = window.screen()
    report = {
        "screen": list(screen.geometry().getRect()),
        "available": list(screen.availableGeometry().getRect()),
        "window": list(window.frameGeometry().getRect()),
        "dialogs": {
            name: list(d.frameGeometry().getRect()) if d is not None and d.isVisible() else None
            for name, d in dialogs.items()
        },
    }
    print(json.dumps(report), flush=True)
    for dialog in dialogs.values():
        if dialog is not None:
            dialog.close()
    window.close()
    _settle()
    store.close()
    eng.close()
    app.quit()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
