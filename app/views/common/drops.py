"""What a drag carries that Corral can open: local files (the chat, the composer, the MCP
panel and the Extract window take them)."""

from __future__ import annotations

from PySide6.QtCore import QMimeData


def dropped_paths(mime: QMimeData) -> list[str]:
    """Local file paths carried by a drag (file URLs only)."""
    if not mime.hasUrls():
        return []
    return [url.toLocalFile() for url in mime.urls() if url.isLocalFile()]
