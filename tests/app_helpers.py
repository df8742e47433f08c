"""Shared pieces for the GUI tests (tests/test_app_*.py; conftest.py makes Qt offscreen): a
MainWindow on a temporary data folder over a real Engine (`tiny_engine` / `default_engine`)."""

from __future__ import annotations

from pathlib import Path

import engine  # noqa: F401  (OpenBLAS before MLX)

REPO = Path(__file__).resolve().parents[1]
SCREENSHOTS = REPO / "artifacts" / "screenshots"


def make_window(qtbot, data_dir: Path, eng):
    """A shown MainWindow over `eng` (already loaded) and a store in `data_dir`."""
    from app.application import build_window
    from app.jobs.engine_bridge import EngineBridge
    from app.store import Store

    store = Store.open(data_dir)
    window = build_window(store, EngineBridge(eng))
    qtbot.addWidget(window)
    if store.get_setting("window_geometry") is None:
        window.resize(1180, 780)  # the default on a laptop screen (offscreen's is 800x600)
    window.show()
    qtbot.waitExposed(window)
    return window


def close_window(window) -> None:
    """Close without stopping the shared engine, once background checks have reported
    (they read the store)."""
    from PySide6.QtCore import QThreadPool
    from PySide6.QtWidgets import QApplication

    if window.controller.busy:
        window.controller.stop()
    window.close()
    QThreadPool.globalInstance().waitForDone(30_000)
    QApplication.processEvents()
    window.store.close()


def wait_idle(qtbot, window, timeout: int = 60_000) -> None:
    qtbot.waitUntil(lambda: not window.controller.busy, timeout=timeout)


# The tiny random model repeats its input token unless sampled very hot; at this
# temperature it streams varied (random) words, which is what GUI tests need.
TINY_TEMPERATURE = 10.0


def set_sampling(window, **changes) -> None:
    """Change the open conversation's settings (stored, and shown in the panel)."""
    from dataclasses import replace

    conv = window.controller.conversation
    settings = replace(conv.settings, **changes)
    window.store.set_chat_settings(conv.id, settings)
    window.settings_panel.set_settings(settings)


def screenshot(widget, name: str) -> Path:
    """Save `widget` as artifacts/screenshots/NAME.png once pending layouts have run."""
    from PySide6.QtWidgets import QApplication

    for _ in range(3):
        QApplication.processEvents()
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    widget.grab().save(str(path))
    return path


def drop_files(target, paths) -> bool:
    """Drag `paths` onto `target` and drop them there, as real Qt drag events."""
    from PySide6.QtCore import QMimeData, QPointF, Qt, QUrl
    from PySide6.QtGui import QDragEnterEvent, QDropEvent
    from PySide6.QtWidgets import QApplication

    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(p)) for p in paths])
    center = target.rect().center()
    buttons, mods = Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier
    try:  # PySide6 6.12 takes a QPointF here, earlier releases a QPoint
        enter = QDragEnterEvent(QPointF(center), Qt.DropAction.CopyAction, mime, buttons, mods)
    except TypeError:
        enter = QDragEnterEvent(center, Qt.DropAction.CopyAction, mime, buttons, mods)
    QApplication.sendEvent(target, enter)
    drop = QDropEvent(QPointF(center), Qt.DropAction.CopyAction, mime, buttons, mods)
    QApplication.sendEvent(target, drop)
    return enter.isAccepted() and drop.isAccepted()
