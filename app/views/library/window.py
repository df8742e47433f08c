"""The model library window: every model on this computer (Corral's cache, the Hugging Face
cache, LM Studio, Ollama) with what one needs to choose, and Load, Delete (Corral's own
copies only) and Show in Finder. Scans run on a worker thread; the window never waits."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QDialog,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QMessageBox,
    QPushButton,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.jobs.library_job import LibraryJob
from app.views.common.fit import fit_to_screen
from app.views.common.format import format_bytes
from app.views.common.reveal import REVEAL, reveal
from app.words import count
from engine.tools.dialect import DESCRIBED

COLUMNS = (
    "Name",
    "Architecture",
    "Parameters",
    "Quantization",
    "Size",
    "Context",
    "Source",
    "Runs Here",
)
SOURCE_NAMES = {
    "corral": "Corral",
    "huggingface": "Hugging Face",
    "lmstudio": "LM Studio",
    "ollama": "Ollama",
}


def count_text(n: int | None) -> str:
    """135M, 1.5B, 8K: how parameter counts and context lengths are read."""
    if not n:
        return "—"
    for unit, scale in (("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f}".removesuffix(".0") + unit
    return str(n)


def ability_words(model: Any) -> tuple[str, str]:
    """What a model can do, in plain words (its tool calls and whether it thinks first),
    and the technical names for the tooltip. A model Corral cannot tell about says why."""
    tools, thinking = model.tool_syntax, model.thinking_syntax
    if tools is None:
        why = (
            "Corral could not read its chat template"
            if model.chat_template
            else "its files carry no chat template to tell"
        )
        return f"Tool calls: not known until it loads ({why})", ""
    if tools.startswith(DESCRIBED):
        said = "Tool calls: supported (Corral describes the tools to this model)"
    else:
        said = "Tool calls: supported (in the model's own format)"
    thinks = "no" if thinking in (None, "none") else "yes"
    technical = f"Tool-call syntax: {tools}. Thinking syntax: {thinking or 'unknown'}."
    return f"{said} · Thinks before answering: {thinks}", technical


class _Row(QTreeWidgetItem):
    """A library row that sorts sizes and counts as numbers."""

    _NUMERIC = {2: "parameters", 4: "size_bytes", 5: "context_length"}

    def __lt__(self, other: QTreeWidgetItem) -> bool:
        tree = self.treeWidget()
        column = tree.sortColumn() if tree is not None else 0
        key = self._NUMERIC.get(column)
        if key is None:  # (QTreeWidgetItem.__lt__ would call back into this override)
            return self.text(column).lower() < other.text(column).lower()
        mine = getattr(self.data(0, Qt.ItemDataRole.UserRole), key) or 0
        theirs = getattr(other.data(0, Qt.ItemDataRole.UserRole), key) or 0
        return bool(mine < theirs)


class LibraryWindow(QDialog):
    """Emits `loadRequested(spec)`; deleting goes through the LibraryJob."""

    loadRequested = Signal(str)

    def __init__(self, job: LibraryJob, loaded_path: Any, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Model Library")
        self.setObjectName("libraryWindow")
        self.resize(1080, 540)
        fit_to_screen(self)  # a narrow screen scrolls the table sideways
        self.job = job
        self._loaded_path = loaded_path  # () -> path of the loaded model, or None
        self.filter = QLineEdit(self)
        self.filter.setAccessibleName("Filter models")
        self.filter.setPlaceholderText("Filter by name, architecture, source or dialect")
        self.filter.setClearButtonEnabled(True)
        self.tree = QTreeWidget(self)
        self.tree.setObjectName("libraryTable")
        self.tree.setAccessibleName("Models")
        self.tree.setColumnCount(len(COLUMNS))
        self.tree.setHeaderLabels(list(COLUMNS))
        self.tree.setRootIsDecorated(False)
        self.tree.setAlternatingRowColors(True)
        self.tree.setSortingEnabled(True)
        self.tree.sortByColumn(6, Qt.SortOrder.AscendingOrder)
        header = self.tree.header()
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        for column in range(1, len(COLUMNS) - 1):
            header.setSectionResizeMode(column, QHeaderView.ResizeMode.ResizeToContents)
        header.resizeSection(len(COLUMNS) - 1, 160)  # reasons are long: the tooltip has all
        self.detail = QLabel(self)
        self.detail.setObjectName("hint")
        self.detail.setWordWrap(True)
        self.detail.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.abilities = QLabel(self)  # tool calls and thinking, technical names in its tooltip
        self.abilities.setObjectName("hint")
        self.abilities.setWordWrap(True)
        self.abilities.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.status = QLabel("", self)
        self.status.setObjectName("hint")
        self.load_button = QPushButton("Load", self)
        self.load_button.setDefault(True)
        self.delete_button = QPushButton("Delete…", self)
        self.reveal_button = QPushButton(REVEAL, self)
        self.refresh_button = QPushButton("Refresh", self)
        buttons = QHBoxLayout()
        buttons.addWidget(self.status, 1)
        for b in (self.refresh_button, self.reveal_button, self.delete_button, self.load_button):
            buttons.addWidget(b)
        layout = QVBoxLayout(self)
        layout.addWidget(self.filter)
        layout.addWidget(self.tree, 1)
        layout.addWidget(self.abilities)
        layout.addWidget(self.detail)
        layout.addLayout(buttons)

        self.filter.textChanged.connect(self._apply_filter)
        self.tree.itemSelectionChanged.connect(self._selection_changed)
        self.tree.itemDoubleClicked.connect(lambda _item, _col: self._load())
        self.load_button.clicked.connect(self._load)
        self.delete_button.clicked.connect(self._delete)
        self.reveal_button.clicked.connect(self._reveal)
        self.refresh_button.clicked.connect(job.refresh)
        job.scanning.connect(lambda: self.status.setText("Looking for models…"))
        job.scanned.connect(self.show_models)
        job.failed.connect(self.status.setText)
        job.deleted.connect(
            lambda path, freed: self.status.setText(f"Deleted, {format_bytes(freed)} freed")
        )
        self.show_models(job.models)
        self._selection_changed()

    # ---- the list ----

    def show_models(self, models: list[Any]) -> None:
        selected = self.selected()
        self.tree.setSortingEnabled(False)
        self.tree.clear()
        for m in models:
            item = _Row(
                [
                    m.name,
                    m.architecture or "—",
                    count_text(m.parameters),
                    m.quantization or "—",
                    format_bytes(m.size_bytes),
                    count_text(m.context_length),
                    SOURCE_NAMES.get(m.source, m.source),
                    "Yes" if m.can_run else f"No: {m.reason}",
                ]
            )
            item.setData(0, Qt.ItemDataRole.UserRole, m)
            if not m.can_run:
                for column in range(len(COLUMNS)):
                    item.setForeground(column, self.palette().placeholderText())
                for column in (0, len(COLUMNS) - 1):
                    item.setToolTip(column, f"Cannot run: {m.reason}")
            self.tree.addTopLevelItem(item)
            if selected is not None and (m.path, m.name) == (selected.path, selected.name):
                item.setSelected(True)
        self.tree.setSortingEnabled(True)
        runnable = sum(1 for m in models if m.can_run)
        self.status.setText(f"{count(len(models), 'model')}, {runnable} can run here")
        self._apply_filter(self.filter.text())

    def _apply_filter(self, text: str) -> None:
        words = text.lower().split()
        for i in range(self.tree.topLevelItemCount()):
            item = self.tree.topLevelItem(i)
            if item is None:
                continue
            model = item.data(0, Qt.ItemDataRole.UserRole)
            dialect = f"{model.tool_syntax or ''} {model.thinking_syntax or ''}" if model else ""
            cells = " ".join(item.text(c) for c in range(len(COLUMNS)))
            haystack = f"{cells} {dialect}".lower()
            item.setHidden(not all(w in haystack for w in words))

    def selected(self) -> Any:
        items = self.tree.selectedItems()
        return items[0].data(0, Qt.ItemDataRole.UserRole) if items else None

    def _selection_changed(self) -> None:
        m = self.selected()
        loaded = self._loaded_path()
        self.load_button.setEnabled(m is not None and m.can_run)
        self.reveal_button.setEnabled(m is not None)
        is_loaded = m is not None and loaded is not None and Path(m.path) == Path(loaded)
        self.delete_button.setEnabled(m is not None and m.deletable and not is_loaded)
        if m is None:
            self.detail.setText("")
            self.abilities.setText("")
            return
        said, technical = ability_words(m)
        self.abilities.setText(said)
        self.abilities.setToolTip(technical)
        lines = [m.path]
        if not m.can_run:
            lines.append(f"Cannot run: {m.reason}")
        if m.deletable:
            lines.append(
                "The model is in use; load another to delete it."
                if is_loaded
                else "Corral's own copy: deleting it frees its space."
            )
        elif m.kind == "gguf" and m.can_run:
            lines.append("Imported into Corral's cache on first use (the original is untouched).")
        self.detail.setText("\n".join(lines))

    # ---- actions ----

    def _load(self) -> None:
        m = self.selected()
        if m is not None and m.can_run:
            self.loadRequested.emit(m.spec)

    def _delete(self) -> None:
        m = self.selected()
        if m is None or not m.deletable:
            return
        answer = QMessageBox.question(
            self,
            "Delete model",
            f"Delete Corral's copy of {m.name} ({format_bytes(m.size_bytes)})?\n{m.path}",
        )
        if answer == QMessageBox.StandardButton.Yes:
            self.status.setText("Deleting…")
            self.job.delete(m.path)

    def _reveal(self) -> None:
        m = self.selected()
        if m is not None:
            reveal(m.path)
