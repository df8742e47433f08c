"""The main window: toolbar (sidebar, new chat, model, settings, tools), the shell with the
conversations sidebar, the chat and the inspector, menus and status bar. It wires the views
to the ChatController and the engine bridge and never waits on either."""

from __future__ import annotations

import json
import re
from pathlib import Path

from PySide6.QtCore import QByteArray, QEvent, QSize, Qt, QTimer
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
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QMainWindow,
    QMessageBox,
    QScrollArea,
    QSizePolicy,
    QTabWidget,
    QToolBar,
    QVBoxLayout,
    QWidget,
)

from app import __version__
from app.constraints import describe_constraint, spec_from_dict
from app.controller import ChatController
from app.jobs.engine_bridge import EngineBridge
from app.jobs.thread import run_task
from app.paths import app_icon_path, resources_dir
from app.preferences import Preferences
from app.qt_compat import guard_refcounts
from app.store import Store
from app.store.export import to_json, to_markdown
from app.tools import builtin_names, builtin_tools
from app.views import theme
from app.views.chat_view import ChatView, Entry
from app.views.composer import Composer, dropped_paths
from app.views.constraint_widgets import ConstraintBar
from app.views.format import format_bytes
from app.views.icons import icon
from app.views.menus import build_menus
from app.views.message_widget import Note
from app.views.model_bar import ModelBar
from app.views.notice_bar import LoadingStrip, NoticeBar
from app.views.preferences import PreferencesDialog
from app.views.settings_panel import SettingsPanel
from app.views.shell import Shell
from app.views.sidebar import Sidebar
from app.views.tools_chip import ToolsChip, describe_tools
from app.views.tools_panel import ToolsPanel
from app.views.welcome import Example
from app.views.window_actions import WindowActions
from engine.model_defaults import ModelDefaults, sampling_defaults
from engine.types import ConstraintSpec, ModelInfo

DEFAULT_SIZE = (1180, 780)
MINIMUM_SIZE = (640, 440)
STATUS_INTERVAL_MS = 1000
SETTINGS_TAB, TOOLS_TAB = 0, 1
_UNSAFE_FILENAME = re.compile(r'[\\/:*?"<>|\x00-\x1f]+')


def _scrolling(widget: QWidget, parent: QWidget) -> QScrollArea:
    """`widget` in a frameless vertical scroll area, so a short window never clips it."""
    area = QScrollArea(parent)
    area.setWidgetResizable(True)
    area.setFrameShape(QScrollArea.Shape.NoFrame)
    area.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
    area.setWidget(widget)
    return area


