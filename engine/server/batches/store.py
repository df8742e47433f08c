"""Batch files, batches and each batch's lines, in SQLite beside the files' bytes.

Uploaded files are kept as files in the batch folder (named by their id, checked to lie
inside it); a batch's input lines are copied into the database when the batch is created,
and each line's result is written there the moment it finishes, so a server that stops
(or crashes) goes on after a restart with the lines still pending and never runs a
finished line again. The output and error files are written when the batch ends.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from engine.database import open_database, transaction
from engine.files import check_inside, read_limited

# Batches that still have work: the worker picks them up, after a restart too.
OPEN_STATUSES = ("validating", "in_progress", "finalizing", "cancelling")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS files (
    id TEXT PRIMARY KEY,
    purpose TEXT NOT NULL,
    filename TEXT NOT NULL,
    bytes INTEGER NOT NULL,
    created_at INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS batches (
    id TEXT PRIMARY KEY,
    created_at INTEGER NOT NULL,
    data TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS lines (
    batch TEXT NOT NULL,
    line INTEGER NOT NULL,
    custom_id TEXT NOT NULL,
    body TEXT NOT NULL,
    done INTEGER NOT NULL DEFAULT 0,
    ok INTEGER NOT NULL DEFAULT 0,
    result TEXT,
    completions INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (batch, line)
);
"""


def batch_dir() -> Path:
    """The Batch API's folder: `batches` in Corral's data folder (CORRAL_BATCH_DIR
    overrides it)."""
    own = os.environ.get("CORRAL_BATCH_DIR")
    if own:
        return Path(own)
    from engine.server.config import data_dir

    return data_dir() / "batches"


def new_id(prefix: str) -> str:
    return f"{prefix}{uuid.uuid4().hex[:24]}"


