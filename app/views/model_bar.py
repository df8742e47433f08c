"""The toolbar row that picks the model (default, MLX folder, GGUF, Hugging Face repo id)
and shows loading progress without ever blocking the window."""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import (
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


class ModelBar(QWidget):
    """Emits `loadRequested(spec)`; the window starts the load and reports progress back."""

    loadRequested = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(4, 0, 4, 0)
        layout.setSpacing(8)
        self.picker = QToolButton(self)
        self.picker.setText("Model: none")
        self.picker.setObjectName("modelPicker")
        self.picker.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        self.menu = QMenu(self.picker)
        self.menu.addAction(DEFAULT_LABEL, lambda: self.loadRequested.emit("default"))
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
        self.repo.setMinimumWidth(260)
        self.progress = QProgressBar(self)
        self.progress.setRange(0, 100)
        self.progress.setMaximumWidth(160)
        self.progress.setVisible(False)
        self.stage = QLabel(self)
        self.stage.setObjectName("hint")
        layout.addWidget(self.picker)
        layout.addWidget(self.repo, 1)
        layout.addWidget(self.progress)
        layout.addWidget(self.stage)
        self.repo.returnPressed.connect(self._load_repo)

    def _load_repo(self) -> None:
        repo = self.repo.text().strip()
        if repo.count("/") == 1 and " " not in repo:
            self.loadRequested.emit(repo)
        else:
            self.stage.setText("A repo id looks like org/name")

    def choose_folder(self) -> None:
        folder = QFileDialog.getExistingDirectory(self, "Open MLX model folder")
        if folder:
            self.loadRequested.emit(folder)

    def choose_gguf(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Import GGUF model", "", "GGUF models (*.gguf)")
        if path:
            self.loadRequested.emit(path)

    def loading(self, spec: str) -> None:
        name = "default model" if spec == "default" else spec
        self.picker.setText(f"Model: loading {name}…")
        self.progress.setValue(0)
        self.progress.setVisible(True)
        self.stage.setText("Starting…")

    def progressed(self, stage: str, fraction: float) -> None:
        self.progress.setValue(int(round(fraction * 100)))
        self.stage.setText(stage)

    def loaded(self, name: str) -> None:
        self.picker.setText(f"Model: {name}")
        self.progress.setVisible(False)
        self.stage.setText("")

    def failed(self, previous: str | None) -> None:
        self.picker.setText(f"Model: {previous}" if previous else "Model: none")
        self.progress.setVisible(False)
        self.stage.setText("")
