"""The Preferences dialog opened from the main window, and what the window itself does when
the preferences change (AppCore applies them to the chat and the engine): the text size
restyles the window, and the model to start with is remembered."""

from __future__ import annotations

from app.preferences import Preferences
from app.views.common.keyboard import guard_text_boxes
from app.views.common.wheel_guard import guard_wheel
from app.views.main.parts import WindowParts
from app.views.preferences.dialog import PreferencesDialog
from app.views.server.pool_panel import PoolPanel


class PreferencesActions:
    """The main window's Preferences: the dialog (`dialog`, once opened) and its effects."""

    def __init__(self, window: WindowParts) -> None:
        self.window = window
        self.dialog: PreferencesDialog | None = None

    def show(self) -> None:
        w = self.window
        server = w.server.preferences_section()
        distributed = w.distributed.preferences_section()
        dialog = PreferencesDialog(
            w.prefs,
            presets=w.store.presets(),
            builtin_tools=w.builtins,
            current_model=w.models.loaded_spec or "",
            parent=w.window(),
            sections=[("", server), ("", PoolPanel(w.bridge, w.store))],  # titled by their boxes
            model_sections=[distributed],
            model_defaults=w.controller.model_defaults,
            model_name=getattr(w.bridge.model_info, "name", ""),
        )
        dialog.changed.connect(w.core.set_preferences)
        # The server restarts on a new port or key: once, when the window closes, not for
        # every keystroke in the port field.
        dialog.finished.connect(lambda _result: w.server.apply(server))
        # Switching to or from a group reloads the model: also once, when the window closes.
        dialog.finished.connect(lambda _result: w.distributed.apply(distributed))
        dialog.finished.connect(lambda _result: w.keys.focus_composer())
        self.dialog = dialog
        guard_text_boxes(dialog)
        guard_wheel(dialog)
        dialog.open()

    def changed(self, prefs: Preferences, old: Preferences) -> None:
        """New preferences were applied: the window's own part."""
        w = self.window
        if prefs.default_model:
            w.store.set_setting("model_spec", prefs.default_model)
        elif w.models.loaded_spec:
            w.store.set_setting("model_spec", w.models.loaded_spec)
        if prefs.chat_font_pt != old.chat_font_pt:
            w.restyle()
            w.chat.restyle()
            w.composer.restyle()
