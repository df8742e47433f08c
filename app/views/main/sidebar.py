"""The conversation list: new chat, search by title and content, rename in place (double
click, F2 or the context menu), delete. By keyboard: Down in the search field moves into the
list, Enter there opens the first match; Enter in the list goes to the composer
(`entered`)."""

from __future__ import annotations

from PySide6.QtCore import (
    QAbstractItemModel,
    QEvent,
    QModelIndex,
    QObject,
    QPersistentModelIndex,
    QPoint,
    QSignalBlocker,
    QSize,
    Qt,
    QTimer,
    Signal,
)
from PySide6.QtGui import QKeyEvent
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListView,
    QListWidget,
    QListWidgetItem,
    QMenu,
    QMessageBox,
    QStyledItemDelegate,
    QStyleOptionViewItem,
    QVBoxLayout,
    QWidget,
)

from app.store import Conversation
from app.views.common import theme
from app.views.common.icons import IconButton, icon

RENAME_MAX = 200


class _RowDelegate(QStyledItemDelegate):
    """Rows as wide as the list (long titles end in "…"), and a rename field that fills the
    row in the list's own font."""

    def __init__(self, view: QListView) -> None:
        super().__init__(view)
        self._view = view

    def sizeHint(
        self, option: QStyleOptionViewItem, index: QModelIndex | QPersistentModelIndex
    ) -> QSize:
        size = super().sizeHint(option, index)
        size.setWidth(self._view.viewport().width())
        size.setHeight(max(size.height(), self._view.fontMetrics().height() + 2 * theme.SPACE.S))
        return size

    def createEditor(
        self,
        parent: QWidget,
        option: QStyleOptionViewItem,
        index: QModelIndex | QPersistentModelIndex,
    ) -> QWidget:
        editor = QLineEdit(parent)
        editor.setObjectName("renameField")
        editor.setMaxLength(RENAME_MAX)
        editor.setFont(self._view.font())
        editor.setFrame(True)
        return editor

    def updateEditorGeometry(
        self,
        editor: QWidget,
        option: QStyleOptionViewItem,
        index: QModelIndex | QPersistentModelIndex,
    ) -> None:
        editor.setGeometry(option.rect.adjusted(2, 1, -2, -1))

    def setModelData(
        self,
        editor: QWidget,
        model: QAbstractItemModel,
        index: QModelIndex | QPersistentModelIndex,
    ) -> None:
        if isinstance(editor, QLineEdit) and editor.text().strip():
            model.setData(index, editor.text().strip(), Qt.ItemDataRole.EditRole)


