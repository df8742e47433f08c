"""The prompt cache's disk tier: KV states the memory trie lets go of, kept in files.

One folder per model identity (`<cache folder>/prompt-cache/<identity>`, see
`engine.memory.identity`) holds one safetensors file per entry (`engine.memory.disk_format`)
and an SQLite index beside them: each entry's name, token prefix, size and last use. The
index is what lookups read; the files are the truth: at start the two are reconciled (a
file the index lacks is checked and added, a row without its file dropped), and a lost or
damaged index is rebuilt from the files' own headers.

Writes happen off the engine thread: the engine thread evaluates the arrays (MLX streams
belong to the thread that made them) and hands them to a writer thread, which writes a
temporary file, renames it into place (so no reader ever sees half a file), records it,
drops entries the new one makes redundant (a shorter prefix of it), and evicts the least
recently used entries past the budget. The budget is a setting, never more than a share of
the free disk. Several processes may share a folder: SQLite serialises their index updates,
file names are digests of their tokens, and a file another process removed is a miss.

Every file this module writes or removes is checked to lie inside the folder; a file that
fails its checks (truncated, garbage, another model's) is removed, never loaded.
"""

from __future__ import annotations

import contextlib
import os
import queue
import re
import secrets
import shutil
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import mlx.core as mx
import numpy as np

from engine.files import OutsideFolder, check_inside
from engine.memory.disk_format import (
    EntryRefused,
    can_write,
    entry_name,
    metadata,
    read_header,
    restore,
    serialize,
)
from engine.memory.prompt_cache import trim_cache
from engine.memory.settings import DEFAULT_DISK_BUDGET
from engine.memory.store import KVState

FREE_SHARE = 0.25  # the disk tier never takes more than this share of the free disk
MIN_TOKENS = 32  # shorter prefixes are cheaper to prefill than to write and read back
INDEX = "index.sqlite3"
_NAME = re.compile(r"^[0-9a-f]{40}\.safetensors$")
_TEMP = re.compile(r"^\.tmp-(\d+)-[0-9a-f]+\.safetensors$")
_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS entries (name TEXT PRIMARY KEY, length INTEGER NOT NULL, "
    "nbytes INTEGER NOT NULL, used REAL NOT NULL, tokens BLOB NOT NULL)"
)


@dataclass
class _Job:
    name: str
    tokens: np.ndarray
    arrays: dict[str, mx.array]
    meta: dict[str, str]


def capped_budget(setting: int, folder: Path, held: int = 0) -> int:
    """`setting`, but at most FREE_SHARE of the disk space free for `folder` (counting the
    `held` bytes the tier already uses as free)."""
    try:
        free = shutil.disk_usage(folder).free
    except OSError:
        return 0
    return max(0, min(int(setting), int(FREE_SHARE * (free + held))))


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


