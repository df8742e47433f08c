"""Stored responses (`store`, `previous_response_id`, GET and DELETE), in SQLite.

Each stored response keeps its JSON (what GET answers) and the conversation it ended
(its input, after any earlier response's, and its reply as chat messages), which a
request naming it by `previous_response_id` continues. The store is bounded: responses
older than `max_age_s` and the oldest beyond `max_count` are deleted as new ones arrive.
The file is opened on first use, so a server that never stores creates nothing.
"""

from __future__ import annotations

import base64
import json
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

from engine.types import ChatMessage, ImageInput

_SCHEMA = """
CREATE TABLE IF NOT EXISTS responses (
    id TEXT PRIMARY KEY,
    created REAL NOT NULL,
    response TEXT NOT NULL,
    conversation TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS responses_created ON responses (created);
"""


class ResponseStore:
    """Responses kept for later turns. Safe from any thread."""

    def __init__(self, path: Path, max_count: int = 1000, max_age_s: float = 30 * 86400) -> None:
        self.path = path
        self.max_count = max(1, max_count)
        self.max_age_s = max_age_s
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = None

    def _connect(self) -> sqlite3.Connection:
        if self._db is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
            db.executescript(_SCHEMA)
            self._db = db
        return self._db

    def put(self, response: dict[str, Any], conversation: list[ChatMessage]) -> None:
        """Keep `response` (by its id) with the conversation it ended; prune."""
        now = time.time()
        with self._lock:
            db = self._connect()
            db.execute(
                "INSERT OR REPLACE INTO responses VALUES (?, ?, ?, ?)",
                (
                    response["id"],
                    now,
                    json.dumps(response),
                    json.dumps(conversation, default=_image_json),
                ),
            )
            db.execute("DELETE FROM responses WHERE created < ?", (now - self.max_age_s,))
            db.execute(
                "DELETE FROM responses WHERE id NOT IN "
                "(SELECT id FROM responses ORDER BY created DESC LIMIT ?)",
                (self.max_count,),
            )

    def get(self, response_id: str) -> tuple[dict[str, Any], list[ChatMessage]] | None:
        """The response and its conversation, or None (never stored, deleted, expired)."""
        with self._lock:
            row = (
                self._connect()
                .execute(
                    "SELECT response, conversation FROM responses WHERE id = ? AND created >= ?",
                    (response_id, time.time() - self.max_age_s),
                )
                .fetchone()
            )
        if row is None:
            return None
        return json.loads(row[0]), json.loads(row[1], object_hook=_image_from_json)

    def delete(self, response_id: str) -> bool:
        """Delete a stored response; False if there was none."""
        with self._lock:
            cursor = self._connect().execute("DELETE FROM responses WHERE id = ?", (response_id,))
        return cursor.rowcount > 0

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None


def _image_json(value: Any) -> Any:
    """A conversation's images (ImageInput) as JSON: their bytes in base64."""
    if isinstance(value, ImageInput):
        return {"$image": base64.b64encode(value.data).decode("ascii"), "name": value.name}
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def _image_from_json(value: dict[str, Any]) -> Any:
    if set(value) == {"$image", "name"}:
        return ImageInput(base64.b64decode(value["$image"]), str(value["name"]))
    return value
