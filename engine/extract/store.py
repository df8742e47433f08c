"""Extraction jobs and their rows, in SQLite, written as each row finishes.

A job is data first: its schema, instruction and settings, and one row per document (or per
page window of a long document). The CLI, the app's Extract window and the Batch API read
the same rows; resuming a job is running what is still pending. A row remembers its file's
content digest, so adding the same files again keeps the rows of unchanged files and reads
a changed one again. A result is written only over a pending row, in one statement, so no
row is ever completed twice.

A row is `valid` only when the model wrote its reply to the end and it validates; `filled`
when Corral's closing policy ended it to fit (it validates, but the values named by its
`filled` JSON pointers are Corral's, not the document's); `incomplete` when it was cut
short or does not validate; `unreadable` (the document) or `failed` (the engine refused).
"""

from __future__ import annotations

import json
import os
import threading
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import platformdirs

from engine.database import open_database, transaction
from engine.types import filled_names

DB_NAME = "extract.sqlite3"
STATUSES = ("pending", "valid", "filled", "incomplete", "unreadable", "failed")
DONE = ("valid", "filled", "incomplete", "unreadable", "failed")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS jobs (
    id TEXT PRIMARY KEY,
    created REAL NOT NULL,
    name TEXT NOT NULL,
    schema TEXT NOT NULL,
    instruction TEXT NOT NULL,
    settings TEXT NOT NULL,
    state TEXT NOT NULL DEFAULT 'ready'
);
CREATE TABLE IF NOT EXISTS rows (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    job TEXT NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,
    path TEXT NOT NULL,
    digest TEXT NOT NULL,
    first_page INTEGER,
    last_page INTEGER,
    status TEXT NOT NULL DEFAULT 'pending',
    result TEXT,
    error TEXT,
    tokens INTEGER NOT NULL DEFAULT 0,
    completions INTEGER NOT NULL DEFAULT 0,
    finished REAL,
    filled TEXT
);
CREATE INDEX IF NOT EXISTS rows_job ON rows (job, status);
"""
# What an older database's rows become: the filled values' column, and the rows it called
# valid though the closing policy had ended them (they said so only in their note).
_MIGRATE_FILLED = (
    "ALTER TABLE rows ADD COLUMN filled TEXT",
    "UPDATE rows SET status = 'filled', filled = '[]' WHERE status = 'valid' "
    "AND error LIKE '%closed to fit the reply''s token limit%'",
)


_ROW_QUERY = (
    "SELECT id, job, path, digest, first_page, last_page, status, result, error, tokens, "
    "completions, filled FROM rows"
)


def extract_dir() -> Path:
    """Where the job database lives: Corral's data folder (CORRAL_EXTRACT_DIR overrides it)."""
    own = os.environ.get("CORRAL_EXTRACT_DIR")
    if own:
        return Path(own)
    return Path(platformdirs.user_data_dir("Corral", "Corral"))


@dataclass(frozen=True)
class JobSettings:
    """How a job's rows are decoded: reply length (None: each row's estimated from the
    schema and its document, `engine.extract.budget`), and an optional page range for
    every document."""

    max_tokens: int | None = None
    pages: tuple[int, int] | None = None

    def to_json(self) -> str:
        return json.dumps({"max_tokens": self.max_tokens, "pages": self.pages})

    @classmethod
    def from_json(cls, text: str) -> JobSettings:
        data = json.loads(text)
        pages = data.get("pages")
        tokens = data.get("max_tokens", 512)  # jobs from before the estimate had 512
        return cls(
            None if tokens is None else int(tokens),
            (int(pages[0]), int(pages[1])) if pages else None,
        )


@dataclass(frozen=True)
class Job:
    id: str
    name: str
    schema: dict[str, Any]
    instruction: str
    settings: JobSettings
    state: str  # ready, paused, cancelled, done
    created: float


