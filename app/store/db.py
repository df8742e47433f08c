"""The SQLite connection and its versioned schema.

The database runs in WAL mode with `synchronous=NORMAL`, and every change is committed as it
happens, so killing the app loses at most the reply being generated. `PRAGMA user_version`
records how many entries of MIGRATIONS have been applied; a new schema version is a new
entry appended to that list, never an edit of an old one.

An existing file is first looked at read-only: a database written by a newer Corral, or
one SQLite finds damaged, is never written to (not even the journal mode). `open_or_set_aside`
then moves it, with its WAL files, to a dated name beside it and starts a fresh one, and
says where the old file is. A database another program holds locked gets a busy timeout,
then a DatabaseBusy error that says so.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path

BUSY_TIMEOUT_S = 10.0


class NewerDatabaseError(RuntimeError):
    """The database was written by a newer Corral (its schema version is higher)."""

    def __init__(self, version: int) -> None:
        super().__init__(
            f"the database has schema version {version}, newer than this app's "
            f"{SCHEMA_VERSION}; update Corral"
        )
        self.version = version


class DamagedDatabaseError(RuntimeError):
    """SQLite cannot read the file as a database, or finds it damaged."""


class DatabaseBusy(RuntimeError):
    """Another program holds the database locked (another Corral, a backup tool)."""


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


def _v2_token_logprobs(db: sqlite3.Connection) -> None:
    # Each recorded reply token's log-probabilities (a reply's token view), apart from the
    # messages: loaded only when a reply's tokens are shown or exported.
    _run(
        db,
        """
        CREATE TABLE token_logprobs (
            message_id INTEGER PRIMARY KEY REFERENCES messages(id) ON DELETE CASCADE,
            tokens TEXT NOT NULL
        );
        """,
    )


def _v3_logprobs_meta_key(db: sqlite3.Connection) -> None:
    # One name for recorded log-probabilities: a reply's meta counted them under "inspect"
    # (the UI's word); it is "logprobs" now, as in the engine, the server and the table
    # above. A row whose meta is not a JSON object is left as it is (the store repairs or
    # reports it when it reads it).
    rows = db.execute("SELECT id, meta FROM messages WHERE meta LIKE '%\"inspect\"%'").fetchall()
    for message_id, text in rows:
        try:
            meta = json.loads(text)
        except ValueError:
            continue
        if isinstance(meta, dict) and "inspect" in meta:
            meta["logprobs"] = meta.pop("inspect")
            db.execute("UPDATE messages SET meta = ? WHERE id = ?", (json.dumps(meta), message_id))


def _v4_message_images(db: sqlite3.Connection) -> None:
    # Images attached to a message, in order: the file lives in the data folder's images/
    # (named by the SHA-256 of its bytes, so one picture sent twice is kept once); `name` is
    # what the user attached ("receipt.png"). Rows go with their message; the file goes when
    # no row names it any more (Store.delete_conversation).
    _run(
        db,
        """
        CREATE TABLE message_images (
            message_id INTEGER NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
            position INTEGER NOT NULL,
            file TEXT NOT NULL,
            name TEXT NOT NULL,
            PRIMARY KEY (message_id, position)
        );
        CREATE INDEX message_images_by_file ON message_images(file);
        """,
    )


MIGRATIONS: list[Migration] = [
    _v1_initial,
    _v2_token_logprobs,
    _v3_logprobs_meta_key,
    _v4_message_images,
]
SCHEMA_VERSION = len(MIGRATIONS)


def _busy(exc: sqlite3.Error) -> bool:
    return getattr(exc, "sqlite_errorname", "") in ("SQLITE_BUSY", "SQLITE_LOCKED") or (
        "locked" in str(exc)
    )


def probe(path: Path) -> None:
    """Look at an existing database read-only: NewerDatabaseError, DamagedDatabaseError or
    DatabaseBusy if it cannot be used as it is; nothing is written."""
    try:
        db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=BUSY_TIMEOUT_S)
    except sqlite3.Error as exc:
        raise DamagedDatabaseError(f"{path}: cannot be opened ({exc})") from exc
    try:
        version = db.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            raise NewerDatabaseError(version)
        problems = [row[0] for row in db.execute("PRAGMA quick_check").fetchall()]
        if problems != ["ok"]:
            raise DamagedDatabaseError(f"{path}: damaged ({problems[0]})")
    except sqlite3.OperationalError as exc:
        if _busy(exc):
            raise DatabaseBusy(
                f"{path} is locked by another program (is Corral already running?)"
            ) from exc
        raise DamagedDatabaseError(f"{path}: cannot be read ({exc})") from exc
    except sqlite3.DatabaseError as exc:
        raise DamagedDatabaseError(f"{path}: not a database Corral can read ({exc})") from exc
    finally:
        db.close()


def connect(path: str | Path) -> sqlite3.Connection:
    """Open (creating if needed) the database at `path` and bring its schema up to date.

    An existing file is checked read-only first (`probe`), so a newer or damaged database
    raises before anything is written to it.
    """
    if str(path) != ":memory:":
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        if Path(path).exists():
            probe(Path(path))
    # autocommit (explicit transactions); waits for a lock instead of failing at once
    db = sqlite3.connect(str(path), isolation_level=None, timeout=BUSY_TIMEOUT_S)
    db.row_factory = sqlite3.Row
    try:
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
        db.execute("PRAGMA foreign_keys=ON")
        migrate(db)
    except sqlite3.OperationalError as exc:
        db.close()
        if _busy(exc):
            raise DatabaseBusy(
                f"{path} is locked by another program (is Corral already running?)"
            ) from exc
        raise
    return db


def set_aside(path: Path, reason: str) -> Path:
    """Move the database at `path` (and its -wal and -shm files) to a new dated name beside
    it, never over an existing file; return the new path of the database file."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    for n in range(1000):
        tag = f"{reason}-{stamp}" + (f"-{n}" if n else "")
        target = path.with_name(f"{path.stem}.{tag}{path.suffix}")
        companions = [Path(f"{target}{s}") for s in ("-wal", "-shm")]
        if not target.exists() and not any(c.exists() for c in companions):
            break
    else:
        raise RuntimeError(f"{path}: no free name to move it to")
    for suffix in ("-wal", "-shm"):
        old = Path(f"{path}{suffix}")
        if old.exists():
            os.rename(old, f"{target}{suffix}")
    os.rename(path, target)
    return target


def migrate(db: sqlite3.Connection) -> int:
    """Apply the migrations this database has not seen yet; return the schema version."""
    version = db.execute("PRAGMA user_version").fetchone()[0]
    if version > SCHEMA_VERSION:
        raise NewerDatabaseError(version)
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
