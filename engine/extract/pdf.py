"""PDF pages through PDFium (`pypdfium2`, Apache-2.0/BSD): each page's text layer, and for
a page without one (a scan) its picture when the model reads images.

PDFium refuses encrypted and malformed files itself; a file with more pages than
`MAX_PAGES` is refused unless a page range picks fewer, so a 10,000-page PDF never has its
pages walked. pypdfium2 is not thread-safe: one job reads one PDF at a time.
"""

from __future__ import annotations

import io
from pathlib import Path

import pypdfium2 as pdfium

from engine.extract.pages import MAX_DOCUMENT_CHARS, MAX_PAGES, Document, Page
from engine.extract.pages import UnreadableDocument as Unreadable

# A scanned page is rendered at this many pixels per inch (72 = the PDF's own points):
# enough for a vision model to read print, well under the image checker's limits.
SCAN_DPI = 110
MAX_SCAN_SIDE = 2048


def read_pdf(
    path: Path, data: bytes, *, vision: bool, pages: tuple[int, int] | None = None
) -> Document:
    """The pages of the PDF `data` (see the module docstring); Unreadable says why not."""
    try:
        pdf = pdfium.PdfDocument(data)
    except pdfium.PdfiumError as exc:
        reason = str(exc)
        if "password" in reason.lower():
            raise Unreadable(f"{path}: the PDF is encrypted (it needs a password)") from None
        raise Unreadable(f"{path}: not a readable PDF ({reason})") from None
    try:
        count = len(pdf)
        if pages is None:
            if count > MAX_PAGES:
                raise Unreadable(
                    f"{path}: {count:,} pages; at most {MAX_PAGES:,} are read at once: "
                    "give a page range"
                )
            first, last = 1, count
        else:
            first, last = pages
            if not 1 <= first <= last or first > count:
                raise Unreadable(f"{path}: pages {first}-{last} are not in its {count} pages")
            last = min(last, count)
            if last - first + 1 > MAX_PAGES:
                raise Unreadable(f"{path}: a range of more than {MAX_PAGES:,} pages")
        read: list[Page] = []
        blank: list[int] = []
        chars = 0
        for number in range(first, last + 1):
            page = pdf[number - 1]
            try:
                text = _page_text(page)
                if text:
                    read.append(Page(number, text))
                    chars += len(text)
                    if chars > MAX_DOCUMENT_CHARS:
                        raise Unreadable(
                            f"{path}: more than {MAX_DOCUMENT_CHARS:,} characters of text: "
                            "give a page range"
                        )
                elif vision:
                    read.append(Page(number, "", _page_png(page)))
                else:
                    blank.append(number)
            finally:
                page.close()
    except pdfium.PdfiumError as exc:
        raise Unreadable(f"{path}: a damaged page ({exc})") from None
    finally:
        pdf.close()
    notes: tuple[str, ...] = ()
    if blank:
        notes = (
            f"{_pages_label(blank)} without text (scanned?), and the loaded model does not "
            "read images",
        )
    if not read:
        raise Unreadable(f"{path}: no page has text{'; ' + notes[0] if notes else ''}")
    return Document(path, "pdf", tuple(read), count, notes)


def _page_text(page: pdfium.PdfPage) -> str:
    textpage = page.get_textpage()
    try:
        text: str = textpage.get_text_bounded()
    finally:
        textpage.close()
    return text.replace("\r\n", "\n").replace("\x00", "").strip()


def _page_png(page: pdfium.PdfPage) -> bytes:
    width, height = page.get_size()
    scale = min(SCAN_DPI / 72, MAX_SCAN_SIDE / max(width, height, 1))
    bitmap = page.render(scale=scale)
    try:
        image = bitmap.to_pil()
        out = io.BytesIO()
        image.save(out, format="PNG")
        return out.getvalue()
    finally:
        bitmap.close()


def _pages_label(numbers: list[int]) -> str:
    if len(numbers) == 1:
        return f"page {numbers[0]}"
    shown = ", ".join(map(str, numbers[:5])) + (", …" if len(numbers) > 5 else "")
    return f"{len(numbers)} pages ({shown})"
