"""At 800×500 every dialog fits the screen (checked in a process whose offscreen screen is
exactly 800×500: tests/small_screen_check.py), what does not fit scrolls inside it, and the
floating inspector is opaque and ends above the composer's controls."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from app_helpers import REPO, close_window, make_window, screenshot, set_sampling
from PySide6.QtCore import QPoint, QRect, Qt
from PySide6.QtWidgets import QApplication


def test_every_dialog_fits_an_800_by_500_screen(tmp_path, tiny_model_dir):
    config = tmp_path / "screen.json"
    config.write_text(
        json.dumps(
            {
                "windowFrameMargins": True,
                "screens": [
                    {
                        "name": "small",
                        "x": 0,
                        "y": 0,
                        "width": 800,
                        "height": 500,
                        "logicalDpi": 96,
                        "logicalBaseDpi": 96,
                        "dpr": 1,
                    }
                ],
            }
        )
    )
    env = {**os.environ, "QT_QPA_PLATFORM": f"offscreen:configfile={config}"}
    result = subprocess.run(
        [
            sys.executable,
            str(REPO / "tests" / "small_screen_check.py"),
            str(tiny_model_dir),
            str(tmp_path / "data"),
        ],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["screen"] == [0, 0, 800, 500]  # the screen Qt reports is the one asked for
    screen = QRect(*report["available"])
    overflow = {}
    for name, frame in report["dialogs"].items():
        assert frame is not None, f"{name} did not open"
        if not screen.contains(QRect(*frame)):
            overflow[name] = frame
    print(f"dialogs that overflow 800x500: {overflow} ({report})")
    assert overflow == {}
    library = report["dialogs"]["Model library"]
    assert library[2] <= 800 < 1080  # capped; its table scrolls sideways


def _in_window(widget, window) -> QRect:
    return QRect(widget.mapTo(window, QPoint(0, 0)), widget.size())


def test_the_floating_inspector_is_opaque_and_leaves_the_composer_free(
    qtbot, tmp_path, tiny_engine
):
    window = make_window(qtbot, tmp_path, tiny_engine)
    window.resize(800, 500)
    window.show_settings()  # 800 wide: the inspector floats over the chat
    assert window.shell.placements["inspector"] == "overlay"
    for _ in range(3):
        QApplication.processEvents()
    assert window.inspector.testAttribute(Qt.WidgetAttribute.WA_StyledBackground)
    assert screenshot(window, "small-screen-inspector").exists()
    image = window.inspector.grab().toImage()
    corner = image.pixelColor(image.width() - 4, image.height() - 4)
    assert corner.alpha() == 255

    panel = _in_window(window.inspector, window)
    controls = {
        "Send": window.composer.button,
        "Format": window.constraint_bar,
        "Tools": window.tools_chip,
        "Attach": window.composer.attach_button,
    }
    for name, control in controls.items():
        assert control.isVisible(), name
        rect = _in_window(control, window)
        assert not panel.intersects(rect), (name, panel.getRect(), rect.getRect())
        # nothing on top of it either (the backdrop ends above the composer too)
        hit = window.childAt(rect.center())
        assert hit is control or control.isAncestorOf(hit), (name, hit)
    assert panel.height() >= 160  # still a usable panel
    set_sampling(window, max_tokens=8)  # the reply itself is not what is tested here
    window.composer.edit.setFocus()
    window.composer.edit.setPlainText("typed below the panel")
    qtbot.mouseClick(window.composer.button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: not window.controller.busy, timeout=60_000)
    assert any(c.title == "typed below the panel" for c in window.store.conversations())
    close_window(window)
