"""Persistence: conversations with branches, settings and presets in SQLite (WAL)."""

from app.store.records import ChatSettings, Conversation, Message, ToolsConfig
from app.store.store import DB_NAME, DEFAULT_TITLE, Store

__all__ = [
    "DB_NAME",
    "DEFAULT_TITLE",
    "ChatSettings",
    "Conversation",
    "Message",
    "Store",
    "ToolsConfig",
]
