"""The composition root: the QApplication (names, icon, and files opened through the OS: a
grammar dropped on the app's Dock icon arrives as a QFileOpenEvent on macOS), and the app's
parts built and wired once (AppCore: the store, the engine bridge, the chat controller, MCP,
and the user's preferences applied to them), then the window over them (`build_window`).
The views are handed these parts; none of them builds its own."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from PySide6.QtCore import QEvent, QObject, Signal
from PySide6.QtGui import QFileOpenEvent, QIcon
from PySide6.QtWidgets import QApplication

from app import __version__
from app.chat.controller import LOGPROB_ALTERNATIVES, ChatController
from app.jobs.engine_bridge import EngineBridge
from app.jobs.mcp_calls import McpCalls
from app.jobs.mcp_job import McpBridge
from app.paths import APP_NAME, app_icon_path
from app.preferences import Preferences
from app.qt_compat import guard_refcounts
from app.store import Store
from app.views import theme
from engine.mcp.config import default_config_path

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


class AppCore(QObject):
    """The app's parts below the window, built once and wired together: the store, the
    engine bridge, the chat controller, MCP (its bridge, and its calls as the controller's
    tool source), and the user's Preferences applied to all of them. `set_preferences`
    applies and saves new ones; `preferencesChanged(new, old)` tells the window (which
    restyles, or stores the model to start with)."""

    preferencesChanged = Signal(object, object)

    def __init__(self, store: Store, bridge: EngineBridge, mcp: McpBridge | None = None) -> None:
        super().__init__()
        self.store = store
        self.bridge = bridge
        self.controller = ChatController(store, bridge, self)
        self.mcp = mcp if mcp is not None else McpBridge(store, default_config_path(), self)
        self.mcp_calls = McpCalls(self.controller, self.mcp, self)
        self.controller.tool_source = self.mcp_calls
        self.mcp_calls.runningChanged.connect(self.controller.set_tools_running)
        self.prefs = Preferences.load(store)
        self._apply(self.prefs, None)

    def set_preferences(self, prefs: Preferences) -> None:
        """Apply and remember the user's preferences at once."""
        old, self.prefs = self.prefs, prefs
        prefs.save(self.store)
        self._apply(prefs, old)
        self.preferencesChanged.emit(prefs, old)

    def _apply(self, prefs: Preferences, old: Preferences | None) -> None:
        """What the preferences set outside the window (all of them at start, `old` None;
        then what changed, and the chat's defaults every time)."""
        controller = self.controller
        controller.new_chat_settings = prefs.new_chat
        controller.new_chat_tools = prefs.new_chat_tools
        controller.set_schema_preferences(prefs.schema_options, prefs.close_loops)
        controller.logprobs = LOGPROB_ALTERNATIVES if prefs.record_logprobs else None
        if old is None or prefs.max_rows != old.max_rows:
            self.bridge.set_max_rows(prefs.max_rows)
        if old is None or prefs.speculative != old.speculative:
            self.bridge.set_speculative(prefs.speculative)
        if old is None or prefs.chat_font_pt != old.chat_font_pt:
            theme.set_chat_pt(prefs.chat_font_pt)
        if old is None or prefs.appearance != old.appearance:
            theme.apply_appearance(prefs.appearance)
        if old is not None and prefs.kv_budget_mb != old.kv_budget_mb:
            self.apply_cache_budget()

    def apply_cache_budget(self) -> None:
        """The preferred KV-cache budget, for the loaded model (0: the engine's own)."""
        mb = self.prefs.kv_budget_mb
        self.bridge.set_cache_budget(mb * 1024 * 1024 if mb > 0 else None)

    def close(self) -> None:
        """Stop what runs in the background: MCP servers, the engine."""
        self.mcp.close()
        self.bridge.close()


def build_window(store: Store, bridge: EngineBridge, mcp: McpBridge | None = None) -> MainWindow:
    """The app's parts over `store` and `bridge` (AppCore), and the main window over them."""
    from app.views.main.window import MainWindow

    return MainWindow(AppCore(store, bridge, mcp))
