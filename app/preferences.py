"""The user's app-wide preferences, kept in the store's settings table: appearance, chat
text size, the model to start with, the KV-cache budget, how many replies are written at
once, whether they are written speculatively, what a new chat starts from (system prompt,
sampling, built-in tools; a new chat never inherits a constraint), how JSON schemas are
followed (tight defaults, strict schemas, closing loops), and whether replies record their
token log-probabilities (a reply's token view, Inspect), and how much the log file holds."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from app.store import ChatSettings, Store, ToolsConfig
from engine.types import DEFAULT_MAX_ROWS, SchemaOptions

MAX_ROWS_LIMIT = 32  # the most replies at once the preference offers

KEYS = {
    "appearance": "appearance",
    "chat_font_pt": "chat_font_pt",
    "default_model": "default_model",
    "kv_budget_mb": "kv_budget_mb",
    "max_rows": "max_batch_rows",
    "new_chat": "new_chat_settings",
    "new_chat_tools": "new_chat_tools",
    "allow_extra_properties": "allow_extra_properties",
    "strict_schema": "strict_schema",
    "close_loops": "close_loops",
    "record_logprobs": "record_tokens",  # the stored key keeps its first name
    "speculative": "speculative_decoding",
    "kv_bits": "kv_cache_bits",
    "log_level": "log_level",
}
LOG_LEVELS = ("warnings", "info", "debug")  # engine.logs.LEVELS


@dataclass
class Preferences:
    appearance: str = "system"  # system | light | dark
    chat_font_pt: float | None = None  # None: a step above the system font
    default_model: str = ""  # a model spec; "" starts with the last model used
    kv_budget_mb: int = 0  # 0: automatic
    max_rows: int = DEFAULT_MAX_ROWS  # replies written side by side at most
    speculative: bool = True  # guess ahead from the conversation, verify in one pass
    kv_bits: int | None = None  # KV cache precision: 8 or 4 bits, None: the model's own
    new_chat: ChatSettings = field(default_factory=ChatSettings)
    new_chat_tools: ToolsConfig = field(default_factory=ToolsConfig)
    # JSON schemas: use all the freedom they leave (no tight defaults); refuse keywords
    # Corral cannot enforce instead of ignoring them with a warning; move a constrained
    # reply on (or close it) when it repeats itself inside a value
    allow_extra_properties: bool = False
    strict_schema: bool = False
    close_loops: bool = True
    # record each reply's token log-probabilities, for its token view (Inspect)
    record_logprobs: bool = True
    # what the log file holds (engine.logs): warnings, info, or debug (with message text)
    log_level: str = "warnings"

    @property
    def schema_options(self) -> SchemaOptions:
        return SchemaOptions(tight=not self.allow_extra_properties, lenient=not self.strict_schema)

    @classmethod
    def load(cls, store: Store) -> Preferences:
        prefs = cls()
        get = store.get_setting
        appearance = get(KEYS["appearance"], prefs.appearance)
        if appearance in ("system", "light", "dark"):
            prefs.appearance = appearance
        size = get(KEYS["chat_font_pt"])
        prefs.chat_font_pt = float(size) if isinstance(size, int | float) and size > 0 else None
        model = get(KEYS["default_model"], "")
        prefs.default_model = model if isinstance(model, str) else ""
        budget = get(KEYS["kv_budget_mb"], 0)
        prefs.kv_budget_mb = int(budget) if isinstance(budget, int | float) else 0
        rows = get(KEYS["max_rows"], DEFAULT_MAX_ROWS)
        if isinstance(rows, int) and 1 <= rows <= MAX_ROWS_LIMIT:
            prefs.max_rows = rows
        bits = get(KEYS["kv_bits"])
        prefs.kv_bits = bits if bits in (8, 4) else None
        prefs.new_chat = ChatSettings.from_dict(_dict(get(KEYS["new_chat"])))
        prefs.new_chat_tools = ToolsConfig.from_dict(_dict(get(KEYS["new_chat_tools"])))
        for name in (
            "allow_extra_properties",
            "strict_schema",
            "close_loops",
            "record_logprobs",
            "speculative",
        ):
            value = get(KEYS[name], getattr(prefs, name))
            if isinstance(value, bool):
                setattr(prefs, name, value)
        level = get(KEYS["log_level"], prefs.log_level)
        if level in LOG_LEVELS:
            prefs.log_level = level
        return prefs

    def save(self, store: Store) -> None:
        store.set_setting(KEYS["appearance"], self.appearance)
        store.set_setting(KEYS["chat_font_pt"], self.chat_font_pt)
        store.set_setting(KEYS["default_model"], self.default_model)
        store.set_setting(KEYS["kv_budget_mb"], self.kv_budget_mb)
        store.set_setting(KEYS["max_rows"], self.max_rows)
        store.set_setting(KEYS["kv_bits"], self.kv_bits)
        store.set_setting(KEYS["new_chat"], self.new_chat.to_dict())
        store.set_setting(KEYS["new_chat_tools"], self.new_chat_tools.to_dict())
        for name in (
            "allow_extra_properties",
            "strict_schema",
            "close_loops",
            "record_logprobs",
            "speculative",
        ):
            store.set_setting(KEYS[name], getattr(self, name))
        store.set_setting(KEYS["log_level"], self.log_level)


def _dict(value: Any) -> dict[str, Any] | None:
    return value if isinstance(value, dict) else None
