"""What the main window's helpers use of it: `WindowParts`, and the face each helper shows
the others (`ModelsFace`, `FilesFace`, ...). The helpers (files.py, models.py, menus.py, ...)
are built by the window and hold it; they name these Protocols, never `MainWindow`, so
window.py imports them and nothing imports window.py back (no import circle). `MainWindow`
matches them structurally; mypy checks it where the window hands itself to a helper.

Where a helper needs the window as a Qt parent (a dialog, a file picker) it asks for
`window()`, QWidget's own method, which a top-level window answers with itself."""

from __future__ import annotations

from typing import Any, Protocol

from PySide6.QtGui import QAction
from PySide6.QtWidgets import QLabel, QMenuBar, QMessageBox, QStatusBar, QTabWidget, QWidget

from app.chat.controller import ChatController
from app.core import AppCore
from app.jobs.engine_bridge import EngineBridge
from app.jobs.library_job import LibraryJob
from app.jobs.mcp_calls import McpCalls
from app.jobs.mcp_job import McpBridge
from app.preferences import Preferences
from app.store import Store
from app.views.chat.composer import Composer
from app.views.chat.tools_chip import ToolsChip
from app.views.chat.view import ChatView
from app.views.constraints.widgets import ConstraintBar
from app.views.inspector.panel import Inspector
from app.views.inspector.settings_panel import SettingsPanel
from app.views.inspector.tools_panel import ToolsPanel
from app.views.library.model_bar import ModelBar
from app.views.main.notice_bar import LoadingStrip, NoticeBar
from app.views.main.shell import Shell
from app.views.main.sidebar import Sidebar
from app.views.mcp.panel import McpPanel
from app.views.server.controls import ServerControls
from app.views.server.distributed_controls import DistributedControls
from engine.types import ModelInfo, ToolDefinition


class ModelsFace(Protocol):
    """models.py's ModelActions, as the other helpers call it."""

    loaded_spec: str | None

    def load(self, spec: str) -> None: ...


class FilesFace(Protocol):
    """files.py's FileActions, as the menus and the model helper call it."""

    def choose_constraint_file(self) -> None: ...
    def choose_tools_file(self) -> None: ...
    def choose_files(self) -> None: ...
    def open_constraint_editor(self) -> None: ...
    def remove_constraint(self) -> None: ...
    def export(self, fmt: str) -> None: ...
    def model_loaded(self, info: ModelInfo) -> None: ...


class DocumentsFace(Protocol):
    """documents.py's DocumentActions: a document read into the next message."""

    def attach(self, path: str, pages: tuple[int, int] | None = None) -> None: ...


class KeysFace(Protocol):
    """keys.py's KeyboardActions, as the menus and the other helpers call it."""

    def focus_composer(self) -> None: ...
    def step_chat(self, step: int) -> None: ...
    def edit(self, name: str) -> None: ...
    def show_shortcuts(self) -> None: ...


class LibraryFace(Protocol):
    """library.py's LibraryActions: the Model Library and downloads."""

    def show(self) -> None: ...
    def show_download(self) -> None: ...
    def update_model_menu(self) -> None: ...
    def recent_models(self) -> list[dict[str, Any]]: ...

    @property
    def job(self) -> LibraryJob: ...


class PreferencesFace(Protocol):
    """preferences_actions.py's PreferencesActions: the Preferences window."""

    def show(self) -> None: ...


class WindowParts(Protocol):
    """The main window as its helpers see it: the app's parts, the widgets it is built of,
    the other helpers, and the few actions they trigger."""

    # the app's parts (app.core.AppCore)
    core: AppCore
    store: Store
    bridge: EngineBridge
    controller: ChatController
    mcp: McpBridge
    mcp_calls: McpCalls
    builtins: list[ToolDefinition]

    @property
    def prefs(self) -> Preferences: ...

    # the widgets
    chat: ChatView
    composer: Composer
    constraint_bar: ConstraintBar
    tools_chip: ToolsChip
    sidebar: Sidebar
    notice: NoticeBar
    loading_strip: LoadingStrip
    shell: Shell
    inspector: Inspector
    inspector_tabs: QTabWidget
    settings_panel: SettingsPanel
    tools_panel: ToolsPanel
    mcp_panel: McpPanel
    model_bar: ModelBar
    model_label: QLabel
    cache_label: QLabel
    server: ServerControls
    distributed: DistributedControls
    sidebar_action: QAction
    settings_action: QAction
    tools_action: QAction
    actions_by_name: dict[str, QAction]
    logs_box: QMessageBox | None

    # the other helpers (read-only: the window holds them as their own classes)
    @property
    def models(self) -> ModelsFace: ...
    @property
    def files(self) -> FilesFace: ...
    @property
    def documents(self) -> DocumentsFace: ...
    @property
    def keys(self) -> KeysFace: ...
    @property
    def library(self) -> LibraryFace: ...
    @property
    def preferences(self) -> PreferencesFace: ...

    # Qt's own (QMainWindow)
    def window(self) -> QWidget: ...
    def menuBar(self) -> QMenuBar: ...
    def statusBar(self) -> QStatusBar: ...
    def close(self) -> bool: ...

    # what the menus and helpers trigger
    def new_chat(self) -> None: ...
    def stop(self) -> None: ...
    def regenerate(self, count: int = 1) -> None: ...
    def rename_chat(self) -> None: ...
    def delete_chat(self) -> None: ...
    def focus_search(self) -> None: ...
    def toggle_sidebar(self) -> None: ...
    def show_settings(self) -> None: ...
    def show_tools(self) -> None: ...
    def show_extract(self) -> None: ...
    def restyle(self) -> None: ...
    def about(self) -> None: ...
    def quit(self) -> None: ...
