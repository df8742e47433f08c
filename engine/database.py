"""The SQLite files Corral keeps beside the user's (extraction jobs, Batch API batches),
opened one way: shared across threads behind the caller's lock, in autocommit mode so each
statement stands alone unless `transaction` groups several."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def open_database(path: Path, schema: str, *, foreign_keys: bool = False) -> sqlite3.Connection:
    """The database at `path` (its folder made), in WAL mode, with `schema` (a script of
    `CREATE ... IF NOT EXISTS`) applied. The connection may be used from any thread, one
    at a time: the caller holds a lock around each use."""
    path.parent.mkdir(parents=True, exist_ok=True)
    db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    if foreign_keys:
        db.execute("PRAGMA foreign_keys=ON")
    db.executescript(schema)
    return db


@contextmanager
def transaction(db: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """Run the block's statements as one: committed when it ends, rolled back (and the
    error raised again) when it raises."""
    db.execute("BEGIN")
    try:
        yield db
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")
