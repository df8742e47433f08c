"""Persistence: conversations with branches, settings and presets in SQLite (WAL)."""

from app.store.records import (
    ChatSettings,
    Conversation,
    Message,
    MessageImage,
    NewImage,
    ToolsConfig,
)
from app.store.store import DB_NAME, DEFAULT_TITLE, Store

__all__ = [
    "DB_NAME",
    "DEFAULT_TITLE",
    "ChatSettings",
    "Conversation",
    "Message",
    "MessageImage",
    "NewImage",
    "Store",
    "ToolsConfig",
]