@dataclass(frozen=True)
class Row:
    """One document, or one page window of one (`pages` then names it)."""

    id: int
    job: str
    path: str
    digest: str
    first_page: int | None
    last_page: int | None
    status: str
    result: Any  # the reply as JSON (valid or not), None until there is one
    error: str | None
    tokens: int
    completions: int
    # JSON pointers of the values Corral filled (status `filled`), else empty
    filled: tuple[str, ...] = ()

    @property
    def filled_fields(self) -> list[str]:
        """The filled values as a reader names them (`date`, `items[0].amount`)."""
        return filled_names(list(self.filled))

    @property
    def status_text(self) -> str:
        """The status as a table shows it: `filled: date, amount` for a filled row."""
        if self.status == "filled" and self.filled:
            return f"filled: {', '.join(self.filled_fields)}"
        return self.status

    @property
    def page_range(self) -> tuple[int, int] | None:
        """(first, last) of a page window, None for a whole document."""
        if self.first_page is None or self.last_page is None:
            return None
        return self.first_page, self.last_page

    @property
    def pages(self) -> str | None:
        """ "3" or "1-4", None for a whole document."""
        if self.first_page is None:
            return None
        if self.first_page == self.last_page:
            return str(self.first_page)
        return f"{self.first_page}-{self.last_page}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "file": self.path,
            "pages": self.pages,
            "status": self.status,
            "data": self.result,
            "filled_paths": list(self.filled),
            "error": self.error,
        }


