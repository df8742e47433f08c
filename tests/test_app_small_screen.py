"""With the window at 800×500, every dialog fits the screen it opens on (the offscreen
screen is 800 px wide: the model library asked for 1080), what does not fit scrolls inside
it, and the floating inspector is opaque."""

from __future__ import annotations

from app_helpers import close_window, make_window, screenshot
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication


def test_dialogs_fit_the_screen_at_800_by_500(qtbot, tmp_path, tiny_engine):
    window = make_window(qtbot, tmp_path, tiny_engine)
    window.resize(800, 500)
    window.move(0, 0)
    screen = window.screen().availableGeometry()
    window.preferences.show()
    window.library.show()
    window.keys.show_shortcuts()
    window.files.open_constraint_editor()
    dialogs = {
        "Preferences": window.preferences.dialog,
        "Model library": window.library.library_window,
        "Keyboard shortcuts": window.keys.shortcuts_dialog,
        "Reply format": window.files.constraint_editor,
    }
    overflow = {}
    for name, dialog in dialogs.items():
        qtbot.waitUntil(dialog.isVisible, timeout=3000)
        QApplication.processEvents()
        frame = dialog.frameGeometry()
        if not screen.contains(frame):
            overflow[name] = (frame.getRect(), screen.getRect())
    print(f"dialogs that overflow {screen.width()}x{screen.height()}: {overflow}")
    assert overflow == {}
    library = window.library.library_window
    assert library.width() <= screen.width() < 1080  # capped; its table scrolls sideways
    for dialog in dialogs.values():
        dialog.close()

    window.show_settings()  # 800 wide: the inspector floats over the chat
    assert window.shell.placements["inspector"] == "overlay"
    assert window.inspector.testAttribute(Qt.WidgetAttribute.WA_StyledBackground)
    assert screenshot(window, "small-screen-inspector").exists()
    image = window.inspector.grab().toImage()
    corner = image.pixelColor(image.width() - 4, image.height() - 4)
    assert corner.alpha() == 255
    close_window(window)
