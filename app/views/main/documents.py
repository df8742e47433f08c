"""Documents in a chat: a PDF, Word, HTML, Markdown or text file dropped on the composer
(or attached with the paperclip) becomes a chip in the draft saying its name, pages and
tokens before anything is sent; its text (with page markers) goes with the message, read
by the model before the question, and the chip shows it. A document longer than the
model's context is not attached: the notice says its pages and tokens and offers a range.

The text is read off the GUI thread by the extraction readers (engine.extract), with their
limits and per-file errors; the same file gives the same text, so the prompt cache reuses
it when a later question in the chat carries it again.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from PySide6.QtWidgets import QInputDialog

from app.jobs.thread import run_task
from app.store.documents import AttachedDocument
from app.views.common.announce import announce
from app.views.main.parts import WindowParts
from engine.extract.document import read_document
from engine.extract.pages import parse_pages
from engine.extract.prompt import attached_text
from engine.extract.runner import estimate_tokens, token_counter

DOCUMENT_SUFFIXES = frozenset({".pdf", ".docx", ".html", ".htm", ".md", ".markdown", ".txt"})
# Tokens left free beside a document for the rest of the chat and the reply (at most a
# quarter of a small context).
ROOM_TOKENS = 1024


def is_document(path: str) -> bool:
    return Path(path).suffix.lower() in DOCUMENT_SUFFIXES


@dataclass(frozen=True)
class ReadDocument:
    path: str
    text: str
    pages: tuple[int, int]
    page_count: int
    tokens: int


class DocumentActions:
    """Attaching documents to the draft of `window`'s composer, as chips."""

    def __init__(self, window: WindowParts) -> None:
        self.window = window

    def attach(self, path: str, pages: tuple[int, int] | None = None) -> None:
        """Read `path` (only `pages`, if given) off the GUI thread, then put it in the draft."""
        bridge = self.window.bridge
        engine = bridge.engine if bridge.model_info is not None else None

        def read() -> ReadDocument:
            document = read_document(path, pages=pages)
            text = attached_text(document)
            # No model loaded yet: an estimate, as the extraction runner makes without one.
            tokens = token_counter(engine)(text) if engine is not None else estimate_tokens(text)
            span = (document.pages[0].number, document.pages[-1].number)
            return ReadDocument(path, text, span, document.page_count, tokens)

        run_task(read, self._read)

    def _read(self, found: ReadDocument | None, error: BaseException | None) -> None:
        notice = self.window.notice
        if found is None:
            notice.show_message(f"{error} — not attached.", "error")
            return
        name = Path(found.path).name
        info = self.window.bridge.model_info
        context = info.context_length if info is not None else None
        first, last = found.pages
        pages = f"pages {first}\u2013{last}" if last > first else f"page {first}"
        if context is not None and found.tokens > context - min(ROOM_TOKENS, context // 4):
            notice.show_message(
                f"{name}: {pages} of {found.page_count} are {found.tokens:,} tokens; the model "
                f"reads {context:,}. Attach fewer pages.",
                "error",
                "Choose Pages…",
                lambda: self.choose_pages(found.path, found.page_count),
            )
            return
        document = AttachedDocument(
            name, found.path, first, last, found.page_count, found.tokens, found.text
        )
        self.window.composer.add_document(document)
        announce(self.window.composer, f"Attached {document.summary()}")

    def choose_pages(self, path: str, page_count: int) -> None:
        text, ok = QInputDialog.getText(
            self.window.window(), "Pages", f"Pages of {Path(path).name} to attach (1-{page_count}):"
        )
        if not ok:
            return
        try:
            span = parse_pages(text)
        except ValueError as exc:
            self.window.notice.show_message(f"{Path(path).name}: {exc}", "error")
            return
        self.attach(path, span)
