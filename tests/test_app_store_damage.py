"""The conversation store never overwrites a database it cannot use, repairs a damaged
message tree without hanging, and one data folder is opened by one app at a time.

Inputs that hung the old code (a parent_id cycle) run in a child process with a deadline.
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from app.store import DB_NAME, Store
from app.store.db import SCHEMA_VERSION, DatabaseBusy

REPO = Path(__file__).resolve().parents[1]


def _aside(folder: Path, tag: str) -> Path:
    (found,) = folder.glob(f"corral.{tag}-*.sqlite3")
    return found


def test_a_database_from_a_newer_corral_is_moved_aside_unchanged(tmp_path: Path) -> None:
    store = Store.open(tmp_path)
    store.create_conversation("from the future")
    store.close()
    raw = sqlite3.connect(tmp_path / DB_NAME)
    raw.execute("PRAGMA journal_mode=DELETE")  # a file whose header a write would change
    raw.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 4}")
    raw.close()
    before = (tmp_path / DB_NAME).read_bytes()
    store = Store.open(tmp_path)
    moved = _aside(tmp_path, f"newer-v{SCHEMA_VERSION + 4}")
    assert moved.read_bytes() == before  # not written to, not even the journal mode
    assert store.notice is not None and str(moved) in store.notice
    assert "newer version of Corral" in store.notice and str(tmp_path / DB_NAME) in store.notice
    assert store.conversations() == []  # a fresh database in its place
    store.create_conversation("new")
    store.close()


@pytest.mark.parametrize("damage", ["garbage", "truncated"])
def test_a_damaged_database_is_moved_aside_and_a_new_one_started(tmp_path: Path, damage: str):
    path = tmp_path / DB_NAME
    if damage == "garbage":
        path.write_bytes(b"this is not a database " * 200)
    else:
        store = Store.open(tmp_path)
        for i in range(200):
            store.create_conversation(f"chat {i} " + "x" * 200)
        store.close()
        data = path.read_bytes()
        path.write_bytes(data[:100] + b"\xff" * 4000 + data[4100:])
    before = path.read_bytes()
    store = Store.open(tmp_path)
    moved = _aside(tmp_path, "damaged")
    assert moved.read_bytes() == before
    assert store.notice is not None and str(moved) in store.notice
    store.create_conversation("works")
    assert [c.title for c in store.conversations()] == ["works"]
    store.close()


def test_a_second_damaged_database_never_overwrites_the_first_backup(tmp_path: Path) -> None:
    for text in (b"first " * 300, b"second " * 300):
        (tmp_path / DB_NAME).unlink(missing_ok=True)
        (tmp_path / DB_NAME).write_bytes(text)
        Store.open(tmp_path).close()
    backups = sorted(p.read_bytes()[:6] for p in tmp_path.glob("corral.damaged-*.sqlite3"))
    assert backups == [b"first ", b"second"]


_CYCLE = """
import sys
from app.store import Store
store = Store.open(sys.argv[1])
conv = store.create_conversation()
a = store.add_message(conv.id, None, "user", "a")
b = store.add_message(conv.id, a.id, "assistant", "b")
c = store.add_message(conv.id, b.id, "user", "c")
store.db.execute("UPDATE messages SET parent_id = ? WHERE id = ?", (c.id, a.id))  # damage
path = store.active_path(conv.id)
print([m.content for m in path])
print(store.warnings[0])
print(store.active_path(conv.id) == path, store.message(a.id).parent_id)
store.select_branch(a.id)  # walks down a -> b -> c (-> a, before the repair)
print("branch", store.conversation(conv.id).active_leaf_id == c.id)
"""


def test_a_parent_id_cycle_is_broken_with_a_warning_not_an_endless_loop(tmp_path: Path) -> None:
    run = subprocess.run(
        [sys.executable, "-c", _CYCLE, str(tmp_path)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr[-500:]
    lines = run.stdout.splitlines()
    assert lines[0] == "['a', 'b', 'c']"
    assert "was recorded as its own ancestor" in lines[1]
    assert lines[2] == "True None"  # repaired in the database: the path stays the same
    assert lines[3] == "branch True"


_CYCLE_BELOW = """
import sys
from app.store import Store
store = Store.open(sys.argv[1])
conv = store.create_conversation()
a = store.add_message(conv.id, None, "user", "a")
b = store.add_message(conv.id, a.id, "assistant", "b")
store.db.execute("UPDATE messages SET parent_id = ? WHERE id = ?", (b.id, a.id))  # a <-> b
store.select_branch(a.id)  # walks down a -> b (-> a again: it must stop there)
print(store.conversation(conv.id).active_leaf_id == b.id)
"""


def test_select_branch_stops_on_a_cycle_below(tmp_path: Path) -> None:
    """The walk down from a message whose descendants loop back to it ends at the last
    message before the loop closes, in a child process with a deadline (a walk that did
    not stop would hang the test run)."""
    run = subprocess.run(
        [sys.executable, "-c", _CYCLE_BELOW, str(tmp_path)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr[-500:]
    assert run.stdout.strip() == "True"  # b: the one message below a before a comes again


def test_a_locked_database_is_a_clear_error_after_a_busy_timeout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from app.store import db as db_module

    Store.open(tmp_path).close()
    holder = sqlite3.connect(tmp_path / DB_NAME, isolation_level=None)
    holder.execute("PRAGMA journal_mode=DELETE")
    holder.execute("BEGIN EXCLUSIVE")
    monkeypatch.setattr(db_module, "BUSY_TIMEOUT_S", 0.3)
    started = time.monotonic()
    with pytest.raises(DatabaseBusy, match="locked by another program"):
        Store.open(tmp_path)
    assert time.monotonic() - started < 30
    holder.execute("ROLLBACK")
    holder.close()
    assert list(tmp_path.glob("corral.damaged-*")) == []  # a busy file is not "damaged"


_SECOND_LAUNCH = """
import os, sys
os.environ["QT_QPA_PLATFORM"] = "offscreen"
from app.__main__ import main
sys.exit(main(["--data-dir", sys.argv[1], sys.argv[2]]))
"""


def test_a_second_launch_hands_its_file_to_the_running_app(qtbot, tmp_path: Path) -> None:
    from app.single_instance import SingleInstance

    first = SingleInstance(tmp_path)
    assert first.claimed
    grammar = tmp_path / "g.lark"
    grammar.write_text('start: "x"\n')
    with qtbot.waitSignal(first.activated, timeout=60_000) as received:
        run = subprocess.run(
            [sys.executable, "-c", _SECOND_LAUNCH, str(tmp_path), str(grammar)],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert run.returncode == 0, run.stderr[-500:]
    assert "already running" in run.stderr
    assert received.args == [[str(grammar.resolve())]]
    assert not (tmp_path / DB_NAME).exists()  # the second app never opened the database
    first.close()
    again = SingleInstance(tmp_path)  # released: the folder can be claimed again
    assert again.claimed
    again.close()
