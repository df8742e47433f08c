"""A reply's recorded tokens (its token view, Inspect): its text coloured by how likely the
model found each token, what it wanted instead, and where the format stepped in.

Each token is a link in a read-only text view. Its background runs from red (the model
gave it little probability, before the format's mask) to green (its first choice); what the
format did is shown by shape as well, never colour alone, and named by one word per kind:
*forced* (the format left no other token: italic, a line above), *steered* (the model
wanted a token the format did not allow, so another was picked: bold, underlined) or
*Corral's* (written by Corral to close the reply to fit, not by the model: italic, a line
above and below, grey). A legend
above the text says so. Hovering a token shows its details in one place beneath the text,
whose height is kept so nothing moves; clicking keeps them there.
"""

from __future__ import annotations

import html
import math

from PySide6.QtCore import Qt, QUrl
from PySide6.QtGui import QColor
from PySide6.QtWidgets import QTextBrowser, QVBoxLayout, QWidget

from app.views import theme
from app.views.message_parts import label
from app.words import count
from engine.types import TokenLogprob

MAX_HEIGHT = 320  # px: a long reply scrolls inside the token view
DETAIL_LINES = 9  # the detail's reserved height, in lines: a token's details never move it
TOKEN_TEXT = "#111111"  # on the light probability backgrounds, in both themes (>= 7:1)
LEGEND = (
    "Background: green, the model's first choice; red, a token it found unlikely. "
    "<i style='text-decoration:overline'>Italic, a line above</i>: forced, the format left "
    "no other token. <b><u>Bold, underlined</u></b>: steered, the format did not allow the "
    "token the model wanted. <i style='text-decoration:underline overline'>Italic, lines above "
    "and below, grey</i>: written by Corral to close the reply, not by the model."
)
CORRALS = "#d9d9d9"  # the background of a token Corral wrote: no colour of the model's


def probability_colour(logprob: float | None) -> str:
    """The background of a token the model gave `logprob` (None: no figures)."""
    if logprob is None:
        return "#d9d9d9"
    p = math.exp(min(0.0, logprob))
    return QColor.fromHslF(p * 120 / 360, 0.70, 0.82).name()  # red (0°) to green (120°)


def _shown(text: str) -> str:
    return html.escape(text).replace("\n", "↵<br>") or "∅"


def token_kind(token: TokenLogprob) -> str:
    """The one word for what the format did at `token`: "corral's" (the closing policy
    wrote it), "forced", "steered" or ""."""
    if token.closing:
        return "corral's"
    if token.forced:
        return "forced"
    return "steered" if token.overridden else ""


def summary(tokens: list[TokenLogprob]) -> str:
    """One line about a recorded reply, in the view's words."""
    forced = sum(token_kind(t) == "forced" for t in tokens)
    steered = sum(token_kind(t) == "steered" for t in tokens)
    corrals = sum(token_kind(t) == "corral's" for t in tokens)
    if not forced and not steered and not corrals:
        return f"{count(len(tokens), 'token')}, all the model's own choice"
    line = f"{count(len(tokens), 'token')}: {steered} steered by the format, {forced} forced"
    return line + (f", {corrals} written by Corral to close the reply" if corrals else "")


def token_details(token: TokenLogprob) -> str:
    """What the token view says about one token, as plain lines."""
    lines = [f"“{token.text}”"]
    kind = token_kind(token)
    if kind == "corral's":
        lines.append("Written by Corral to close the reply to fit, not by the model")
    elif kind == "forced":
        lines.append("Forced: the format left no other token")
    elif kind == "steered":
        lines.append("Steered: the format did not allow the model's first choice")
    if token.model_logprob is not None:
        lines.append(f"Model: {math.exp(token.model_logprob):.1%}")
    if kind not in ("forced", "corral's"):
        lines.append(f"Picked at {math.exp(token.logprob):.1%} among the allowed tokens")
        if token.allowed is not None:
            lines.append(f"{count(token.allowed, 'token')} allowed here")
    if token.top:
        lines.append("The model wanted:")
        for alt in token.top:
            mark = "✓ allowed" if alt.allowed else "✗ not allowed"
            lines.append(f"  “{alt.text}” {math.exp(alt.logprob):.1%} ({mark})")
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
        self.summary = label(summary(tokens), "tokenViewSummary", self)
        self.legend = label(LEGEND, "tokenViewLegend", self)
        self.legend.setTextFormat(Qt.TextFormat.RichText)
        self.text = QTextBrowser(self)
        self.text.setObjectName("tokenViewText")
        self.text.setOpenLinks(False)
        self.text.setHtml(self._html())
        self.text.setMaximumHeight(MAX_HEIGHT)
        self.text.highlighted.connect(self._hovered)
        self.text.anchorClicked.connect(self._clicked)
        self.detail = label(
            "Hover over a token, or click it, to see what the model wanted.",
            "tokenViewDetail",
            self,
        )
        self.detail.setAlignment(Qt.AlignmentFlag.AlignTop | Qt.AlignmentFlag.AlignLeft)
        self.detail.setMinimumHeight(self.detail.fontMetrics().lineSpacing() * DETAIL_LINES)
        layout.addWidget(self.summary)
        layout.addWidget(self.legend)
        layout.addWidget(self.text)
        layout.addWidget(self.detail)

    def _html(self) -> str:
        parts = []
        for i, token in enumerate(self.tokens):
            kind = token_kind(token)
            colour = CORRALS if kind == "corral's" else probability_colour(token.model_logprob)
            style = f"background-color:{colour};color:{TOKEN_TEXT};"
            if kind == "corral's":
                style += "font-style:italic;text-decoration:underline overline;"
            elif kind == "forced":
                style += "font-style:italic;text-decoration:overline;"
            elif kind == "steered":
                style += "font-weight:bold;text-decoration:underline;"
            else:
                style += "text-decoration:none;"
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
            return
        self.show_token(index)  # one place for details (no tooltip repeating them)

    def _clicked(self, url: QUrl) -> None:
        index = self._index(url)
        if index is not None:
            self.pinned = index
            self.show_token(index)
