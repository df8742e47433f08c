"""Markdown rendering for chat messages: read-only QTextBrowsers sized to their content.

Code blocks render in the system's fixed font on a tinted background, each with a "Copy"
link above it. Links to the web open in the browser. The views have no scroll bars of
their own; the chat's scroll area scrolls.

Laying out a QTextDocument costs time in proportion to its length, so a message is shown
as a column of chunks split at paragraph boundaries (`ChunkedMarkdown`): while a reply
streams only its last, growing chunk is laid out again, never the whole reply.
"""

from __future__ import annotations

import math
import re

from PySide6.QtCore import QEvent, Qt, QUrl, Signal
from PySide6.QtGui import (
    QDesktopServices,
    QGuiApplication,
    QPalette,
    QResizeEvent,
    QTextCursor,
    QTextFormat,
    QWheelEvent,
)
from PySide6.QtWidgets import QFrame, QSizePolicy, QTextBrowser, QVBoxLayout, QWidget

COPY_SCHEME = "corral-copy"
_FENCE_RE = re.compile(r"^( {0,3})(`{3,}|~{3,})\s*([^`\s]*)")


def prepare_markdown(text: str) -> tuple[str, list[str]]:
    """Add a copy link before each fenced code block; return the Markdown and the blocks' code.

    An unclosed fence (a reply still streaming) counts as a block running to the end.
    """
    out: list[str] = []
    blocks: list[str] = []
    fence: tuple[str, int] | None = None  # (character, length) of the open fence
    code: list[str] = []
    for line in text.split("\n"):
        match = _FENCE_RE.match(line)
        if fence is None and match:
            indent, marks, lang = match.groups()
            fence, code = (marks[0], len(marks)), []
            label = f"{lang} · " if lang else ""
            out += [f"{indent}{label}[Copy]({COPY_SCHEME}:{len(blocks)})", ""]
            out.append(line)
            continue
        if fence is not None:
            stripped = line.strip()
            if stripped and set(stripped) == {fence[0]} and len(stripped) >= fence[1]:
                blocks.append("\n".join(code))
                fence = None
            else:
                code.append(line)
        out.append(line)
    if fence is not None:
        blocks.append("\n".join(code))
    return "\n".join(out), blocks


def split_chunks(text: str) -> list[str]:
    """Split Markdown at blank lines outside code fences, where rendering the parts apart
    looks the same as rendering them together (indented continuations stay attached)."""
    chunks: list[str] = []
    current: list[str] = []
    fence: tuple[str, int] | None = None
    blank = False
    for line in text.split("\n"):
        stripped = line.strip()
        if fence is None and blank and stripped and not line[:1].isspace() and current:
            chunks.append("\n".join(current).strip("\n"))
            current = []
        current.append(line)
        match = _FENCE_RE.match(line)
        if fence is None and match:
            fence = (match.group(2)[0], len(match.group(2)))
        elif (
            fence is not None
            and stripped
            and set(stripped) == {fence[0]}
            and len(stripped) >= fence[1]
        ):
            fence = None
        blank = fence is None and not stripped
    if current and "\n".join(current).strip():
        chunks.append("\n".join(current).strip("\n"))
    return chunks


class MarkdownView(QTextBrowser):
    """Shows Markdown; its height follows its content so a column of them can scroll."""

    copied = Signal(str)  # the code that went to the clipboard

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._source: str | None = None
        self._blocks: list[str] = []
        self.setOpenLinks(False)
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.setTextInteractionFlags(
            Qt.TextInteractionFlag.TextBrowserInteraction
            | Qt.TextInteractionFlag.TextSelectableByKeyboard
        )
        self.viewport().setAutoFillBackground(False)
        self.setStyleSheet("QTextBrowser { background: transparent; }")
        self.document().setDocumentMargin(2)
        self.document().documentLayout().documentSizeChanged.connect(lambda _size: self._fit())
        self.anchorClicked.connect(self._open)

    @property
    def markdown(self) -> str:
        return self._source or ""

    @property
    def code_blocks(self) -> list[str]:
        return list(self._blocks)

    def set_markdown(self, text: str) -> None:
        if text == self._source:
            return
        self._source = text
        markdown, self._blocks = prepare_markdown(text)
        self.setMarkdown(markdown)
        self._style_code()
        self._fit()

    def copy_code(self, index: int) -> None:
        if 0 <= index < len(self._blocks):
            QGuiApplication.clipboard().setText(self._blocks[index])
            self.copied.emit(self._blocks[index])

    def _open(self, url: QUrl) -> None:
        if url.scheme() == COPY_SCHEME:
            try:
                self.copy_code(int(url.path()))
            except ValueError:
                pass
        elif url.scheme() in ("http", "https", "mailto"):
            QDesktopServices.openUrl(url)

    def _style_code(self) -> None:
        """Tint fenced code blocks with a colour from the current palette (light or dark)."""
        palette = self.palette()
        tint = palette.color(QPalette.ColorRole.AlternateBase)
        if tint == palette.color(QPalette.ColorRole.Base):
            tint = palette.color(QPalette.ColorRole.Midlight)
        doc = self.document()
        cursor = QTextCursor(doc)
        block = doc.begin()
        while block.isValid():
            fmt = block.blockFormat()
            if fmt.hasProperty(QTextFormat.Property.BlockCodeFence):
                fmt.setBackground(tint)
                fmt.setLeftMargin(4)
                cursor.setPosition(block.position())
                cursor.setBlockFormat(fmt)
            block = block.next()

    def _fit(self) -> None:
        doc = self.document()
        doc.setTextWidth(self.viewport().width())
        margins = self.contentsMargins()
        height = math.ceil(doc.size().height()) + margins.top() + margins.bottom()
        if height != self.height():
            self.setFixedHeight(max(height, 1))

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        self._fit()

    def wheelEvent(self, event: QWheelEvent) -> None:
        event.ignore()  # nothing to scroll here: let the chat scroll

    def changeEvent(self, event: QEvent) -> None:
        super().changeEvent(event)
        if event.type() == QEvent.Type.PaletteChange and self._source is not None:
            source, self._source = self._source, None
            self.set_markdown(source)  # re-tint for the new light/dark palette


class ChunkedMarkdown(QWidget):
    """A message body: one MarkdownView per chunk, re-rendering only chunks that changed."""

    copied = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._source = ""
        self.views: list[MarkdownView] = []
        self._layout = QVBoxLayout(self)
        self._layout.setContentsMargins(0, 0, 0, 0)
        self._layout.setSpacing(4)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Minimum)

    @property
    def markdown(self) -> str:
        return self._source

    @property
    def code_blocks(self) -> list[str]:
        return [code for view in self.views for code in view.code_blocks]

    def toPlainText(self) -> str:  # mirrors QTextEdit
        return "\n\n".join(view.toPlainText() for view in self.views)

    def set_markdown(self, text: str) -> None:
        if text == self._source:
            return
        self._source = text
        chunks = split_chunks(text)
        for index, chunk in enumerate(chunks):
            if index == len(self.views):
                view = MarkdownView(self)
                view.copied.connect(self.copied)
                self._layout.addWidget(view)
                self.views.append(view)
            self.views[index].set_markdown(chunk)  # unchanged chunks return at once
        for view in self.views[len(chunks) :]:
            self._layout.removeWidget(view)
            view.deleteLater()
        del self.views[len(chunks) :]
