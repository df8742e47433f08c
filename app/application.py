"""The QApplication: names, icon, and files opened through the OS (a grammar dropped on the
app's Dock icon arrives as a QFileOpenEvent on macOS)."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QEvent, QObject
from PySide6.QtGui import QFileOpenEvent, QIcon
from PySide6.QtWidgets import QApplication

from app import __version__
from app.paths import APP_NAME, app_icon_path
from app.qt_compat import guard_refcounts


class FileOpenFilter(QObject):
    """Routes QFileOpenEvents to the window; files that arrive before it exists wait."""

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._handler: Callable[[list[str]], None] | None = None
        self._waiting: list[str] = []

    def attach(self, handler: Callable[[list[str]], None]) -> None:
        self._handler = handler
        if self._waiting:
            waiting, self._waiting = self._waiting, []
            handler(waiting)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if event.type() == QEvent.Type.FileOpen and isinstance(event, QFileOpenEvent):
            path = event.file()
            if path:
                if self._handler is not None:
                    self._handler([path])
                else:
                    self._waiting.append(path)
                return True
        return super().eventFilter(watched, event)


def create_application(argv: list[str]) -> tuple[QApplication, FileOpenFilter]:
    """The QApplication (created once) and its file-open filter."""
    existing = QApplication.instance()
    app = existing if isinstance(existing, QApplication) else QApplication(argv)
    guard_refcounts()
    app.setApplicationName(APP_NAME)
    app.setOrganizationName(APP_NAME)
    app.setApplicationVersion(__version__)
    app.setDesktopFileName("corral")
    if app_icon_path().exists():
        app.setWindowIcon(QIcon(str(app_icon_path())))
    opener = FileOpenFilter(app)
    app.installEventFilter(opener)
    return app, opener
