"""Message bodies: Markdown replies as prose and code blocks, user messages as plain text.

Every view is a read-only QTextBrowser whose height follows its content, so a column of
them scrolls in the chat's scroll area. Code blocks are separate widgets: syntax colours
(Pygments), a language label and a copy button, and a horizontal scroll bar of their own
instead of clipping or wrapping long lines. Links to the web open in the browser; nothing
is ever fetched to render a message.
"""

from __future__ import annotations

import math
from functools import lru_cache
from html import escape
from typing import Any

from PySide6.QtCore import QEvent, QSize, Qt, QTimer, QUrl, Signal
from PySide6.QtGui import QDesktopServices, QGuiApplication, QResizeEvent, QTextOption, QWheelEvent
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QSizePolicy,
    QTextBrowser,
    QVBoxLayout,
    QWidget,
)

from app.views.chat.markdown_render import Block, document_css, render_blocks
from app.views.common import theme
from app.views.common.icons import IconButton

COPIED_FEEDBACK_MS = 1500


@lru_cache(maxsize=64)
def _lexer(language: str) -> Any:
    from pygments.lexers import TextLexer, get_lexer_by_name

    try:
        return get_lexer_by_name(language.lower(), stripnl=False) if language else TextLexer()
    except Exception:  # an unknown language (ClassNotFound), or a lexer a bundle lacks
        return TextLexer()


@lru_cache(maxsize=4)
def _style(dark: bool) -> Any:
    from pygments.styles import get_style_by_name

    return get_style_by_name("github-dark" if dark else "xcode")


def highlight_html(code: str, language: str, dark: bool) -> str:
    """`code` as a <pre> with Pygments colours (inline styles: Qt's rich text has no
    class selectors worth relying on). Plain, if Pygments cannot be loaded."""
    try:
        style = _style(dark)
    except ImportError:
        return f'<pre style="margin:0">{escape(code)}</pre>'
    tokens = list(_lexer(language).get_tokens(code))
    if tokens and tokens[-1][1].endswith("\n") and not code.endswith("\n"):
        # the lexer adds a final newline, which would show as an empty last line
        tokens[-1] = (tokens[-1][0], tokens[-1][1][:-1])
    parts: list[str] = []
    for token_type, value in tokens:
        text = escape(value)
        spec = style.style_for_token(token_type)
        rules = []
        if spec["color"]:
            rules.append(f"color:#{spec['color']}")
        if spec["bold"]:
            rules.append("font-weight:600")
        if spec["italic"]:
            rules.append("font-style:italic")
        parts.append(f'<span style="{";".join(rules)}">{text}</span>' if rules else text)
    body = "".join(parts)
    return f'<pre style="margin:0">{body}</pre>'


