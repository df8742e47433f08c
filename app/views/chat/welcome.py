"""What an empty chat shows: a greeting, example prompts that show what Corral does (one
asks for JSON that must fit a schema, one makes the model call the clock), and a target
for dropping a picture, grammar, schema or tools file."""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtCore import QSize, Qt, Signal
from PySide6.QtGui import QKeyEvent, QMouseEvent, QResizeEvent
from PySide6.QtWidgets import (
    QFrame,
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QSizePolicy,
    QVBoxLayout,
    QWidget,
)

from app.views.common import theme
from app.views.common.icons import icon


@dataclass(frozen=True)
class Example:
    """An example prompt; `grammar` (a file in resources/grammars) or `tool` (a built-in)
    is applied to the conversation before it is sent; with `must_call` the model must call
    that tool (a small model left to decide answers by itself, and wrongly)."""

    title: str
    prompt: str
    grammar: str = ""
    tool: str = ""
    must_call: bool = False


EXAMPLES = (
    Example("Explain an idea", "Explain recursion in two sentences, with a tiny example."),
    Example("Write something", "Write a four-line poem about a lighthouse."),
    Example(
        "Get JSON that always fits a schema",
        "Give me a simple pancake recipe.",
        grammar="recipe.json",
    ),
    # the clock, which the default model (135M parameters) calls correctly; it writes
    # junk into the calculator's expression (", 17, ") and answers sums wrongly without it
    Example(
        "Let it use a tool",
        "What time is it in Paris? Use the clock.",
        tool="current_datetime",
        must_call=True,
    ),
)
TWO_COLUMNS_FROM = 520  # px of column width


def _activated_by_keys(event: QKeyEvent) -> bool:
    return event.key() in (Qt.Key.Key_Space, Qt.Key.Key_Return, Qt.Key.Key_Enter)


class DropTarget(QFrame):
    """ "Drop a document, picture, grammar or tool file here": lights up while a file is
    dragged over the window. It is in the Tab order too: a click, Enter or Space chooses
    the file instead."""

    clicked = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("dropTarget")
        self.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
        self.setCursor(Qt.CursorShape.PointingHandCursor)
        self.setAccessibleName("Choose a grammar, JSON schema or tools file")
        self.setToolTip("Choose a file (or drop one here)")
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(theme.SPACE.M)
        self.icon = QLabel(self)
        self.text = QLabel(
            "Drop a document or picture to ask about it, or a grammar, JSON schema or tools "
            "file — replies will follow it",
            self,
        )
        self.text.setWordWrap(True)
        self.text.setObjectName("dropTargetText")
        layout.addWidget(self.icon, 0, Qt.AlignmentFlag.AlignTop)
        layout.addWidget(self.text, 1)
        self.set_armed(False)

    def set_armed(self, armed: bool) -> None:
        self.setProperty("armed", armed)
        self.style().unpolish(self)
        self.style().polish(self)
        colors = theme.colors()
        self.icon.setPixmap(
            icon("file", colors.accent if armed else colors.secondary, 22).pixmap(QSize(22, 22))
        )

    def mouseReleaseEvent(self, event: QMouseEvent) -> None:
        if event.button() == Qt.MouseButton.LeftButton:
            self.clicked.emit()
        super().mouseReleaseEvent(event)

    def keyPressEvent(self, event: QKeyEvent) -> None:
        if _activated_by_keys(event):
            self.clicked.emit()
            event.accept()
        else:
            super().keyPressEvent(event)


class ExampleCard(QFrame):
    """A clickable card: a short title over the prompt it sends."""

    clicked = Signal()

    def __init__(self, example: Example, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.example = example
        self.setObjectName("examplePrompt")
        self.setAttribute(Qt.WidgetAttribute.WA_Hover)
        self.setCursor(Qt.CursorShape.PointingHandCursor)
        self.setToolTip("Send this message")
        self.setFocusPolicy(Qt.FocusPolicy.StrongFocus)  # in the Tab order: Enter sends it
        self.setAccessibleName(f"{example.title}: {example.prompt}")
        self.setAccessibleDescription("Sends this message")
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Preferred)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(
            theme.SPACE.M, theme.SPACE.S + 2, theme.SPACE.M, theme.SPACE.S + 2
        )
        layout.setSpacing(theme.SPACE.XXS)
        self.title = QLabel(example.title, self)
        self.title.setObjectName("exampleTitle")
        self.prompt = QLabel(example.prompt, self)
        self.prompt.setObjectName("exampleText")
        for label in (self.title, self.prompt):
            label.setWordWrap(True)
            label.setAttribute(Qt.WidgetAttribute.WA_TransparentForMouseEvents)
            layout.addWidget(label)

    def mouseReleaseEvent(self, event: QMouseEvent) -> None:
        if event.button() == Qt.MouseButton.LeftButton and self.rect().contains(
            event.position().toPoint()
        ):
            self.clicked.emit()
        super().mouseReleaseEvent(event)

    def keyPressEvent(self, event: QKeyEvent) -> None:
        if _activated_by_keys(event):
            self.clicked.emit()
            event.accept()
        else:
            super().keyPressEvent(event)


class Welcome(QWidget):
    """The empty-chat view; `examplePicked` carries the chosen Example."""

    examplePicked = Signal(object)
    chooseFileRequested = Signal()  # the drop target clicked or pressed

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("welcome")
        self.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Expanding)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, theme.SPACE.L, 0, theme.SPACE.L)
        layout.setSpacing(theme.SPACE.M)
        layout.addStretch(2)
        self.title = QLabel("What shall we do?", self)
        self.title.setObjectName("welcomeTitle")
        self.title.setWordWrap(True)
        self.subtitle = QLabel(self)
        self.subtitle.setObjectName("welcomeText")
        self.subtitle.setWordWrap(True)
        layout.addWidget(self.title)
        layout.addWidget(self.subtitle)
        layout.addSpacing(theme.SPACE.S)
        self.grid = QGridLayout()
        self.grid.setSpacing(theme.SPACE.S)
        self.buttons: list[ExampleCard] = []
        for example in EXAMPLES:
            card = ExampleCard(example, self)
            card.clicked.connect(lambda e=example: self.examplePicked.emit(e))
            self.buttons.append(card)
        self._columns = 0
        layout.addLayout(self.grid)
        layout.addSpacing(theme.SPACE.M)
        self.drop_target = DropTarget(self)
        self.drop_target.clicked.connect(self.chooseFileRequested)
        layout.addWidget(self.drop_target)
        layout.addStretch(3)
        self.set_model_name(None)
        self._arrange(2)

    def set_model_name(self, name: str | None) -> None:
        where = f"{name} runs" if name else "Models run"
        self.subtitle.setText(f"{where} on this computer: nothing you type leaves it.")

    def _arrange(self, columns: int) -> None:
        if columns == self._columns:
            return
        self._columns = columns
        for button in self.buttons:
            self.grid.removeWidget(button)
        for index, button in enumerate(self.buttons):
            self.grid.addWidget(button, index // columns, index % columns)

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        self._arrange(2 if self.width() >= TWO_COLUMNS_FROM else 1)
