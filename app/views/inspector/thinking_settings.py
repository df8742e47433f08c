"""The Chat settings' "Thinking" group, shown only while the loaded model thinks before it
answers (its ModelInfo.reasoning): the switch *Think before answering* and the thinking
budget (0 = no budget of the chat's own). Both are stored with the conversation's
ChatSettings (`think`, `max_thinking_tokens`) like its other settings.
"""

from __future__ import annotations

from PySide6.QtCore import QSignalBlocker, Signal
from PySide6.QtWidgets import QCheckBox, QFormLayout, QSpinBox, QVBoxLayout, QWidget

from app.store import ChatSettings
from app.views.common import theme

MAX_THINKING_BUDGET = 32768  # tokens; the longest reply the panel allows


class ThinkingSettings(QWidget):
    """Edits a ChatSettings' `think` and `max_thinking_tokens`; emits `edited` on a change."""

    edited = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("thinkingSettings")
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(theme.SPACE.S)
        self.think = QCheckBox("Think before answering", self)
        self.think.setToolTip(
            "The model reasons first (shown collapsed above its answer), then answers; "
            "a format or tools hold only the answer"
        )
        layout.addWidget(self.think)
        form = QFormLayout()
        form.setSpacing(theme.SPACE.S)
        self.budget = QSpinBox(self, minimum=0, maximum=MAX_THINKING_BUDGET)
        self.budget.setSuffix(" tokens")
        self.budget.setSpecialValueText("No limit")
        self.budget.setToolTip(
            "At most this many thinking tokens: then the answer is made to begin; 0 = no limit"
        )
        form.addRow("Thinking budget", self.budget)
        layout.addLayout(form)
        self.think.toggled.connect(self._think_toggled)
        self.budget.valueChanged.connect(lambda _v: self.edited.emit())

    def show_settings(self, settings: ChatSettings) -> None:
        """Show `settings`' thinking values without emitting `edited`."""
        with QSignalBlocker(self.think), QSignalBlocker(self.budget):
            self.think.setChecked(settings.think)
            self.budget.setValue(settings.max_thinking_tokens)
        self.budget.setEnabled(settings.think)

    def apply_to(self, settings: ChatSettings) -> None:
        """Write the shown values into `settings`."""
        settings.think = self.think.isChecked()
        settings.max_thinking_tokens = self.budget.value()

    def _think_toggled(self, on: bool) -> None:
        self.budget.setEnabled(on)
        self.edited.emit()