class Sidebar(QWidget):
    """Lists conversations; the window fills it through `set_conversations`."""

    newRequested = Signal()
    conversationSelected = Signal(int)
    renameRequested = Signal(int, str)
    deleteRequested = Signal(int)
    searchChanged = Signal(str)
    entered = Signal()  # Enter on a chat (or on a search): the user wants to type in it
    questionClosed = Signal()  # the Delete question was answered either way

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("sidebar")
        layout = QVBoxLayout(self)
        layout.setContentsMargins(theme.SPACE.M, theme.SPACE.M, theme.SPACE.S, theme.SPACE.M)
        layout.setSpacing(theme.SPACE.S)
        header = QHBoxLayout()
        header.setContentsMargins(theme.SPACE.XS, 0, 0, 0)
        title = QLabel("CHATS", self)
        title.setObjectName("sidebarTitle")
        self.new_button = IconButton("new", "New chat (Ctrl+N)", self)
        self.new_button.setObjectName("newChat")
        header.addWidget(title, 1)
        header.addWidget(self.new_button)
        self.search = QLineEdit(self)
        self.search.setObjectName("search")
        self.search.setPlaceholderText("Search chats")
        self.search.setClearButtonEnabled(True)
        self._search_icon = self.search.addAction(
            icon("search", size=16), QLineEdit.ActionPosition.LeadingPosition
        )
        self._search_icon.setText("Search chats")  # its button's accessible name
        self.list = QListWidget(self)
        self.list.setObjectName("conversationList")
        self.list.setAccessibleName("Chats")
        self.search.setAccessibleName("Search chats")
        self.list.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.list.setTextElideMode(Qt.TextElideMode.ElideRight)
        self.list.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.list.setResizeMode(QListView.ResizeMode.Adjust)
        self.list.setEditTriggers(
            QAbstractItemView.EditTrigger.DoubleClicked
            | QAbstractItemView.EditTrigger.EditKeyPressed
        )
        self.list.setItemDelegate(_RowDelegate(self.list))
        self.list.setSpacing(1)
        layout.addLayout(header)
        layout.addWidget(self.search)
        layout.addWidget(self.list, 1)
        self._search_timer = QTimer(self, singleShot=True, interval=200)
        self._search_timer.timeout.connect(lambda: self.searchChanged.emit(self.query()))
        self.search.textChanged.connect(self._search_timer.start)
        self.new_button.clicked.connect(self.newRequested)
        self.list.currentItemChanged.connect(self._current_changed)
        self.list.customContextMenuRequested.connect(self._menu)
        self.list.itemChanged.connect(self._item_edited)
        self._pointer_over = False
        self._held: tuple[list[Conversation], int | None] | None = None
        self.delete_box: QMessageBox | None = None
        self.search.installEventFilter(self)
        self.list.installEventFilter(self)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if watched is self.list and event.type() == QEvent.Type.Enter:
            self._pointer_over = True
        elif watched is self.list and event.type() == QEvent.Type.Leave:
            self._pointer_over = False
            if self._held is not None:  # the order held while the pointer was here
                self.set_conversations(*self._held)
        if event.type() == QEvent.Type.KeyPress and isinstance(event, QKeyEvent):
            key = event.key()
            enter = key in (Qt.Key.Key_Return, Qt.Key.Key_Enter)
            if watched is self.search and key == Qt.Key.Key_Down and self.list.count():
                self.list.setFocus(Qt.FocusReason.TabFocusReason)
                if self.list.currentRow() < 0:
                    self.list.setCurrentRow(0)
                return True
            if watched is self.search and enter:
                self._search_timer.stop()  # the list shows what is typed before Enter acts
                self.searchChanged.emit(self.query())
                if self.list.count():
                    self.list.setCurrentRow(0)
                    self.entered.emit()
                return True
            if watched is self.list and enter and self.rename_editor() is None:
                if self.list.currentItem() is not None:
                    self.entered.emit()
                return True
        return super().eventFilter(watched, event)

    def query(self) -> str:
        return self.search.text().strip()

    def set_conversations(self, conversations: list[Conversation], current: int | None) -> None:
        """Show `conversations` (newest first). While the pointer is over the list, rows keep
        their places (titles update): a reply finishing in the background must not move
        the row about to be clicked. The new order is shown when the pointer leaves."""
        shown = [self._id(self.list.item(i)) for i in range(self.list.count())]
        if self._pointer_over and {c.id for c in conversations} == set(shown):
            position = {cid: i for i, cid in enumerate(shown)}
            self._held = (conversations, current)
            conversations = sorted(conversations, key=lambda c: position[c.id])
        else:
            self._held = None
        with QSignalBlocker(self.list):
            self.list.clear()
            for conv in conversations:
                item = QListWidgetItem(conv.title, self.list)
                item.setData(Qt.ItemDataRole.UserRole, conv.id)
                item.setToolTip(conv.title)
                item.setFlags(item.flags() | Qt.ItemFlag.ItemIsEditable)
                if conv.id == current:
                    self.list.setCurrentItem(item)

    def titles(self) -> list[str]:
        return [self.list.item(i).text() for i in range(self.list.count())]

    @staticmethod
    def _id(item: QListWidgetItem) -> int:
        return int(item.data(Qt.ItemDataRole.UserRole))

    def _current_changed(self, item: QListWidgetItem | None, _previous: object) -> None:
        if item is not None:
            self.conversationSelected.emit(self._id(item))

    def rename(self, conversation_id: int) -> None:
        """Edit the title in place; Enter saves, Esc keeps the old one."""
        item = self._item(conversation_id)
        if item is not None:
            self.list.scrollToItem(item)
            self.list.editItem(item)

    def rename_editor(self) -> QLineEdit | None:
        """The open rename field, if any."""
        editor = self.list.findChild(QLineEdit, "renameField")
        return editor if editor is not None and editor.isVisible() else None

    def _item_edited(self, item: QListWidgetItem) -> None:
        title, cid = item.text().strip(), self._id(item)
        if title:
            # After the editor has closed: the rename refills the list, deleting this item.
            QTimer.singleShot(0, lambda: self.renameRequested.emit(cid, title))

    def confirm_delete(self, conversation_id: int) -> None:
        """Ask before deleting, saying what is lost; Cancel is the default (Enter, Esc)."""
        item = self._item(conversation_id)
        title = item.text() if item else "this chat"
        box = QMessageBox(self.window())
        box.setIcon(QMessageBox.Icon.Warning)
        box.setWindowTitle("Delete chat")
        box.setText(f"Delete “{title}”?")
        box.setInformativeText(
            "Its messages, every version of its replies and its settings are deleted. "
            "This cannot be undone."
        )
        delete = box.addButton("Delete", QMessageBox.ButtonRole.DestructiveRole)
        cancel = box.addButton(QMessageBox.StandardButton.Cancel)
        box.setDefaultButton(cancel)
        box.setEscapeButton(cancel)
        box.setWindowModality(Qt.WindowModality.WindowModal)

        def answered() -> None:
            if box.clickedButton() is delete:
                self.deleteRequested.emit(conversation_id)
            self.questionClosed.emit()

        box.finished.connect(answered)
        box.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        self.delete_box = box  # the open question, for tests
        box.open()

    def _item(self, conversation_id: int) -> QListWidgetItem | None:
        for i in range(self.list.count()):
            if self._id(self.list.item(i)) == conversation_id:
                return self.list.item(i)
        return None

    def _menu(self, pos: QPoint) -> None:
        item = self.list.itemAt(pos)
        if item is None:
            return
        cid = self._id(item)
        menu = QMenu(self)
        menu.addAction("Rename", lambda: self.rename(cid))
        menu.addAction("Delete…", lambda: self.confirm_delete(cid))
        menu.exec(self.list.mapToGlobal(pos))
