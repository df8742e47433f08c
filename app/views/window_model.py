"""What the main window does about the model and the app's settings: loading a model (the
loading strip, the model box, what is really loaded after a failure and an offer to load
the previous one again), each model's recommended sampling, Preferences applied at once,
the status bar, and export."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from PySide6.QtWidgets import QFileDialog, QMainWindow

from app.controller import INSPECT_ALTERNATIVES
from app.jobs.library_job import model_disk_size
from app.jobs.thread import run_task
from app.preferences import Preferences
from app.store.export import to_json, to_markdown
from app.views import theme
from app.views.format import format_bytes
from app.views.model_menu import DEFAULT_NAME, remember
from app.views.preferences import PreferencesDialog
from engine.library.defaults import ModelDefaults, sampling_defaults
from engine.types import ModelInfo, ToolDefinition

_UNSAFE_FILENAME = re.compile(r'[\\/:*?"<>|\x00-\x1f]+')


class WindowModel(QMainWindow):
    """MainWindow's model and settings side; uses its bridge, store, controller, bars and
    panels."""

    bridge: Any
    store: Any
    controller: Any
    prefs: Preferences
    model_defaults: ModelDefaults
    _model_name: str | None
    _loaded_spec: str | None
    _loading_spec: str | None
    _builtins: list[ToolDefinition]
    notice: Any
    chat: Any
    composer: Any
    model_bar: Any
    loading_strip: Any
    settings_panel: Any
    model_label: Any
    cache_label: Any
    restyle: Any
    server: Any
    distributed: Any
    preferences_dialog: PreferencesDialog
    library: Any
    recent_models: Any  # WindowLibrary's
    update_model_menu: Any

    def reload_model(self) -> None:
        """Load the current model again (on another engine: this Mac, or a group)."""
        spec = self._loaded_spec or self._loading_spec or self.store.get_setting("model_spec")
        self.load_model(spec or "default")

    def load_model(self, spec: str) -> None:
        self.notice.hide()
        self._loading_spec = spec
        self.loading_strip.start(spec_name(spec))
        self.composer.set_waiting_for_model(True)
        self.bridge.load_model(spec)

    def _model_loaded(self, info: ModelInfo) -> None:
        self._model_name = info.name
        self._loaded_spec = self.bridge.model_spec or self._loaded_spec
        self.model_bar.loaded(info.name)
        self._remember_model(info)
        self.loading_strip.finish()
        self.composer.set_waiting_for_model(False)
        self.chat.welcome.set_model_name(info.name)
        if self._loaded_spec and not self.prefs.default_model:
            self.store.set_setting("model_spec", self._loaded_spec)
        if self.prefs.kv_budget_mb:
            self._apply_cache_budget()
        plan = self.bridge.snapshot().memory
        if plan is not None and plan.warning:
            self.notice.show_message(plan.warning, "error")
        reply = self.chat.reply
        if reply is not None and not self.chat.reply_text_shown:
            reply.set_status("Reading your message…")
        run_task(
            lambda: sampling_defaults(info.path, info.name),
            lambda defaults, _error: self._set_model_defaults(info, defaults),
        )
        self.update_status()

    def _remember_model(self, info: ModelInfo) -> None:
        """Put the model first in the picker's recent list; measure its size on disk
        off the GUI thread, for the picker's label."""
        spec = self._loaded_spec or info.path
        recents = remember(self.recent_models(), spec, info.path, info.name)
        self.store.set_setting("recent_models", recents)
        self.library.recent_paths = [str(r.get("path")) for r in recents]
        self.update_model_menu()
        self.library.refresh()  # a GGUF imported on first use is in the library now

        def sized(size: int | None, error: BaseException | None) -> None:
            if error is not None or not size:
                return  # the picker shows the name alone
            self.model_bar.sized(info.name, size)
            current = self.bridge.model_info
            if current is not None and current.path == info.path:
                known = remember(self.recent_models(), spec, info.path, info.name, size)
                self.store.set_setting("recent_models", known)
                self.update_model_menu()

        run_task(lambda: model_disk_size(info.path), sized)

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
        self.update_model_menu()
        self.loading_strip.finish()
        self.composer.set_waiting_for_model(False)
        previous = self._loaded_spec if self._loaded_spec and self._loaded_spec != failed else None
        text = f"The model could not be loaded: {message.rstrip()}"
        text += "" if text.endswith((".", "!", "?")) else "."  # a sentence may follow
        if self._model_name is None:
            text += " No model is loaded now."
        if previous:
            name = spec_name(previous)
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
        server = self.server.preferences_section()
        distributed = self.distributed.preferences_section()
        dialog = PreferencesDialog(
            self.prefs,
            presets=self.store.presets(),
            builtin_tools=self._builtins,
            current_model=self._loaded_spec or "",
            parent=self,
            sections=[("", server)],  # titled by its own group box
            model_sections=[distributed],
        )
        dialog.changed.connect(self.apply_preferences)
        # The server restarts on a new port or key: once, when the window closes, not for
        # every keystroke in the port field.
        dialog.finished.connect(lambda _result: self.server.apply(server))
        # Switching to or from a group reloads the model: also once, when the window closes.
        dialog.finished.connect(lambda _result: self.distributed.apply(distributed))
        self.preferences_dialog = dialog
        dialog.open()

    def apply_preferences(self, prefs: Preferences) -> None:
        """Apply and remember the user's preferences at once."""
        old, self.prefs = self.prefs, prefs
        prefs.save(self.store)
        self.controller.new_chat_settings = prefs.new_chat
        self.controller.new_chat_tools = prefs.new_chat_tools
        self.controller.set_schema_preferences(prefs.schema_options, prefs.close_loops)
        self.controller.record_tokens = INSPECT_ALTERNATIVES if prefs.record_tokens else None
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
        if prefs.max_rows != old.max_rows:
            self.bridge.set_max_rows(prefs.max_rows)
        if prefs.speculative != old.speculative:
            self.bridge.set_speculative(prefs.speculative)
        if prefs.kv_bits != old.kv_bits:
            self.bridge.set_kv_bits(prefs.kv_bits)

    def update_status(self) -> None:
        info = self.bridge.model_info
        # The picker names the model and its size on disk; this says what it takes in memory.
        if self.bridge.loading:
            self.model_label.setText("Loading model…")
        elif info is not None:
            self.model_label.setText(f"Model memory {format_bytes(info.weights_bytes)}")
            self.model_label.setToolTip(f"{info.name}: its weights in memory")
        else:
            self.model_label.setText("No model")
            self.model_label.setToolTip("")
        snapshot = self.bridge.snapshot()  # published by the engine thread: safe to read here
        if snapshot.model is not None:
            stats = snapshot.cache
            budget = snapshot.memory.kv_budget_bytes if snapshot.memory else stats.budget_bytes
            text = f"Reuse memory {format_bytes(stats.bytes)}"
            text += f" of {format_bytes(budget)}" if budget else ""
            if stats.disk_budget_bytes:
                text += f", disk {format_bytes(stats.disk_bytes)}"
            self.cache_label.setText(text)
            kept = f"{stats.entries} earlier prompt{'s' if stats.entries != 1 else ''}"
            tip = (
                f"Memory holding what the model already read ({kept}), so the next reply "
                f"starts sooner. {stats.hit_rate:.0%} of prompt tokens were reused"
            )
            if stats.disk_budget_bytes:
                tip += (
                    f"; {stats.disk_entries} on disk ({format_bytes(stats.disk_bytes)} of "
                    f"{format_bytes(stats.disk_budget_bytes)}), {stats.disk_hit_rate:.0%} "
                    "read back from there"
                )
            if stats.kv_bits:
                tip += f". KV cache at {stats.kv_bits} bits"
            self.cache_label.setToolTip(tip + ".")
        else:
            self.cache_label.setText("")

    # ---- export ----

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


def spec_name(spec: str) -> str:
    """A model spec as people read it."""
    if spec == "default":
        return DEFAULT_NAME
    return Path(spec).name or spec
