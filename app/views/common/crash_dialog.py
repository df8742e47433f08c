"""The dialog an uncaught exception shows: what happened, the report (redacted, the same
text the log holds) and a Copy button; nothing is sent anywhere. Closing it goes on where
the app was."""

from __future__ import annotations

from PySide6.QtCore import QUrl
from PySide6.QtGui import QDesktopServices, QGuiApplication
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from app.views.common.fit import fit_to_screen

INTRO = (
    "Something went wrong that Corral did not expect. It was written to the log; you can go "
    "on working. To report it, copy the text below (it holds no keys or messages) and paste "
    "it into your report."
)
NATIVE_INTRO = (
    "Corral quit unexpectedly the last time it ran. This is what it was doing (the report "
    "was kept in the log folder). To report it, copy the text below and paste it into your "
    "report."
)


class CrashDialog(QDialog):
    """One report; `copy_button` puts it on the clipboard."""

    def __init__(
        self,
        report: str,
        log_folder: str | None,
        parent: QWidget | None = None,
        *,
        title: str = "Corral hit a problem",
        intro: str = INTRO,
    ) -> None:
        super().__init__(parent)
        self.setWindowTitle(title)
        self.setAccessibleName("Problem report")
        layout = QVBoxLayout(self)
        intro_label = QLabel(intro, self)
        intro_label.setWordWrap(True)
        layout.addWidget(intro_label)
        self.report = QPlainTextEdit(report, self)
        self.report.setReadOnly(True)
        self.report.setAccessibleName("Report")
        self.report.setTabChangesFocus(True)
        layout.addWidget(self.report)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close, self)
        self.copy_button = QPushButton("Copy", self)
        self.copy_button.setAccessibleName("Copy the report")
        buttons.addButton(self.copy_button, QDialogButtonBox.ButtonRole.ActionRole)
        self.copy_button.clicked.connect(self.copy)
        if log_folder:
            logs = QPushButton("Show logs", self)
            buttons.addButton(logs, QDialogButtonBox.ButtonRole.ActionRole)
            logs.clicked.connect(lambda: QDesktopServices.openUrl(QUrl.fromLocalFile(log_folder)))
        buttons.rejected.connect(self.reject)
        layout.addWidget(buttons)
        self.resize(640, 420)
        fit_to_screen(self)

    def copy(self) -> None:
        QGuiApplication.clipboard().setText(self.report.toPlainText())