class _FittedBrowser(QTextBrowser):
    """A frameless, read-only QTextBrowser whose height is its content's."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setOpenLinks(False)
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.setTextInteractionFlags(
            Qt.TextInteractionFlag.TextBrowserInteraction
            | Qt.TextInteractionFlag.TextSelectableByKeyboard
        )
        # A click selects text; Tab passes by: the message holding it is one stop (its
        # text is its accessible description), not one per paragraph.
        self.setFocusPolicy(Qt.FocusPolicy.ClickFocus)
        self.viewport().setAutoFillBackground(False)
        self.setStyleSheet("QTextBrowser { background: transparent; }")
        self.document().setDocumentMargin(0)
        self.document().documentLayout().documentSizeChanged.connect(lambda _size: self.fit())
        self.anchorClicked.connect(self._open)

    def _open(self, url: QUrl) -> None:
        if url.scheme() in ("http", "https", "mailto"):
            QDesktopServices.openUrl(url)

    def extra_height(self) -> int:
        return 0

    def fit(self) -> None:
        doc = self.document()
        if self.lineWrapMode() != QTextBrowser.LineWrapMode.NoWrap:
            doc.setTextWidth(self.viewport().width())
        margins = self.contentsMargins()
        height = math.ceil(doc.size().height()) + margins.top() + margins.bottom()
        height += self.extra_height()
        if height != self.height():
            self.setFixedHeight(max(height, 1))

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        self.fit()

    def wheelEvent(self, event: QWheelEvent) -> None:
        event.ignore()  # nothing to scroll vertically here: the chat scrolls


class ProseView(_FittedBrowser):
    """A run of Markdown prose, rendered to HTML."""

    html = ""  # a class default: palette events can arrive before __init__ sets it

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("prose")
        self.html = ""
        self.document().setDefaultTextOption(_wrap_anywhere())

    def set_html(self, html: str) -> None:
        if html == self.html:
            return
        self.html = html
        self.restyle()

    def restyle(self) -> None:
        doc = self.document()
        doc.setDefaultFont(theme.font(theme.type_scale().chat))
        doc.setDefaultStyleSheet(document_css(theme.colors(), theme.type_scale()))
        self.setHtml(self.html)
        self.fit()

    def changeEvent(self, event: QEvent) -> None:
        super().changeEvent(event)
        if event.type() == QEvent.Type.PaletteChange and self.html:
            self.restyle()


def _wrap_anywhere() -> QTextOption:
    option = QTextOption()
    option.setWrapMode(QTextOption.WrapMode.WrapAtWordBoundaryOrAnywhere)
    return option


class _CodeText(_FittedBrowser):
    """The code itself: no wrapping, its own horizontal scroll bar when a line is long."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("codeText")
        self.setLineWrapMode(QTextBrowser.LineWrapMode.NoWrap)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAsNeeded)
        self.setViewportMargins(theme.SPACE.M, theme.SPACE.S, theme.SPACE.M, theme.SPACE.S)

    def extra_height(self) -> int:
        bar = self.horizontalScrollBar()
        needs_bar = self.document().idealWidth() > self.viewport().width()
        return theme.SPACE.S * 2 + (bar.sizeHint().height() if needs_bar else 0)

    def wheelEvent(self, event: QWheelEvent) -> None:
        # Sideways scrolling moves the code; up and down scroll the chat.
        delta = event.angleDelta()
        if abs(delta.x()) > abs(delta.y()) and self.horizontalScrollBar().maximum() > 0:
            QTextBrowser.wheelEvent(self, event)
        else:
            event.ignore()


class CodeBlockView(QFrame):
    """A fenced code block: language and copy button over the highlighted code."""

    copied = Signal(str)
    code = ""  # a class default: palette events can arrive before __init__ sets it
    highlighted = True

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("codeBlock")
        self.code = ""
        self.language = ""
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(0)
        header = QWidget(self)
        header.setObjectName("codeHeader")
        row = QHBoxLayout(header)
        row.setContentsMargins(theme.SPACE.M, theme.SPACE.XXS, theme.SPACE.XS, theme.SPACE.XXS)
        self.label = QLabel(self)
        self.label.setObjectName("codeLanguage")
        self.copy_button = IconButton("copy", "Copy code", header, size=16)
        row.addWidget(self.label, 1)
        row.addWidget(self.copy_button)
        self.text = _CodeText(self)
        layout.addWidget(header)
        layout.addWidget(self.text)
        self.copy_button.clicked.connect(self.copy)
        self._reset_timer = QTimer(self, singleShot=True, interval=COPIED_FEEDBACK_MS)
        self._reset_timer.timeout.connect(lambda: self.copy_button.set_icon_name("copy"))

    def set_code(self, code: str, language: str, highlight: bool = True) -> None:
        """Show `code`; without `highlight` (a block still streaming) as plain text, which
        costs little however long the block grows."""
        if (code, language, highlight) == (self.code, self.language, self.highlighted):
            return
        self.code, self.language, self.highlighted = code, language, highlight
        self.label.setText(language or "code")
        self.restyle()

    def restyle(self) -> None:
        self.text.document().setDefaultFont(theme.mono_font(theme.type_scale().chat))
        if self.highlighted:
            self.text.setHtml(highlight_html(self.code, self.language, theme.colors().dark))
        else:
            self.text.setPlainText(self.code)
        self.text.fit()

    def copy(self) -> None:
        QGuiApplication.clipboard().setText(self.code)
        self.copy_button.set_icon_name("check")
        self.copy_button.setToolTip("Copied")
        self._reset_timer.start()
        self.copied.emit(self.code)

    def changeEvent(self, event: QEvent) -> None:
        super().changeEvent(event)
        if event.type() == QEvent.Type.PaletteChange and self.code:
            self.restyle()


