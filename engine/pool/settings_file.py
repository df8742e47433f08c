"""A pool's per-model settings file (engine.pool.settings), watched: read when the pool is
told of it, and again whenever it changes (checked by the pool's thread). Each model the
file lists gets its settings (models it names with `model = ...` are listed); models it
no longer lists lose them, and leave the pool if the file alone listed them. A bad edit is
left unapplied: the log and `PoolSnapshot.settings_error` say why."""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING

from engine.pool.settings import ModelEntrySettings, ModelSettingsError, read_settings_file

if TYPE_CHECKING:
    from engine.pool.state import PoolState

log = logging.getLogger("engine.pool")

SETTINGS_CHECK_S = 1.0


class SettingsFile:
    """The settings file of one pool, once it is told of one."""

    def __init__(self, pool: PoolState) -> None:
        self.pool = pool
        self._path: Path | None = None
        self._stamp: tuple[int, int] | None = None
        self._checked = 0.0

    def read(self, path: Path, strict: bool = True) -> None:
        """Apply the settings file at `path` now, and again whenever it changes. `strict`:
        ModelSettingsError naming the file and key for a bad or missing one; otherwise
        the error is published as a later bad edit's is."""
        stamp = file_stamp(path)
        try:
            if stamp is not None or strict:
                self.apply(read_settings_file(path), path)
            error = None
        except (ModelSettingsError, ValueError) as exc:
            if strict:
                raise
            error = str(exc)
            log.warning("model settings not applied: %s", exc)
        self._path, self.pool.settings_path = path, str(path)
        self._stamp, self.pool.settings_error = stamp, error
        with self.pool.lock:
            self.pool.publish()

    def check(self) -> None:
        """Apply the file again if it changed since it was last read (at most every
        SETTINGS_CHECK_S)."""
        path = self._path
        if path is None or time.monotonic() - self._checked < SETTINGS_CHECK_S:
            return
        self._checked = time.monotonic()
        stamp = file_stamp(path)
        if stamp == self._stamp:
            return
        self._stamp = stamp
        try:
            found = read_settings_file(path) if stamp is not None else []  # removed: none
            self.apply(found, path)
        except (ModelSettingsError, ValueError) as exc:
            self.pool.settings_error = str(exc)
            log.warning("model settings not applied: %s", exc)
        else:
            self.pool.settings_error = None
            log.info("model settings read again from %s", path)
        with self.pool.lock:
            self.pool.publish()

    def apply(self, found: list[ModelEntrySettings], where: Path) -> None:
        """Give each model the file lists its settings (listing the ones it adds); models
        it no longer lists lose them (and leave the pool if the file alone listed them).
        ModelSettingsError for a table naming no model and giving none to load."""
        pool = self.pool
        for item in found:  # every name checked before anything changes
            if item.spec is None:
                with pool.lock:
                    known = pool.published[0].find(item.name)
                if known is None:
                    raise ModelSettingsError(
                        f"{where}: models.{item.name}: no model named {item.name!r} is "
                        'listed; say what to load with model = "FOLDER, FILE OR REPO ID"'
                    )
        kept: set[str] = set()
        for item in found:
            if item.spec is not None:
                entry_id, made = pool.add_model(item.spec, alias=item.name, kind=item.kind)
            else:
                with pool.lock:
                    known = pool.published[0].find(item.name)
                assert known is not None
                entry_id, made = known.id, False
            with pool.lock:
                entry = pool.entries[entry_id]
                entry.from_file = item.settings
                entry.made_by_file = entry.made_by_file or made
                for alias in item.aliases:
                    if alias != entry.id and alias not in entry.names:
                        pool.check_free_name(alias, entry)
                        entry.names.append(alias)
                kept.add(entry_id)
        with pool.lock:
            for entry in list(pool.entries.values()):
                if entry.id in kept or entry.from_file is None:
                    continue
                entry.from_file = None
                if entry.made_by_file:
                    entry.listed = False
                    if entry.state in ("unloaded", "failed") and not entry.waiters:
                        pool.entries.pop(entry.id, None)
            pool.publish()
        pool.wake()


def file_stamp(path: Path) -> tuple[int, int] | None:
    try:
        info = path.stat()
    except OSError:
        return None
    return info.st_mtime_ns, info.st_size
