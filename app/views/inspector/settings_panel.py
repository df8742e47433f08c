"""Per-conversation settings (the inspector's Chat tab): the system prompt with presets, and
sampling. Sampling values follow the loaded model's recommendation until the user changes
one (shown in grey while they follow it, with Reset to go back); the preset box names the
preset the prompt matches, or says Custom.

Every change is saved at once (the system prompt after a short pause in typing).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from PySide6.QtCore import QSignalBlocker, QTimer, Signal
from PySide6.QtWidgets import (
    QAbstractSpinBox,
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
from app.store.records import SAMPLING_FIELDS
from app.views.common import theme
from app.views.common.forms import hint, section
from app.views.common.icons import IconButton
from app.views.inspector.thinking_settings import ThinkingSettings

CUSTOM = "Custom"
NO_PROMPT = "None"
NO_PRESET = CUSTOM  # the preset box's text when the prompt matches no preset
SAMPLING_LABELS = {
    "temperature": ("Temperature", "Higher is more varied, 0 always picks the likeliest word"),
    "top_p": ("Top-p", "Only the likeliest words that together make up this share; 1 = off"),
    "top_k": ("Top-k", "Only the k likeliest words; 0 = off"),
    "min_p": ("Min-p", "Drop words less likely than this share of the likeliest; 0 = off"),
    "repetition_penalty": ("Repetition penalty", "Above 1 discourages repeating; 1 = off"),
}


class SettingsPanel(QWidget):
    """Edits a ChatSettings; emits `changed` with the new settings."""

    changed = Signal(object)  # ChatSettings
    presetSaved = Signal(str, str)  # name, system prompt
    presetDeleted = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("settingsPanel")
        self._presets: dict[str, str] = {}
        self._settings = ChatSettings()
        self._model_defaults: dict[str, float] = {}
        self._model_name = ""
        self._defaults_source = ""
        layout = QVBoxLayout(self)
        layout.setContentsMargins(theme.SPACE.L, theme.SPACE.M, theme.SPACE.L, theme.SPACE.L)
        layout.setSpacing(theme.SPACE.S)

        layout.addWidget(section("System prompt", self))
        preset_row = QHBoxLayout()
        preset_row.setSpacing(theme.SPACE.XS)
        self.preset = QComboBox(self)
        self.preset.setToolTip("Replace the system prompt with a saved preset")
        self.save_preset = QPushButton("Save…", self)
        self.save_preset.setToolTip("Save this prompt as a preset")
        self.delete_preset = IconButton("close", "Delete the selected preset", self, size=16)
        preset_row.addWidget(self.preset, 1)
        preset_row.addWidget(self.save_preset)
        preset_row.addWidget(self.delete_preset)
        layout.addLayout(preset_row)
        self.system_prompt = QPlainTextEdit(self)
        self.system_prompt.setPlaceholderText("Instructions the model follows in this chat")
        self.system_prompt.setMinimumHeight(72)
        self.system_prompt.setMaximumHeight(140)
        layout.addWidget(self.system_prompt)

        layout.addSpacing(theme.SPACE.S)
        header = QHBoxLayout()
        header.addWidget(section("Sampling", self), 1)
        self.sampling_state = QLabel(self)
        self.sampling_state.setObjectName("sectionHint")
        self.reset_sampling = QPushButton("Reset", self)
        self.reset_sampling.setToolTip("Go back to the model's recommended settings")
        header.addWidget(self.sampling_state)
        header.addWidget(self.reset_sampling)
        layout.addLayout(header)
        form = QFormLayout()
        form.setSpacing(theme.SPACE.S)
        self.temperature = self._double(0.0, 2.0, 0.05, 2)
        self.top_p = self._double(0.01, 1.0, 0.01, 2)
        self.top_k = self._int(0, 1000)
        self.min_p = self._double(0.0, 0.99, 0.01, 2)
        self.repetition_penalty = self._double(0.5, 2.0, 0.05, 2)
        self.sampling_boxes: dict[str, QAbstractSpinBox] = {
            "temperature": self.temperature,
            "top_p": self.top_p,
            "top_k": self.top_k,
            "min_p": self.min_p,
            "repetition_penalty": self.repetition_penalty,
        }
        for name, box in self.sampling_boxes.items():
            label, tip = SAMPLING_LABELS[name]
            box.setToolTip(tip)
            form.addRow(label, box)
        layout.addLayout(form)
        self.defaults_hint = hint("", self)
        layout.addWidget(self.defaults_hint)

        layout.addSpacing(theme.SPACE.S)
        layout.addWidget(section("Reply", self))
        form2 = QFormLayout()
        form2.setSpacing(theme.SPACE.S)
        self.max_tokens = self._int(1, 32768)
        self.max_tokens.setSuffix(" tokens")
        self.max_tokens.setToolTip("The longest reply; a longer one stops with Continue")
        self.seed = self._int(-1, 2**31 - 1)
        self.seed.setSpecialValueText("Random")
        self.seed.setToolTip("The same seed and settings give the same reply")
        form2.addRow("Longest reply", self.max_tokens)
        form2.addRow("Seed", self.seed)
        layout.addLayout(form2)
        # only for a model that thinks first (set_reasoning)
        self.thinking_settings = ThinkingSettings(self)
        self.thinking_settings.setVisible(False)
        layout.addWidget(self.thinking_settings)
        layout.addStretch(1)

        self._prompt_timer = QTimer(self, singleShot=True, interval=400)
        self._prompt_timer.timeout.connect(self._emit)
        self.system_prompt.textChanged.connect(self._prompt_edited)
        for name, box in self.sampling_boxes.items():
            box.valueChanged.connect(lambda value, n=name: self._sampling_edited(n, value))  # type: ignore[attr-defined]
        self.max_tokens.valueChanged.connect(self._reply_edited)
        self.seed.valueChanged.connect(self._reply_edited)
        self.thinking_settings.edited.connect(self._emit)
        self.reset_sampling.clicked.connect(self.reset_to_model)
        self.preset.activated.connect(self._apply_preset)
        self.save_preset.clicked.connect(self._save_preset)
        self.delete_preset.clicked.connect(self._delete_preset)
        self._show_sampling()

    def _double(self, lo: float, hi: float, step: float, decimals: int) -> QDoubleSpinBox:
        return QDoubleSpinBox(self, minimum=lo, maximum=hi, singleStep=step, decimals=decimals)

    def _int(self, lo: int, hi: int) -> QSpinBox:
        return QSpinBox(self, minimum=lo, maximum=hi)

    # ---- presets ----

    def set_presets(self, presets: dict[str, str]) -> None:
        self._presets = dict(presets)
        self._show_preset()

    def _matching_preset(self) -> str:
        text = self.system_prompt.toPlainText()
        if not text.strip():
            return NO_PROMPT
        for name, prompt in self._presets.items():
            if prompt.strip() == text.strip():
                return name
        return CUSTOM

    def _show_preset(self) -> None:
        with QSignalBlocker(self.preset):
            self.preset.clear()
            self.preset.addItem(NO_PROMPT)
            self.preset.addItems(sorted(self._presets))
            match = self._matching_preset()
            if match == CUSTOM:
                self.preset.insertItem(0, CUSTOM)
            self.preset.setCurrentIndex(max(0, self.preset.findText(match)))
        self.delete_preset.setEnabled(match in self._presets)

    def _apply_preset(self, index: int) -> None:
        name = self.preset.itemText(index)
        if name == NO_PROMPT:
            self.system_prompt.setPlainText("")
        elif name in self._presets:
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

    # ---- showing settings ----

    def set_model_defaults(self, values: dict[str, float], model_name: str, source: str) -> None:
        """The loaded model's recommended sampling (shown for values that follow it)."""
        self._model_defaults = dict(values)
        self._model_name = model_name
        self._defaults_source = source
        self._show_sampling()

    def set_reasoning(self, available: bool) -> None:
        """Show the thinking settings only while the loaded model thinks before answering."""
        self.thinking_settings.setVisible(available)

    def set_settings(self, settings: ChatSettings) -> None:
        """Show `settings` without emitting `changed`."""
        self._settings = replace(settings)
        self._prompt_timer.stop()
        with QSignalBlocker(self.system_prompt):
            if self.system_prompt.toPlainText() != settings.system_prompt:
                self.system_prompt.setPlainText(settings.system_prompt)
        with QSignalBlocker(self.max_tokens), QSignalBlocker(self.seed):
            self.max_tokens.setValue(settings.max_tokens)
            self.seed.setValue(-1 if settings.seed is None else settings.seed)
        self.thinking_settings.show_settings(settings)
        self._show_sampling()
        self._show_preset()

    def _show_sampling(self) -> None:
        effective = self._settings.effective(self._model_defaults)
        custom = set(self._settings.custom_fields())
        for name, box in self.sampling_boxes.items():
            with QSignalBlocker(box):
                box.setValue(effective[name])  # type: ignore[attr-defined]
            box.setProperty("followsModel", name not in custom)
            box.style().unpolish(box)
            box.style().polish(box)
        self.sampling_state.setText(CUSTOM if custom else "Model defaults")
        self.reset_sampling.setEnabled(bool(custom))
        model = self._model_name or "the model"
        if self._defaults_source:
            where = (
                "its model card"
                if self._defaults_source == "model card"
                else (f"its {self._defaults_source}")
            )
            text = f"Grey values are {model}'s recommended settings (from {where})."
        else:
            text = "Grey values are the defaults; the model recommends none."
        self.defaults_hint.setText(text)

    def settings(self) -> ChatSettings:
        settings = replace(
            self._settings,
            system_prompt=self.system_prompt.toPlainText(),
            max_tokens=self.max_tokens.value(),
            seed=None if self.seed.value() < 0 else self.seed.value(),
        )
        self.thinking_settings.apply_to(settings)
        return settings

    # ---- edits ----

    def _prompt_edited(self) -> None:
        self._prompt_timer.start()
        self._show_preset()

    def _sampling_edited(self, name: str, value: Any) -> None:
        setattr(self._settings, name, int(value) if name == "top_k" else float(value))
        self._show_sampling()
        self._emit()

    def _reply_edited(self, _value: int) -> None:
        self._emit()

    def reset_to_model(self) -> None:
        """Every sampling value follows the model again."""
        for name in SAMPLING_FIELDS:
            setattr(self._settings, name, None)
        self._show_sampling()
        self._emit()

    def flush(self) -> None:
        """Save a pending system-prompt edit now (before sending or switching chats)."""
        if self._prompt_timer.isActive():
            self._prompt_timer.stop()
            self._emit()

    def _emit(self) -> None:
        self._settings = self.settings()
        self.changed.emit(self._settings)
