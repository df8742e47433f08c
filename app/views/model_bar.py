"""The toolbar row that picks the model (default, the library, MLX folder, GGUF, Hugging
Face repo id with completion from the library) and shows loading and download progress
without ever blocking the window. It fits an 800 px window while a model loads: a long
model name is shortened with "…" (whole in the tooltip), and the stage of the load is the
progress bar's tooltip (the strip above the composer says it in words)."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QStringListModel, Qt, Signal
from PySide6.QtWidgets import (
    QCompleter,
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QMenu,
    QProgressBar,
    QToolButton,
    QWidget,
)

DEFAULT_LABEL = "Default model (SmolLM2-135M-Instruct)"
PICKER_MAX_TEXT = 220  # px of the picker's text before a long name is shortened


class ModelBar(QWidget):
    """Emits `loadRequested(spec)`, `repoRequested(repo_id)` (load or download it),
    `libraryRequested` and `cancelDownload`; the window reports progress back."""

    loadRequested = Signal(str)
    repoRequested = Signal(str)
    libraryRequested = Signal()
    cancelDownload = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(4, 0, 4, 0)
        layout.setSpacing(8)
        self.picker = QToolButton(self)
        self.picker.setObjectName("modelPicker")
        self._set_picker("Model: none")
        self.picker.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        self.menu = QMenu(self.picker)
        self.menu.addAction(DEFAULT_LABEL, lambda: self.loadRequested.emit("default"))
        self.menu.addAction("Model Library…", self.libraryRequested.emit)
        self.menu.addSeparator()
        self.menu.addAction("Open MLX model folder…", self.choose_folder)
        self.menu.addAction("Import GGUF…", self.choose_gguf)
        self.picker.setMenu(self.menu)
        self.repo = QLineEdit(self)
        self.repo.setObjectName("repoField")
        self.repo.setPlaceholderText(
            "Hugging Face repo id, e.g. mlx-community/Qwen2.5-0.5B-Instruct-4bit"
        )
        self.repo.setClearButtonEnabled(True)
        self.repo.setMinimumWidth(160)  # with the progress shown, the bar still fits 800 px
        self.completions = QStringListModel(self)
        completer = QCompleter(self.completions, self)
        completer.setCaseSensitivity(Qt.CaseSensitivity.CaseInsensitive)
        completer.setFilterMode(Qt.MatchFlag.MatchContains)
        self.repo.setCompleter(completer)
        self.progress = QProgressBar(self)
        self.progress.setRange(0, 100)
        self.progress.setMaximumWidth(160)
        self.progress.setVisible(False)
        self.stage = QLabel(self)
        self.stage.setObjectName("hint")
        self.cancel = QToolButton(self)
        self.cancel.setText("Cancel")
        self.cancel.setToolTip("Stop the download; downloading it again resumes where it stopped")
        self.cancel.setVisible(False)
        self.cancel.clicked.connect(self.cancelDownload.emit)
        layout.addWidget(self.picker)
        layout.addWidget(self.repo, 1)
        layout.addWidget(self.progress)
        layout.addWidget(self.stage)
        layout.addWidget(self.cancel)
        self.repo.returnPressed.connect(self._load_repo)

    def _load_repo(self) -> None:
        repo = self.repo.text().strip()
        if repo.count("/") == 1 and " " not in repo:
            self.repoRequested.emit(repo)
        else:
            self.stage.setText("A repo id looks like org/name")

    def set_completions(self, repo_ids: list[str]) -> None:
        """Repo ids the library knows (downloaded, in the Hugging Face cache, LM Studio)."""
        self.completions.setStringList(repo_ids)

    def downloading(self, text: str, fraction: float) -> None:
        """A download in progress: its bar, what and how fast, and a Cancel button."""
        self.progress.setValue(int(round(fraction * 100)))
        self.progress.setVisible(True)
        self.stage.setText(text)
        self.cancel.setVisible(True)

    def download_ended(self) -> None:
        self.progress.setVisible(False)
        self.stage.setText("")
        self.cancel.setVisible(False)

    def _set_picker(self, text: str) -> None:
        metrics = self.picker.fontMetrics()
        shown = metrics.elidedText(text, Qt.TextElideMode.ElideMiddle, PICKER_MAX_TEXT)
        self.picker.setText(shown)
        self.picker.setToolTip(text if shown != text else "Choose the model")

    def choose_folder(self) -> None:
        folder = QFileDialog.getExistingDirectory(self, "Open MLX model folder")
        if folder:
            self.loadRequested.emit(folder)

    def choose_gguf(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Import GGUF model", "", "GGUF models (*.gguf)")
        if path:
            self.loadRequested.emit(path)

    def loading(self, spec: str) -> None:
        name = "default model" if spec == "default" else Path(spec).name or spec  # not a path
        self._set_picker(f"Model: loading {name}…")
        self.progress.setValue(0)
        self.progress.setToolTip("Starting")
        self.progress.setVisible(True)
        self.stage.setText("")

    def progressed(self, stage: str, fraction: float) -> None:
        self.progress.setValue(int(round(fraction * 100)))
        self.progress.setToolTip(stage)

    def loaded(self, name: str) -> None:
        self._set_picker(f"Model: {name}")
        self.progress.setVisible(False)
        self.stage.setText("")

    def failed(self, previous: str | None) -> None:
        self._set_picker(f"Model: {previous}" if previous else "Model: none")
        self.progress.setVisible(False)
        self.stage.setText("")
