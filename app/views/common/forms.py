"""The pieces a settings page is laid out with (the inspector's tabs, Preferences): a
section's title and the grey hint under a control, styled by the theme's object names."""

from __future__ import annotations

from PySide6.QtWidgets import QLabel, QWidget


def section(text: str, parent: QWidget) -> QLabel:
    label = QLabel(text, parent)
    label.setObjectName("sectionTitle")
    return label


def hint(text: str, parent: QWidget) -> QLabel:
    label = QLabel(text, parent)
    label.setObjectName("sectionHint")
    label.setWordWrap(True)
    return label
