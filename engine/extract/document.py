"""A document as extraction reads it: its pages of text (or of pixels), read from any
format Corral knows, within limits, or refused with one clear sentence.

`read_document` picks a reader by what the file *is* (its first bytes) checked against what
its name says, so a binary renamed `.pdf` or `.txt` is refused instead of being fed to a
parser or the model. Every reader's failure becomes `UnreadableDocument`, naming the file
and the reason; a job records it on the document's row and goes on with the next.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable
from pathlib import Path

from engine.errors import CorralError
from engine.extract.pages import (
    MAX_DOCUMENT_CHARS,
    MAX_FILE_BYTES,
    MAX_HTML_BYTES,
    MAX_TEXT_BYTES,
    TEXT_PAGE_CHARS,
    Document,
    Page,
    UnreadableDocument,
)
from engine.files import FileRefused, open_regular, read_limited

__all__ = [
    "Document",
    "Page",
    "UnreadableDocument",
    "document_keys",
    "documents_in",
    "file_digest",
    "read_document",
    "sniff",
]

TEXT_SUFFIXES = {".txt", ".text", ".md", ".markdown", ".csv", ".tsv", ".log", ".rst", ".json"}
HTML_SUFFIXES = {".html", ".htm", ".xhtml"}
IMAGE_SUFFIXES = {".png", ".jpg", ".jpeg", ".webp", ".gif"}
SUFFIXES = TEXT_SUFFIXES | HTML_SUFFIXES | IMAGE_SUFFIXES | {".pdf", ".docx"}


def file_digest(path: str | os.PathLike[str]) -> str:
    """The SHA-256 of the file's bytes (hex): a job keys a document by it, so a changed file
    is read again and an unchanged one is not. FileRefused for what is not a regular file."""
    with open_regular(path, "document") as (fd, size):
        if size > MAX_FILE_BYTES:
            raise FileRefused(
                f"{path}: too large for a document ({size:,} bytes; "
                f"the limit is {MAX_FILE_BYTES:,} bytes)"
            )
        with os.fdopen(fd, "rb", closefd=False) as file:  # streamed: not held in memory
            return hashlib.file_digest(file, "sha256").hexdigest()


def documents_in(folder: Path) -> list[Path]:
    """The files under `folder` (walked) whose names say a format Corral reads, in name
    order."""
    return sorted(p for p in folder.rglob("*") if p.is_file() and p.suffix.lower() in SUFFIXES)


def document_keys(paths: Iterable[str | os.PathLike[str]]) -> list[tuple[str, str]]:
    """(path, digest) for each file, as a job's rows are keyed (`JobStore.add_documents`).
    A file that cannot be read is kept with the digest "unreadable": reading it when the
    job runs records on its row why it is refused."""
    keys: list[tuple[str, str]] = []
    for path in paths:
        try:
            keys.append((str(path), file_digest(path)))
        except FileRefused:
            keys.append((str(path), "unreadable"))
    return keys


def sniff(data: bytes) -> str:
    """What the bytes are by their signature: "pdf", "zip", "image", "text" or "binary"."""
    head = data[:16]
    if head.startswith(b"%PDF-") or b"%PDF-" in data[:1024]:
        return "pdf"
    if head.startswith(b"PK\x03\x04"):
        return "zip"
    if head.startswith((b"\x89PNG", b"\xff\xd8\xff", b"GIF87a", b"GIF89a")) or (
        head[:4] == b"RIFF" and head[8:12] == b"WEBP"
    ):
        return "image"
    sample = data[:8192]
    if b"\x00" in sample:
        return "binary"
    try:
        sample.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.start < len(sample) - 4:  # not just a character cut at the sample's end
            return "binary"
    return "text"


def read_document(
    path: str | os.PathLike[str],
    *,
    vision: bool = False,
    pages: tuple[int, int] | None = None,
) -> Document:
    """Read `path` into pages. `vision`: the model reads images, so image files and PDF pages
    without text are kept as pictures; `pages` (first, last; from 1) reads only that range
    of a PDF. UnreadableDocument says what is wrong with the file."""
    p = Path(path)
    suffix = p.suffix.lower()
    if suffix not in SUFFIXES:
        raise UnreadableDocument(f"{p}: {suffix or 'no extension'} is not a format Corral reads")
    try:
        data = read_limited(p, MAX_FILE_BYTES, "document")
    except FileRefused as exc:
        raise UnreadableDocument(str(exc)) from None
    kind = sniff(data)
    try:
        if suffix == ".pdf":
            _expect(p, kind, "pdf", "a PDF")
            from engine.extract.pdf import read_pdf

            return read_pdf(p, data, vision=vision, pages=pages)
        if suffix == ".docx":
            _expect(p, kind, "zip", "a Word document (.docx)")
            from engine.extract.office import read_docx

            return _paged(p, "docx", read_docx(p, data))
        if suffix in IMAGE_SUFFIXES:
            _expect(p, kind, "image", "an image")
            return _read_image(p, data, vision)
        _expect(p, kind, "text", "a text file")
        if suffix in HTML_SUFFIXES:
            if len(data) > MAX_HTML_BYTES:
                raise UnreadableDocument(
                    f"{p}: HTML of {len(data):,} bytes; the limit is {MAX_HTML_BYTES:,} bytes"
                )
            from engine.extract.html_text import main_text

            return _paged(p, "html", main_text(_decode(p, data)))
        if len(data) > MAX_TEXT_BYTES:
            raise UnreadableDocument(
                f"{p}: text of {len(data):,} bytes; the limit is {MAX_TEXT_BYTES:,} bytes"
            )
        return _paged(p, "text", _decode(p, data))
    except UnreadableDocument:
        raise
    except (CorralError, ValueError, OSError, RecursionError, MemoryError) as exc:
        raise UnreadableDocument(f"{p}: cannot be read ({exc})") from None


def _expect(path: Path, kind: str, wanted: str, what: str) -> None:
    if kind != wanted:
        found = {"pdf": "a PDF", "zip": "a zip archive", "image": "an image"}.get(
            kind, "binary data" if kind == "binary" else "text"
        )
        raise UnreadableDocument(f"{path}: named as {what}, but the file is {found}")


def _decode(path: Path, data: bytes) -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        # Older text files: Latin-1 reads any byte, and binary was refused by the sniff.
        return data.decode("latin-1")


def _paged(path: Path, kind: str, text: str) -> Document:
    """A text as pages of about TEXT_PAGE_CHARS, cut at paragraph breaks where there are."""
    text = text.strip()
    if not text:
        raise UnreadableDocument(f"{path}: has no text")
    if len(text) > MAX_DOCUMENT_CHARS:
        raise UnreadableDocument(
            f"{path}: {len(text):,} characters of text; the limit is {MAX_DOCUMENT_CHARS:,}"
        )
    pages: list[Page] = []
    start = 0
    while start < len(text):
        end = min(len(text), start + TEXT_PAGE_CHARS)
        if end < len(text):
            cut = text.rfind("\n\n", start + TEXT_PAGE_CHARS // 2, end)
            end = cut if cut > 0 else end
        pages.append(Page(len(pages) + 1, text[start:end].strip()))
        start = end
    return Document(path, kind, tuple(pages), len(pages))


def _read_image(path: Path, data: bytes, vision: bool) -> Document:
    from engine.prompt.images import check_image

    if not vision:
        raise UnreadableDocument(f"{path}: an image, and the loaded model does not read images")
    try:
        check_image(data, str(path))
    except (CorralError, ValueError) as exc:
        raise UnreadableDocument(str(exc)) from None
    return Document(path, "image", (Page(1, "", data),), 1)
