"""What a model thought before it answered, above the answer: a disclosure ("▸ Thought for
4.2 s") that starts collapsed and opens onto the thinking text, in the secondary colour.

While the model is still thinking the header says "Thinking…" and the text streams in
(visible if the user opened the section); the header becomes "Thought for N s" when the
reply is saved. A reply without thinking has no section at all.
"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QSizePolicy, QToolButton, QVBoxLayout, QWidget

from app.views.chat.markdown_view import PlainTextView
from app.views.common import theme
from app.views.common.format import format_seconds

THINKING = "Thinking…"


def thought_title(seconds: float) -> str:
    """ "Thought for 4.2 s", or "Thought" when the time is not known."""
    return f"Thought for {format_seconds(seconds)}" if seconds > 0 else "Thought"


class ThinkingSection(QWidget):
    """A collapsed, expandable section holding a reply's thinking."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("thinkingSection")
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(theme.SPACE.XS)
        self.toggle = QToolButton(self)
        self.toggle.setObjectName("thinkingToggle")
        self.toggle.setCheckable(True)
        self.toggle.setAutoRaise(True)
        self.toggle.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        self.toggle.setArrowType(Qt.ArrowType.RightArrow)
        self.toggle.setCursor(Qt.CursorShape.PointingHandCursor)
        self.toggle.setToolTip("Show what the model thought before it answered")
        secondary = theme.css(theme.colors().secondary)
        # a quiet header, not a pressed button, whether open or closed
        self.toggle.setStyleSheet(
            f"QToolButton {{ border: none; background: transparent; color: {secondary}; "
            "padding: 0; }"
        )
        self.toggle.toggled.connect(self.set_expanded)
        layout.addWidget(self.toggle, 0, Qt.AlignmentFlag.AlignLeft)
        self.text_view = PlainTextView("", self)
        self.text_view.setObjectName("thoughtText")
        # the thought fills the column, unlike a user's bubble that fits its text
        self.text_view.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.text_view.setStyleSheet(
            f"QTextBrowser {{ background: transparent; color: {secondary}; }}"
        )
        self.text_view.setVisible(False)
        layout.addWidget(self.text_view)
        self._text = ""
        self.setVisible(False)

    @property
    def text(self) -> str:
        """The thinking shown (empty: none)."""
        return self._text

    @property
    def title(self) -> str:
        return self.toggle.text()

    @property
    def expanded(self) -> bool:
        return self.toggle.isChecked()

    def set_expanded(self, expanded: bool) -> None:
        """Open (True) or close the section; the header's arrow follows."""
        if self.toggle.isChecked() != expanded:
            self.toggle.setChecked(expanded)  # comes back here through `toggled`
            return
        self.toggle.setArrowType(Qt.ArrowType.DownArrow if expanded else Qt.ArrowType.RightArrow)
        self.text_view.setVisible(expanded)

    def show_thinking(self, text: str) -> None:
        """The model is thinking: stream `text` (all of it so far)."""
        self.toggle.setText(THINKING)
        self._set_text(text)
        self.setVisible(True)

    def show_thought(self, text: str, seconds: float) -> None:
        """A finished thought of `seconds`; an empty one hides the section."""
        self.toggle.setText(thought_title(seconds))
        self._set_text(text)
        self.setVisible(bool(text))

    def _set_text(self, text: str) -> None:
        if text != self._text:
            self._text = text
            self.text_view.setPlainText(text)
