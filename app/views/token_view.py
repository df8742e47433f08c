"""A reply's recorded tokens (its token view): its text coloured by how likely the
model found each token, what it wanted instead, and where the constraint stepped in.

Each token is a link in a read-only text view: its background runs from red (the model
gave it little probability, before the constraint's mask) to green (its first choice);
tokens the grammar forced are in italics, and tokens where the constraint overrode the
model's own first choice are underlined in red. Hovering a token shows its alternatives
beneath (as a tooltip too); clicking keeps them there. A line above summarises: "the
constraint overrode the model at N of M tokens; K forced".
"""

from __future__ import annotations

import html
import math

from PySide6.QtCore import QUrl
from PySide6.QtGui import QCursor
from PySide6.QtWidgets import QTextBrowser, QToolTip, QVBoxLayout, QWidget

from app.views import theme
from app.views.message_parts import label
from engine.types import TokenLogprob, logprobs_summary

MAX_HEIGHT = 320  # px: a long reply scrolls inside the token view


def probability_colour(logprob: float | None) -> str:
    """The background of a token the model gave `logprob` (None: no figures)."""
    if logprob is None:
        return "#d9d9d9"
    p = math.exp(min(0.0, logprob))
    return f"hsl({round(120 * p)}, 70%, 82%)"


def _shown(text: str) -> str:
    return html.escape(text).replace("\n", "↵<br>") or "∅"


def token_details(token: TokenLogprob) -> str:
    """What the token view says about one token, as plain lines."""
    lines = [f"“{token.text}”"]
    if token.model_logprob is not None:
        lines.append(f"model: {math.exp(token.model_logprob):.1%}")
    if token.forced:
        lines.append("forced by the constraint (no choice was left)")
    else:
        lines.append(f"sampled at {math.exp(token.logprob):.1%} after the mask")
    if token.allowed is not None and not token.forced:
        lines.append(f"{token.allowed} tokens allowed here")
    if token.overridden:
        lines.append("the constraint overrode the model's first choice")
    if token.top:
        lines.append("the model wanted:")
        for alt in token.top:
            mark = "✓" if alt.allowed else "✗"
            lines.append(f"  {mark} “{alt.text}” {math.exp(alt.logprob):.1%}")
    return "\n".join(lines)


class TokenView(QWidget):
    """The token view of one reply: summary line, coloured tokens, the chosen token's details."""

    def __init__(self, tokens: list[TokenLogprob], parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("tokenView")
        self.tokens = tokens
        self.pinned: int | None = None
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(theme.SPACE.XS)
        self.summary = label(logprobs_summary(tokens), "tokenViewSummary", self)
        self.text = QTextBrowser(self)
        self.text.setObjectName("tokenViewText")
        self.text.setOpenLinks(False)
        self.text.setHtml(self._html())
        self.text.setMaximumHeight(MAX_HEIGHT)
        self.text.highlighted.connect(self._hovered)
        self.text.anchorClicked.connect(self._clicked)
        self.detail = label(
            "Hover over a token to see what the model wanted.", "tokenViewDetail", self
        )
        layout.addWidget(self.summary)
        layout.addWidget(self.text)
        layout.addWidget(self.detail)

    def _html(self) -> str:
        parts = []
        for i, token in enumerate(self.tokens):
            style = f"background-color:{probability_colour(token.model_logprob)};color:#111;"
            style += "text-decoration:none;"
            if token.forced:
                style += "font-style:italic;"
            if token.overridden:
                style += "text-decoration:underline;color:#b00020;"
            parts.append(f'<a href="#t{i}" style="{style}">{_shown(token.text)}</a>')
        return f'<p style="white-space:pre-wrap">{"".join(parts)}</p>'

    @staticmethod
    def _index(url: QUrl) -> int | None:
        fragment = url.fragment()
        if fragment.startswith("t") and fragment[1:].isdigit():
            return int(fragment[1:])
        return None

    def show_token(self, index: int) -> None:
        """Show token `index`'s alternatives and flags beneath the text."""
        self.detail.setText(token_details(self.tokens[index]))

    def _hovered(self, url: QUrl) -> None:
        index = self._index(url)
        if index is None:  # left the token: back to the pinned one
            if self.pinned is not None:
                self.show_token(self.pinned)
            QToolTip.hideText()
            return
        self.show_token(index)
        QToolTip.showText(QCursor.pos(), token_details(self.tokens[index]), self.text)

    def _clicked(self, url: QUrl) -> None:
        index = self._index(url)
        if index is not None:
            self.pinned = index
            self.show_token(index)
