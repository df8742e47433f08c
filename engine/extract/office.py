"""Word documents (.docx) through `python-docx` (MIT): paragraphs and table rows in order.

A .docx is a zip archive, so before python-docx inflates anything the archive's entries are
checked: a decompression bomb (a few kilobytes that unpack to gigabytes) is refused by its
declared sizes and its ratio, and python-docx's XML parser (lxml) resolves no entities.
"""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

from engine.extract.pages import UnreadableDocument as Unreadable

MAX_UNPACKED_BYTES = 256 * 1024 * 1024
MAX_RATIO = 200  # unpacked over packed, per entry: XML compresses well, not this well
MAX_ENTRIES = 10_000


def check_archive(path: Path, data: bytes) -> None:
    """Refuse a zip whose entries would unpack to too much, or that is not a zip at all."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            entries = archive.infolist()
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        raise Unreadable(f"{path}: not a readable .docx ({exc})") from None
    if len(entries) > MAX_ENTRIES:
        raise Unreadable(f"{path}: {len(entries):,} entries in the archive; too many")
    total = 0
    for entry in entries:
        total += entry.file_size
        ratio = entry.file_size / max(entry.compress_size, 1)
        if total > MAX_UNPACKED_BYTES or (entry.file_size > 1 << 20 and ratio > MAX_RATIO):
            raise Unreadable(
                f"{path}: unpacks to more than it should ({entry.filename}: "
                f"{entry.file_size:,} bytes from {entry.compress_size:,}); a decompression "
                "bomb is not read"
            )


def read_docx(path: Path, data: bytes) -> str:
    """The text of the .docx `data`: paragraphs, and each table row as cells joined by
    " | ", in the order they appear."""
    check_archive(path, data)
    import docx
    from docx.table import Table
    from docx.text.paragraph import Paragraph

    try:
        document = docx.Document(io.BytesIO(data))
    except Exception as exc:  # python-docx raises many types for a broken package
        raise Unreadable(f"{path}: not a readable .docx ({type(exc).__name__}: {exc})") from None
    lines: list[str] = []
    for block in document.iter_inner_content():
        if isinstance(block, Paragraph):
            if block.text.strip():
                lines.append(block.text)
        elif isinstance(block, Table):
            for row in block.rows:
                lines.append(" | ".join(cell.text.strip() for cell in row.cells))
            lines.append("")
    return "\n".join(lines)
