"""The menu bar, with the platform's standard shortcuts (Cmd on macOS, Ctrl elsewhere)."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QMenu

from app.views.main.parts import WindowParts

Key = QKeySequence.StandardKey


def _action(
    menu: QMenu,
    text: str,
    slot: Callable[[], Any],
    *shortcuts: Any,
    role: QAction.MenuRole | None = None,
) -> QAction:
    action = QAction(text, menu)
    keys: list[QKeySequence] = []
    for shortcut in shortcuts:
        if isinstance(shortcut, QKeySequence.StandardKey):
            keys += QKeySequence.keyBindings(shortcut)
        else:
            keys.append(QKeySequence(shortcut))
    action.setShortcuts(keys)
    if role is not None:
        action.setMenuRole(role)
    action.triggered.connect(lambda _checked=False: slot())
    menu.addAction(action)
    return action


def open_usage() -> bool:
    """Open the README's "Using the app" section in the user's browser or viewer (the copy
    beside the app; nothing is fetched)."""
    from PySide6.QtCore import QUrl
    from PySide6.QtGui import QDesktopServices

    from app.paths import readme_path

    url = QUrl.fromLocalFile(str(readme_path()))
    url.setFragment("using-the-app")
    return QDesktopServices.openUrl(url)


def show_logs(window: WindowParts | None = None) -> bool:
    """Open the log folder (engine.logs) in the system's file browser; where none opens it
    (no file manager, a bare Linux desktop), say where it is in a box whose text can be
    selected and copied (`window.logs_box`)."""
    from PySide6.QtCore import QUrl
    from PySide6.QtGui import QDesktopServices
    from PySide6.QtWidgets import QMessageBox

    from engine import logs

    folder = logs.log_dir()
    folder.mkdir(parents=True, exist_ok=True)
    if QDesktopServices.openUrl(QUrl.fromLocalFile(str(folder))):
        return True
    if window is not None:
        box = QMessageBox(window.window())
        box.setWindowTitle("Logs")
        box.setText("No file browser could open the log folder. It is here:")
        box.setInformativeText(str(folder))
        box.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        box.setStandardButtons(QMessageBox.StandardButton.Ok)
        box.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        box.finished.connect(lambda _r: window.keys.focus_composer())
        window.logs_box = box
        box.open()
    return False


def copy_diagnostics(window: WindowParts) -> str:
    """Help → Copy Diagnostics: the report app.diagnostics makes, for the model loaded
    now, on the clipboard; the status bar says so. Returns the text."""
    from PySide6.QtGui import QGuiApplication

    from app import diagnostics
    from app.secrets import SERVER_API_KEY

    text = diagnostics.report(
        model=window.bridge.model_info,
        model_spec=window.models.loaded_spec or "",
        data_dir=window.store.path.parent,
        secrets=[window.core.secrets.get(SERVER_API_KEY)],
    )
    QGuiApplication.clipboard().setText(text)
    window.statusBar().showMessage("Diagnostics copied: paste them into your report.", 8000)
    return text


def build_menus(window: WindowParts) -> dict[str, QAction]:
    """Create the menus of `window`; return the actions by name."""
    bar = window.menuBar()
    files, library = window.files, window.library
    acts: dict[str, QAction] = {}
    file = bar.addMenu("&File")
    acts["new"] = _action(file, "&New Chat", window.new_chat, Key.New)
    acts["constrain_file"] = _action(
        file, "Open Schema or &Grammar…", files.choose_constraint_file, Key.Open
    )
    acts["load_tools"] = _action(file, "Load &Tools…", files.choose_tools_file)
    acts["extract"] = _action(file, "&Extract from Documents…", window.show_extract, "Ctrl+Shift+E")
    file.addSeparator()
    acts["export_md"] = _action(file, "Export as &Markdown…", lambda: files.export("md"))
    acts["export_json"] = _action(file, "Export as &JSON…", lambda: files.export("json"))
    file.addSeparator()
    acts["close"] = _action(file, "&Close Window", window.close, Key.Close)
    acts["quit"] = _action(file, "&Quit", window.quit, Key.Quit, role=QAction.MenuRole.QuitRole)

    edit = bar.addMenu("&Edit")
    keys = window.keys
    for name, text, key in (
        ("undo", "&Undo", Key.Undo),
        ("redo", "&Redo", Key.Redo),
        ("cut", "Cu&t", Key.Cut),
        ("copy", "&Copy", Key.Copy),
        ("paste", "&Paste", Key.Paste),
        ("selectAll", "Select &All", Key.SelectAll),
    ):
        acts[f"edit_{name}"] = _action(edit, text, partial(keys.edit, name), key)
        if name in ("redo", "paste"):
            edit.addSeparator()
    edit.addSeparator()
    acts["find"] = _action(edit, "&Find Chats", window.focus_search, Key.Find)
    acts["preferences"] = _action(
        edit,
        "&Preferences…",
        window.preferences.show,
        Key.Preferences,
        "Ctrl+,",
        role=QAction.MenuRole.PreferencesRole,
    )

    chat = bar.addMenu("&Chat")
    acts["stop"] = _action(chat, "&Stop", window.stop, "Esc", "Ctrl+.")
    acts["stop"].setEnabled(window.controller.busy)  # enabled while a reply is written
    acts["regenerate"] = _action(chat, "&Regenerate Reply", window.regenerate, "Ctrl+R")
    acts["regenerate_many"] = _action(
        chat, "Write 3 &Versions", lambda: window.regenerate(3), "Ctrl+Shift+R"
    )
    chat.addSeparator()
    acts["attach"] = _action(chat, "&Attach Files…", files.choose_files, "Ctrl+Shift+A")
    acts["constrain_editor"] = _action(
        chat, "Reply &Format: Write or Paste…", files.open_constraint_editor, "Ctrl+G"
    )
    acts["remove_constraint"] = _action(chat, "Free-Text Replies", files.remove_constraint)
    chat.addSeparator()
    acts["next_chat"] = _action(
        chat, "Ne&xt Chat", lambda: keys.step_chat(1), "Ctrl+Shift+]", "Ctrl+PgDown"
    )
    acts["previous_chat"] = _action(
        chat, "Pre&vious Chat", lambda: keys.step_chat(-1), "Ctrl+Shift+[", "Ctrl+PgUp"
    )
    acts["rename"] = _action(chat, "Re&name Chat", window.rename_chat, "F2")
    acts["delete"] = _action(chat, "&Delete Chat…", window.delete_chat)

    model = bar.addMenu("&Model")
    _action(model, "SmolLM2-135M-Instruct (&Built In)", lambda: window.models.load("default"))
    acts["library"] = _action(model, "Model &Library…", library.show, "Ctrl+Shift+L")
    acts["download"] = _action(model, "Down&load a Model…", library.show_download)
    _action(model, "Open MLX Model &Folder…", window.model_bar.choose_folder)
    _action(model, "Import &GGUF…", window.model_bar.choose_gguf)

    view = bar.addMenu("&View")
    acts["sidebar"] = _action(view, "Chats &Sidebar", window.toggle_sidebar, "Ctrl+Shift+S")
    acts["settings"] = _action(view, "Chat &Settings", window.show_settings, "Ctrl+Shift+I")
    acts["tools"] = _action(view, "&Tools", window.show_tools, "Ctrl+Shift+T")
    # the toolbar's checkable toggles, so the menu shows the same check marks
    acts["sidebar"].setCheckable(True)
    acts["settings"].setCheckable(True)
    acts["tools"].setCheckable(True)
    window.sidebar_action.toggled.connect(acts["sidebar"].setChecked)
    window.settings_action.toggled.connect(acts["settings"].setChecked)
    window.tools_action.toggled.connect(acts["tools"].setChecked)
    view.addAction(window.server.log_dock.toggleViewAction())

    help_menu = bar.addMenu("&Help")
    acts["shortcuts"] = _action(help_menu, "&Keyboard Shortcuts", keys.show_shortcuts, "Ctrl+/")
    acts["usage"] = _action(help_menu, "Using Corral (README)", open_usage)
    acts["show_logs"] = _action(help_menu, "Show &Logs", lambda: show_logs(window))
    acts["copy_diagnostics"] = _action(
        help_menu, "Copy &Diagnostics", lambda: copy_diagnostics(window)
    )
    help_menu.addSeparator()
    _action(help_menu, "&About Corral", window.about, role=QAction.MenuRole.AboutRole)
    return acts
