"""The tools panel: the conversation's tool definitions (loaded from .json or edited in
place, validated before use), the built-in tools to offer, and the tool_choice."""

from __future__ import annotations

import json
from typing import Any

from PySide6.QtCore import QSignalBlocker, Qt, QTimer, Signal
from PySide6.QtGui import QFontDatabase
from PySide6.QtWidgets import (
    QComboBox,
    QHBoxLayout,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QPlainTextEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from app.jobs.thread import run_task
from app.store import ToolsConfig
from app.store.records import TOOL_CHOICES
from app.tools import POLICY_LONG, ToolsError, parse_tools_text, tool_title
from app.views.common import theme
from app.views.common.forms import hint, section
from engine.types import ToolDefinition

CHOICE_LABELS = POLICY_LONG  # the same sentences as the Tools chip's menu

EXAMPLE = """[
  {"type": "function", "function": {
    "name": "get_weather",
    "description": "Current weather for a city",
    "parameters": {"type": "object",
      "properties": {"city": {"type": "string"}},
      "required": ["city"]}}}
]"""


class ToolsPanel(QWidget):
    """Edits a ToolsConfig; `changed` carries the new config once it is valid."""

    changed = Signal(object)  # ToolsConfig
    loadFileRequested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("toolsPanel")
        self.config = ToolsConfig()
        self._builtins: list[ToolDefinition] = []
        self._generation = 0
        self._pending: list[ToolDefinition] | None = None
        layout = QVBoxLayout(self)
        layout.setContentsMargins(theme.SPACE.L, theme.SPACE.M, theme.SPACE.L, theme.SPACE.L)
        layout.setSpacing(theme.SPACE.S)
        layout.addWidget(section("When to call", self))
        self.choice = QComboBox(self)
        self.choice.setToolTip(
            "Whether the model may call a tool, must call one (or a given one), or may not"
        )
        layout.addWidget(self.choice)
        layout.addSpacing(theme.SPACE.S)
        layout.addWidget(section("Built-in tools", self))
        self.builtin_list = QListWidget(self)
        self.builtin_list.setMaximumHeight(96)
        self.builtin_list.setMinimumHeight(72)
        layout.addWidget(self.builtin_list)
        self.no_builtins = hint("No built-in tools in this engine.", self)
        layout.addWidget(self.no_builtins)
        layout.addSpacing(theme.SPACE.S)
        row = QHBoxLayout()
        row.addWidget(section("Your tools", self), 1)
        self.load_button = QPushButton("Load .json…", self)
        row.addWidget(self.load_button)
        layout.addLayout(row)
        layout.addWidget(hint("Function definitions in the OpenAI format.", self))
        self.editor = QPlainTextEdit(self)
        self.editor.setObjectName("toolsEditor")
        self.editor.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        self.editor.setPlaceholderText(EXAMPLE)
        self.editor.setMinimumHeight(140)
        layout.addWidget(self.editor, 1)
        self.status = QLabel(self)
        self.status.setObjectName("toolsStatus")
        self.status.setWordWrap(True)
        self.status.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        layout.addWidget(self.status)
        buttons = QHBoxLayout()
        self.clear_button = QPushButton("Clear", self)
        self.apply_button = QPushButton("Apply", self)
        self.apply_button.setEnabled(False)
        buttons.addStretch(1)
        buttons.addWidget(self.clear_button)
        buttons.addWidget(self.apply_button)
        layout.addLayout(buttons)

        self._timer = QTimer(self, singleShot=True, interval=400)
        self._timer.timeout.connect(self.validate)
        self.editor.textChanged.connect(self._edited)
        self.apply_button.clicked.connect(self.apply)
        self.clear_button.clicked.connect(lambda: self.editor.setPlainText(""))
        self.load_button.clicked.connect(self.loadFileRequested)
        self.choice.activated.connect(lambda _i: self._emit())
        self.builtin_list.itemChanged.connect(lambda _item: self._emit())

    # ---- showing a conversation's config ----

    def set_builtins(self, tools: list[ToolDefinition]) -> None:
        self._builtins = tools
        self.no_builtins.setVisible(not tools)
        self.builtin_list.setVisible(bool(tools))

    def set_config(self, config: ToolsConfig) -> None:
        self.config = config
        with QSignalBlocker(self.editor):
            text = json.dumps(config.definitions, indent=2) if config.definitions else ""
            self.editor.setPlainText(text)
        with QSignalBlocker(self.builtin_list):
            self.builtin_list.clear()
            for tool in self._builtins:
                fn = tool["function"]
                item = QListWidgetItem(tool_title(fn["name"]), self.builtin_list)
                item.setData(Qt.ItemDataRole.UserRole, fn["name"])  # what the model calls
                item.setToolTip(f"{fn['name']}: {fn.get('description', '')}")
                item.setFlags(item.flags() | Qt.ItemFlag.ItemIsUserCheckable)
                checked = fn["name"] in config.builtins
                item.setCheckState(Qt.CheckState.Checked if checked else Qt.CheckState.Unchecked)
        self._fill_choices()
        self._pending = None
        self.apply_button.setEnabled(False)
        self._show_summary()

    def _names(self, definitions: list[dict[str, Any]] | None = None) -> list[str]:
        defs = self.config.definitions if definitions is None else definitions
        names = [d["function"]["name"] for d in defs]
        return names + [n for n in self._checked_builtins() if n not in names]

    def _checked_builtins(self) -> list[str]:
        out = []
        for i in range(self.builtin_list.count()):
            item = self.builtin_list.item(i)
            if item.checkState() == Qt.CheckState.Checked:
                out.append(str(item.data(Qt.ItemDataRole.UserRole)))
        return out

    def _fill_choices(self) -> None:
        with QSignalBlocker(self.choice):
            self.choice.clear()
            for choice in TOOL_CHOICES:
                self.choice.addItem(CHOICE_LABELS[choice], choice)
            for name in self._names():
                self.choice.addItem(f"Must call {tool_title(name)}", name)
            index = self.choice.findData(self.config.tool_choice)
            self.choice.setCurrentIndex(max(index, 0))

    def set_choice(self, choice: str) -> None:
        """Pick a rule ("auto", "required", "none" or a tool's name), as the user would."""
        index = self.choice.findData(choice)
        if index >= 0:
            self.choice.setCurrentIndex(index)
            self.choice.activated.emit(index)

    def _show_summary(self, error: str = "") -> None:
        if error:
            self.status.setProperty("error", True)
            self.status.setText(error)
        else:
            self.status.setProperty("error", False)
            names = self._names()
            self.status.setText(
                f"Offered to the model: {', '.join(names)}"
                if names
                else "No tools: replies are plain text."
            )
        self.status.style().unpolish(self.status)
        self.status.style().polish(self.status)

    # ---- editing ----

    def _edited(self) -> None:
        self.apply_button.setEnabled(False)
        self._timer.start()

    def load_text(self, text: str, source: str) -> None:
        """Put a file's text in the editor and apply it if it is valid."""
        self.config.source_name = source
        with QSignalBlocker(self.editor):
            self.editor.setPlainText(text)
        self.validate(apply=True, source=source)

    def validate(self, apply: bool = False, source: str = "") -> None:
        """Check the editor's JSON on a worker thread (schemas are compiled by llguidance)."""
        self._generation += 1
        generation, text = self._generation, self.editor.toPlainText()
        run_task(
            lambda: parse_tools_text(text, source),
            lambda result, error: self._validated(generation, result, error, apply),
        )

    def _validated(
        self, generation: int, result: Any, error: BaseException | None, apply: bool
    ) -> None:
        if generation != self._generation:
            return
        if error is not None:
            self._pending = None
            message = str(error) if isinstance(error, ToolsError) else f"{error!r}"
            self._show_summary(f"Not applied: {message}")
            self.apply_button.setEnabled(False)
            return
        self._pending = result
        names = self._names(result)
        self.status.setText(f"Valid: {', '.join(names) or 'no tools'}. Apply to use them.")
        self.apply_button.setEnabled(True)
        if apply:
            self.apply()

    def apply(self) -> None:
        if self._pending is None:
            return
        self.config.definitions = self._pending
        self._pending = None
        with QSignalBlocker(self.editor):  # show what was applied, normalised and readable
            self.editor.setPlainText(json.dumps(self.config.definitions, indent=2))
        self.apply_button.setEnabled(False)
        self._fill_choices()
        self._emit()

    def _emit(self) -> None:
        self.config = ToolsConfig(
            definitions=self.config.definitions,
            builtins=self._checked_builtins(),
            tool_choice=self.choice.currentData() or "auto",
            source_name=self.config.source_name,
        )
        if self.config.tool_choice not in self._names() + list(TOOL_CHOICES):
            self.config.tool_choice = "auto"
        self._fill_choices()
        self._show_summary()
        self.changed.emit(self.config)
