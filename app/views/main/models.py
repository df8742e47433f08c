"""What the main window does about the model: loading one (the loading strip, the model box,
what is really loaded after a failure and an offer to load the previous one again), each
model's recommended sampling, the KV budget from Preferences once a model is in, and the
status bar's model and cache figures."""

from __future__ import annotations

from pathlib import Path

from app.jobs.library_job import model_disk_size
from app.jobs.thread import run_task
from app.views.common.format import format_bytes
from app.views.library.model_menu import DEFAULT_NAME, remember
from app.views.main.parts import WindowParts
from engine.library.defaults import ModelDefaults, sampling_defaults
from engine.types import ModelInfo


class ModelActions:
    """The main window's model: which one is loaded or loading, and what follows a load."""

    def __init__(self, window: WindowParts) -> None:
        self.window = window
        self.bridge = window.bridge
        self.store = window.store
        self.defaults = ModelDefaults()  # the loaded model's recommended sampling
        self.name: str | None = None  # what is loaded now
        self.loaded_spec: str | None = None
        self.loading_spec: str | None = None

    def adopt_loaded(self) -> None:
        """An engine handed over with a model loaded already: show it as loaded."""
        if self.bridge.model_info is not None:
            self.loaded_spec = self.bridge.model_spec
            self.loaded(self.bridge.model_info)

    def reload(self) -> None:
        """Load the current model again (on another engine: this Mac, or a group)."""
        spec = self.loaded_spec or self.loading_spec or self.store.get_setting("model_spec")
        self.load(spec or "default")

    def load(self, spec: str) -> None:
        w = self.window
        w.notice.hide()
        self.loading_spec = spec
        w.loading_strip.start(spec_name(spec))
        w.composer.set_waiting_for_model(True)
        self.bridge.load_model(spec)

    def loaded(self, info: ModelInfo) -> None:
        w = self.window
        self.name = info.name
        self.loaded_spec = self.bridge.model_spec or self.loaded_spec
        w.model_bar.loaded(info.name)
        self._remember(info)
        w.loading_strip.finish()
        w.composer.set_waiting_for_model(False)
        w.files.model_loaded(info)  # the paperclip, for a model that reads images
        w.chat.welcome.set_model_name(info.name)
        w.settings_panel.set_reasoning(info.reasoning is not None)
        if self.loaded_spec and not w.prefs.default_model:
            self.store.set_setting("model_spec", self.loaded_spec)
        if w.prefs.kv_budget_mb:
            w.core.apply_cache_budget()
        plan = self.bridge.snapshot().memory
        if plan is not None and plan.warning:
            w.notice.show_message(plan.warning, "error")
        reply = w.chat.reply
        if reply is not None and not w.chat.reply_text_shown:
            reply.set_status("Reading your message…")
        run_task(
            lambda: sampling_defaults(info.path, info.name),
            lambda defaults, _error: self._set_defaults(info, defaults),
        )
        self.update_status()

    def _remember(self, info: ModelInfo) -> None:
        """Put the model first in the picker's recent list; measure its size on disk
        off the GUI thread, for the picker's label."""
        library = self.window.library
        spec = self.loaded_spec or info.path
        recents = remember(library.recent_models(), spec, info.path, info.name)
        self.store.set_setting("recent_models", recents)
        library.job.recent_paths = [str(r.get("path")) for r in recents]
        library.update_model_menu()
        library.job.refresh()  # a GGUF imported on first use is in the library now

        def sized(size: int | None, error: BaseException | None) -> None:
            if error is not None or not size:
                return  # the picker shows the name alone
            if self.store.closed:
                return  # measured after the window closed: nothing left to show it in
            self.window.model_bar.sized(info.name, size)
            current = self.bridge.model_info
            if current is not None and current.path == info.path:
                known = remember(library.recent_models(), spec, info.path, info.name, size)
                self.store.set_setting("recent_models", known)
                library.update_model_menu()

        run_task(lambda: model_disk_size(info.path), sized)

    def _set_defaults(self, info: ModelInfo, defaults: ModelDefaults | None) -> None:
        if self.name != info.name:
            return  # another model was loaded meanwhile
        self.defaults = defaults or ModelDefaults()
        self.window.controller.model_defaults = dict(self.defaults.values)
        self.window.settings_panel.set_model_defaults(
            self.defaults.values, info.name, self.defaults.source
        )

    def failed(self, message: str) -> None:
        # A failed load leaves no model loaded: say so, and offer the one that worked.
        w = self.window
        failed = self.loading_spec or ""
        self.name = getattr(self.bridge.model_info, "name", None)
        w.model_bar.failed(self.name)
        w.library.update_model_menu()
        w.loading_strip.finish()
        w.composer.set_waiting_for_model(False)
        # the model loaded before stays loaded (it is the pool's default again): no offer
        gone = self.name is None and self.loaded_spec and self.loaded_spec != failed
        previous = self.loaded_spec if gone else None
        text = f"The model could not be loaded: {message.rstrip()}"
        text += "" if text.endswith((".", "!", "?")) else "."  # a sentence may follow
        if self.name is None:
            text += " No model is loaded now."
        if previous:
            name = spec_name(previous)
            w.notice.show_message(text, "error", f"Load {name} again", lambda: self.load(previous))
        else:
            w.notice.show_message(text, "error")
        self.update_status()

    def update_status(self) -> None:
        w = self.window
        info = self.bridge.model_info
        # The picker names the model and its size on disk; this says what it takes in memory.
        if self.bridge.loading:
            w.model_label.setText("Loading model…")
        elif info is not None:
            w.model_label.setText(f"Model in memory: {format_bytes(info.weights_bytes)}")
            w.model_label.setToolTip(f"{info.name}: its weights in memory")
        else:
            w.model_label.setText("No model")
            w.model_label.setToolTip("")
        snapshot = self.bridge.snapshot()  # published by the engine thread: safe to read here
        if snapshot.model is not None:
            stats = snapshot.cache
            budget = snapshot.memory.kv_budget_bytes if snapshot.memory else stats.budget_bytes
            # one figure per label, each with its name; the disk part is in the tooltip
            text = f"Memory for reuse: {format_bytes(stats.bytes)}"
            text += f" of {format_bytes(budget)}" if budget else ""
            w.cache_label.setText(text)
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
            w.cache_label.setToolTip(tip + ".")
        else:
            w.cache_label.setText("")


def spec_name(spec: str) -> str:
    """A model spec as people read it."""
    if spec == "default":
        return DEFAULT_NAME
    return Path(spec).name or spec
