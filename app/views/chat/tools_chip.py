"""The tools chip next to the composer: which tools this conversation offers and how the
model may use them ("Tools: calculator, clock (auto)", "(must call one)"), with a menu to
switch built-in tools on and off, pick the rule, or open the Tools panel."""

from __future__ import annotations

from dataclasses import replace

from PySide6.QtCore import QEvent, QSize, Qt, Signal
from PySide6.QtGui import QAction, QActionGroup, QPaintEvent
from PySide6.QtWidgets import (
    QMenu,
    QStyle,
    QStyleOptionToolButton,
    QStylePainter,
    QToolButton,
    QWidget,
)

from app.store import ToolsConfig
from app.tools import POLICY_LONG, policy_words, tool_title
from app.views.common.icons import icon
from app.words import count
from engine.types import ToolDefinition

CHOICE_MENU = POLICY_LONG
MAX_NAMES = 3


def tool_names(config: ToolsConfig) -> list[str]:
    """The tools a conversation offers: its own definitions, then the enabled built-ins."""
    names = [d.get("function", d).get("name", "?") for d in config.definitions]
    return names + [tool_title(n) for n in config.builtins if n not in names]


def describe_tools(config: ToolsConfig, max_names: int = MAX_NAMES) -> str:
    """The chip's words: "" when no tools are on, else "Tools: a, b (auto)" naming up to
    `max_names` tools ("Tools: a +2 (auto)"), or "3 tools (auto)" with `max_names` 0."""
    names = tool_names(config)
    if not names:
        return ""
    rule = policy_words(config.tool_choice)
    if max_names <= 0:
        return f"{count(len(names), 'tool')} ({rule})"
    more = len(names) - max_names
    shown = ", ".join(names[:max_names]) + (f" +{more}" if more > 0 else "")
    return f"Tools: {shown} ({rule})"


class ToolsChip(QToolButton):
    """Shows the conversation's tools; its menu changes them. `configChanged` carries the
    new ToolsConfig; `editRequested` asks for the Tools panel.

    In a narrow composer it names fewer tools ("Tools: a +2 (auto)", then "3 tools
    (auto)"), so the rule stays in view; `text()` keeps the whole description."""

    configChanged = Signal(object)  # ToolsConfig
    editRequested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("toolsChip")
        self.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        self.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        self.setCursor(Qt.CursorShape.PointingHandCursor)
        self.setIconSize(QSize(16, 16))
        self.config = ToolsConfig()
        self.warnings: tuple[str, ...] = ()
        self._shorter: list[str] = []  # shorter descriptions, for a narrow composer
        self._builtins: list[ToolDefinition] = []
        self.menu_ = QMenu(self)
        self.setMenu(self.menu_)
        self.menu_.aboutToShow.connect(self._fill_menu)
        self.set_config(self.config)

    def set_builtins(self, tools: list[ToolDefinition]) -> None:
        self._builtins = tools

    def set_config(self, config: ToolsConfig, warnings: tuple[str, ...] | None = None) -> None:
        """Show `config`; `warnings` (what Corral cannot enforce of the tools' schemas) add
        ⚠ and their reasons (None keeps the last ones while the tools stay the same)."""
        if warnings is not None:
            self.warnings = warnings
        elif config != self.config:
            self.warnings = ()
        self.config = config
        text = describe_tools(config)
        shown_warnings = self.warnings if text else ()
        mark = " ⚠" if shown_warnings else ""
        self.setText((text or "Tools") + mark)
        shorter = [describe_tools(config, n) for n in range(MAX_NAMES - 1, -1, -1)]
        self._shorter = [t + mark for t in shorter if t and t != text]
        self.setProperty("active", bool(text))
        self.style().unpolish(self)
        self.style().polish(self)
        tip = "Tools the model may call in this conversation"
        if text:
            tip += ": " + ", ".join(tool_names(config))
        if config.tool_choice == "required" and text:
            tip += " — it must call one before it answers"
        elif config.tool_choice not in CHOICE_MENU and text:
            tip += f" — it must call {tool_title(config.tool_choice)} before it answers"
        if shown_warnings:
            tip += "\n\nNot enforced:\n" + "\n".join(f"• {w}" for w in shown_warnings)
        self.setToolTip(tip)
        self.setIcon(icon("tools", size=16))

    def _fill_menu(self) -> None:
        menu = self.menu_
        menu.clear()
        own = [d.get("function", d).get("name", "?") for d in self.config.definitions]
        if own:
            menu.addSection(f"From {self.config.source_name or 'your definitions'}")
            for name in own:
                action = menu.addAction(name)
                action.setEnabled(False)
        if self._builtins:
            menu.addSection("Built in")
            for tool in self._builtins:
                fn = tool["function"]
                action = menu.addAction(tool_title(fn["name"]))
                action.setCheckable(True)
                action.setChecked(fn["name"] in self.config.builtins)
                action.setToolTip(f"{fn['name']}: {fn.get('description', '')}")
                action.toggled.connect(
                    lambda on, name=fn["name"]: self._toggle_builtin(name, bool(on))
                )
        menu.addSection("When to call")
        group = QActionGroup(menu)
        choices = dict(CHOICE_MENU)
        if self.config.tool_choice not in choices:  # one tool (the welcome's clock example)
            one = tool_title(self.config.tool_choice)
            choices[self.config.tool_choice] = f"The model must call {one}"
        for choice, words in choices.items():
            action = QAction(words, menu, checkable=True)
            action.setChecked(self.config.tool_choice == choice)
            action.triggered.connect(lambda _on=False, c=choice: self._choose(c))
            group.addAction(action)
            menu.addAction(action)
        menu.addSeparator()
        menu.addAction("Edit tools…", self.editRequested.emit)

    def _toggle_builtin(self, name: str, on: bool) -> None:
        builtins = [n for n in self.config.builtins if n != name] + ([name] if on else [])
        self._emit(replace(self.config, builtins=builtins))

    def _choose(self, choice: str) -> None:
        self._emit(replace(self.config, tool_choice=choice))

    def _emit(self, config: ToolsConfig) -> None:
        self.set_config(config)
        self.configChanged.emit(config)

    # ---- fitting a narrow composer ----

    def _chrome(self) -> int:
        """The button's width besides its text (icon, padding, border)."""
        return super().sizeHint().width() - self.fontMetrics().horizontalAdvance(self.text())

    def minimumSizeHint(self) -> QSize:
        hint = super().minimumSizeHint()
        if not self._shorter:
            return hint
        narrowest = self._chrome() + self.fontMetrics().horizontalAdvance(self._shorter[-1])
        return QSize(min(hint.width(), narrowest), hint.height())

    def shown_text(self) -> str:
        """The longest description that fits the width the layout gave the chip."""
        room = self.width() - self._chrome()
        metrics = self.fontMetrics()
        for text in [self.text(), *self._shorter]:
            if metrics.horizontalAdvance(text) <= room:
                return text
        narrowest = (self._shorter or [self.text()])[-1]
        return metrics.elidedText(narrowest, Qt.TextElideMode.ElideRight, room)

    def paintEvent(self, event: QPaintEvent) -> None:
        option = QStyleOptionToolButton()
        self.initStyleOption(option)
        option.text = self.shown_text()
        QStylePainter(self).drawComplexControl(QStyle.ComplexControl.CC_ToolButton, option)

    def changeEvent(self, event: QEvent) -> None:
        super().changeEvent(event)
        if event.type() == QEvent.Type.PaletteChange:
            self.setIcon(icon("tools", size=16))