class JobStore:
    """The jobs database. Safe from any thread (one connection behind a lock)."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path or extract_dir() / DB_NAME
        self._lock = threading.Lock()
        self._db = open_database(self.path, _SCHEMA, foreign_keys=True)
        columns = {r[1] for r in self._db.execute("PRAGMA table_info(rows)")}
        if "filled" not in columns:
            with transaction(self._db) as db:
                for statement in _MIGRATE_FILLED:
                    db.execute(statement)

    def close(self) -> None:
        with self._lock:
            self._db.close()

    # ---- jobs ----

    def create_job(
        self,
        schema: dict[str, Any],
        *,
        name: str = "",
        instruction: str = "",
        settings: JobSettings | None = None,
        job_id: str | None = None,
    ) -> Job:
        job = Job(
            job_id or f"job_{uuid.uuid4().hex[:16]}",
            name or "extraction",
            schema,
            instruction,
            settings or JobSettings(),
            "ready",
            time.time(),
        )
        with self._lock:
            self._db.execute(
                "INSERT INTO jobs (id, created, name, schema, instruction, settings) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (
                    job.id,
                    job.created,
                    job.name,
                    json.dumps(schema),
                    instruction,
                    job.settings.to_json(),
                ),
            )
        return job

    def job(self, job_id: str) -> Job | None:
        with self._lock:
            found = self._db.execute(
                "SELECT id, name, schema, instruction, settings, state, created FROM jobs "
                "WHERE id = ?",
                (job_id,),
            ).fetchone()
        if found is None:
            return None
        jid, name, schema, instruction, settings, state, created = found
        return Job(
            jid, name, json.loads(schema), instruction, JobSettings.from_json(settings), state,
            created,
        )  # fmt: skip

    def jobs(self) -> list[Job]:
        with self._lock:
            ids = [r[0] for r in self._db.execute("SELECT id FROM jobs ORDER BY created DESC")]
        return [job for jid in ids if (job := self.job(jid)) is not None]

    def set_state(self, job_id: str, state: str) -> None:
        with self._lock:
            self._db.execute("UPDATE jobs SET state = ? WHERE id = ?", (state, job_id))

    def find_job(
        self, schema: dict[str, Any], instruction: str, settings: JobSettings
    ) -> Job | None:
        """The newest job with this schema, instruction and settings (what --resume continues)."""
        with self._lock:
            found = self._db.execute(
                "SELECT id FROM jobs WHERE schema = ? AND instruction = ? AND settings = ? "
                "ORDER BY created DESC LIMIT 1",
                (json.dumps(schema), instruction, settings.to_json()),
            ).fetchone()
        return self.job(found[0]) if found else None

    # ---- rows ----

    def add_documents(self, job_id: str, documents: Iterable[tuple[str, str]]) -> int:
        """Add (path, digest) documents to the job: a path already there with the same
        digest keeps its rows; with another digest (the file changed) its rows are replaced
        by one pending row. Returns how many rows were added."""
        added = 0
        with self._lock, transaction(self._db) as db:
            for path, digest in documents:
                known = {
                    d for (d,) in db.execute(
                        "SELECT DISTINCT digest FROM rows WHERE job = ? AND path = ?",
                        (job_id, path),
                    )
                }  # fmt: skip
                if known == {digest}:
                    continue
                db.execute("DELETE FROM rows WHERE job = ? AND path = ?", (job_id, path))
                db.execute(
                    "INSERT INTO rows (job, path, digest) VALUES (?, ?, ?)",
                    (job_id, path, digest),
                )
                added += 1
        return added

    def split(self, row_id: int, windows: list[tuple[int, int]]) -> list[int]:
        """Replace the pending whole-document row `row_id` by one pending row per page
        window (first, last); returns the new rows' ids, in page order."""
        ids: list[int] = []
        with self._lock, transaction(self._db) as db:
            job, path, digest = db.execute(
                "SELECT job, path, digest FROM rows WHERE id = ? AND status = 'pending'",
                (row_id,),
            ).fetchone()
            db.execute("DELETE FROM rows WHERE id = ?", (row_id,))
            for first, last in windows:
                cursor = db.execute(
                    "INSERT INTO rows (job, path, digest, first_page, last_page) "
                    "VALUES (?, ?, ?, ?, ?)",
                    (job, path, digest, first, last),
                )
                ids.append(int(cursor.lastrowid or 0))
        return ids

    def finish(
        self,
        row_id: int,
        status: str,
        *,
        result: Any = None,
        error: str | None = None,
        tokens: int = 0,
        filled: list[str] | None = None,
    ) -> bool:
        """Write a pending row's outcome (`filled`: the JSON pointers Corral filled, for a
        `filled` row); False (nothing written) if it was done already."""
        if status not in DONE:
            raise ValueError(f"not a finished status: {status}")
        with self._lock:
            cursor = self._db.execute(
                "UPDATE rows SET status = ?, result = ?, error = ?, tokens = ?, filled = ?, "
                "completions = completions + 1, finished = ? WHERE id = ? AND status = 'pending'",
                (
                    status,
                    None if result is None else json.dumps(result),
                    error,
                    tokens,
                    json.dumps(filled) if filled is not None else None,
                    time.time(),
                    row_id,
                ),
            )
            return cursor.rowcount == 1

    def retry(self, job_id: str, statuses: tuple[str, ...] = ("failed",)) -> int:
        """Make the job's rows with these statuses pending again; how many."""
        marks = ",".join("?" * len(statuses))
        with self._lock:
            cursor = self._db.execute(
                f"UPDATE rows SET status = 'pending', result = NULL, error = NULL, filled = NULL "
                f"WHERE job = ? AND status IN ({marks})",
                (job_id, *statuses),
            )
            return cursor.rowcount

    def rows(self, job_id: str, status: str | None = None) -> list[Row]:
        query = _ROW_QUERY + " WHERE job = ?"
        params: tuple[Any, ...] = (job_id,)
        if status is not None:
            query += " AND status = ?"
            params += (status,)
        with self._lock:
            found = self._db.execute(query + " ORDER BY path, first_page, id", params).fetchall()
        return [_row(r) for r in found]

    def row(self, row_id: int) -> Row | None:
        with self._lock:
            found = self._db.execute(_ROW_QUERY + " WHERE id = ?", (row_id,)).fetchone()
        return None if found is None else _row(found)

    def counts(self, job_id: str) -> dict[str, int]:
        """Rows of the job by status (every status present, zeros included)."""
        with self._lock:
            found = dict(
                self._db.execute(
                    "SELECT status, COUNT(*) FROM rows WHERE job = ? GROUP BY status", (job_id,)
                ).fetchall()
            )
        return {s: int(found.get(s, 0)) for s in STATUSES}


def _row(r: tuple[Any, ...]) -> Row:
    result = None if r[7] is None else json.loads(r[7])
    filled = tuple(json.loads(r[11])) if r[11] else ()
    return Row(r[0], r[1], r[2], r[3], r[4], r[5], r[6], result, r[8], r[9], r[10], filled)