class MarkdownBody(QWidget):
    """A reply's body: prose and code blocks, re-rendering only the blocks that changed."""

    copied = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._source = ""
        # While a reply streams, a code block still growing is shown plain: colouring it
        # again for every token would cost time in proportion to its length.
        self.streaming = False
        self.views: list[ProseView | CodeBlockView] = []
        self._layout = QVBoxLayout(self)
        self._layout.setContentsMargins(0, 0, 0, 0)
        self._layout.setSpacing(theme.SPACE.S)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Minimum)

    @property
    def markdown(self) -> str:
        return self._source

    @property
    def code_blocks(self) -> list[str]:
        return [v.code for v in self.views if isinstance(v, CodeBlockView)]

    def code_views(self) -> list[CodeBlockView]:
        return [v for v in self.views if isinstance(v, CodeBlockView)]

    def toPlainText(self) -> str:  # mirrors QTextEdit
        parts = [v.code if isinstance(v, CodeBlockView) else v.toPlainText() for v in self.views]
        return "\n\n".join(parts)

    def set_markdown(self, text: str) -> None:
        if text == self._source:
            return
        self._source = text
        blocks = render_blocks(text)
        for index, block in enumerate(blocks):
            if index < len(self.views) and not _fits(self.views[index], block):
                self._drop_from(index)
            if index == len(self.views):
                self._append(block)
            view = self.views[index]
            if isinstance(view, CodeBlockView):
                highlight = block.complete or not self.streaming
                view.set_code(block.text, block.language, highlight)
            else:
                view.set_html(block.text)
        self._drop_from(len(blocks))

    def restyle(self) -> None:
        for view in self.views:
            view.restyle()

    def finish(self) -> None:
        """The reply is complete: colour any code block shown plain while it streamed."""
        self.streaming = False
        for view in self.code_views():
            view.set_code(view.code, view.language, True)

    def _append(self, block: Block) -> None:
        view: ProseView | CodeBlockView
        if block.kind == "code":
            view = CodeBlockView(self)
            view.copied.connect(self.copied)
        else:
            view = ProseView(self)
        self._layout.addWidget(view)
        self.views.append(view)

    def _drop_from(self, index: int) -> None:
        for view in self.views[index:]:
            self._layout.removeWidget(view)
            view.hide()
            view.deleteLater()
        del self.views[index:]


def _fits(view: QWidget, block: Block) -> bool:
    return isinstance(view, CodeBlockView) == (block.kind == "code")


class PlainTextView(_FittedBrowser):
    """A user's message exactly as typed: no Markdown, every line break and space kept,
    long words wrapped anywhere. Its preferred width is its longest line's (up to the
    width it is given), so a short message makes a short bubble."""

    def __init__(self, text: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("plainText")
        self.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Fixed)
        self.document().setDefaultTextOption(_wrap_anywhere())
        self._ideal = 0
        self.setPlainText(text)
        self.restyle()

    @property
    def markdown(self) -> str:  # the same accessor as MarkdownBody, for callers of either
        return self.toPlainText()

    def restyle(self) -> None:
        self.document().setDefaultFont(theme.font(theme.type_scale().chat))
        doc = self.document().clone()
        doc.setTextWidth(-1)
        self._ideal = math.ceil(doc.idealWidth()) + 2
        self.updateGeometry()
        self.fit()

    def ideal_width(self) -> int:
        return self._ideal

    def sizeHint(self) -> QSize:
        return QSize(self.ideal_width(), self.height())

    def minimumSizeHint(self) -> QSize:
        return QSize(min(self.ideal_width(), 48), self.height())
