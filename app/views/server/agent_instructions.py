"""Preferences → Local server → "Use with Claude Code…": what to set so that Claude Code,
Codex or OpenCode uses this server, the same text `python -m engine launch AGENT --print`
prints (engine.server.agents). It only shows text to copy: nothing is written, nothing runs.
"""

from __future__ import annotations

from PySide6.QtGui import QFontDatabase
from PySide6.QtWidgets import (
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QLabel,
    QPlainTextEdit,
    QVBoxLayout,
    QWidget,
)

from engine.server.agents import agent_setup
from engine.server.launch import agents_dir

AGENT_CHOICES = (
    ("Claude Code", "claude", "openai"),
    ("Codex", "codex", "openai"),
    ("OpenCode (OpenAI-compatible)", "opencode", "openai"),
    ("OpenCode (Anthropic)", "opencode", "anthropic"),
)


def agent_instructions(agent: str, provider: str, port: int, api_key: str, model: str) -> str:
    """The shell lines that point `agent` at the server on `port`."""
    setup = agent_setup(
        agent,
        f"http://127.0.0.1:{port}",
        model,
        agents_dir(),
        api_key=api_key or None,
        opencode_provider=provider,
    )
    return setup.instructions()


class AgentInstructionsDialog(QDialog):
    """A choice of agent and the lines to set for it."""

    def __init__(
        self, port: int, api_key: str, any_model: bool, model: str, parent: QWidget | None = None
    ) -> None:
        super().__init__(parent)
        self.setWindowTitle("Use with a coding agent")
        self.port, self.api_key, self.model = port, api_key, model
        layout = QVBoxLayout(self)
        self.agent = QComboBox(self)
        self.agent.setAccessibleName("Coding agent")
        for label, _, _ in AGENT_CHOICES:
            self.agent.addItem(label)
        layout.addWidget(self.agent)
        intro = "Run these lines in a terminal (or: python -m engine launch AGENT)."
        if not any_model:
            intro += (
                " Agents ask for their own model names: turn on “Answer requests for any model "
                "name” too."
            )
        note = QLabel(intro, self)
        note.setWordWrap(True)
        layout.addWidget(note)
        self.text = QPlainTextEdit(self)
        self.text.setReadOnly(True)
        self.text.setAccessibleName("Settings for the agent")
        self.text.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        layout.addWidget(self.text)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close, self)
        buttons.rejected.connect(self.reject)
        layout.addWidget(buttons)
        self.agent.currentIndexChanged.connect(self._show)
        self.resize(640, 420)
        self._show()

    def _show(self) -> None:
        _, agent, provider = AGENT_CHOICES[self.agent.currentIndex()]
        self.text.setPlainText(
            agent_instructions(agent, provider, self.port, self.api_key, self.model)
        )
