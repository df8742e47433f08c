"""What a document reads into: pages of text (or of pixels), the limits every reader keeps,
and the error that refuses a file. Shared by the readers (`document`, `pdf`, `office`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from engine.errors import CorralError

# Refused above these sizes, before a parser sees a byte (a user can split a larger file).
MAX_FILE_BYTES = 64 * 1024 * 1024
MAX_TEXT_BYTES = 16 * 1024 * 1024  # plain text and Markdown
MAX_HTML_BYTES = 8 * 1024 * 1024
# Pages read from one PDF at most unless a page range is given; text kept per document.
MAX_PAGES = 2000
MAX_DOCUMENT_CHARS = 4_000_000
# Characters a plain-text or HTML "page" holds: long texts are cut at paragraph breaks
# into pages like these, so page windows work the same for every format.
TEXT_PAGE_CHARS = 3000


class UnreadableDocument(CorralError):
    """A document that cannot be read; the message names it and says why."""


@dataclass(frozen=True)
class Page:
    """One page: its number (from 1) and text; `image` is the page as a PNG where it has no
    text and the model reads images (a scanned page), else None."""

    number: int
    text: str
    image: bytes | None = field(default=None, repr=False)


@dataclass(frozen=True)
class Document:
    """A document read: its file, format, pages, and notes on what was left out (pages
    without text a model cannot see)."""

    path: Path
    kind: str
    pages: tuple[Page, ...]
    page_count: int  # pages the file has (more than `pages` holds under a page range)
    notes: tuple[str, ...] = ()

    @property
    def text(self) -> str:
        return "\n\n".join(p.text for p in self.pages if p.text)


def parse_pages(text: str) -> tuple[int, int]:
    """A page range as a user types it, "3" or "1-4", as (first, last); ValueError saying
    what is wrong."""
    first, _, last = text.strip().partition("-")
    try:
        pages = int(first), int(last or first)
    except ValueError:
        raise ValueError(f"pages are FIRST-LAST (e.g. 1-3), not {text!r}") from None
    if not 1 <= pages[0] <= pages[1]:
        raise ValueError(f"pages are FIRST-LAST with 1 <= FIRST <= LAST, not {text!r}")
    return pages
