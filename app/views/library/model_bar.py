"""The toolbar's model picker, one control as in LM Studio and Jan: a button that shows the
loaded model with its size on disk ("SmolLM2-135M-Instruct · 98 MB", "No model" when none
is), whose menu lists the models on this computer (recent first, from the library's last
scan, so opening it never waits on the disk), then "Model Library…", "Download a model…",
"Open MLX model folder…" and "Import GGUF…". Beside it, a small bar while a model loads
and a progress chip while a download runs (a click on it opens the download window). It
fits an 800 px window throughout: a long name is shortened with "…" (whole in the tooltip);
the load's stage is the bar's tooltip (the strip above the composer says it in words)."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QRect, QSize, Qt, Signal
from PySide6.QtGui import QAction, QPainter, QPaintEvent
from PySide6.QtWidgets import (
    QFileDialog,
    QHBoxLayout,
    QMenu,
    QProgressBar,
    QToolButton,
    QWidget,
)

from app.views.common.icons import icon
from app.views.library.model_menu import DEFAULT_NAME, DEFAULT_SPEC, MenuEntry, model_label

PICKER_MAX_TEXT = 220  # px of the picker's text before a long name is shortened
NO_MODEL = "No model"
DOWNLOAD_LABEL = "Download a model…"


class PickerButton(QToolButton):
    """The picker: a bordered button with a chevron at its right (the style sheet keeps
    room for it and hides Qt's own menu arrow, which sits in a corner)."""

    CHEVRON = 14

    def paintEvent(self, event: QPaintEvent) -> None:
        super().paintEvent(event)
        size = self.CHEVRON
        area = QRect(self.width() - size - 7, (self.height() - size) // 2, size, size)
        painter = QPainter(self)
        icon("down", size=size).paint(painter, area)
        painter.end()


class ModelBar(QWidget):
    """Emits `loadRequested(spec)`, `libraryRequested`, `downloadRequested` (open the
    download window) and `menuOpened` (a chance to rescan); the window reports loads and
    downloads back."""

    loadRequested = Signal(str)
    libraryRequested = Signal()
    downloadRequested = Signal()
    menuOpened = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(4, 0, 4, 0)
        layout.setSpacing(8)
        self.picker = PickerButton(self)
        self.picker.setObjectName("modelPicker")
        self.picker.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        self.picker.setIconSize(QSize(16, 16))
        self.picker.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        self.picker.setAccessibleName("Model")
        self.menu = QMenu(self.picker)
        self.menu.setObjectName("modelMenu")
        self.menu.setToolTipsVisible(True)
        self.menu.aboutToShow.connect(self.menuOpened.emit)
        self.picker.setMenu(self.menu)
        self.progress = QProgressBar(self)
        self.progress.setObjectName("loadProgress")
        self.progress.setRange(0, 100)
        self.progress.setMaximumWidth(120)
        self.progress.setTextVisible(False)
        self.progress.setVisible(False)
        self.download_chip = QToolButton(self)
        self.download_chip.setObjectName("downloadChip")
        self.download_chip.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        self.download_chip.setIconSize(QSize(14, 14))
        self.download_chip.setAutoRaise(True)
        self.download_chip.setVisible(False)
        self.download_chip.clicked.connect(self.downloadRequested.emit)
        layout.addWidget(self.picker)
        layout.addWidget(self.progress)
        layout.addWidget(self.download_chip)
        # Kept across rebuilds of the list (owned by the bar, so clearing the menu keeps them).
        self.library_action = QAction("Model Library…", self)
        self.library_action.triggered.connect(lambda _checked=False: self.libraryRequested.emit())
        self.download_action = QAction(DOWNLOAD_LABEL, self)
        self.download_action.triggered.connect(lambda _checked=False: self.downloadRequested.emit())
        self.folder_action = QAction("Open MLX model folder…", self)
        self.folder_action.triggered.connect(lambda _checked=False: self.choose_folder())
        self.gguf_action = QAction("Import GGUF…", self)
        self.gguf_action.triggered.connect(lambda _checked=False: self.choose_gguf())
        self.entries: list[MenuEntry] = []
        self._scanned = False
        self._loaded: tuple[str, int | None] | None = None  # the engine's name, size on disk
        self._previous: tuple[str, int | None] | None = None  # the same, before a load began
        self.restyle()
        self._set_picker(NO_MODEL)
        self._build_menu()

    def restyle(self) -> None:
        """Redraw the icons in the palette's colours."""
        self.picker.setIcon(icon("model", size=16))
        self.download_chip.setIcon(icon("download", size=14))

    # ---- the menu ----

    def set_entries(self, entries: list[MenuEntry]) -> None:
        """The models to offer (from `model_menu.menu_entries`), once the library is read."""
        if entries == self.entries and self._scanned:
            return  # unchanged: an open menu does not flicker
        self.entries, self._scanned = list(entries), True
        self._build_menu()
        self._show_loaded()

    def _build_menu(self) -> None:
        menu = self.menu
        menu.clear()
        menu.addSection("On this computer")
        if not self.entries:
            looking = menu.addAction("Looking for models…")
            looking.setEnabled(False)
        for entry in self.entries:
            action = menu.addAction(entry.label)
            action.setCheckable(True)
            action.setChecked(entry.loaded)
            action.setToolTip(entry.detail)
            action.setData(entry.spec)
            action.triggered.connect(lambda _checked=False, e=entry, a=action: self._pick(e, a))
        menu.addSeparator()
        menu.addAction(self.library_action)
        menu.addAction(self.download_action)
        menu.addSeparator()
        menu.addAction(self.folder_action)
        menu.addAction(self.gguf_action)

    def _pick(self, entry: MenuEntry, action: QAction) -> None:
        if entry.loaded:  # already loaded: nothing to do, and it keeps its tick
            action.setChecked(True)
        else:
            self.loadRequested.emit(entry.spec)

    def model_actions(self) -> list[tuple[str, str]]:
        """The menu's models as (label, spec), as a user sees them."""
        return [(a.text(), a.data()) for a in self.menu.actions() if isinstance(a.data(), str)]

    def choose_folder(self) -> None:
        folder = QFileDialog.getExistingDirectory(self, "Open MLX model folder")
        if folder:
            self.loadRequested.emit(folder)

    def choose_gguf(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Import GGUF model", "", "GGUF models (*.gguf)")
        if path:
            self.loadRequested.emit(path)

    # ---- what is loaded ----

    def _set_picker(self, text: str, tip: str = "Choose the model") -> None:
        metrics = self.picker.fontMetrics()
        shown = metrics.elidedText(text, Qt.TextElideMode.ElideMiddle, PICKER_MAX_TEXT)
        self.picker.setText(shown)
        self.picker.setToolTip(f"{text}\n{tip}" if shown != text else tip)

    def _show_loaded(self) -> None:
        """The loaded model as its menu entry says it (the library's name and size, so the
        button and the ticked entry agree), else the engine's name and the measured size."""
        if self._loaded is None:
            return
        entry = next((e for e in self.entries if e.loaded), None)
        if entry is not None:
            label = model_label(entry.name, entry.size_bytes or self._loaded[1])
            self._set_picker(label, f"{entry.detail}\nChoose the model (size on disk)")
        else:
            self._set_picker(model_label(*self._loaded), "Choose the model (size on disk)")

    def loading(self, spec: str) -> None:
        name = DEFAULT_NAME if spec == DEFAULT_SPEC else Path(spec).name or spec  # not a path
        self._previous, self._loaded = self._loaded or self._previous, None
        self._set_picker(f"Loading {name}…")
        self.progress.setValue(0)
        self.progress.setToolTip("Starting")
        self.progress.setVisible(True)

    def progressed(self, stage: str, fraction: float) -> None:
        self.progress.setValue(int(round(fraction * 100)))
        self.progress.setToolTip(stage)

    def loaded(self, name: str, size_bytes: int | None = None) -> None:
        """`name` is loaded; its size on disk follows with `sized` once measured."""
        self._loaded = (name, size_bytes)
        self.progress.setVisible(False)
        self._show_loaded()

    def sized(self, name: str, size_bytes: int) -> None:
        """The size on disk of `name`, measured off the GUI thread after it loaded."""
        if self._loaded is not None and self._loaded[0] == name:
            self.loaded(name, size_bytes)

    def failed(self, loaded: str | None) -> None:
        """A load failed; `loaded` is what the engine still has (None: nothing)."""
        self.progress.setVisible(False)
        if loaded is None:
            self._loaded = None
            self._set_picker(NO_MODEL, "No model is loaded: choose one")
        else:
            known = self._loaded or self._previous
            self.loaded(loaded, known[1] if known and known[0] == loaded else None)

    # ---- a download ----

    def downloading(self, repo_id: str, text: str, fraction: float) -> None:
        """A download in progress: a chip with its percentage (details in its tooltip)."""
        percent = int(fraction * 100)
        self.download_chip.setText(f"{percent}%")
        self.download_chip.setToolTip(f"{text}\nClick to see the download or cancel it")
        self.download_chip.setVisible(True)
        self.download_action.setText(f"Downloading {repo_id} ({percent}%)…")

    def download_ended(self) -> None:
        self.download_chip.setVisible(False)
        self.download_action.setText(DOWNLOAD_LABEL)