class MainWindow(WindowActions, QMainWindow):
    def __init__(self, store: Store, bridge: EngineBridge) -> None:
        super().__init__()
        guard_refcounts()  # before the thousands of Qt calls a session makes
        self.store = store
        self.bridge = bridge
        self.prefs = Preferences.load(store)
        theme.set_chat_pt(self.prefs.chat_font_pt)
        theme.apply_appearance(self.prefs.appearance)
        self.controller = ChatController(store, bridge, self)
        self.controller.new_chat_settings = self.prefs.new_chat
        self.controller.new_chat_tools = self.prefs.new_chat_tools
        self.model_defaults = ModelDefaults()
        self._model_name: str | None = None  # what is loaded now
        self._loaded_spec: str | None = None
        self._loading_spec: str | None = None
        self.setWindowTitle("Corral")
        self.setObjectName("mainWindow")
        self.setUnifiedTitleAndToolBarOnMac(True)
        if app_icon_path().exists():
            self.setWindowIcon(QIcon(str(app_icon_path())))
        self._restyling = False
        self.setAcceptDrops(True)
        self._build()
        self.restyle()
        self.actions_by_name = build_menus(self)
        self._connect()
        self._builtins = builtin_tools()
        self.tools_panel.set_builtins(self._builtins)
        self.tools_chip.set_builtins(self._builtins)
        self.settings_panel.set_presets(store.presets())
        self._restore_state()
        self._open_initial_conversation()
        self._status_timer = QTimer(self, interval=STATUS_INTERVAL_MS)
        self._status_timer.timeout.connect(self.update_status)
        self._status_timer.start()
        if bridge.model_info is not None:  # an engine handed over already loaded
            self._loaded_spec = bridge.model_spec
            self._model_loaded(bridge.model_info)
        self.update_status()

    # ---- construction ----

    def _build(self) -> None:
        self.sidebar = Sidebar(self)
        self.chat_area = QWidget(self)
        self.chat_area.setObjectName("chatArea")
        self.notice = NoticeBar(self.chat_area)
        self.chat = ChatView(self.chat_area)
        self.loading_strip = LoadingStrip(self.chat_area)
        self.constraint_bar = ConstraintBar(self.chat_area)
        self.tools_chip = ToolsChip(self.chat_area)
        self.composer = Composer(self.chat_area)
        self.composer.add_accessory(self.constraint_bar)
        self.composer.add_accessory(self.tools_chip)
        self.composer.finish_accessories()
        column = QVBoxLayout(self.chat_area)
        column.setContentsMargins(0, 0, 0, 0)
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
        self.inspector = QWidget(self)
        self.inspector.setObjectName("inspector")
        inspector_layout = QVBoxLayout(self.inspector)
        inspector_layout.setContentsMargins(0, theme.SPACE.XS, 0, 0)
        self.inspector_tabs = QTabWidget(self.inspector)
        self.inspector_tabs.setDocumentMode(True)
        self.inspector_tabs.addTab(_scrolling(self.settings_panel, self.inspector), "Chat")
        self.inspector_tabs.addTab(_scrolling(self.tools_panel, self.inspector), "Tools")
        from app.views.icons import IconButton

        close = IconButton("close", "Close the panel", self.inspector, size=16)
        close.clicked.connect(lambda: self.shell.set_inspector_open(False))
        self.inspector_tabs.setCornerWidget(close, Qt.Corner.TopRightCorner)
        inspector_layout.addWidget(self.inspector_tabs)

        self.shell = Shell(self.sidebar, self.chat_area, self.inspector, self)
        self.setCentralWidget(self.shell)

        self.model_bar = ModelBar(self)
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

        self.model_label = QLabel("No model", self)
        self.cache_label = QLabel(self)
        self.cache_label.setObjectName("cacheLabel")
        self.cache_label.setToolTip(
            "Memory holding what the model already read, so the next reply starts sooner"
        )
        self.statusBar().addPermanentWidget(self.model_label)
        self.statusBar().addPermanentWidget(self.cache_label)
        self.statusBar().setSizeGripEnabled(False)
        self.setMinimumSize(*MINIMUM_SIZE)
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
        c.replyFinished.connect(self._reply_finished)
        c.busyChanged.connect(self._busy_changed)
        c.notice.connect(lambda text: self.notice.show_message(text, "error"))

        self.sidebar.newRequested.connect(self.new_chat)
        self.sidebar.conversationSelected.connect(self._select_conversation)
        self.sidebar.renameRequested.connect(c.rename_conversation)
        self.sidebar.deleteRequested.connect(c.delete_conversation)
        self.sidebar.searchChanged.connect(lambda _q: self.refresh_sidebar())

        self.composer.sendRequested.connect(self.send)
        self.composer.stopRequested.connect(self.stop)
        self.composer.filesDropped.connect(self.open_files)
        self.chat.editSubmitted.connect(self._edit)
        self.chat.regenerateRequested.connect(self.regenerate)
        self.chat.retryRequested.connect(self.retry)
        self.chat.continueRequested.connect(self.continue_reply)
        self.chat.branchStepped.connect(c.switch_branch)
        self.chat.toolResultSubmitted.connect(c.submit_tool_result)
        self.chat.toolRunRequested.connect(self.run_builtin_tool)
        self.chat.welcome.examplePicked.connect(self.use_example)

        self.constraint_bar.openFileRequested.connect(self.choose_constraint_file)
        self.constraint_bar.editorRequested.connect(self.open_constraint_editor)
        self.constraint_bar.anyJsonRequested.connect(
            lambda: self.apply_constraint(ConstraintSpec(kind="any_json", name="any JSON"))
        )
        self.constraint_bar.removeRequested.connect(self.remove_constraint)
        self.tools_chip.configChanged.connect(self._tools_chip_changed)
        self.tools_chip.editRequested.connect(self.show_tools)

        self.settings_panel.changed.connect(self._settings_changed)
        self.settings_panel.presetSaved.connect(self._save_preset)
        self.settings_panel.presetDeleted.connect(self._delete_preset)
        self.tools_panel.changed.connect(self._tools_changed)
        self.tools_panel.loadFileRequested.connect(self.choose_tools_file)
        self.shell.panelsChanged.connect(self._panels_changed)
        self.inspector_tabs.currentChanged.connect(lambda _i: self._panels_changed())

        self.model_bar.loadRequested.connect(self.load_model)
        self.bridge.loadStarted.connect(self.model_bar.loading)
        self.bridge.loadProgress.connect(self.model_bar.progressed)
        self.bridge.loadProgress.connect(self.loading_strip.progress)
        self.bridge.modelLoaded.connect(self._model_loaded)
        self.bridge.loadFailed.connect(self._model_failed)

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

    def changeEvent(self, event: QEvent) -> None:
        super().changeEvent(event)
        if event.type() == QEvent.Type.PaletteChange and not self._restyling:
            # Colours are baked into the style sheet: rebuild it for the new palette (the
            # system switching between light and dark, or the user's override).
            self.restyle()

    # ---- panels ----

    def toggle_sidebar(self) -> None:
        self.shell.set_sidebar_open(not self.shell.sidebar_open)

    def show_settings(self) -> None:
        self._show_tab(SETTINGS_TAB)

    def show_tools(self) -> None:
        """Open the inspector with the Tools tab in front (a second click closes it)."""
        self._show_tab(TOOLS_TAB)

    def _show_tab(self, tab: int) -> None:
        if self.shell.inspector_open and self.inspector_tabs.currentIndex() == tab:
            self.shell.set_inspector_open(False)
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
        self.settings_panel.flush()
        self.controller.new_conversation()
        self.composer.edit.setFocus()

    def _select_conversation(self, conversation_id: int) -> None:
        if conversation_id != self.controller.conversation_id:
            self.settings_panel.flush()
            self.controller.open_conversation(conversation_id)
            if self.shell.placements["sidebar"] == "overlay":
                self.shell.close_overlays()

    def _conversation_opened(self, conversation_id: int) -> None:
        conv = self.store.conversation(conversation_id)
        if conv is None:
            return
        self.settings_panel.set_settings(conv.settings)
        self.tools_panel.set_config(conv.tools)
        self.tools_chip.set_config(conv.tools)
        self.constraint_bar.set_spec(spec_from_dict(conv.constraint) if conv.constraint else None)
        self.constraint_bar.show_error("")
        self.chat.end_reply()
        self.refresh_sidebar()

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

    # ---- the chat ----

    def render_chat(self) -> None:
        c = self.controller
        path = c.path()
        results = {m.meta.get("tool_call_id"): m.content for m in path if m.role == "tool"}
        last_reply = max((i for i, m in enumerate(path) if m.role == "assistant"), default=-1)
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
        builtins = frozenset(builtin_names()) if self._builtins else frozenset()
        self.chat.set_entries(entries, interactive=not c.busy, builtins=builtins)
        streaming_here = c.busy and c.reply_conversation_id == c.conversation_id
        if streaming_here and self.chat.reply is None:
            self._reply_started()
            if c.job is not None and c.reply_text():
                self.chat.update_reply(c.reply_text())
        elif not streaming_here and self.chat.reply is not None:
            self.chat.end_reply()
        self._update_title()

    def send(self, text: str) -> None:
        self.settings_panel.flush()
        if self.controller.send(text):
            self.composer.edit.clear()
            self.notice.hide()

    def stop(self) -> None:
        self.controller.stop()

    def regenerate(self) -> None:
        self.settings_panel.flush()
        self.controller.regenerate()

    def retry(self, message_id: int) -> None:
        self.settings_panel.flush()
        self.controller.retry(message_id)

    def continue_reply(self, message_id: int) -> None:
        self.settings_panel.flush()
        self.controller.continue_reply(message_id)

    def _edit(self, message_id: int, text: str) -> None:
        self.settings_panel.flush()
        self.controller.edit(message_id, text)

    def _reply_started(self) -> None:
        conv = self.controller.conversation
        tag = ""
        if conv is not None and conv.constraint and not self.controller.reply_prefix:
            tag = describe_constraint(conv.constraint["kind"], conv.constraint.get("name", ""))
        if conv is not None and describe_tools(conv.tools) and not self.controller.reply_prefix:
            tag = describe_tools(conv.tools)
        reply = self.chat.begin_reply(tag, prefix=self.controller.reply_prefix)
        if self.bridge.loading:
            reply.set_status("Waiting for the model to finish loading…")
        elif self.bridge.model_info is None:
            reply.set_status("Waiting for a model…")

    def _reply_finished(self, _result: object) -> None:
        self.chat.end_reply(keep_body=True)
        self.update_status()  # the prompt cache just changed

    def _busy_changed(self, busy: bool) -> None:
        self.composer.set_busy(busy)
        self.chat.set_interactive(not busy)
        self.actions_by_name["regenerate"].setEnabled(not busy)
        if not busy:
            self.composer.edit.setFocus()

    def use_example(self, example: Example) -> None:
        """Send an example prompt, after applying the grammar or tool it shows off."""
        if example.tool:
            conv = self.controller.conversation
            if conv is not None and example.tool not in conv.tools.builtins:
                from dataclasses import replace

                config = replace(conv.tools, builtins=[*conv.tools.builtins, example.tool])
                self._tools_chip_changed(config)
        if example.grammar:
            path = str(resources_dir() / "grammars" / example.grammar)
            self.open_constraint_file(path, then=lambda: self.send(example.prompt))
            return
        self.send(example.prompt)

    # ---- model ----

    def load_model(self, spec: str) -> None:
        self.notice.hide()
        self._loading_spec = spec
        self.loading_strip.start(_spec_name(spec))
        self.composer.set_waiting_for_model(True)
        self.bridge.load_model(spec)

    def _model_loaded(self, info: ModelInfo) -> None:
        self._model_name = info.name
        self._loaded_spec = self.bridge.model_spec or self._loaded_spec
        self.model_bar.loaded(info.name)
        self.loading_strip.finish()
        self.composer.set_waiting_for_model(False)
        self.chat.welcome.set_model_name(info.name)
        if self._loaded_spec and not self.prefs.default_model:
            self.store.set_setting("model_spec", self._loaded_spec)
        if self.prefs.kv_budget_mb:
            self._apply_cache_budget()
        plan = self.bridge.memory_plan()
        if getattr(plan, "warning", None):
            self.notice.show_message(plan.warning, "error")
        reply = self.chat.reply
        if reply is not None and not self.chat.reply_text_shown:
            reply.set_status("Reading your message…")
        run_task(
            lambda: sampling_defaults(info.path, info.name),
            lambda defaults, _error: self._set_model_defaults(info, defaults),
        )
        self.update_status()

    def _set_model_defaults(self, info: ModelInfo, defaults: ModelDefaults | None) -> None:
        if self._model_name != info.name:
            return  # another model was loaded meanwhile
        self.model_defaults = defaults or ModelDefaults()
        self.controller.model_defaults = dict(self.model_defaults.values)
        self.settings_panel.set_model_defaults(
            self.model_defaults.values, info.name, self.model_defaults.source
        )

    def _model_failed(self, message: str) -> None:
        # A failed load leaves no model loaded: say so, and offer the one that worked.
        failed = self._loading_spec or ""
        self._model_name = getattr(self.bridge.model_info, "name", None)
        self.model_bar.failed(self._model_name)
        self.loading_strip.finish()
        self.composer.set_waiting_for_model(False)
        previous = self._loaded_spec if self._loaded_spec and self._loaded_spec != failed else None
        text = f"The model could not be loaded: {message}"
        if self._model_name is None:
            text += " No model is loaded now."
        if previous:
            name = _spec_name(previous)
            self.notice.show_message(
                text, "error", f"Load {name} again", lambda: self.load_model(previous)
            )
        else:
            self.notice.show_message(text, "error")
        self.update_status()

    def _apply_cache_budget(self) -> None:
        mb = self.prefs.kv_budget_mb
        self.bridge.set_cache_budget(mb * 1024 * 1024 if mb > 0 else None)

    def show_preferences(self) -> None:
        dialog = PreferencesDialog(
            self.prefs,
            presets=self.store.presets(),
            builtin_tools=self._builtins,
            current_model=self._loaded_spec or "",
            parent=self,
        )
        dialog.changed.connect(self.apply_preferences)
        self.preferences_dialog = dialog
        dialog.open()

    def apply_preferences(self, prefs: Preferences) -> None:
        """Apply and remember the user's preferences at once."""
        old, self.prefs = self.prefs, prefs
        prefs.save(self.store)
        self.controller.new_chat_settings = prefs.new_chat
        self.controller.new_chat_tools = prefs.new_chat_tools
        if prefs.default_model:
            self.store.set_setting("model_spec", prefs.default_model)
        elif self._loaded_spec:
            self.store.set_setting("model_spec", self._loaded_spec)
        if prefs.appearance != old.appearance:
            theme.apply_appearance(prefs.appearance)
        if prefs.chat_font_pt != old.chat_font_pt:
            theme.set_chat_pt(prefs.chat_font_pt)
            self.restyle()
            self.chat.restyle()
            self.composer.restyle()
        if prefs.kv_budget_mb != old.kv_budget_mb:
            self._apply_cache_budget()

    def update_status(self) -> None:
        info = self.bridge.model_info
        if self.bridge.loading:
            self.model_label.setText("Loading model…")
        elif info is not None:
            self.model_label.setText(f"{info.name} · {format_bytes(info.weights_bytes)}")
        else:
            self.model_label.setText("No model")
        stats = self.bridge.cache_stats()
        plan = self.bridge.memory_plan()
        if stats:
            used = format_bytes(stats.get("bytes", 0))
            budget = getattr(plan, "kv_budget_bytes", None) or stats.get("budget_bytes")
            text = f"Reuse memory {used}" + (f" of {format_bytes(budget)}" if budget else "")
            self.cache_label.setText(text)
        else:
            self.cache_label.setText("")

    # ---- export, window state, drops ----

    def export(self, fmt: str) -> None:
        """Save the chat; the dialog suggests its title, in the folder used last time."""
        cid = self.controller.conversation_id
        conv = self.controller.conversation
        if cid is None or conv is None:
            return
        suffix = ".md" if fmt == "md" else ".json"
        folder = self.store.get_setting("export_folder") or str(Path.home())
        name = _UNSAFE_FILENAME.sub("-", conv.title).strip(" .-") or "chat"
        path, _ = QFileDialog.getSaveFileName(
            self,
            "Export chat",
            str(Path(folder) / (name + suffix)),
            "Markdown (*.md)" if fmt == "md" else "JSON (*.json)",
        )
        if not path:
            return
        text = (
            to_markdown(self.store, cid)
            if fmt == "md"
            else json.dumps(to_json(self.store, cid), indent=2, ensure_ascii=False)
        )
        try:
            Path(path).write_text(text, encoding="utf-8")
        except OSError as exc:
            self.notice.show_message(f"Export failed: {exc}", "error")
            return
        self.store.set_setting("export_folder", str(Path(path).parent))
        self.statusBar().showMessage(f"Exported to {path}", 5000)

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
            self.open_files(paths)

    def quit(self) -> None:
        self.close()
        QApplication.quit()

    def about(self) -> None:
        QMessageBox.about(
            self,
            "About Corral",
            f"<h3>Corral {__version__}</h3><p>A local chat app whose replies always fit your "
            "schemas, grammars and tools.</p>",
        )


def _spec_name(spec: str) -> str:
    """A model spec as people read it."""
    if spec == "default":
        return "SmolLM2-135M-Instruct"
    return Path(spec).name or spec
