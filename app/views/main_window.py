"""The main window: sidebar, chat, constraint bar and composer; settings and tools docks;
model bar, menus and status bar. It wires the views to the ChatController and the engine
bridge and never waits on either."""

from __future__ import annotations

import json
from pathlib import Path

from PySide6.QtCore import QByteArray, QEvent, Qt, QTimer
from PySide6.QtGui import QCloseEvent, QDragEnterEvent, QDropEvent, QGuiApplication, QIcon
from PySide6.QtWidgets import (
    QApplication,
    QDockWidget,
    QFileDialog,
    QLabel,
    QMainWindow,
    QMessageBox,
    QSplitter,
    QToolBar,
    QVBoxLayout,
    QWidget,
)

from app import __version__
from app.controller import ChatController
from app.jobs.engine_bridge import EngineBridge
from app.jobs.mcp_job import McpBridge
from app.paths import app_icon_path
from app.qt_compat import guard_refcounts
from app.store import Store
from app.store.export import to_json, to_markdown
from app.tools import builtin_names, builtin_tools
from app.views.chat_view import ChatView, Entry
from app.views.composer import Composer, dropped_paths
from app.views.constraint_widgets import ConstraintBar
from app.views.format import format_bytes
from app.views.mcp_setup import install_mcp
from app.views.menus import build_menus
from app.views.model_bar import ModelBar
from app.views.notice_bar import NoticeBar
from app.views.preferences import PreferencesDialog
from app.views.server_controls import ServerControls
from app.views.settings_panel import SettingsPanel
from app.views.sidebar import Sidebar
from app.views.theme import STYLE_SHEET
from app.views.tools_panel import ToolsPanel
from app.views.window_actions import WindowActions
from engine.types import ConstraintSpec, ModelInfo

DEFAULT_SIZE = (1180, 780)
STATUS_INTERVAL_MS = 1000


