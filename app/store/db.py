"""The SQLite connection and its versioned schema.

The database runs in WAL mode with `synchronous=NORMAL`, and every change is committed as it
happens, so killing the app loses at most the reply being generated. `PRAGMA user_version`
records how many entries of MIGRATIONS have been applied; a new schema version is a new
entry appended to that list, never an edit of an old one.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

Migration = Callable[[sqlite3.Connection], None]


def _run(db: sqlite3.Connection, script: str) -> None:
    # Statement by statement: executescript() would commit the migration's transaction.
    for statement in script.split(";"):
        if statement.strip():
            db.execute(statement)


def _v1_initial(db: sqlite3.Connection) -> None:
    _run(
        db,
        """
        CREATE TABLE conversations (
            id INTEGER PRIMARY KEY,
            title TEXT NOT NULL,
            created_at REAL NOT NULL,
            updated_at REAL NOT NULL,
            active_leaf_id INTEGER,
            settings TEXT NOT NULL DEFAULT '{}',
            constraint_spec TEXT,
            tools TEXT NOT NULL DEFAULT '{}'
        );
        CREATE TABLE messages (
            id INTEGER PRIMARY KEY,
            conversation_id INTEGER NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
            parent_id INTEGER REFERENCES messages(id) ON DELETE CASCADE,
            role TEXT NOT NULL,
            content TEXT NOT NULL,
            meta TEXT NOT NULL DEFAULT '{}',
            created_at REAL NOT NULL,
            visited_at REAL NOT NULL
        );
        CREATE INDEX messages_by_conversation ON messages(conversation_id);
        CREATE INDEX messages_by_parent ON messages(parent_id);
        CREATE TABLE settings (key TEXT PRIMARY KEY, value TEXT NOT NULL);
        CREATE TABLE presets (
            name TEXT PRIMARY KEY,
            system_prompt TEXT NOT NULL,
            builtin INTEGER NOT NULL DEFAULT 0
        );
        """,
    )


MIGRATIONS: list[Migration] = [_v1_initial]
SCHEMA_VERSION = len(MIGRATIONS)


def connect(path: str | Path) -> sqlite3.Connection:
    """Open (creating if needed) the database at `path` and bring its schema up to date."""
    if str(path) != ":memory:":
        Path(path).parent.mkdir(parents=True, exist_ok=True)
    db = sqlite3.connect(str(path), isolation_level=None)  # autocommit; explicit transactions
    db.row_factory = sqlite3.Row
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")
    db.execute("PRAGMA foreign_keys=ON")
    migrate(db)
    return db


def migrate(db: sqlite3.Connection) -> int:
    """Apply the migrations this database has not seen yet; return the schema version."""
    version = db.execute("PRAGMA user_version").fetchone()[0]
    if version > SCHEMA_VERSION:
        raise RuntimeError(
            f"the database has schema version {version}, newer than this app's "
            f"{SCHEMA_VERSION}; update Corral"
        )
    for index in range(version, SCHEMA_VERSION):
        db.execute("BEGIN IMMEDIATE")
        try:
            MIGRATIONS[index](db)
            db.execute(f"PRAGMA user_version = {index + 1}")
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
    return SCHEMA_VERSION
