"""Preferences → Local server → one button per coding agent (Claude Code, Codex, OpenCode):
the server started if it is not running, the agent's configuration and a launcher written
into Corral's own folder (`agents/` in the data folder; never the agent's own files), and
the one command to run in a terminal, with Copy. The setup is engine.server.agents', the
same `python -m engine launch AGENT` uses; the server's key is never written in a file:
the command carries it for that run."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtGui import QFontDatabase, QGuiApplication
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from app.paths import display_path
from app.views.common.fit import fit_to_screen
from app.words import error_sentence
from engine.server.agents import AGENT_NAMES, INSTALL, KEY_VARIABLE, agent_setup, run_command

# The agents' buttons, in order: (agent, label)
AGENT_BUTTONS = tuple(AGENT_NAMES.items())
MASK = "••••••"  # the key as the dialog shows it (Copy copies it whole)
NO_MODEL_NAME = "corral"  # the name agents ask for before a model is loaded (any name works)


class AgentDialog(QDialog):
    """What one agent's button did, and the command to run. `ready(url)` once the server
    answers (at once if it already does), `failed(why)` if it could not start."""

    def __init__(
        self,
        agent: str,
        folder: Path,
        api_key: str,
        model: Callable[[], Any],
        parent: QWidget | None = None,
    ) -> None:
        """`folder`: Corral's folder for the agents' setup; `model()`: the model loaded
        now (a ModelInfo), or None."""
        super().__init__(parent)
        self.agent, self.folder, self.api_key, self._model = agent, folder, api_key, model
        self.name = AGENT_NAMES[agent]
        self.setWindowTitle(f"Use with {self.name}")
        self.command = ""  # the whole command, key included (what Copy copies)
        self.status = QLabel(f"Starting Corral's server for {self.name}…", self)
        self.status.setWordWrap(True)
        self.status.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.run_label = QLabel("Run this in a terminal:", self)
        self.command_field = QLineEdit(self)
        self.command_field.setReadOnly(True)
        self.command_field.setAccessibleName(f"Command that starts {self.name}")
        self.command_field.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        self.run_label.setBuddy(self.command_field)
        self.copy_button = QPushButton("Copy", self)
        self.copy_button.setToolTip("Copy the command (with the server's key, if it has one)")
        self.copy_button.clicked.connect(self.copy)
        self.note = QLabel(self)
        self.note.setWordWrap(True)
        self.note.setObjectName("hint")
        self.note.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close, self)
        buttons.rejected.connect(self.reject)
        row = QHBoxLayout()
        row.addWidget(self.command_field, 1)
        row.addWidget(self.copy_button)
        layout = QVBoxLayout(self)
        layout.addWidget(self.status)
        layout.addWidget(self.run_label)
        layout.addLayout(row)
        layout.addWidget(self.note)
        layout.addStretch(1)
        layout.addWidget(buttons)
        for widget in (self.run_label, self.command_field, self.copy_button):
            widget.setEnabled(False)
        self.resize(640, 260)
        fit_to_screen(self)

    def ready(self, url: str) -> None:
        """The server answers at `url`: write the agent's setup and show its command."""
        info = self._model()
        model = getattr(info, "name", None) or NO_MODEL_NAME
        setup = agent_setup(
            self.agent,
            url,
            model,
            self.folder,
            api_key=self.api_key or None,
            context_length=getattr(info, "context_length", None),
        )
        try:
            launcher = setup.write_launcher(self.folder)
        except OSError as exc:
            self.failed(f"its settings could not be written in {display_path(self.folder)}: "
                        f"{error_sentence(exc)}")  # fmt: skip
            return
        self.command = run_command(launcher, self.api_key or None)
        masked = f"{KEY_VARIABLE}={MASK} " if self.api_key else ""
        shown = masked + run_command(launcher)
        self.command_field.setText(shown)
        self.command_field.setCursorPosition(0)
        for widget in (self.run_label, self.command_field, self.copy_button):
            widget.setEnabled(True)
        serving = f"Corral's server is running at {url}"
        self.status.setText(
            f"{serving} with {info.name}." if info is not None
            else f"{serving}; load a model in Corral before you ask {self.name} anything."
        )  # fmt: skip
        notes = [
            f"{self.name}'s settings for Corral are in {display_path(self.folder)} (Corral's "
            f"folder); {self.name}'s own settings are not touched."
        ]
        if shutil.which(setup.command[0]) is None:
            notes.append(f"{self.name} is not installed here: {INSTALL[self.agent]}")
        self.note.setText(" ".join(notes))
        self.copy_button.setFocus()

    def failed(self, why: str) -> None:
        self.status.setText(f"Corral's server could not start: {why}")

    def copy(self) -> None:
        if self.command:
            QGuiApplication.clipboard().setText(self.command)
            self.copy_button.setText("Copied")