class BatchStore:
    """Files, batches and lines. Safe from any thread; opened on first use."""

    def __init__(self, folder: Path | None = None) -> None:
        self.folder = folder or batch_dir()
        self._lock = threading.RLock()
        self._db: sqlite3.Connection | None = None

    @property
    def exists(self) -> bool:
        return (self.folder / "batches.sqlite3").exists()

    def _connect(self) -> sqlite3.Connection:
        if self._db is None:
            (self.folder / "files").mkdir(parents=True, exist_ok=True)
            self._db = open_database(self.folder / "batches.sqlite3", _SCHEMA)
        return self._db

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None

    # ---- files ----

    def _file_path(self, file_id: str) -> Path:
        return check_inside(self.folder / "files" / f"{file_id}.jsonl", self.folder)

    def add_file(self, data: bytes, filename: str, purpose: str) -> dict[str, Any]:
        """Keep `data` as a new file; its File object."""
        with self._lock:
            db = self._connect()
            file_id = new_id("file-")
            self._file_path(file_id).write_bytes(data)
            created = int(time.time())
            db.execute(
                "INSERT INTO files VALUES (?, ?, ?, ?, ?)",
                (file_id, purpose, filename, len(data), created),
            )
        return _file_json(file_id, purpose, filename, len(data), created)

    def file(self, file_id: str) -> dict[str, Any] | None:
        with self._lock:
            found = (
                self._connect()
                .execute(
                    "SELECT id, purpose, filename, bytes, created_at FROM files WHERE id = ?",
                    (file_id,),
                )
                .fetchone()
            )
        return _file_json(*found) if found else None

    def files(self) -> list[dict[str, Any]]:
        """Every file, newest first."""
        with self._lock:
            rows = (
                self._connect()
                .execute(
                    "SELECT id, purpose, filename, bytes, created_at FROM files "
                    "ORDER BY created_at DESC, id DESC"
                )
                .fetchall()
            )
        return [_file_json(*r) for r in rows]

    def delete_file(self, file_id: str) -> bool:
        """Remove a file (its row and its bytes); False if there is none."""
        with self._lock:
            cursor = self._connect().execute("DELETE FROM files WHERE id = ?", (file_id,))
            if cursor.rowcount != 1:
                return False
            self._file_path(file_id).unlink(missing_ok=True)
        return True

    def file_content(self, file_id: str, limit: int) -> bytes:
        return read_limited(self._file_path(file_id), limit, "batch file")

    # ---- batches ----

    def put_batch(self, batch: dict[str, Any]) -> None:
        with self._lock:
            self._connect().execute(
                "INSERT OR REPLACE INTO batches VALUES (?, ?, ?)",
                (batch["id"], batch["created_at"], json.dumps(batch)),
            )

    def add_batch(self, batch: dict[str, Any], lines: list[tuple[str, dict[str, Any]]]) -> None:
        """A new batch and its input lines (custom_id, body), in one transaction."""
        with self._lock, transaction(self._connect()) as db:
            db.execute(
                "INSERT INTO batches VALUES (?, ?, ?)",
                (batch["id"], batch["created_at"], json.dumps(batch)),
            )
            db.executemany(
                "INSERT INTO lines (batch, line, custom_id, body) VALUES (?, ?, ?, ?)",
                [(batch["id"], i, cid, json.dumps(body)) for i, (cid, body) in enumerate(lines)],
            )

    def batch(self, batch_id: str) -> dict[str, Any] | None:
        with self._lock:
            found = (
                self._connect()
                .execute("SELECT data FROM batches WHERE id = ?", (batch_id,))
                .fetchone()
            )
        return json.loads(found[0]) if found else None

    def batches(self, limit: int = 20, after: str | None = None) -> list[dict[str, Any]]:
        """Newest first; `after` a batch id to page from."""
        with self._lock:
            rows = (
                self._connect()
                .execute("SELECT data FROM batches ORDER BY created_at DESC, id DESC")
                .fetchall()
            )
        found = [json.loads(r[0]) for r in rows]
        if after is not None:
            ids = [b["id"] for b in found]
            found = found[ids.index(after) + 1 :] if after in ids else []
        return found[:limit]

    def open_batches(self) -> list[dict[str, Any]]:
        """Batches with work left, oldest first."""
        with self._lock:
            rows = (
                self._connect()
                .execute("SELECT data FROM batches ORDER BY created_at, id")
                .fetchall()
            )
        return [b for b in (json.loads(r[0]) for r in rows) if b["status"] in OPEN_STATUSES]

    # ---- lines ----

    def pending_lines(self, batch_id: str) -> list[tuple[int, str, dict[str, Any]]]:
        with self._lock:
            rows = (
                self._connect()
                .execute(
                    "SELECT line, custom_id, body FROM lines WHERE batch = ? AND done = 0 "
                    "ORDER BY line",
                    (batch_id,),
                )
                .fetchall()
            )
        return [(r[0], r[1], json.loads(r[2])) for r in rows]

    def finish_line(self, batch_id: str, line: int, ok: bool, result: dict[str, Any]) -> bool:
        """Write a pending line's output line; False if it was done already."""
        with self._lock:
            cursor = self._connect().execute(
                "UPDATE lines SET done = 1, ok = ?, result = ?, completions = completions + 1 "
                "WHERE batch = ? AND line = ? AND done = 0",
                (int(ok), json.dumps(result), batch_id, line),
            )
            return cursor.rowcount == 1

    def results(self, batch_id: str) -> list[tuple[int, bool, dict[str, Any]]]:
        """(line, ok, output line) of the finished lines, in input order."""
        with self._lock:
            rows = (
                self._connect()
                .execute(
                    "SELECT line, ok, result FROM lines WHERE batch = ? AND done = 1 ORDER BY line",
                    (batch_id,),
                )
                .fetchall()
            )
        return [(r[0], bool(r[1]), json.loads(r[2])) for r in rows]

    def line_counts(self, batch_id: str) -> dict[str, int]:
        with self._lock:
            total, completed, failed = (
                self._connect()
                .execute(
                    "SELECT COUNT(*), COALESCE(SUM(done AND ok), 0), "
                    "COALESCE(SUM(done AND NOT ok), 0) FROM lines WHERE batch = ?",
                    (batch_id,),
                )
                .fetchone()
            )
        return {"total": total, "completed": completed, "failed": failed}

    def completions(self, batch_id: str) -> dict[str, int]:
        """How often each line was completed (by custom_id): at most once, always."""
        with self._lock:
            rows = (
                self._connect()
                .execute("SELECT custom_id, completions FROM lines WHERE batch = ?", (batch_id,))
                .fetchall()
            )
        return dict(rows)


def _file_json(
    file_id: str, purpose: str, filename: str, size: int, created: int
) -> dict[str, Any]:
    return {
        "id": file_id,
        "object": "file",
        "bytes": size,
        "created_at": created,
        "filename": filename,
        "purpose": purpose,
        "status": "processed",
        "status_details": None,
    }
