"""The composition root: the QApplication (names, icon, and files opened through the OS: a
grammar dropped on the app's Dock icon arrives as a QFileOpenEvent on macOS), and the app's
parts built and wired once (app.core.AppCore: the store, the engine bridge, the chat
controller, MCP, and the user's preferences applied to them; the look applied here), then
the window over them (`build_window`). The views are handed these parts; none of them
builds its own."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from PySide6.QtCore import QEvent, QObject, Qt, QTimer
from PySide6.QtGui import QFileOpenEvent, QIcon
from PySide6.QtWidgets import QApplication

from app import __version__
from app.core import AppCore
from app.crash_reports import CrashReporter
from app.jobs.engine_bridge import EngineBridge
from app.jobs.mcp_job import McpBridge
from app.paths import APP_NAME, app_icon_path
from app.preferences import Preferences
from app.qt_compat import guard_refcounts
from app.store import Store
from app.views.common import theme
from app.views.common.style import install_style
from engine import logs

if TYPE_CHECKING:
    from app.views.main.window import MainWindow


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


def apply_look(prefs: Preferences, old: Preferences | None = None) -> None:
    """The preferences that set how the views look: the palette and the chat's text size
    (all of them at start, `old` None; then what changed). The window restyles itself."""
    if old is None or prefs.chat_font_pt != old.chat_font_pt:
        theme.set_chat_pt(prefs.chat_font_pt)
    if old is None:
        install_style()  # before the palette: a new style resets it
    if old is None or prefs.appearance != old.appearance:
        theme.apply_appearance(prefs.appearance)


def build_window(
    store: Store, bridge: EngineBridge, mcp: McpBridge | None = None, diagnostics: bool = False
) -> MainWindow:
    """The app's parts over `store` and `bridge` (AppCore, its preferences applied), and
    the main window over them; with `diagnostics` (the app run by `python -m app`), the log
    file and the crash hooks too."""
    from app.views.main.window import MainWindow

    core = AppCore(store, bridge, mcp)
    if diagnostics:
        logs.setup_logging(core.prefs.log_level)
    apply_look(core.prefs)
    core.preferencesChanged.connect(apply_look)  # before the window's own reaction
    window = MainWindow(core)
    if diagnostics:
        start_crash_reports(window)
    return window


def start_crash_reports(window: MainWindow) -> CrashReporter:
    """Uncaught exceptions on any thread: logged, and shown over `window` (a queued signal
    brings a worker thread's report to the GUI thread); native crashes written by
    faulthandler into the log folder, and the last run's offered. The level follows
    Preferences."""
    from app.views.common.crash_dialog import NATIVE_INTRO, CrashDialog

    window.core.preferencesChanged.connect(lambda new, _old: logs.set_level(new.log_level))
    reporter = CrashReporter(window)

    def show(report: str) -> None:
        dialog = CrashDialog(report, str(logs.log_dir()), window)
        dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        window.crash_dialog = dialog  # the latest one, for tests and screenshots
        dialog.show()

    reporter.crashed.connect(show, Qt.ConnectionType.QueuedConnection)
    reporter.install()
    window.destroyed.connect(reporter.uninstall)
    window.crash_reporter = reporter
    previous = logs.catch_native_crashes()
    if previous is not None:  # the last run died natively: offer its report once
        kept, text = previous
        logs.log.warning("the last run quit unexpectedly; its report is in %s", kept)

        def offer() -> None:
            dialog = CrashDialog(
                text,
                str(logs.log_dir()),
                window,
                title="Corral quit unexpectedly",
                intro=NATIVE_INTRO,
            )
            dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
            window.crash_dialog = dialog
            dialog.show()

        QTimer.singleShot(0, offer)
    return reporter
