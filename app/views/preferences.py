"""The Preferences dialog: app-wide settings (the KV-cache budget, and sections such as the
local server's that their owners provide)."""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtWidgets import QDialog, QDialogButtonBox, QFormLayout, QLabel, QSpinBox, QWidget


class PreferencesDialog(QDialog):
    def __init__(
        self, kv_budget_mb: int, parent: QWidget | None = None, sections: Sequence[QWidget] = ()
    ) -> None:
        super().__init__(parent)
        self.setWindowTitle("Preferences")
        form = QFormLayout(self)
        self.kv_budget = QSpinBox(
            self, minimum=0, maximum=1024 * 1024, singleStep=256, suffix=" MB"
        )
        self.kv_budget.setSpecialValueText("Automatic")
        self.kv_budget.setValue(kv_budget_mb)
        form.addRow("KV-cache budget", self.kv_budget)
        hint = QLabel(
            "Memory kept for reusing prompts already computed (earlier turns, "
            "shared system prompts). Automatic sizes it to the free memory.",
            self,
        )
        hint.setWordWrap(True)
        hint.setObjectName("hint")
        form.addRow(hint)
        for section in sections:  # e.g. the local server's settings
            form.addRow(section)
        buttons = QDialogButtonBox(
            QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel, self
        )
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        form.addRow(buttons)

    def kv_budget_mb(self) -> int:
        return self.kv_budget.value()