class MainWindow(WindowActions, QMainWindow):
    def __init__(self, store: Store, bridge: EngineBridge, mcp: McpBridge | None = None) -> None:
        super().__init__()
        guard_refcounts()  # before the thousands of Qt calls a session makes
        self.store = store
        self.bridge = bridge
        self.controller = ChatController(store, bridge, self)
        self._model_name: str | None = None
        self.setWindowTitle("Corral")
        self.setObjectName("mainWindow")
        if app_icon_path().exists():
            self.setWindowIcon(QIcon(str(app_icon_path())))
        self._restyling = False
        self.setStyleSheet(STYLE_SHEET)
        self.setAcceptDrops(True)
        self._build()
        self.actions_by_name = build_menus(self)
        self._connect()
        self.mcp = install_mcp(self, mcp)  # MCP servers start with self.mcp.start()
        self._builtins = builtin_tools()
        self.tools_panel.set_builtins(self._builtins)
        self.settings_panel.set_presets(store.presets())
        self._restore_state()
        self._open_initial_conversation()
        self.server.restore()
        self._status_timer = QTimer(self, interval=STATUS_INTERVAL_MS)
        self._status_timer.timeout.connect(self.update_status)
        self._status_timer.start()
        if bridge.model_info is not None:  # an engine handed over already loaded
            self._model_loaded(bridge.model_info)
        self.update_status()

    # ---- construction ----

    def _build(self) -> None:
        self.sidebar = Sidebar(self)
        self.notice = NoticeBar(self)
        self.chat = ChatView(self)
        self.constraint_bar = ConstraintBar(self)
        self.composer = Composer(self)
        right = QWidget(self)
        column = QVBoxLayout(right)
        column.setContentsMargins(0, 0, 0, 0)
        column.setSpacing(0)
        column.addWidget(self.notice)
        column.addWidget(self.chat, 1)
        bottom = QWidget(right)
        bottom_layout = QVBoxLayout(bottom)
        bottom_layout.setContentsMargins(12, 8, 12, 12)
        bottom_layout.addWidget(self.constraint_bar)
        bottom_layout.addWidget(self.composer)
        column.addWidget(bottom)
        self.splitter = QSplitter(Qt.Orientation.Horizontal, self)
        self.splitter.addWidget(self.sidebar)
        self.splitter.addWidget(right)
        self.splitter.setStretchFactor(1, 1)
        self.splitter.setSizes([240, DEFAULT_SIZE[0] - 240])
        self.splitter.setChildrenCollapsible(False)
        self.setCentralWidget(self.splitter)

        self.model_bar = ModelBar(self)
        toolbar = QToolBar("Model", self)
        toolbar.setObjectName("modelToolbar")
        toolbar.setMovable(False)
        toolbar.addWidget(self.model_bar)
        self.addToolBar(Qt.ToolBarArea.TopToolBarArea, toolbar)

        self.settings_panel = SettingsPanel(self)
        self.settings_dock = self._dock("Chat Settings", "settingsDock", self.settings_panel)
        self.tools_panel = ToolsPanel(self)
        self.tools_dock = self._dock("Tools", "toolsDock", self.tools_panel)
        self.tabifyDockWidget(self.settings_dock, self.tools_dock)
        self.settings_dock.raise_()
        toolbar.addAction(self.settings_dock.toggleViewAction())
        toolbar.addAction(self.tools_dock.toggleViewAction())
        for dock in (self.settings_dock, self.tools_dock):
            dock.hide()

        self.model_label = QLabel("No model", self)
        self.cache_label = QLabel(self)
        self.cache_label.setObjectName("cacheLabel")
        self.statusBar().addPermanentWidget(self.model_label)
        self.statusBar().addPermanentWidget(self.cache_label)
        self.server = ServerControls(self, self.store, lambda: self.bridge.engine)
        width, height = DEFAULT_SIZE
        screen = QGuiApplication.primaryScreen()
        if screen is not None:  # a small screen gets most of it, not more than all of it
            available = screen.availableGeometry()
            width = min(width, int(available.width() * 0.92))
            height = min(height, int(available.height() * 0.92))
        self.resize(width, height)

    def _dock(self, title: str, name: str, widget: QWidget) -> QDockWidget:
        dock = QDockWidget(title, self)
        dock.setObjectName(name)
        dock.setWidget(widget)
        dock.setMinimumWidth(300)
        self.addDockWidget(Qt.DockWidgetArea.RightDockWidgetArea, dock)
        return dock

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
        c.chipsChanged.connect(lambda: self.constraint_bar.set_state(c.chip_state()))

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
        self.chat.branchStepped.connect(c.switch_branch)
        self.chat.toolResultSubmitted.connect(c.submit_tool_result)
        self.chat.toolRunRequested.connect(self.run_builtin_tool)

        self.constraint_bar.openFileRequested.connect(self.choose_constraint_file)
        self.constraint_bar.editorRequested.connect(self.open_constraint_editor)
        self.constraint_bar.anyJsonRequested.connect(
            lambda: self.apply_constraint(ConstraintSpec(kind="any_json", name="Any JSON"))
        )
        self.constraint_bar.removeRequested.connect(self.remove_constraint)

        self.settings_panel.changed.connect(self._settings_changed)
        self.settings_panel.presetSaved.connect(self._save_preset)
        self.settings_panel.presetDeleted.connect(self._delete_preset)
        self.tools_panel.changed.connect(self._tools_changed)
        self.tools_panel.loadFileRequested.connect(self.choose_tools_file)

        self.model_bar.loadRequested.connect(self.load_model)
        self.bridge.loadStarted.connect(self.model_bar.loading)
        self.bridge.loadProgress.connect(self.model_bar.progressed)
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

    # ---- conversations ----

    def refresh_sidebar(self) -> None:
        conversations = self.store.conversations(self.sidebar.query())
        self.sidebar.set_conversations(conversations, self.controller.conversation_id)

    def new_chat(self) -> None:
        self.settings_panel.flush()
        self.controller.new_conversation()
        self.composer.edit.setFocus()

    def _select_conversation(self, conversation_id: int) -> None:
        if conversation_id != self.controller.conversation_id:
            self.settings_panel.flush()
            self.controller.open_conversation(conversation_id)

    def _conversation_opened(self, conversation_id: int) -> None:
        conv = self.store.conversation(conversation_id)
        if conv is None:
            return
        self.settings_panel.set_settings(conv.settings)
        self.tools_panel.set_config(conv.tools)
        self.constraint_bar.set_state(self.controller.chip_state())
        self.constraint_bar.show_error("")
        self.chat.end_reply()
        self.setWindowTitle(f"{conv.title} — Corral")
        self.refresh_sidebar()

    def rename_chat(self) -> None:
        if self.controller.conversation_id is not None:
            self.sidebar.rename(self.controller.conversation_id)

    def delete_chat(self) -> None:
        if self.controller.conversation_id is not None:
            self.sidebar.confirm_delete(self.controller.conversation_id)

    def focus_search(self) -> None:
        self.sidebar.setVisible(True)
        self.sidebar.search.setFocus()
        self.sidebar.search.selectAll()

    def toggle_sidebar(self) -> None:
        self.sidebar.setVisible(not self.sidebar.isVisible())

    # ---- the chat ----

    def render_chat(self) -> None:
        c = self.controller
        path = c.path()
        results = {m.meta.get("tool_call_id"): m.content for m in path if m.role == "tool"}
        last_reply = max((i for i, m in enumerate(path) if m.role == "assistant"), default=-1)
        entries = [
            Entry(
                m,
                branch=c.branch_position(m),
                last_reply=i == last_reply,
                tool_results={k: v for k, v in results.items() if k},
            )
            for i, m in enumerate(path)
            if m.role != "tool"
        ]
        builtins = frozenset(builtin_names()) if self._builtins else frozenset()
        self.chat.set_entries(entries, interactive=not c.busy, builtins=builtins)
        streaming_here = c.busy and c.reply_conversation_id == c.conversation_id
        if streaming_here and self.chat.reply is None:
            self._reply_started()
            if c.job is not None and c.job.text:
                self.chat.update_reply(c.job.text)
        elif not streaming_here and self.chat.reply is not None:
            self.chat.end_reply()
        conv = c.conversation
        if conv is not None:
            self.setWindowTitle(f"{conv.title} — Corral")

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

    def _edit(self, message_id: int, text: str) -> None:
        self.settings_panel.flush()
        self.controller.edit(message_id, text)

    def _reply_started(self) -> None:
        conv = self.controller.conversation
        badge = ""
        if conv is not None and conv.constraint:
            badge = f"Constrained: {conv.constraint.get('name') or conv.constraint['kind']}"
        self.chat.begin_reply(badge)
        if not self.bridge.model_info:
            self.chat.reply.set_status("Waiting for the model to load…")  # type: ignore[union-attr]

    def _reply_finished(self, _result: object) -> None:
        self.chat.end_reply(keep_body=True)
        self.update_status()  # the prompt cache just changed

    def _busy_changed(self, busy: bool) -> None:
        self.composer.set_busy(busy)
        self.chat.set_interactive(not busy)
        self.actions_by_name["regenerate"].setEnabled(not busy)
        if not busy:
            self.composer.edit.setFocus()

    # ---- model ----

    def load_model(self, spec: str) -> None:
        self.notice.hide()
        self.bridge.load_model(spec)

    def _model_loaded(self, info: ModelInfo) -> None:
        self._model_name = info.name
        self.model_bar.loaded(info.name)
        if self.bridge.model_spec:
            self.store.set_setting("model_spec", self.bridge.model_spec)
        if self.store.get_setting("kv_budget_mb", 0):
            self._apply_cache_budget()
        plan = self.bridge.snapshot().memory
        if plan is not None and plan.warning:
            self.notice.show_message(plan.warning, "error")
        if self.chat.reply is not None and not self.chat.reply_text_shown:
            self.chat.reply.set_status("Reading the prompt…")
        self.update_status()

    def _model_failed(self, message: str) -> None:
        self.model_bar.failed(self._model_name)
        self.notice.show_message(f"The model could not be loaded: {message}", "error")
        self.update_status()

    def _apply_cache_budget(self) -> None:
        mb = int(self.store.get_setting("kv_budget_mb", 0) or 0)
        self.bridge.set_cache_budget(mb * 1024 * 1024 if mb > 0 else None)

    def show_preferences(self) -> None:
        server = self.server.preferences_section()
        kv_budget_mb = int(self.store.get_setting("kv_budget_mb", 0) or 0)
        dialog = PreferencesDialog(kv_budget_mb, self, sections=[server])
        if dialog.exec():
            self.store.set_setting("kv_budget_mb", dialog.kv_budget_mb())
            self._apply_cache_budget()
            self.server.apply(server)

    def update_status(self) -> None:
        info = self.bridge.model_info
        if self.bridge.loading:
            self.model_label.setText("Loading model…")
        elif info is not None:
            self.model_label.setText(f"{info.name} · {format_bytes(info.weights_bytes)}")
        else:
            self.model_label.setText("No model")
        snapshot = self.bridge.snapshot()  # published by the engine thread: safe to read here
        if snapshot.model is not None:
            stats = snapshot.cache
            budget = snapshot.memory.kv_budget_bytes if snapshot.memory else stats.budget_bytes
            text = f"KV cache {format_bytes(stats.bytes)}"
            text += f" of {format_bytes(budget)}" if budget else ""
            entries = stats.entries
            self.cache_label.setText(text + f" · {entries} entr{'y' if entries == 1 else 'ies'}")
        else:
            self.cache_label.setText("")

    # ---- export, window state, drops ----

    def export(self, fmt: str) -> None:
        cid = self.controller.conversation_id
        conv = self.controller.conversation
        if cid is None or conv is None:
            return
        suffix = ".md" if fmt == "md" else ".json"
        path, _ = QFileDialog.getSaveFileName(self, "Export chat", conv.title + suffix)
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
        self.statusBar().showMessage(f"Exported to {path}", 5000)

    def _restore_state(self) -> None:
        geometry = self.store.get_setting("window_geometry")
        state = self.store.get_setting("window_state")
        if geometry:
            self.restoreGeometry(QByteArray.fromBase64(geometry.encode()))
        if state:
            self.restoreState(QByteArray.fromBase64(state.encode()))
        splitter = self.store.get_setting("window_splitter")
        if splitter:
            self.splitter.restoreState(QByteArray.fromBase64(splitter.encode()))

    def save_state(self) -> None:
        self.store.set_setting("window_geometry", self.saveGeometry().toBase64().toStdString())
        self.store.set_setting("window_state", self.saveState().toBase64().toStdString())
        self.store.set_setting(
            "window_splitter", self.splitter.saveState().toBase64().toStdString()
        )

    def changeEvent(self, event: QEvent) -> None:
        super().changeEvent(event)
        if event.type() == QEvent.Type.PaletteChange and not self._restyling:
            # palette(...) in a style sheet is resolved when the sheet is applied: re-apply
            # it so a switch between light and dark mode recolours everything.
            self._restyling = True
            self.setStyleSheet("")
            self.setStyleSheet(STYLE_SHEET)
            self._restyling = False

    def closeEvent(self, event: QCloseEvent) -> None:
        self.settings_panel.flush()
        self.save_state()
        self.controller.stop()
        self.server.shutdown()
        self.mcp.close()  # no server outlives the window
        super().closeEvent(event)

    def dragEnterEvent(self, event: QDragEnterEvent) -> None:
        if dropped_paths(event.mimeData()):
            event.acceptProposedAction()

    def dropEvent(self, event: QDropEvent) -> None:
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