class DiskTier:
    """The entries of one model identity on disk (lookups on the engine thread)."""

    def __init__(
        self, folder: Path, identity: str, budget_bytes: int = DEFAULT_DISK_BUDGET
    ) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.folder = folder.resolve()
        self.identity = identity
        self._setting = int(budget_bytes)
        self._tokens: dict[str, np.ndarray] = {}  # the engine thread's view of the index
        self._pending: set[str] = set()  # names handed to the writer, not yet recorded
        self._queue: queue.Queue[_Job | None] = queue.Queue(maxsize=4)
        self.counts = dict.fromkeys(
            ("hits", "restored_tokens", "writes", "evictions", "removed_bad", "write_errors"), 0
        )
        self.entries = 0
        self.nbytes = 0
        self._open_index()
        self._reconcile()
        self.budget_bytes = capped_budget(self._setting, self.folder, self.nbytes)
        self._thread = threading.Thread(
            target=self._write_loop, name="corral-disk-cache", daemon=True
        )
        self._thread.start()

    # -- the engine thread -----------------------------------------------------------------

    def best(self, tokens: Sequence[int], better_than: int) -> tuple[str, int] | None:
        """(name, tokens shared) of the entry sharing the longest prefix with `tokens`, if
        longer than `better_than`; of equally long ones, the smallest file."""
        self._sync_view()
        want = np.asarray(tokens, dtype=np.int32)
        best: tuple[str, int] | None = None
        best_len = 0
        for name, have in self._tokens.items():
            m = min(len(have), len(want))
            if m <= better_than:
                continue
            differ = np.flatnonzero(have[:m] != want[:m])
            k = int(differ[0]) if len(differ) else m
            if k <= better_than or (best is not None and k < best[1]):
                continue
            if best is None or k > best[1] or len(have) < best_len:
                best, best_len = (name, k), len(have)
        return best

    def load(self, name: str, tokens: Sequence[int], n: int) -> KVState | None:
        """The KV state of `tokens[:n]` from entry `name`, or None (the entry is gone, or
        damaged: then it is removed)."""
        try:
            path = self._path(name)
            header = read_header(path, self.identity)
            if len(header.tokens) < n or not np.array_equal(
                header.tokens[:n], np.asarray(tokens[:n], dtype=np.int32)
            ):
                raise EntryRefused("its tokens are not the ones indexed")
            cache = restore(path, header)
        except (EntryRefused, OutsideFolder):
            if (self.folder / name).exists():
                self.counts["removed_bad"] += 1
            self._forget([name])
            return None
        if len(header.tokens) > n:
            trim_cache(cache, len(header.tokens) - n)
        self.counts["hits"] += 1
        self.counts["restored_tokens"] += n
        with self._db() as db:
            db.execute("UPDATE entries SET used = ? WHERE name = ?", (time.time(), name))
        return cache

    def put(self, tokens: Sequence[int], cache: KVState) -> None:
        """Hand the KV state of `tokens` (all of `cache`'s length) to the writer; a prefix
        too short, a cache this format cannot hold, or an entry already on disk is not
        written again (the latter only marked as used)."""
        if len(tokens) < MIN_TOKENS or not can_write(cache) or self.budget_bytes <= 0:
            return
        arr = np.asarray(tokens, dtype=np.int32)
        name = entry_name(arr)
        if name in self._pending:
            return
        if name in self._tokens:
            with self._db() as db:
                db.execute("UPDATE entries SET used = ? WHERE name = ?", (time.time(), name))
            return
        arrays, layout = serialize(cache, len(arr))
        if sum(a.nbytes for a in arrays.values()) > self.budget_bytes:
            return
        self._pending.add(name)
        self._queue.put(_Job(name, arr, arrays, metadata(self.identity, arr, layout)))

    def flush(self) -> None:
        """Wait until every entry handed over is written."""
        self._queue.join()

    def close(self) -> None:
        """Write what is pending and stop the writer thread."""
        if self._thread.is_alive():
            self.flush()
            self._queue.put(None)
            self._thread.join()

    # -- the writer thread -------------------------------------------------------------------

    def _write_loop(self) -> None:
        while (job := self._queue.get()) is not None:
            try:
                self._write(job)
            except (OSError, RuntimeError, ValueError, sqlite3.Error):
                self.counts["write_errors"] += 1  # a full disk costs entries, never the engine
            finally:
                self._pending.discard(job.name)
                self._queue.task_done()
        self._queue.task_done()

    def _write(self, job: _Job) -> None:
        temp = check_inside(
            self.folder / f".tmp-{os.getpid()}-{secrets.token_hex(6)}.safetensors", self.folder
        )
        final = self._path(job.name)
        try:
            mx.save_safetensors(str(temp), job.arrays, metadata=job.meta)
            nbytes = temp.stat().st_size
            os.replace(temp, final)
        finally:
            with contextlib.suppress(FileNotFoundError):
                temp.unlink()
        self.counts["writes"] += 1
        with self._db() as db:
            db.execute("BEGIN IMMEDIATE")
            db.execute(
                "INSERT OR REPLACE INTO entries VALUES (?, ?, ?, ?, ?)",
                (job.name, len(job.tokens), nbytes, time.time(), job.tokens.tobytes()),
            )
            redundant = [
                name
                for name, blob in db.execute(
                    "SELECT name, tokens FROM entries WHERE length < ?", (len(job.tokens),)
                )
                if _is_prefix(np.frombuffer(blob, dtype=np.int32), job.tokens)
            ]
            victims = list(redundant)
            rows = db.execute("SELECT name, nbytes FROM entries ORDER BY used ASC").fetchall()
            total = sum(b for n, b in rows if n not in redundant)
            for name, size in rows:
                if total <= self.budget_bytes:
                    break
                if name != job.name and name not in redundant:
                    victims.append(name)
                    total -= size
                    self.counts["evictions"] += 1
            db.executemany("DELETE FROM entries WHERE name = ?", [(v,) for v in victims])
            db.execute("COMMIT")
        for name in victims:
            self._unlink(name)
        self._totals()

    # -- the index and the files -------------------------------------------------------------

    @contextlib.contextmanager
    def _db(self) -> Iterator[sqlite3.Connection]:
        db = sqlite3.connect(self.folder / INDEX, timeout=30, isolation_level=None)
        try:
            yield db
        finally:
            db.close()

    def _open_index(self) -> None:
        """Open the index, rebuilding it (from the files) if it is damaged."""
        try:
            with self._db() as db:
                db.execute(_SCHEMA)
                db.execute("SELECT name, length, nbytes, used, tokens FROM entries LIMIT 1")
        except sqlite3.DatabaseError:
            for suffix in ("", "-journal", "-wal", "-shm"):
                with contextlib.suppress(FileNotFoundError):
                    check_inside(self.folder / (INDEX + suffix), self.folder).unlink()
            with self._db() as db:
                db.execute(_SCHEMA)

    def _reconcile(self) -> None:
        """Make the index and the files agree: stale temporary files of dead processes and
        files that fail their checks are removed, files the index lacks are added."""
        files = set()
        for entry in os.scandir(self.folder):
            temp = _TEMP.match(entry.name)
            if temp and not _pid_alive(int(temp.group(1))):
                self._unlink(entry.name)
            elif _NAME.match(entry.name) and entry.is_file(follow_symlinks=False):
                files.add(entry.name)
            elif entry.name.endswith(".safetensors"):  # a foreign file: never ours to read
                self._unlink(entry.name)
                self.counts["removed_bad"] += 1
        with self._db() as db:
            indexed = {n for (n,) in db.execute("SELECT name FROM entries")}
            db.executemany("DELETE FROM entries WHERE name = ?", [(n,) for n in indexed - files])
        for name in sorted(files - indexed):
            path = self._path(name)
            try:
                header = read_header(path, self.identity)
                if entry_name(header.tokens) != name:
                    raise EntryRefused("its name is not its tokens' digest")
            except EntryRefused:
                self._unlink(name)
                self.counts["removed_bad"] += 1
                continue
            with self._db() as db:
                db.execute(
                    "INSERT OR REPLACE INTO entries VALUES (?, ?, ?, ?, ?)",
                    (
                        name,
                        len(header.tokens),
                        path.stat().st_size,
                        path.stat().st_mtime,
                        header.tokens.tobytes(),
                    ),
                )
        self._totals()

    def _sync_view(self) -> None:
        """Bring the engine thread's view up to date with the index (another process or
        the writer may have changed it)."""
        with self._db() as db:
            names = {n for (n,) in db.execute("SELECT name FROM entries")}
            for gone in set(self._tokens) - names:
                del self._tokens[gone]
            for name in names - set(self._tokens):
                row = db.execute("SELECT tokens FROM entries WHERE name = ?", (name,)).fetchone()
                if row is not None:
                    self._tokens[name] = np.frombuffer(row[0], dtype=np.int32)
        self._totals()

    def _totals(self) -> None:
        with self._db() as db:
            count, total = db.execute("SELECT COUNT(*), SUM(nbytes) FROM entries").fetchone()
        self.entries, self.nbytes = int(count), int(total or 0)

    def _forget(self, names: list[str]) -> None:
        with self._db() as db:
            db.executemany("DELETE FROM entries WHERE name = ?", [(n,) for n in names])
        for name in names:
            self._tokens.pop(name, None)
            if _NAME.match(name):  # an index row never names the index or a foreign file
                self._unlink(name)
        self._totals()

    def _path(self, name: str) -> Path:
        if not _NAME.match(name):
            raise EntryRefused(f"{name!r} is not an entry name")
        return check_inside(self.folder / name, self.folder)

    def _unlink(self, name: str) -> None:
        path = self.folder / name
        with contextlib.suppress(FileNotFoundError):
            if path.is_symlink():  # the link itself goes, never what it points to
                path.unlink()
            else:
                check_inside(path, self.folder).unlink()


def _is_prefix(short: np.ndarray, long: np.ndarray) -> bool:
    return len(short) <= len(long) and bool(np.array_equal(long[: len(short)], short))


def describe(tier: DiskTier | None) -> dict[str, Any]:
    """The disk tier's figures for CacheStats (zeros without one)."""
    if tier is None:
        return {}
    c = tier.counts
    return {
        "disk_entries": tier.entries,
        "disk_bytes": tier.nbytes,
        "disk_budget_bytes": tier.budget_bytes,
        "disk_hits": c["hits"],
        "disk_restored_tokens": c["restored_tokens"],
        "disk_writes": c["writes"],
        "disk_evictions": c["evictions"],
        "disk_removed_bad": c["removed_bad"],
    }
