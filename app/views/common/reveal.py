"""Showing a file Corral wrote or found where the user keeps it: selected in Finder on a
Mac, its folder opened in the file manager elsewhere (the Model Library, Extract's export)."""

from __future__ import annotations

import sys
from pathlib import Path

from PySide6.QtCore import QProcess, QUrl
from PySide6.QtGui import QDesktopServices

REVEAL = "Show in Finder" if sys.platform == "darwin" else "Show in Folder"


def reveal(path: str) -> None:
    """Show `path` in Finder (selected) or open its folder in the file manager."""
    if sys.platform == "darwin":
        QProcess.startDetached("open", ["-R", path])
    else:
        target = Path(path)
        folder = target if target.is_dir() else target.parent
        QDesktopServices.openUrl(QUrl.fromLocalFile(str(folder)))
