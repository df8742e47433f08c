"""engine/database.py: Corral's SQLite files open with their schema, and a transaction
keeps all of its statements or none."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from engine.database import open_database, transaction

SCHEMA = """
CREATE TABLE IF NOT EXISTS parents (id INTEGER PRIMARY KEY);
CREATE TABLE IF NOT EXISTS children (
    id INTEGER PRIMARY KEY,
    parent INTEGER NOT NULL REFERENCES parents(id) ON DELETE CASCADE
);
"""


def test_opens_in_a_new_folder_with_the_schema_and_reopens(tmp_path: Path) -> None:
    path = tmp_path / "new" / "folder" / "data.sqlite3"
    db = open_database(path, SCHEMA)
    db.execute("INSERT INTO parents VALUES (1)")  # autocommit: kept without a COMMIT
    db.close()
    again = open_database(path, SCHEMA)  # the schema script runs again harmlessly
    assert again.execute("SELECT id FROM parents").fetchall() == [(1,)]
    assert again.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_foreign_keys_cascade_only_when_asked(tmp_path: Path) -> None:
    for keys, left in ((True, 0), (False, 1)):
        db = open_database(tmp_path / f"{keys}.sqlite3", SCHEMA, foreign_keys=keys)
        db.execute("INSERT INTO parents VALUES (1)")
        db.execute("INSERT INTO children VALUES (1, 1)")
        db.execute("DELETE FROM parents WHERE id = 1")
        assert db.execute("SELECT COUNT(*) FROM children").fetchone()[0] == left


def test_a_transaction_that_raises_keeps_nothing(tmp_path: Path) -> None:
    db = open_database(tmp_path / "data.sqlite3", SCHEMA)
    with pytest.raises(sqlite3.IntegrityError), transaction(db):
        db.execute("INSERT INTO parents VALUES (1)")
        db.execute("INSERT INTO parents VALUES (1)")  # the same key again
    assert db.execute("SELECT COUNT(*) FROM parents").fetchone()[0] == 0
    with transaction(db):
        db.execute("INSERT INTO parents VALUES (2)")
        db.execute("INSERT INTO parents VALUES (3)")
    assert db.execute("SELECT id FROM parents ORDER BY id").fetchall() == [(2,), (3,)]
