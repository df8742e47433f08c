"""What the main window does for the keyboard: the next and previous chat, the Edit menu's
standard actions on whichever text box has focus, the composer focused at launch and after
each action that leaves it (sending, an edit, a tool run, a dialog closed), the composer's
Tab order, and the Help menu's list of every shortcut."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import (
    QAbstractItemView,
    QApplication,
    QDialog,
    QDialogButtonBox,
    QLineEdit,
    QMenu,
    QPlainTextEdit,
    QTextEdit,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.views.chat.message_widget import MessageWidget
from app.views.common.fit import fit_to_screen
from app.views.common.keyboard import MessageFocus, focus_within, guard_text_boxes
from app.views.main.parts import WindowParts

EDIT_ACTIONS = ("undo", "redo", "cut", "copy", "paste", "selectAll")


class KeyboardActions:
    """The window's keyboard helpers; `install` once the window is built."""

    def __init__(self, window: WindowParts) -> None:
        self.window = window
        self.message_focus = MessageFocus(window.window())
        self.shortcuts_dialog: ShortcutsDialog | None = None

    def install(self) -> None:
        w = self.window
        guard_text_boxes(w.window())
        self.composer_tab_order()
        w.sidebar.entered.connect(self.focus_composer)
        w.sidebar.questionClosed.connect(self.focus_composer)
        self.focus_composer()

    # ---- focus ----

    def composer_tab_order(self) -> None:
        """Tab from the text goes through the composer's own controls in the order they sit
        (the paperclip, the format chip or button, the tools chip) and then Send, before the
        rest of the window; controls hidden or disabled at the time are skipped by Qt."""
        w = self.window
        chain: list[QWidget] = [
            w.composer.edit,
            w.composer.attach_button,
            w.constraint_bar.chip,
            w.constraint_bar.chip.close_button,
            w.constraint_bar.button,
            w.tools_chip,
            w.composer.button,
        ]
        tab = Qt.FocusPolicy.TabFocus
        chain = [c for c in chain if c.focusPolicy() & tab == tab]  # Qt drops the rest badly
        for first, second in zip(chain, chain[1:], strict=False):
            QWidget.setTabOrder(first, second)

    def focus_composer(self) -> None:
        self.window.composer.edit.setFocus(Qt.FocusReason.OtherFocusReason)

    def after_switch(self) -> None:
        """A chat was opened: the composer takes the keys, unless the user is walking the
        chat list with the arrow keys (Enter there comes to the composer)."""
        if not focus_within(self.window.sidebar.list):
            self.focus_composer()

    # ---- chats ----

    def step_chat(self, step: int) -> None:
        """Open the chat `step` rows below (or above) the open one in the list, wrapping."""
        w = self.window
        ids = [
            w.sidebar.list.item(i).data(Qt.ItemDataRole.UserRole)
            for i in range(w.sidebar.list.count())
        ]
        if not ids:
            return
        current = w.controller.conversation_id
        index = ids.index(current) if current in ids else -1
        target = ids[(index + step) % len(ids)]
        if target != current:
            w.controller.open_conversation(int(target))
        self.focus_composer()

    # ---- the Edit menu ----

    @staticmethod
    def edit(name: str) -> None:
        """Undo, Cut, Copy… on the text box with focus (nothing when none has); Copy on a
        message with focus copies its text."""
        focus = QApplication.focusWidget()
        if isinstance(focus, (QLineEdit, QPlainTextEdit, QTextEdit)):
            getattr(focus, name)()
        elif name == "copy" and isinstance(focus, MessageWidget):
            focus.copy_text()

    # ---- Help ----

    def show_shortcuts(self) -> None:
        dialog = ShortcutsDialog(self.window.menuBar().actions(), self.window.window())
        self.shortcuts_dialog = dialog
        dialog.finished.connect(lambda _result: self.focus_composer())
        dialog.open()


def shortcut_rows(actions: list[QAction]) -> list[tuple[str, str, str]]:
    """(menu, action, shortcut) for every menu action with a shortcut, in menu order: one
    shortcut per action, the platform's main one in its own notation (⌘Z on a Mac; Qt's
    list for Undo also holds "F14" and "Undo" keys nobody types)."""
    rows: list[tuple[str, str, str]] = []

    def walk(menu: QMenu, path: str) -> None:
        for action in menu.actions():
            sub = action.menu()
            if isinstance(sub, QMenu):
                walk(sub, f"{path} → {sub.title().replace('&', '')}")
            elif action.shortcuts():
                main = action.shortcuts()[0]
                keys = main.toString(QKeySequence.SequenceFormat.NativeText)
                rows.append((path, action.text().replace("&", ""), keys))

    for top in actions:
        menu = top.menu()
        if isinstance(menu, QMenu):
            walk(menu, menu.title().replace("&", ""))
    return rows


class ShortcutsDialog(QDialog):
    """Help → Keyboard Shortcuts: every menu action that has a shortcut, by menu."""

    def __init__(self, menus: list[QAction], parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Keyboard shortcuts")
        layout = QVBoxLayout(self)
        self.table = QTreeWidget(self)
        self.table.setAccessibleName("Keyboard shortcuts")
        self.table.setHeaderLabels(["Menu", "Action", "Keys"])
        self.table.setRootIsDecorated(False)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        for row in shortcut_rows(menus):
            QTreeWidgetItem(self.table, list(row))
        rows = [
            ("Composer", "New line", "Shift+Enter"),
            ("Text boxes", "Next or previous control", "Tab, Shift+Tab"),
            ("Text boxes", "Type a tab character", "Ctrl+Tab or Alt+Tab"),
            ("Chats", "Into the list from search; open the first match", "Down; Enter"),
        ]
        for row in rows:
            QTreeWidgetItem(self.table, list(row))
        for column in range(3):
            self.table.resizeColumnToContents(column)
        layout.addWidget(self.table)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close, self)
        buttons.rejected.connect(self.reject)
        layout.addWidget(buttons)
        self.resize(560, 520)
        fit_to_screen(self)
