"""The app's parts below the window, built once and wired together (AppCore): the store,
the engine bridge, the chat controller, MCP, and the user's preferences applied to them.
app.application builds it and hands it to the main window; it imports no views."""

from __future__ import annotations

from PySide6.QtCore import QObject, Signal

from app.chat.controller import LOGPROB_ALTERNATIVES, ChatController
from app.jobs.engine_bridge import EngineBridge
from app.jobs.mcp_calls import McpCalls
from app.jobs.mcp_job import McpBridge
from app.preferences import Preferences
from app.secrets import SERVER_API_KEY, SecretStore, migrate_setting
from app.store import Store
from engine.mcp.config import default_config_path

# The store's setting of what the local pool's models may hold together, in GB (0: the
# machine's budget); set in Preferences → Server (app/views/server/pool_panel.py).
MODEL_MEMORY_SETTING = "model_memory_gb"


class AppCore(QObject):
    """The app's parts below the window, built once and wired together: the store, the
    secrets (the server's key, in the system's keychain), the engine bridge, the chat
    controller, MCP (its bridge, and its calls as the controller's tool source), and the
    user's Preferences applied to them. `set_preferences` applies
    and saves new ones; `preferencesChanged(new, old)` tells the views (app.application
    restyles them; the window stores the model to start with)."""

    preferencesChanged = Signal(object, object)

    def __init__(self, store: Store, bridge: EngineBridge, mcp: McpBridge | None = None) -> None:
        super().__init__()
        self.store = store
        self.bridge = bridge
        # secrets (the server's key) in the keychain; an older Corral's, out of the database
        self.secrets = SecretStore(store.path.parent)
        migrate_setting(store, self.secrets, "server_api_key", SERVER_API_KEY)
        self.controller = ChatController(store, bridge, self)
        self.mcp = mcp if mcp is not None else McpBridge(store, default_config_path(), self)
        self.mcp_calls = McpCalls(self.controller, self.mcp, self)
        self.controller.tool_source = self.mcp_calls
        self.mcp_calls.runningChanged.connect(self.controller.set_tools_running)
        self.prefs = Preferences.load(store)
        self._apply(self.prefs, None)
        gb = store.get_setting(MODEL_MEMORY_SETTING, 0)  # Preferences → Server's models
        if isinstance(gb, int | float) and gb > 0:
            bridge.set_model_memory_limit(int(gb * (1 << 30)))

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
        if old is None or prefs.kv_bits != old.kv_bits:
            self.bridge.set_kv_bits(prefs.kv_bits)
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
