"""The conversation list: new chat, search by title and content, rename, delete."""

from __future__ import annotations

from PySide6.QtCore import (
    QModelIndex,
    QPersistentModelIndex,
    QPoint,
    QSignalBlocker,
    QSize,
    Qt,
    QTimer,
    Signal,
)
from PySide6.QtWidgets import (
    QInputDialog,
    QLineEdit,
    QListView,
    QListWidget,
    QListWidgetItem,
    QMenu,
    QMessageBox,
    QPushButton,
    QStyledItemDelegate,
    QStyleOptionViewItem,
    QVBoxLayout,
    QWidget,
)

from app.store import Conversation


class _FitWidth(QStyledItemDelegate):
    """Rows as wide as the list, so long titles end in "…" instead of scrolling sideways."""

    def __init__(self, view: QListView) -> None:
        super().__init__(view)
        self._view = view

    def sizeHint(
        self, option: QStyleOptionViewItem, index: QModelIndex | QPersistentModelIndex
    ) -> QSize:
        size = super().sizeHint(option, index)
        size.setWidth(self._view.viewport().width())
        return size


class Sidebar(QWidget):
    """Lists conversations; the window fills it through `set_conversations`."""

    newRequested = Signal()
    conversationSelected = Signal(int)
    renameRequested = Signal(int, str)
    deleteRequested = Signal(int)
    searchChanged = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("sidebar")
        layout = QVBoxLayout(self)
        layout.setContentsMargins(8, 8, 8, 8)
        self.new_button = QPushButton("New chat", self)
        self.new_button.setObjectName("newChat")
        self.search = QLineEdit(self)
        self.search.setObjectName("search")
        self.search.setPlaceholderText("Search chats")
        self.search.setClearButtonEnabled(True)
        self.list = QListWidget(self)
        self.list.setObjectName("conversationList")
        self.list.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.list.setTextElideMode(Qt.TextElideMode.ElideRight)
        self.list.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.list.setResizeMode(QListView.ResizeMode.Adjust)
        self.list.setItemDelegate(_FitWidth(self.list))
        layout.addWidget(self.new_button)
        layout.addWidget(self.search)
        layout.addWidget(self.list, 1)
        self._search_timer = QTimer(self, singleShot=True, interval=200)
        self._search_timer.timeout.connect(lambda: self.searchChanged.emit(self.query()))
        self.search.textChanged.connect(self._search_timer.start)
        self.new_button.clicked.connect(self.newRequested)
        self.list.currentItemChanged.connect(self._current_changed)
        self.list.customContextMenuRequested.connect(self._menu)
        self.list.itemDoubleClicked.connect(lambda item: self.rename(self._id(item)))

    def query(self) -> str:
        return self.search.text().strip()

    def set_conversations(self, conversations: list[Conversation], current: int | None) -> None:
        with QSignalBlocker(self.list):
            self.list.clear()
            for conv in conversations:
                item = QListWidgetItem(conv.title, self.list)
                item.setData(Qt.ItemDataRole.UserRole, conv.id)
                item.setToolTip(conv.title)
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
        item = self._item(conversation_id)
        title, ok = QInputDialog.getText(
            self, "Rename chat", "Title:", text=item.text() if item else ""
        )
        if ok:
            self.renameRequested.emit(conversation_id, title)

    def confirm_delete(self, conversation_id: int) -> None:
        item = self._item(conversation_id)
        answer = QMessageBox.question(
            self,
            "Delete chat",
            f"Delete “{item.text() if item else 'this chat'}” and all its branches?",
        )
        if answer == QMessageBox.StandardButton.Yes:
            self.deleteRequested.emit(conversation_id)

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
        menu.addAction("Rename…", lambda: self.rename(cid))
        menu.addAction("Delete…", lambda: self.confirm_delete(cid))
        menu.exec(self.list.mapToGlobal(pos))
