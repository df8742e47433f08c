"""The main window: toolbar (sidebar, new chat, model, settings, tools), the shell with the
conversations sidebar, the chat and the inspector, menus and status bar. It is handed the
app's parts (app.application.AppCore: store, engine bridge, ChatController, MCP) and wires
the views to them, never waiting on any. One class: what it does about files, the model,
the library and Preferences lives in helpers that hold the window (files.py, models.py,
library.py, preferences_actions.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from PySide6.QtCore import QByteArray, QEvent, QObject, QSize, Qt, QTimer
from PySide6.QtGui import (
    QAction,
    QCloseEvent,
    QDragEnterEvent,
    QDragLeaveEvent,
    QDropEvent,
    QGuiApplication,
    QIcon,
)
from PySide6.QtWidgets import (
    QApplication,
    QDialog,
    QHBoxLayout,
    QLabel,
    QMainWindow,
    QMessageBox,
    QSizePolicy,
    QToolBar,
    QVBoxLayout,
    QWidget,
)

from app import __version__
from app.constraints import describe_constraint
from app.paths import app_icon_path, resources_dir
from app.preferences import Preferences
from app.qt_compat import guard_refcounts
from app.store import ToolsConfig
from app.tools import builtin_names, builtin_tools, tools_tag
from app.views.chat.composer import Composer
from app.views.chat.message_parts import Note
from app.views.chat.tools_chip import ToolsChip
from app.views.chat.view import ChatView, Entry
from app.views.chat.welcome import Example
from app.views.common import theme
from app.views.common.announce import announce, reply_announcement
from app.views.common.drops import dropped_paths
from app.views.common.icons import icon
from app.views.common.keyboard import focus_within, place_in_chain
from app.views.common.wheel_guard import guard_wheel
from app.views.constraints.widgets import ConstraintBar
from app.views.inspector.panel import SETTINGS_TAB, TOOLS_TAB, Inspector
from app.views.inspector.settings_panel import SettingsPanel
from app.views.inspector.tools_panel import ToolsPanel
from app.views.library.model_bar import ModelBar
from app.views.main.documents import DocumentActions
from app.views.main.files import FileActions
from app.views.main.keys import KeyboardActions
from app.views.main.library import LibraryActions
from app.views.main.mcp import install_mcp_views
from app.views.main.menus import build_menus
from app.views.main.models import ModelActions
from app.views.main.notice_bar import LoadingStrip, NoticeBar
from app.views.main.preferences_actions import PreferencesActions
from app.views.main.shell import Shell
from app.views.main.sidebar import Sidebar
from app.views.server.controls import ServerControls
from app.views.server.distributed_controls import DistributedControls
from engine.types import ConstraintSpec, StopReason

if TYPE_CHECKING:
    from app.core import AppCore

DEFAULT_SIZE = (1180, 780)
MINIMUM_SIZE = (640, 440)
STATUS_INTERVAL_MS = 1000


class MainWindow(QMainWindow):
    """The one main window over the app's parts (built by app.application)."""

    # Set by app.application.start_crash_reports: the hooks, and the latest crash dialog.
    crash_reporter: QObject | None = None
    crash_dialog: QDialog | None = None
    logs_box: QMessageBox | None = None  # Help → Show Logs where no file browser opens

    def __init__(self, core: AppCore) -> None:
        super().__init__()
        guard_refcounts()  # before the thousands of Qt calls a session makes
        self.core = core
        self.store = core.store
        self.bridge = core.bridge
        self.controller = core.controller
        self.mcp = core.mcp  # MCP servers start with self.mcp.start()
        self.mcp_calls = core.mcp_calls
        self.builtins = builtin_tools()
        self.models = ModelActions(self)
        self.setWindowTitle("Corral")
        self.setObjectName("mainWindow")
        self.setUnifiedTitleAndToolBarOnMac(True)
        if app_icon_path().exists():
            self.setWindowIcon(QIcon(str(app_icon_path())))
        self._restyling = False
        self.setAcceptDrops(True)
        self._build()
        self.files = FileActions(self)
        self.documents = DocumentActions(self)
        self.library = LibraryActions(self)
        self.preferences = PreferencesActions(self)
        self.keys = KeyboardActions(self)
        self.restyle()
        self.actions_by_name = build_menus(self)
        self._connect()
        self.mcp_panel = install_mcp_views(self)
        self.tools_panel.set_builtins(self.builtins)
        self.tools_chip.set_builtins(self.builtins)
        self.settings_panel.set_presets(self.store.presets())
        self._restore_state()
        self._open_initial_conversation()
        self.distributed.restore()  # before the first model loads
        self.server.restore()
        self._status_timer = QTimer(self, interval=STATUS_INTERVAL_MS)
        self._status_timer.timeout.connect(self.models.update_status)
        self._status_timer.start()
        self.models.adopt_loaded()  # an engine handed over already loaded
        self.models.update_status()
        self.keys.install()  # text boxes pass Tab on; the composer takes the first keys
        guard_wheel(self)  # the wheel scrolls pages, never a value it passes over

    # ---- construction ----

    def _build(self) -> None:
        self.sidebar = Sidebar(self)
        self.chat_area = QWidget(self)
        self.chat_area.setObjectName("chatArea")
        self.notice = NoticeBar(self.chat_area)
        self.chat = ChatView(self.chat_area)
        self.chat.token_loader = self.store.token_logprobs
        self.loading_strip = LoadingStrip(self.chat_area)
        self.constraint_bar = ConstraintBar(self.chat_area)
        self.tools_chip = ToolsChip(self.chat_area)
        self.composer = Composer(self.chat_area)
        self.composer.add_accessory(self.constraint_bar)
        self.composer.add_accessory(self.tools_chip)
        self.composer.finish_accessories()
        column = QVBoxLayout(self.chat_area)
        column.setContentsMargins(1, 0, 0, 0)  # the style sheet's border-left, all the way down
        column.setSpacing(0)
        column.addWidget(self.notice)
        column.addWidget(self.chat, 1)
        bottom = QWidget(self.chat_area)
        bottom.setObjectName("composerArea")
        bottom.setMaximumWidth(theme.CHAT_MAX_WIDTH + 2 * theme.SPACE.L)
        bottom_layout = QVBoxLayout(bottom)
        bottom_layout.setContentsMargins(
            theme.SPACE.L, theme.SPACE.XS, theme.SPACE.L, theme.SPACE.L
        )
        bottom_layout.setSpacing(theme.SPACE.S)
        bottom_layout.addWidget(self.loading_strip)
        bottom_layout.addWidget(self.constraint_bar.error)
        bottom_layout.addWidget(self.composer)
        centred = QHBoxLayout()  # the composer lines up with the conversation column
        centred.setContentsMargins(theme.SPACE.S, 0, theme.SPACE.S, 0)
        centred.addStretch(1)
        centred.addWidget(bottom, 1000)
        centred.addStretch(1)
        column.addLayout(centred)

        self.settings_panel = SettingsPanel()
        self.tools_panel = ToolsPanel()
        self.inspector = Inspector(self.settings_panel, self.tools_panel, self)
        self.inspector_tabs = self.inspector.tabs
        self.inspector.closeRequested.connect(self._close_inspector)

        self.shell: Shell = Shell(self.sidebar, self.chat_area, self.inspector, self)
        self.shell.keep_clear(bottom)  # a floating inspector never covers Send, Format, Tools
        self.setCentralWidget(self.shell)

        self.model_bar: ModelBar = ModelBar(self)
        self.toolbar = QToolBar("Main", self)
        self.toolbar.setObjectName("mainToolbar")
        self.toolbar.setMovable(False)
        self.toolbar.setFloatable(False)
        self.toolbar.setIconSize(QSize(18, 18))
        self.toolbar.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonIconOnly)
        self.addToolBar(Qt.ToolBarArea.TopToolBarArea, self.toolbar)
        self.sidebar_action = self._toolbar_action(
            "sidebar", "Show or hide the chats (Ctrl+Shift+S)", self.toggle_sidebar
        )
        self.sidebar_action.setCheckable(True)
        self.new_action = self._toolbar_action("new", "New chat (Ctrl+N)", self.new_chat)
        self.toolbar.addWidget(self._spacer())
        self.toolbar.addWidget(self.model_bar)
        self.toolbar.addWidget(self._spacer())
        self.settings_action = self._toolbar_action(
            "settings", "Chat settings: system prompt, sampling", self.show_settings
        )
        self.tools_action = self._toolbar_action(
            "tools", "Tools the model may call", self.show_tools
        )
        for action in (self.settings_action, self.tools_action):
            action.setCheckable(True)
        self.extract_action = self._toolbar_action(
            "table", "Extract a table from documents (Ctrl+Shift+E)", self.show_extract
        )

        self.model_label = QLabel("No model", self)
        self.cache_label = QLabel(self)
        self.cache_label.setObjectName("cacheLabel")
        self.cache_label.setToolTip(
            "Memory holding what the model already read, so the next reply starts sooner"
        )
        # apart from each other and from the window's edge (they ran together, clipped)
        for label in (self.model_label, self.cache_label):
            label.setContentsMargins(theme.SPACE.M, 0, theme.SPACE.M, 0)
        self.statusBar().addPermanentWidget(self.model_label)
        self.statusBar().addPermanentWidget(self.cache_label)
        self.statusBar().setSizeGripEnabled(False)
        self.setMinimumSize(*MINIMUM_SIZE)
        self.server: ServerControls = ServerControls(
            self, self.store, lambda: self.bridge.engine, self.core.secrets
        )
        self.distributed: DistributedControls = DistributedControls(
            self, self.store, self.bridge, self.models.reload
        )
        width, height = DEFAULT_SIZE
        screen = QGuiApplication.primaryScreen()
        if screen is not None:  # a small screen gets most of it, not more than all of it
            available = screen.availableGeometry()
            width = min(width, int(available.width() * 0.92))
            height = min(height, int(available.height() * 0.92))
        self.resize(width, height)

    def _toolbar_action(self, icon_name: str, tip: str, slot: object) -> QAction:
        action = QAction(icon(icon_name), tip.split(" (")[0].split(":")[0], self)
        action.setToolTip(tip)
        action.setData(icon_name)
        action.triggered.connect(lambda _checked=False: slot())  # type: ignore[operator]
        self.toolbar.addAction(action)
        return action

    def _spacer(self) -> QWidget:
        spacer = QWidget(self)
        spacer.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Preferred)
        return spacer

    def _connect(self) -> None:
        c = self.controller
        c.conversationsChanged.connect(self.refresh_sidebar)
        c.conversationOpened.connect(self._conversation_opened)
        c.pathChanged.connect(self.render_chat)
        c.replyStarted.connect(self._reply_started)
        c.replyPrefill.connect(self.chat.reply_prefill)
        c.replyText.connect(self.chat.update_reply)
        c.replyReasoning.connect(self.chat.update_reasoning)
        c.replyFinished.connect(self._reply_finished)
        c.busyChanged.connect(self._busy_changed)
        c.notice.connect(lambda text: self.notice.show_message(text, "error"))
        c.info.connect(lambda text: self.notice.show_message(text, "info"))
        c.contextExceeded.connect(self.offer_shorter_prompt)
        c.chipsChanged.connect(self._show_chips)
        # an edit still being typed is saved before the controller reads the settings
        c.save_pending_edits = self.settings_panel.flush

        self.sidebar.newRequested.connect(self.new_chat)
        self.sidebar.conversationSelected.connect(self._select_conversation)
        self.sidebar.renameRequested.connect(c.rename_conversation)
        self.sidebar.deleteRequested.connect(c.delete_conversation)
        self.sidebar.searchChanged.connect(lambda _q: self.refresh_sidebar())

        self.composer.sendRequested.connect(self.send)
        self.composer.stopRequested.connect(self.stop)
        self.composer.filesDropped.connect(self.files.open)
        self.composer.imagePasted.connect(self.files.attach_pasted)
        self.composer.attachRequested.connect(self.files.choose_files)
        self.chat.editSubmitted.connect(self._edit)
        self.chat.regenerateRequested.connect(self.regenerate)
        self.chat.retryRequested.connect(self.retry)
        self.chat.continueRequested.connect(self.continue_reply)
        self.chat.branchStepped.connect(c.switch_branch)
        self.chat.toolResultSubmitted.connect(c.submit_tool_result)
        self.chat.toolRunRequested.connect(self.files.run_builtin_tool)
        # the button or box that sent these is rebuilt: the keys go back to the composer
        for done in (self.chat.editSubmitted, self.chat.toolResultSubmitted):
            done.connect(lambda *_args: self.keys.focus_composer())
        self.chat.toolRunRequested.connect(lambda *_args: self.keys.focus_composer())
        self.chat.welcome.examplePicked.connect(self.use_example)
        self.chat.welcome.chooseFileRequested.connect(self.files.choose_constraint_file)

        files = self.files
        self.constraint_bar.openFileRequested.connect(files.choose_constraint_file)
        self.constraint_bar.editorRequested.connect(files.open_constraint_editor)
        self.constraint_bar.anyJsonRequested.connect(
            lambda: files.apply_constraint(ConstraintSpec(kind="any_json", name="any JSON"))
        )
        self.constraint_bar.removeRequested.connect(files.remove_constraint)
        self.tools_chip.configChanged.connect(self.tools_chip_changed)
        self.tools_chip.editRequested.connect(self.show_tools)

        self.settings_panel.changed.connect(c.set_settings)
        self.settings_panel.presetSaved.connect(self._save_preset)
        self.settings_panel.presetDeleted.connect(self._delete_preset)
        self.tools_panel.changed.connect(self._tools_changed)
        self.tools_panel.loadFileRequested.connect(files.choose_tools_file)
        self.shell.panelsChanged.connect(self._panels_changed)
        self.inspector_tabs.currentChanged.connect(lambda _i: self._panels_changed())

        self.model_bar.loadRequested.connect(self.models.load)
        self.bridge.loadStarted.connect(self.model_bar.loading)
        self.bridge.loadStarted.connect(lambda _spec: self.library.update_model_menu())
        self.bridge.loadProgress.connect(self.model_bar.progressed)
        self.bridge.loadProgress.connect(self.loading_strip.progress)
        self.bridge.modelLoaded.connect(self.models.loaded)
        self.bridge.loadFailed.connect(self.models.failed)
        self.core.preferencesChanged.connect(self.preferences.changed)

    def _open_initial_conversation(self) -> None:
        last = self.store.get_setting("last_conversation")
        conversations = self.store.conversations()
        if last is not None and self.store.conversation(last) is not None:
            self.controller.open_conversation(last)
        elif conversations:
            self.controller.open_conversation(conversations[0].id)
        else:
            self.controller.new_conversation()
        self.refresh_sidebar()

    @property
    def prefs(self) -> Preferences:
        """The user's preferences as applied now (AppCore keeps them)."""
        return self.core.prefs

    # ---- look ----

    def restyle(self) -> None:
        """Apply the style sheet for the current palette and text size."""
        self._restyling = True
        self.setStyleSheet(theme.style_sheet())
        self._restyling = False
        for action in self.toolbar.actions():
            name = action.data()
            if isinstance(name, str) and name:
                action.setIcon(icon(name))
        self.model_bar.restyle()

    def changeEvent(self, event: QEvent) -> None:
        super().changeEvent(event)
        if event.type() == QEvent.Type.PaletteChange and not self._restyling:
            # Colours are baked into the style sheet: rebuild it for the new palette (the
            # system switching between light and dark, or the user's override).
            self.restyle()

    def event(self, event: QEvent) -> bool:
        if event.type() == QEvent.Type.ApplicationFontChange:
            # the system's text size changed: every size derives from it (theme.type_scale)
            self.restyle()
            self.chat.restyle()
            self.composer.restyle()
        return super().event(event)

    # ---- panels ----

    def toggle_sidebar(self) -> None:
        opening = not self.shell.sidebar_open
        self._closing(self.sidebar, lambda: self.shell.set_sidebar_open(opening), not opening)

    def _close_inspector(self) -> None:
        self._closing(self.inspector, lambda: self.shell.set_inspector_open(False))

    def _closing(self, panel: QWidget, change: Callable[[], None], closes: bool = True) -> None:
        """Open or close a panel; one closed with the keys inside gives them back to the
        composer (Qt would hand them to the next control, the toolbar's model picker)."""
        inside = closes and focus_within(panel)
        change()
        if inside:
            self.keys.focus_composer()

    def show_settings(self) -> None:
        self._show_tab(SETTINGS_TAB)

    def show_tools(self) -> None:
        """Open the inspector with the Tools tab in front (a second click closes it)."""
        self._show_tab(TOOLS_TAB)

    def _show_tab(self, tab: int) -> None:
        if self.shell.inspector_open and self.inspector_tabs.currentIndex() == tab:
            self._close_inspector()
            return
        self.inspector_tabs.setCurrentIndex(tab)
        self.shell.set_inspector_open(True)
        self._panels_changed()

    def _panels_changed(self) -> None:
        open_tab = self.inspector_tabs.currentIndex() if self.shell.inspector_open else -1
        self.settings_action.setChecked(open_tab == SETTINGS_TAB)
        self.tools_action.setChecked(open_tab == TOOLS_TAB)
        self.sidebar_action.setChecked(self.shell.placements["sidebar"] != "hidden")

    # ---- conversations ----

    def refresh_sidebar(self) -> None:
        conversations = self.store.conversations(self.sidebar.query())
        self.sidebar.set_conversations(conversations, self.controller.conversation_id)
        self._update_title()

    def _update_title(self) -> None:
        conv = self.controller.conversation
        self.setWindowTitle(f"{conv.title} — Corral" if conv is not None else "Corral")

    def new_chat(self) -> None:
        self.controller.new_conversation()
        self.composer.edit.setFocus()

    def _select_conversation(self, conversation_id: int) -> None:
        if conversation_id != self.controller.conversation_id:
            self.controller.open_conversation(conversation_id)
            if self.shell.placements["sidebar"] == "overlay":
                self.shell.close_overlays()

    def _conversation_opened(self, conversation_id: int) -> None:
        conv = self.store.conversation(conversation_id)
        if conv is None:
            return
        self.settings_panel.set_settings(conv.settings)
        self.tools_panel.set_config(conv.tools)
        self._show_chips()
        self.constraint_bar.show_error("")
        self.chat.end_reply()
        self.refresh_sidebar()
        self.keys.after_switch()

    def _show_chips(self) -> None:
        """The composer's chips as the controller describes the open conversation."""
        state = self.controller.chip_state()
        self.constraint_bar.set_state(state)
        conv = self.controller.conversation
        if conv is not None:
            self.tools_chip.set_config(conv.tools, state.tool_warnings)

    def rename_chat(self) -> None:
        if self.controller.conversation_id is not None:
            self.shell.set_sidebar_open(True)
            self.sidebar.rename(self.controller.conversation_id)

    def delete_chat(self) -> None:
        if self.controller.conversation_id is not None:
            self.sidebar.confirm_delete(self.controller.conversation_id)

    def focus_search(self) -> None:
        self.shell.set_sidebar_open(True)
        self.sidebar.search.setFocus()
        self.sidebar.search.selectAll()

    def bring_forward(self, files: list[str]) -> None:
        """Another launch of Corral on this data folder: show this window, open its files."""
        if self.isMinimized():
            self.showNormal()
        self.show()
        self.raise_()
        self.activateWindow()
        if files:
            self.files.open(files)

    # ---- the inspector's panels and the tools chip (saved with the conversation) ----

    def _tools_changed(self, config: ToolsConfig) -> None:
        """The Tools panel changed the conversation's tools."""
        self.controller.set_tools(config)
        self.tools_chip.set_config(config)

    def tools_chip_changed(self, config: ToolsConfig) -> None:
        """The chip's menu (or an example) changed the conversation's tools."""
        self.controller.set_tools(config)
        self.tools_panel.set_config(config)
        self.tools_chip.set_config(config)

    def _save_preset(self, name: str, text: str) -> None:
        self.store.save_preset(name, text)
        self.settings_panel.set_presets(self.store.presets())

    def _delete_preset(self, name: str) -> None:
        self.store.delete_preset(name)
        self.settings_panel.set_presets(self.store.presets())

    # ---- the chat ----

    def render_chat(self) -> None:
        c = self.controller
        path = c.path()
        streaming_here = c.busy and c.reply_conversation_id == c.conversation_id
        replacing = c.replacing if streaming_here else None
        cut = next((i for i, m in enumerate(path) if replacing and m.id == replacing.id), None)
        if cut is not None:  # a new version is written in its place: the old one waits off
            path = path[:cut]
        results = {m.meta.get("tool_call_id"): m.content for m in path if m.role == "tool"}
        last_reply = max((i for i, m in enumerate(path) if m.role == "assistant"), default=-1)
        if cut is not None:
            last_reply = -1  # the last reply is the one being written
        waiting = bool(path) and path[-1].role == "user" and not c.busy
        entries = []
        for i, m in enumerate(path):
            if m.role == "tool":
                continue
            note = None
            if waiting and i == len(path) - 1:
                why = c.unanswered.get(m.id, "No reply yet")
                note = Note(why, "error" if why.startswith("No reply:") else "quiet", "retry")
            entries.append(
                Entry(
                    m,
                    branch=c.branch_position(m),
                    last_reply=i == last_reply,
                    tool_results={k: v for k, v in results.items() if k},
                    note=note,
                )
            )
        builtins = frozenset(builtin_names()) if self.builtins else frozenset()
        focus_in_chat = focus_within(self.chat)
        self.chat.set_entries(entries, interactive=not c.busy, builtins=builtins)
        if focus_in_chat and not focus_within(self.chat):
            # the message that held focus was replaced: not onto the sidebar's New Chat
            self.keys.focus_composer()
        if streaming_here and self.chat.reply is None:
            self._reply_started()
            if c.job is not None and c.reply_reasoning():
                self.chat.update_reasoning(c.reply_reasoning())
            if c.job is not None and c.reply_text():
                self.chat.update_reply(c.reply_text())
        elif not streaming_here and self.chat.reply is not None:
            self.chat.end_reply()
        self._order_chat_keys()
        self._update_title()

    def _order_chat_keys(self) -> None:
        """The messages in the Tab order where they are seen: after the sidebar, before the
        composer (Qt puts widgets made later at the end of the window's chain)."""
        shown = [*self.chat.message_widgets(), self.chat.previous, self.chat.reply]
        place_in_chain([w for w in shown if w is not None], self.composer.tab_start())

    def send(self, text: str) -> None:
        composer = self.composer
        if self.controller.send(text, composer.pending_images(), composer.pending_documents()):
            self.composer.edit.clear()
            self.composer.clear_attachments()
            self.notice.hide()
        self.keys.focus_composer()  # also when Send was clicked or pressed

    def stop(self) -> None:
        self.controller.stop()

    def regenerate(self, count: int = 1) -> None:
        """Write `count` new versions of the last reply, side by side."""
        self.controller.regenerate(count)

    def retry(self, message_id: int) -> None:
        self.controller.retry(message_id)

    def continue_reply(self, message_id: int) -> None:
        self.controller.continue_reply(message_id)

    def _edit(self, message_id: int, text: str) -> None:
        self.controller.edit(message_id, text)

    def _reply_started(self) -> None:
        conv = self.controller.conversation
        tag = ""
        if conv is not None and not self.controller.reply_prefix:
            # what the chips say the reply is held to: the format (or a tool call), or tools
            state = self.controller.chip_state()
            if state.constraint is not None and state.constraint_use != "paused":
                spec = state.constraint
                tag = describe_constraint(spec.kind, spec.name)
                tag += ", or a tool call" if state.constraint_use == "with_tools" else ""
            elif self.controller.reply_tools is not None:
                tag = tools_tag(*self.controller.reply_tools)
        replacing = self.controller.replacing
        reply = self.chat.begin_reply(
            tag,
            prefix=self.controller.reply_prefix,
            writing=self.controller.writing_label(),
            versions=self.controller.writing_versions,
            previous=replacing,
            previous_index=self.controller.branch_position(replacing)[0] if replacing else 1,
        )
        if replacing is not None and self.chat.previous is not None:
            self.render_chat()  # the old version leaves the column: the new one takes its place
        self._order_chat_keys()
        if self.bridge.loading:
            reply.set_status("Waiting for the model to finish loading…")
        elif self.bridge.model_info is None:
            reply.set_status("Waiting for a model…")

    def offer_shorter_prompt(self, message: str, tools_on: bool) -> None:
        """A prompt longer than the model reads: offer to leave out the oldest messages,
        or (when tools were offered) to turn tools off."""
        c = self.controller
        self.notice.show_message(
            f"{message}.",
            "error",
            action="Leave out oldest messages",
            callback=lambda: None if c.drop_oldest_turns() else None,
            second_action="Turn tools off" if tools_on else "",
            second_callback=(lambda: None if c.turn_tools_off() else None) if tools_on else None,
        )

    def _reply_finished(self, result: object) -> None:
        self.chat.end_reply(keep_body=True)
        text = getattr(result, "text", "")
        error = getattr(result, "error", None)
        if getattr(result, "stop_reason", None) != StopReason.CANCELLED:
            announce(self.chat, reply_announcement(text, error), assertive=bool(error))
        self.models.update_status()  # the prompt cache just changed

    def _busy_changed(self, busy: bool) -> None:
        self.composer.set_busy(busy)
        self.chat.set_interactive(not busy)
        self.actions_by_name["regenerate"].setEnabled(not busy)
        self.actions_by_name["regenerate_many"].setEnabled(not busy)
        self.actions_by_name["stop"].setEnabled(busy)
        if not busy:
            self.composer.edit.setFocus()

    def use_example(self, example: Example) -> None:
        """Send an example prompt, after applying the grammar or tool it shows off."""
        if example.tool:
            conv = self.controller.conversation
            if conv is not None:
                from dataclasses import replace

                builtins = list(dict.fromkeys([*conv.tools.builtins, example.tool]))
                choice = example.tool if example.must_call else conv.tools.tool_choice
                config = replace(conv.tools, builtins=builtins, tool_choice=choice)
                if config != conv.tools:
                    self.tools_chip_changed(config)
        if example.grammar:
            path = str(resources_dir() / "grammars" / example.grammar)
            self.files.open_constraint_file(path, then=lambda: self.send(example.prompt))
            return
        self.send(example.prompt)

    # ---- window state, drops ----

    def _restore_state(self) -> None:
        geometry = self.store.get_setting("window_geometry")
        if geometry:
            self.restoreGeometry(QByteArray.fromBase64(geometry.encode()))
        panels = self.store.get_setting("window_panels") or {}
        self.shell.set_sidebar_open(bool(panels.get("sidebar", True)))
        self.inspector_tabs.setCurrentIndex(int(panels.get("tab", SETTINGS_TAB)))
        self.shell.set_inspector_open(bool(panels.get("inspector", False)))
        self._panels_changed()

    def save_state(self) -> None:
        self.store.set_setting(
            "window_geometry", bytes(self.saveGeometry().toBase64().data()).decode()
        )
        self.store.set_setting(
            "window_panels",
            {
                "sidebar": self.shell.sidebar_open,
                "inspector": self.shell.inspector_open,
                "tab": self.inspector_tabs.currentIndex(),
            },
        )

    def closeEvent(self, event: QCloseEvent) -> None:
        self.settings_panel.flush()
        self.save_state()
        self.controller.stop()
        self.server.shutdown()
        self.mcp.close()  # no server outlives the window
        self.library.job.close()
        super().closeEvent(event)

    def dragEnterEvent(self, event: QDragEnterEvent) -> None:
        if dropped_paths(event.mimeData()):
            event.acceptProposedAction()
            self.chat.welcome.drop_target.set_armed(True)

    def dragLeaveEvent(self, event: QDragLeaveEvent) -> None:
        self.chat.welcome.drop_target.set_armed(False)
        super().dragLeaveEvent(event)

    def dropEvent(self, event: QDropEvent) -> None:
        self.chat.welcome.drop_target.set_armed(False)
        paths = dropped_paths(event.mimeData())
        if paths:
            event.acceptProposedAction()
            self.files.open(paths)

    def quit(self) -> None:
        self.close()
        QApplication.quit()

    def show_extract(self) -> None:
        """The Extract window (one per main window); its jobs live in the data folder."""
        from app.views.extract.window import ExtractWindow
        from engine.extract.store import DB_NAME, JobStore

        extract = getattr(self, "extract_window", None)
        if extract is None:
            store = JobStore(self.store.path.parent / DB_NAME)
            extract = self.extract_window = ExtractWindow(self.bridge, store, self)
        extract.show()
        extract.raise_()
        extract.activateWindow()

    def about(self) -> None:
        QMessageBox.about(
            self,
            "About Corral",
            f"<h3>Corral {__version__}</h3><p>A local chat app whose replies always fit your "
            "schemas, grammars and tools.</p>",
        )
