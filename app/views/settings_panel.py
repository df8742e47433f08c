"""Per-conversation settings: system prompt with presets, and the sampling settings.

Every change is saved at once (the system prompt after a short pause in typing).
"""

from __future__ import annotations

from PySide6.QtCore import QSignalBlocker, QTimer, Signal
from PySide6.QtWidgets import (
    QComboBox,
    QDoubleSpinBox,
    QFormLayout,
    QHBoxLayout,
    QInputDialog,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from app.store import ChatSettings

NO_PRESET = "Presets…"


class SettingsPanel(QWidget):
    """Edits a ChatSettings; emits `changed` with the new settings."""

    changed = Signal(object)  # ChatSettings
    presetSaved = Signal(str, str)  # name, system prompt
    presetDeleted = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("settingsPanel")
        self._presets: dict[str, str] = {}
        layout = QVBoxLayout(self)
        layout.addWidget(QLabel("<b>System prompt</b>", self))
        preset_row = QHBoxLayout()
        self.preset = QComboBox(self)
        self.preset.setToolTip("Replace the system prompt with a saved preset")
        self.save_preset = QPushButton("Save…", self)
        self.save_preset.setToolTip("Save the prompt as a preset")
        self.delete_preset = QPushButton("Delete", self)
        self.delete_preset.setToolTip("Delete the selected preset")
        preset_row.addWidget(self.preset, 1)
        preset_row.addWidget(self.save_preset)
        preset_row.addWidget(self.delete_preset)
        layout.addLayout(preset_row)
        self.system_prompt = QPlainTextEdit(self)
        self.system_prompt.setPlaceholderText("You are a helpful assistant.")
        self.system_prompt.setMaximumHeight(130)
        layout.addWidget(self.system_prompt)

        layout.addWidget(QLabel("<b>Sampling</b>", self))
        form = QFormLayout()
        self.temperature = self._double(0.0, 2.0, 0.05, 2, "0 = always the most likely token")
        self.top_p = self._double(0.01, 1.0, 0.01, 2, "1 = off")
        self.top_k = self._int(0, 1000, "0 = off")
        self.min_p = self._double(0.0, 0.99, 0.01, 2, "0 = off")
        self.repetition_penalty = self._double(0.5, 2.0, 0.05, 2, "1 = off")
        self.max_tokens = self._int(1, 32768, "Longest reply, in tokens")
        self.seed = self._int(-1, 2**31 - 1, "Same seed + same settings = same reply")
        self.seed.setSpecialValueText("Random")
        for label, widget in (
            ("Temperature", self.temperature),
            ("Top-p", self.top_p),
            ("Top-k", self.top_k),
            ("Min-p", self.min_p),
            ("Repetition penalty", self.repetition_penalty),
            ("Max tokens", self.max_tokens),
            ("Seed", self.seed),
        ):
            form.addRow(label, widget)
        layout.addLayout(form)
        layout.addStretch(1)

        self._prompt_timer = QTimer(self, singleShot=True, interval=400)
        self._prompt_timer.timeout.connect(self._emit)
        self.system_prompt.textChanged.connect(self._prompt_timer.start)
        for w in (self.temperature, self.top_p, self.min_p, self.repetition_penalty):
            w.valueChanged.connect(self._emit)
        for spin in (self.top_k, self.max_tokens, self.seed):
            spin.valueChanged.connect(self._emit)
        self.preset.activated.connect(self._apply_preset)
        self.save_preset.clicked.connect(self._save_preset)
        self.delete_preset.clicked.connect(self._delete_preset)

    def _double(self, lo: float, hi: float, step: float, decimals: int, tip: str) -> QDoubleSpinBox:
        box = QDoubleSpinBox(self, minimum=lo, maximum=hi, singleStep=step, decimals=decimals)
        box.setToolTip(tip)
        return box

    def _int(self, lo: int, hi: int, tip: str) -> QSpinBox:
        box = QSpinBox(self, minimum=lo, maximum=hi)
        box.setToolTip(tip)
        return box

    def set_presets(self, presets: dict[str, str]) -> None:
        self._presets = dict(presets)
        with QSignalBlocker(self.preset):
            self.preset.clear()
            self.preset.addItem(NO_PRESET)
            self.preset.addItems(sorted(presets))

    def set_settings(self, settings: ChatSettings) -> None:
        """Show `settings` without emitting `changed`."""
        widgets = (
            self.system_prompt,
            self.temperature,
            self.top_p,
            self.top_k,
            self.min_p,
            self.repetition_penalty,
            self.max_tokens,
            self.seed,
        )
        blockers = [QSignalBlocker(w) for w in widgets]
        self._prompt_timer.stop()
        if self.system_prompt.toPlainText() != settings.system_prompt:
            self.system_prompt.setPlainText(settings.system_prompt)
        self.temperature.setValue(settings.temperature)
        self.top_p.setValue(settings.top_p)
        self.top_k.setValue(settings.top_k)
        self.min_p.setValue(settings.min_p)
        self.repetition_penalty.setValue(settings.repetition_penalty)
        self.max_tokens.setValue(settings.max_tokens)
        self.seed.setValue(-1 if settings.seed is None else settings.seed)
        del blockers

    def settings(self) -> ChatSettings:
        return ChatSettings(
            system_prompt=self.system_prompt.toPlainText(),
            temperature=self.temperature.value(),
            top_p=self.top_p.value(),
            top_k=self.top_k.value(),
            min_p=self.min_p.value(),
            repetition_penalty=self.repetition_penalty.value(),
            max_tokens=self.max_tokens.value(),
            seed=None if self.seed.value() < 0 else self.seed.value(),
        )

    def flush(self) -> None:
        """Save a pending system-prompt edit now (before sending or switching chats)."""
        if self._prompt_timer.isActive():
            self._prompt_timer.stop()
            self._emit()

    def _emit(self) -> None:
        self.changed.emit(self.settings())

    def _apply_preset(self, index: int) -> None:
        name = self.preset.itemText(index)
        if name in self._presets:
            self.system_prompt.setPlainText(self._presets[name])
            self.flush()

    def _save_preset(self) -> None:
        name, ok = QInputDialog.getText(self, "Save preset", "Preset name:")
        if ok and name.strip():
            self.presetSaved.emit(name.strip(), self.system_prompt.toPlainText())

    def _delete_preset(self) -> None:
        name = self.preset.currentText()
        if name in self._presets:
            self.presetDeleted.emit(name)
